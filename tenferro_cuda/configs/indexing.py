"""Configurations of the indexing ops (StableHLO ``gather``, ``scatter``, ``slice``, ``pad``).

Every config is a frozen dataclass that normalises its sequences to tuples of ints and
checks, in ``__post_init__``, every rule that needs no tensor shape: uniqueness and
sortedness of the dimension lists, disjointness of dimension sets, lengths that must
agree, signs. The StableHLO constraint numbers (C1, C4, ...) are those of the gather and
scatter sections of the StableHLO specification (with batching dimensions). Rules that
need shapes (index_vector_dim against the rank of the indices, slice sizes against the
operand extents, ...) are checked by ``tenferro_cuda.shapes`` when the op is called.
Messages quote the bad value.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..values import int_sequence

__all__ = ["GatherConfig", "ScatterConfig", "ScatterCombiner", "SliceConfig", "PadConfig"]


class ScatterCombiner(str, enum.Enum):
    """How ``scatter`` combines an update with the value already in the result."""

    ADD = "add"
    REPLACE = "replace"
    MAX = "max"
    MIN = "min"


def _ints(value, name: str, owner: str) -> tuple[int, ...]:
    """A sequence of ints in the order written (``values.int_sequence``: a list, tuple,
    range or 1-d integer array; no sets, dicts, iterators or bools)."""
    return int_sequence(value, owner, name)


def _flag(value, name: str, owner: str) -> bool:
    """A bool flag: True/False (Python or numpy) or the ints 0/1, as for bool fill values;
    nothing else is taken for a truth value (a str "False" is not False)."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise ValidationError(f"{name} must be a bool (got {value!r})", op=owner)


def _int(value, name: str, owner: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValidationError(f"{name} must be an int (got {value!r})", op=owner)
    return int(value.__index__())


def _nonneg(values: tuple[int, ...], name: str, owner: str) -> None:
    if any(v < 0 for v in values):
        kind = "invalid_argument" if name == "slice_sizes" else "axis_out_of_bounds"
        raise ValidationError(f"{name} entries must be >= 0 (got {values})", op=owner,
                              kind=kind)


def _unique(values: tuple[int, ...], name: str, owner: str, rule: str) -> None:
    if len(set(values)) != len(values):
        raise ValidationError(f"{name} must not repeat a dimension (got {values}; {rule})",
                              op=owner, kind="duplicate_axis")


def _sorted(values: tuple[int, ...], name: str, owner: str, rule: str) -> None:
    if list(values) != sorted(values):
        raise ValidationError(f"{name} must be sorted ascending (got {values}; {rule})",
                              op=owner)


def _below(values: tuple[int, ...], bound: int, name: str, owner: str, what: str,
           rule: str) -> None:
    for v in values:
        if v >= bound:
            raise ValidationError(f"{name}: dimension {v} is out of range for {what} "
                                  f"{bound} ({rule})", op=owner, kind="axis_out_of_bounds")


def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class GatherConfig:
    """StableHLO ``gather`` dimension numbers and slice sizes.

    ``operand_index = full_start_index + full_batching_index + full_offset_index`` for
    every result index, with each start index clamped to
    ``[0, dim(operand, d) - slice_sizes[d]]`` (see docs/indexing.md).
    ``indices_are_sorted`` is accepted and ignored.
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    slice_sizes: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()
    indices_are_sorted: bool = False

    def __post_init__(self) -> None:
        own = "GatherConfig"
        for name in ("offset_dims", "collapsed_slice_dims", "start_index_map", "slice_sizes",
                     "operand_batching_dims", "start_indices_batching_dims"):
            _set(self, name, _ints(getattr(self, name), name, own))
            _nonneg(getattr(self, name), name, own)
        _set(self, "index_vector_dim", _int(self.index_vector_dim, "index_vector_dim", own))
        if self.index_vector_dim < 0:
            raise ValidationError(f"index_vector_dim must be >= 0 (got "
                                  f"{self.index_vector_dim}; C2)", op=own,
                                  kind="axis_out_of_bounds")
        _set(self, "indices_are_sorted",
             _flag(self.indices_are_sorted, "indices_are_sorted", own))
        self._check_dims(own)

    def _check_dims(self, own: str) -> None:
        off, col, obd = self.offset_dims, self.collapsed_slice_dims, self.operand_batching_dims
        sibd, sim = self.start_indices_batching_dims, self.start_index_map
        _unique(off, "offset_dims", own, "C4")
        _sorted(off, "offset_dims", own, "C4")
        _unique(col + obd, "collapsed_slice_dims + operand_batching_dims", own, "C6")
        _sorted(col, "collapsed_slice_dims", own, "C7")
        _sorted(obd, "operand_batching_dims", own, "C10")
        _unique(sibd, "start_indices_batching_dims", own, "C13")
        if self.index_vector_dim in sibd:
            raise ValidationError(f"index_vector_dim {self.index_vector_dim} must not be one "
                                  f"of start_indices_batching_dims {sibd} (C15)", op=own)
        if len(obd) != len(sibd):
            raise ValidationError(f"operand_batching_dims {obd} and start_indices_batching_"
                                  f"dims {sibd} must have the same length (C16)", op=own,
                                  kind="rank_mismatch")
        _unique(sim + obd, "start_index_map + operand_batching_dims", own, "C18")
        rank = len(off) + len(col) + len(obd)
        if len(self.slice_sizes) != rank:
            raise ValidationError(
                f"slice_sizes {self.slice_sizes} must have one entry per operand dimension: "
                f"{rank} = size(offset_dims) + size(collapsed_slice_dims) + "
                f"size(operand_batching_dims) (C1, C20)", op=own, kind="rank_mismatch")
        _below(col, rank, "collapsed_slice_dims", own, "operand rank", "C8")
        _below(obd, rank, "operand_batching_dims", own, "operand rank", "C11")
        _below(sim, rank, "start_index_map", own, "operand rank", "C19")
        for d in col + obd:
            if self.slice_sizes[d] > 1:
                raise ValidationError(f"slice_sizes[{d}] = {self.slice_sizes[d]} must be <= 1 "
                                      f"for a collapsed or batching dimension (C9, C12)",
                                      op=own)

    @property
    def operand_rank(self) -> int:
        """The operand rank the config describes (C1)."""
        return len(self.slice_sizes)


@dataclass(frozen=True)
class ScatterConfig:
    """StableHLO ``scatter`` dimension numbers and the combiner.

    ``combiner`` is ``"add"`` (default: duplicates accumulate), ``"replace"``, ``"max"``
    or ``"min"``. Update windows that do not fit inside the operand are skipped whole
    (XLA semantics; see docs/indexing.md). ``indices_are_sorted`` is accepted and ignored;
    ``unique_indices=True`` promises that no two updates hit the same element, which lets
    ``replace`` skip its ordering pass (with duplicates the result is then unspecified).
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()
    combiner: ScatterCombiner | str = ScatterCombiner.ADD
    indices_are_sorted: bool = False
    unique_indices: bool = False

    def __post_init__(self) -> None:
        own = "ScatterConfig"
        for name in ("update_window_dims", "inserted_window_dims",
                     "scatter_dims_to_operand_dims", "input_batching_dims",
                     "scatter_indices_batching_dims"):
            _set(self, name, _ints(getattr(self, name), name, own))
            _nonneg(getattr(self, name), name, own)
        _set(self, "index_vector_dim", _int(self.index_vector_dim, "index_vector_dim", own))
        if self.index_vector_dim < 0:
            raise ValidationError(f"index_vector_dim must be >= 0 (got "
                                  f"{self.index_vector_dim}; C22)", op=own,
                                  kind="axis_out_of_bounds")
        try:
            _set(self, "combiner", ScatterCombiner(self.combiner))
        except ValueError:
            raise ValidationError(
                f"combiner must be one of {', '.join(c.value for c in ScatterCombiner)} "
                f"(got {self.combiner!r})", op=own) from None
        _set(self, "indices_are_sorted",
             _flag(self.indices_are_sorted, "indices_are_sorted", own))
        _set(self, "unique_indices", _flag(self.unique_indices, "unique_indices", own))
        self._check_dims(own)

    def _check_dims(self, own: str) -> None:
        uwd, iwd, ibd = self.update_window_dims, self.inserted_window_dims, \
            self.input_batching_dims
        sibd, sdod = self.scatter_indices_batching_dims, self.scatter_dims_to_operand_dims
        _unique(uwd, "update_window_dims", own, "C7")
        _sorted(uwd, "update_window_dims", own, "C7")
        _unique(iwd + ibd, "inserted_window_dims + input_batching_dims", own, "C9")
        _sorted(iwd, "inserted_window_dims", own, "C10")
        _sorted(ibd, "input_batching_dims", own, "C12")
        _unique(sibd, "scatter_indices_batching_dims", own, "C14")
        if self.index_vector_dim in sibd:
            raise ValidationError(f"index_vector_dim {self.index_vector_dim} must not be one "
                                  f"of scatter_indices_batching_dims {sibd} (C16)", op=own)
        if len(ibd) != len(sibd):
            raise ValidationError(f"input_batching_dims {ibd} and scatter_indices_batching_"
                                  f"dims {sibd} must have the same length (C17)", op=own,
                                  kind="rank_mismatch")
        _unique(sdod + ibd, "scatter_dims_to_operand_dims + input_batching_dims", own, "C20")
        rank = self.operand_rank
        _below(iwd, rank, "inserted_window_dims", own, "operand rank", "C11")
        _below(ibd, rank, "input_batching_dims", own, "operand rank", "C13")
        _below(sdod, rank, "scatter_dims_to_operand_dims", own, "operand rank", "C21")

    @property
    def operand_rank(self) -> int:
        """The operand rank the config describes (C2)."""
        return (len(self.update_window_dims) + len(self.inserted_window_dims)
                + len(self.input_batching_dims))


@dataclass(frozen=True)
class SliceConfig:
    """``result[i] = x[starts + i * strides]`` for ``starts <= . < limits``, per axis.

    ``strides`` defaults to all ones. Limits are checked against the operand at call time.
    """

    starts: tuple[int, ...]
    limits: tuple[int, ...]
    strides: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        own = "SliceConfig"
        starts = _ints(self.starts, "starts", own)
        limits = _ints(self.limits, "limits", own)
        strides = (1,) * len(starts) if self.strides is None else \
            _ints(self.strides, "strides", own)
        if not len(starts) == len(limits) == len(strides):
            raise ValidationError(f"starts {starts}, limits {limits} and strides {strides} "
                                  "must have the same length", op=own, kind="rank_mismatch")
        for a, (s, lim, st) in enumerate(zip(starts, limits, strides)):
            if s < 0 or lim < s:
                raise ValidationError(f"axis {a}: need 0 <= start <= limit (got start {s}, "
                                      f"limit {lim})", op=own, kind="axis_out_of_bounds")
            if st < 1:
                raise ValidationError(f"axis {a}: stride must be >= 1 (got {st})", op=own)
        _set(self, "starts", starts)
        _set(self, "limits", limits)
        _set(self, "strides", strides)


@dataclass(frozen=True)
class PadConfig:
    """Edge padding ``low``/``high`` (negative values crop) and ``interior`` padding
    (>= 0 elements inserted between neighbours), per axis; ``interior`` defaults to 0."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    interior: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        own = "PadConfig"
        low = _ints(self.low, "low", own)
        high = _ints(self.high, "high", own)
        interior = (0,) * len(low) if self.interior is None else \
            _ints(self.interior, "interior", own)
        if not len(low) == len(high) == len(interior):
            raise ValidationError(f"low {low}, high {high} and interior {interior} must "
                                  "have the same length", op=own, kind="rank_mismatch")
        if any(v < 0 for v in interior):
            raise ValidationError(f"interior padding must be >= 0 (got {interior})", op=own)
        _set(self, "low", low)
        _set(self, "high", high)
        _set(self, "interior", interior)
