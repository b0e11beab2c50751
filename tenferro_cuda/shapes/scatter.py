"""Validation of StableHLO ``scatter`` (the shape- and dtype-dependent constraints; the
config checked the rest in its ``__post_init__``).

Combiner against dtype: ``replace`` takes every dtype; ``add`` every numeric dtype
(complex per component); ``max``/``min`` integer and real floating dtypes. ``bool`` takes
``replace`` only and complex has no ``max``/``min`` (UnsupportedDTypeError).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..configs.indexing import ScatterCombiner, ScatterConfig
from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError
from . import check_rank, same_dtype
from .gather import _check_batching_extents, _check_index_side, combine, index_batch_axes
from .indexing import check_config, check_index_dtype


@dataclass(frozen=True)
class ScatterDims:
    """Axis correspondences of one validated scatter."""

    update_scatter_dims: tuple[int, ...]  # update axes that are not update_window_dims
    index_batch_dims: tuple[int, ...]  # index axes (all but index_vector_dim), in order
    window_dims: tuple[int, ...]  # operand axes behind update_window_dims, in order
    window_sizes: tuple[int, ...]  # per operand axis: the update window extent (1 if none)


def check_combiner(dtype: DType, combiner: ScatterCombiner, op: str) -> None:
    if combiner is ScatterCombiner.REPLACE:
        return
    if dtype.is_bool:
        raise UnsupportedDTypeError(f"combiner {combiner.value!r} is not defined for bool "
                                    "(only 'replace' is)", op=op)
    if dtype.is_complex and combiner in (ScatterCombiner.MAX, ScatterCombiner.MIN):
        raise UnsupportedDTypeError(f"combiner {combiner.value!r} is not defined for "
                                    f"{dtype.value} (complex numbers are not ordered)", op=op)


def scatter_dims(shape: Sequence[int], dtype: DType, index_shape: Sequence[int],
                 index_dtype: DType, update_shape: Sequence[int], update_dtype: DType,
                 cfg: ScatterConfig, op: str = "scatter") -> ScatterDims:
    """Validate a scatter against its operand, indices and updates."""
    check_config(cfg, ScatterConfig, op)
    for s in (shape, index_shape, update_shape):
        check_rank(s, op)
    check_index_dtype(index_dtype, op, "scatter_indices")
    same_dtype(op, dtype, update_dtype)
    assert isinstance(cfg.combiner, ScatterCombiner)  # ScatterConfig converted it
    check_combiner(dtype, cfg.combiner, op)
    if len(shape) != cfg.operand_rank:
        raise ValidationError(
            f"the operand has rank {len(shape)} but the config describes rank "
            f"{cfg.operand_rank} (C2)", op=op, kind="rank_mismatch")
    _check_index_side(cfg, index_shape, cfg.scatter_indices_batching_dims,
                      len(cfg.scatter_dims_to_operand_dims),
                      ("index_vector_dim", "scatter_dims_to_operand_dims",
                       "scatter_indices_batching_dims"), ("C22", "C19", "C15"), op)
    _check_batching_extents(shape, index_shape, cfg.input_batching_dims,
                            cfg.scatter_indices_batching_dims, "C18", op)
    ib = index_batch_axes(len(index_shape), cfg.index_vector_dim)
    skip = set(cfg.inserted_window_dims) | set(cfg.input_batching_dims)
    window = tuple(d for d in range(len(shape)) if d not in skip)
    rank = len(ib) + len(window)
    if len(update_shape) != rank:
        raise ValidationError(
            f"updates have rank {len(update_shape)}; the indices (shape "
            f"{tuple(index_shape)}) and update_window_dims {cfg.update_window_dims} need "
            f"rank {rank} (C4)", op=op, kind="rank_mismatch")
    for d in cfg.update_window_dims:
        if d >= rank:
            raise ValidationError(f"update_window_dims: dimension {d} is out of range for "
                                  f"the updates of rank {rank} (C8)", op=op,
                                  kind="axis_out_of_bounds")
    scatter = tuple(d for d in range(rank) if d not in cfg.update_window_dims)
    want_batch = combine(rank, cfg.update_window_dims, [update_shape[d] for d in
                                                        cfg.update_window_dims],
                         [index_shape[d] for d in ib])
    if tuple(update_shape) != want_batch:
        raise ValidationError(
            f"updates of shape {tuple(update_shape)} do not match the scatter indices: the "
            f"update scatter dimensions {scatter} need extents "
            f"{tuple(index_shape[d] for d in ib)} (C4)", op=op, kind="shape_mismatch")
    sizes = [1] * len(shape)
    for ud, od in zip(cfg.update_window_dims, window):
        if update_shape[ud] > shape[od]:
            raise ValidationError(
                f"update window dimension {ud} (extent {update_shape[ud]}) exceeds operand "
                f"dimension {od} (extent {shape[od]}) (C4)", op=op, kind="shape_mismatch")
        sizes[od] = update_shape[ud]
    return ScatterDims(scatter, ib, window, tuple(sizes))
