"""Validation and shape inference of StableHLO ``gather`` (the shape-dependent constraints;
the config checked the rest in its ``__post_init__``).

``gather_dims`` also returns how result axes map onto operand and index axes, which the
op uses to build its kernel geometry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..configs.indexing import GatherConfig
from ..dtypes import DType
from ..errors import ValidationError
from . import check_rank
from .indexing import check_config, check_index_dtype


@dataclass(frozen=True)
class GatherDims:
    """Result shape and the axis correspondences of one validated gather."""

    result_shape: tuple[int, ...]
    batch_dims: tuple[int, ...]  # result axes that are not offset_dims
    index_batch_dims: tuple[int, ...]  # index axes (all but index_vector_dim), in order
    window_dims: tuple[int, ...]  # operand axes behind offset_dims, in order
    index_count: int  # size(start_index_map)


def index_batch_axes(index_rank: int, index_vector_dim: int) -> tuple[int, ...]:
    return tuple(d for d in range(index_rank) if d != index_vector_dim)


def combine(rank: int, window_axes: Sequence[int], window_sizes: Sequence[int],
            batch_sizes: Sequence[int]) -> tuple[int, ...]:
    """StableHLO ``combine``: window sizes at ``window_axes``, batch sizes elsewhere."""
    win, bat = iter(window_sizes), iter(batch_sizes)
    return tuple(next(win) if d in window_axes else next(bat) for d in range(rank))


def _check_index_side(cfg, index_shape: Sequence[int], batching: Sequence[int],
                      count: int, names: tuple[str, str, str], rules: tuple[str, str, str],
                      op: str) -> None:
    """Gather C2, C3, C14 and scatter C22, C19, C15 (``rules`` names them)."""
    ivd_name, map_name, bat_name = names
    rank = len(index_shape)
    ivd = cfg.index_vector_dim
    if ivd > rank:
        raise ValidationError(f"{ivd_name} {ivd} must be <= the rank {rank} of the indices "
                              f"({rules[0]})", op=op, kind="axis_out_of_bounds")
    want = index_shape[ivd] if ivd < rank else 1
    if count != want:
        raise ValidationError(
            f"{map_name} has {count} entries but the index vectors have {want} components "
            f"(indices shape {tuple(index_shape)}, {ivd_name} {ivd}; {rules[1]})", op=op,
            kind="shape_mismatch")
    for d in batching:
        if d >= rank:
            raise ValidationError(f"{bat_name}: dimension {d} is out of range for the "
                                  f"indices of rank {rank} ({rules[2]})", op=op,
                                  kind="axis_out_of_bounds")


def _check_batching_extents(shape, index_shape, operand_batching, index_batching,
                            rule: str, op: str) -> None:
    for do, di in zip(operand_batching, index_batching):
        if shape[do] != index_shape[di]:
            raise ValidationError(
                f"batching dimension {do} of the operand (extent {shape[do]}) and dimension "
                f"{di} of the indices (extent {index_shape[di]}) must agree ({rule})", op=op,
                kind="shape_mismatch")


def gather_dims(shape: Sequence[int], dtype: DType, index_shape: Sequence[int],
                index_dtype: DType, cfg: GatherConfig, op: str = "gather") -> GatherDims:
    """Validate a gather against its operand and indices; the result geometry."""
    check_config(cfg, GatherConfig, op)
    check_rank(shape, op)
    check_rank(index_shape, op)
    check_index_dtype(index_dtype, op, "start_indices")
    if len(shape) != cfg.operand_rank:
        raise ValidationError(
            f"the operand has rank {len(shape)} but the config describes rank "
            f"{cfg.operand_rank} (C1, C20)", op=op, kind="rank_mismatch")
    _check_index_side(cfg, index_shape, cfg.start_indices_batching_dims,
                      len(cfg.start_index_map),
                      ("index_vector_dim", "start_index_map", "start_indices_batching_dims"),
                      ("C2", "C3", "C14"), op)
    _check_batching_extents(shape, index_shape, cfg.operand_batching_dims,
                            cfg.start_indices_batching_dims, "C17", op)
    for d, (k, n) in enumerate(zip(cfg.slice_sizes, shape)):
        if k > n:
            raise ValidationError(f"slice_sizes[{d}] = {k} exceeds the operand extent {n} "
                                  "(C21)", op=op, kind="axis_out_of_bounds")
    ib = index_batch_axes(len(index_shape), cfg.index_vector_dim)
    skip = set(cfg.collapsed_slice_dims) | set(cfg.operand_batching_dims)
    window = tuple(d for d in range(len(shape)) if d not in skip)
    rank = len(ib) + len(window)
    for d in cfg.offset_dims:
        if d >= rank:
            raise ValidationError(f"offset_dims: dimension {d} is out of range for the "
                                  f"result rank {rank} (C5)", op=op,
                                  kind="axis_out_of_bounds")
    result = combine(rank, cfg.offset_dims, [cfg.slice_sizes[d] for d in window],
                     [index_shape[d] for d in ib])
    check_rank(result, op)
    _check_empty_windows(cfg, result, skip, op)
    batch = tuple(d for d in range(rank) if d not in cfg.offset_dims)
    return GatherDims(result, batch, ib, window, len(cfg.start_index_map))


def _check_empty_windows(cfg: GatherConfig, result: tuple[int, ...], skip: set[int],
                         op: str) -> None:
    """A collapsed or batching axis with slice size 0 leaves nothing to read."""
    n = 1
    for s in result:
        n *= s
    if n == 0:
        return
    for d in sorted(skip):
        if cfg.slice_sizes[d] == 0:
            raise ValidationError(
                f"slice_sizes[{d}] = 0 on a collapsed or batching dimension leaves the "
                f"non-empty result of shape {result} without operand elements", op=op)
