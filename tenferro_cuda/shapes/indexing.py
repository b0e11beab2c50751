"""Validation and shape inference of the slicing ops (``slice``, ``dynamic_slice``,
``dynamic_update_slice``, ``pad``, ``concatenate``, ``reverse``) and the checks the gather
and scatter modules share. Pure Python over shapes and dtypes; every function raises
before anything is allocated or launched.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..configs.indexing import PadConfig, SliceConfig
from ..dtypes import DType, lattice_allows
from ..errors import UnsupportedDTypeError, ValidationError
from . import MAX_RANK, check_rank, check_size, int_sequence, normalize_axes, same_dtype
from .reduction import scalar_bytes

INDEX_DTYPES = (DType.INT32, DType.INT64)


def check_index_dtype(dtype: DType, op: str, what: str = "indices") -> None:
    """Index tensors are int32 or int64 (UnsupportedDTypeError otherwise; the message
    names the convert that keeps every index of another integer dtype)."""
    if dtype not in INDEX_DTYPES:
        hint = ""
        if dtype.is_integer:
            to = DType.INT32 if lattice_allows(dtype, DType.INT32) else DType.INT64
            hint = (f"; convert to {to.value} first" if lattice_allows(dtype, to) else
                    "; no index dtype holds every uint64: cast to int64 (values of 2**63 "
                    "and more become negative)")
        raise UnsupportedDTypeError(f"{what} must be int32 or int64 (got {dtype.value}"
                                    f"{hint})", op=op)


def check_config(cfg, cls: type, op: str) -> None:
    if not isinstance(cfg, cls):
        raise ValidationError(f"expected a {cls.__name__} (got {type(cfg).__name__})", op=op)


def check_sizes(sizes, name: str, op: str) -> tuple[int, ...]:
    """A sequence of ints >= 0 (``int_sequence``: no sets, iterators or bools)."""
    out = int_sequence(sizes, op, name)
    if any(s < 0 for s in out):
        raise ValidationError(f"{name} entries must be ints >= 0 (got {out!r})", op=op)
    return out


def rank_of_config(n: int, rank: int, what: str, op: str) -> None:
    if n != rank:
        raise ValidationError(f"{what} has {n} entries; the operand has rank {rank}", op=op,
                              kind="rank_mismatch")


# --- slice / pad / reverse / concatenate --------------------------------------------------
def slice_shape(shape: Sequence[int], cfg: SliceConfig, op: str = "slice") -> tuple[int, ...]:
    """Result shape of ``slice``: ceil((limit - start) / stride) per axis."""
    check_config(cfg, SliceConfig, op)
    check_rank(shape, op)
    rank_of_config(len(cfg.starts), len(shape), "SliceConfig.starts", op)
    for a, (lim, n) in enumerate(zip(cfg.limits, shape)):
        if lim > n:
            raise ValidationError(f"axis {a}: limit {lim} exceeds the extent {n}", op=op,
                                  kind="axis_out_of_bounds")
    assert cfg.strides is not None  # SliceConfig filled in the default
    return tuple(-(-(lim - s) // st) for s, lim, st in zip(cfg.starts, cfg.limits,
                                                           cfg.strides))


def pad_shape(shape: Sequence[int], cfg: PadConfig, op: str = "pad",
              itemsize: int = 1) -> tuple[int, ...]:
    """Result shape of ``pad``: low + high + n + max(n - 1, 0) * interior per axis; every
    extent and the byte size (``itemsize``-byte elements) below 2**63 (kind ``overflow``)."""
    check_config(cfg, PadConfig, op)
    check_rank(shape, op)
    rank_of_config(len(cfg.low), len(shape), "PadConfig.low", op)
    assert cfg.interior is not None  # PadConfig filled in the default
    out = []
    for a, (n, lo, hi, it) in enumerate(zip(shape, cfg.low, cfg.high, cfg.interior)):
        size = lo + hi + n + max(n - 1, 0) * it
        if size < 0:
            raise ValidationError(f"axis {a}: padding (low {lo}, high {hi}, interior {it}) "
                                  f"of extent {n} gives a negative extent {size}", op=op)
        out.append(size)
    check_size(out, op, itemsize)
    return tuple(out)


def reverse_axes(shape: Sequence[int], axes, op: str = "reverse") -> tuple[int, ...]:
    check_rank(shape, op)
    try:
        items = list(axes)
    except TypeError:
        raise ValidationError(f"axes must be a sequence of ints (got {axes!r})", op=op) from None
    if any(isinstance(a, bool) or not hasattr(a, "__index__") for a in items):
        raise ValidationError(f"axes must be a sequence of ints (got {axes!r})", op=op)
    return normalize_axes([a.__index__() for a in items], len(shape), op, what="axes")


def concatenate_shape(shapes: Sequence[Sequence[int]], dtypes: Sequence[DType], axis,
                      op: str = "concatenate") -> tuple[int, ...]:
    """Result shape of ``concatenate``: equal ranks, dtypes and extents off ``axis``."""
    if not shapes:
        raise ValidationError("needs at least one input", op=op)
    same_dtype(op, *dtypes)
    rank = len(shapes[0])
    check_rank(shapes[0], op)
    for s in shapes[1:]:
        if len(s) != rank:
            raise ValidationError(f"all inputs must have the same rank (got "
                                  f"{', '.join(str(tuple(x)) for x in shapes)})", op=op,
                                  kind="rank_mismatch")
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise ValidationError(f"axis must be an int (got {axis!r})", op=op)
    (ax,) = normalize_axes((axis,), rank, op, what="axis")
    for s in shapes[1:]:
        for d in range(rank):
            if d != ax and s[d] != shapes[0][d]:
                raise ValidationError(
                    f"inputs differ off the concatenation axis {ax}: "
                    f"{', '.join(str(tuple(x)) for x in shapes)}", op=op,
                    kind="shape_mismatch")
    out = list(shapes[0])
    out[ax] = sum(s[ax] for s in shapes)
    return tuple(out)


# --- dynamic slices -----------------------------------------------------------------------
def check_starts(starts_shape: Sequence[int], starts_dtype: DType, rank: int, op: str) -> None:
    """The starts tensor is rank-1 int32/int64 with one entry per operand axis."""
    check_index_dtype(starts_dtype, op, "starts")
    if len(starts_shape) != 1 or starts_shape[0] != rank:
        raise ValidationError(f"starts must be a rank-1 tensor of {rank} entries (one per "
                              f"operand axis; got shape {tuple(starts_shape)})", op=op,
                              kind="shape_mismatch")


def dynamic_slice_shape(shape: Sequence[int], starts_shape: Sequence[int],
                        starts_dtype: DType, slice_sizes, op: str = "dynamic_slice"
                        ) -> tuple[int, ...]:
    check_rank(shape, op)
    sizes = check_sizes(slice_sizes, "slice_sizes", op)
    rank_of_config(len(sizes), len(shape), "slice_sizes", op)
    check_starts(starts_shape, starts_dtype, len(shape), op)
    for a, (k, n) in enumerate(zip(sizes, shape)):
        if k > n:
            raise ValidationError(f"axis {a}: slice size {k} exceeds the extent {n}", op=op,
                                  kind="axis_out_of_bounds")
    return sizes


def dynamic_update_slice_check(shape: Sequence[int], dtype: DType, update_shape,
                               update_dtype: DType, starts_shape, starts_dtype: DType,
                               op: str = "dynamic_update_slice") -> None:
    check_rank(shape, op)
    same_dtype(op, dtype, update_dtype)
    if len(update_shape) != len(shape):
        raise ValidationError(f"update rank {len(update_shape)} differs from the operand "
                              f"rank {len(shape)}", op=op, kind="rank_mismatch")
    check_starts(starts_shape, starts_dtype, len(shape), op)
    for a, (k, n) in enumerate(zip(update_shape, shape)):
        if k > n:
            raise ValidationError(f"axis {a}: update extent {k} exceeds the operand extent "
                                  f"{n}", op=op, kind="shape_mismatch")


def pad_value_bytes(value, dtype: DType, op: str = "pad") -> bytes:
    """The padding value as raw bytes of ``dtype``, under the rules of ``full``
    (``ops.storage.fill.value_bytes``): True/False (or the ints 0/1) for bool, else
    ``shapes.reduction.scalar_bytes`` -- a Python or numpy number of the dtype's kind (no
    bool for a number, no str, None, list or array), kind ``overflow`` when out of range."""
    if dtype is DType.BOOL:
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, int) and value in (0, 1)):
            return bytes([int(value)])
        raise ValidationError(f"value must be True/False (or 0/1) for bool (got {value!r})",
                              op=op)
    return scalar_bytes(value, dtype, op, "value")


__all__ = ["MAX_RANK", "INDEX_DTYPES", "check_index_dtype", "check_config", "check_sizes",
           "slice_shape", "pad_shape", "reverse_axes", "concatenate_shape", "check_starts",
           "dynamic_slice_shape", "dynamic_update_slice_check", "pad_value_bytes"]
