"""StableHLO ``gather`` and ``scatter`` (semantics: docs/indexing.md)."""

from __future__ import annotations

from ...configs.indexing import GatherConfig, ScatterCombiner, ScatterConfig
from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...shapes.gather import gather_dims
from ...shapes.scatter import ScatterDims, scatter_dims
from ...tensor import Tensor, TensorView
from .. import storage
from .base import alloc_words, copy_view, run
from .partition import gather_partition
from .plan import (
    GatherArgs,
    ScatterArgs,
    gather_launch,
    is_dense,
    keeps_l2,
    l2_normal_launch,
    scatter_launch,
    scatter_passes,
)

__all__ = ["gather", "scatter"]

_U32_KEYS = (1 << 32) - 1


def gather(ctx: ExecContext, operand: Tensor | TensorView,
           start_indices: Tensor | TensorView, config: GatherConfig) -> Tensor:
    """Gather slices of ``operand`` at ``start_indices`` (StableHLO ``gather``).

    Parameters
    ----------
    operand : Tensor or TensorView
        Any dtype, on this session's device.
    start_indices : Tensor or TensorView
        int32 or int64 start indices; the index vectors run along
        ``config.index_vector_dim`` (== rank means one implicit trailing component).
    config : GatherConfig
        Dimension numbers and slice sizes.

    Returns
    -------
    Tensor
        ``combine(batch sizes, offset sizes)``-shaped result. Each start index is
        clamped to ``[0, dim - slice_size]``, so every window lies in the operand.

    Raises
    ------
    ValidationError
        Config or shapes break a StableHLO constraint (C1..C23).
    UnsupportedDTypeError
        Indices that are not int32/int64.

    Notes
    -----
    A dense scalar gather from a table of more than 2 x L2 runs in three passes and
    takes 2 bytes of scratch per result element from the pool (docs/indexing.md).
    """
    op = "gather"
    resident(ctx, operand, op, "operand")
    resident(ctx, start_indices, op, "start_indices")
    dims = gather_dims(operand.shape, operand.dtype, start_indices.shape,
                       start_indices.dtype, config, op)
    out = ctx.alloc(operand.dtype, dims.result_shape, op)
    if out.size == 0:
        return out
    args = GatherArgs(
        itemsize=operand.dtype.itemsize,
        operand=(operand.data_ptr(), operand.shape, operand.strides),
        indices=(start_indices.data_ptr(), start_indices.shape, start_indices.strides),
        wide=start_indices.dtype is DType.INT64, out_ptr=out.data_ptr(),
        result_shape=dims.result_shape, offset_dims=config.offset_dims,
        batch_dims=dims.batch_dims, index_batch_dims=dims.index_batch_dims,
        window_dims=dims.window_dims, slice_sizes=config.slice_sizes,
        start_index_map=config.start_index_map,
        index_vector_dim=config.index_vector_dim,
        operand_batching_dims=config.operand_batching_dims,
        index_batching_dims=config.start_indices_batching_dims)
    part = gather_partition(args, ctx.info.l2_cache_bytes, ctx.sm_count)
    if part is None:
        run(ctx, gather_launch(args, ctx.sm_count), op)
        return out
    scratch = ctx.alloc_bytes(part.scratch_bytes, op)
    for launch in part.launches(scratch.ptr):
        run(ctx, launch, op)
    return out  # `scratch` is freed stream-ordered, after use


def scatter(ctx: ExecContext, operand: Tensor | TensorView,
            scatter_indices: Tensor | TensorView, updates: Tensor | TensorView,
            config: ScatterConfig) -> Tensor:
    """A copy of ``operand`` with ``updates`` combined in at ``scatter_indices``
    (StableHLO ``scatter``; the operand is not modified).

    Parameters
    ----------
    operand : Tensor or TensorView
        The values the result starts from.
    scatter_indices : Tensor or TensorView
        int32 or int64 start indices of the update windows.
    updates : Tensor or TensorView
        Same dtype as ``operand``; shape ``combine(scatter sizes, window sizes)``.
    config : ScatterConfig
        Dimension numbers and the combiner: ``add`` (duplicates accumulate),
        ``replace`` (the window that comes last in row-major order of the update
        scatter dimensions wins), ``max`` or ``min``.

    Returns
    -------
    Tensor
        Compact, the operand's shape and dtype. Windows that do not fit inside the
        operand are skipped whole (no clamping).

    Raises
    ------
    ValidationError
        Config or shapes break a StableHLO constraint (C1..C25).
    UnsupportedDTypeError
        Indices not int32/int64; ``add``/``max``/``min`` on bool; ``max``/``min`` on
        complex.
    """
    op = "scatter"
    resident(ctx, operand, op, "operand")
    resident(ctx, scatter_indices, op, "scatter_indices")
    resident(ctx, updates, op, "updates")
    dims = scatter_dims(operand.shape, operand.dtype, scatter_indices.shape,
                        scatter_indices.dtype, updates.shape, updates.dtype, config, op)
    out = alloc_words(ctx, operand.dtype, operand.shape, op)
    if out.size == 0:
        return out
    item = operand.dtype.itemsize
    copy_view(ctx, out.shape, item, (out.data_ptr(), out.strides),
              (operand.data_ptr(), operand.strides), op)
    if updates.size == 0:
        return out
    if not is_dense(updates.shape, updates.strides):
        updates = storage.materialize(ctx, updates, op)
    args = _scatter_args(out, scatter_indices, updates, config, dims)
    assert isinstance(config.combiner, ScatterCombiner)  # ScatterConfig converted it
    passes = scatter_passes(config.combiner.value, config.unique_indices, args.windows)
    wide_key = args.windows >= _U32_KEYS
    winner = None
    if "claim" in passes:
        nbytes = out.size * (8 if wide_key else 4)
        winner = ctx.alloc_bytes(nbytes, op)
        ctx.memset(winner.ptr, 0, nbytes, op)
    wptr = 0 if winner is None else winner.ptr
    arch = ctx.info.arch
    for p in passes:
        run(ctx, scatter_launch(args, p, wptr, wide_key, ctx.sm_count, arch), op)
        if keeps_l2(args, p, arch):
            run(ctx, l2_normal_launch(args, ctx.sm_count), op)
    return out  # `winner` and a compacted `updates` are freed stream-ordered, after use


def _scatter_args(out: Tensor, indices: Tensor | TensorView,
                  updates: Tensor | TensorView, config: ScatterConfig,
                  dims: ScatterDims) -> ScatterArgs:
    return ScatterArgs(
        ctype=out.dtype.ctype, itemsize=out.dtype.itemsize, out_shape=out.shape,
        out_ptr=out.data_ptr(), updates=(updates.data_ptr(), updates.shape),
        indices=(indices.data_ptr(), indices.shape, indices.strides),
        wide=indices.dtype is DType.INT64, update_window_dims=config.update_window_dims,
        update_scatter_dims=dims.update_scatter_dims,
        index_batch_dims=dims.index_batch_dims, window_dims=dims.window_dims,
        window_sizes=dims.window_sizes,
        scatter_dims_to_operand_dims=config.scatter_dims_to_operand_dims,
        index_vector_dim=config.index_vector_dim,
        input_batching_dims=config.input_batching_dims,
        index_batching_dims=config.scatter_indices_batching_dims)
