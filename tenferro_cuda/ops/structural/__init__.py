"""Structural ops: transpose, reshape, broadcast_in_dim, diagonals, tril/triu, compaction
and copies between views. Semantics in ``shapes/structural.py``; kernels in
``ptx/permute.cu`` (permutation copies) and ``ptx/structural.cu`` (triangular masks).

Every op accepts owned tensors and views (the ``*_read`` names are the same functions),
works for all 15 dtypes (a permutation moves bits), validates everything before allocating
or launching, and only enqueues. Each op except ``reshape`` returns a fresh compact
tensor. Copies go through the storage family (``ops/storage``).
``reshape`` returns a Tensor that *shares the buffer* of its input when the input is its
whole buffer in row-major order (an owned tensor, or a view equal to one): no copy, and
reclaiming either tensor reclaims the storage of both. Any other view is copied into a
fresh compact tensor first (a Tensor cannot describe a strided layout).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ... import shapes
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...kernels.families.structural import tri_expression
from ...shapes import structural as sshapes
from ...shapes.aliasing import check_distinct_elements, check_output
from ...tensor import Tensor, TensorView, compact_strides
from .. import storage
from ..storage.copy import device_ptr
from ..storage.plan import U32_LIMIT, Operand, alignment, plan_tri

__all__ = ["METHODS"]


def transpose(ctx: ExecContext, x: Tensor | TensorView, perm: Sequence[int]) -> Tensor:
    """Permute axes: output axis i is input axis ``perm[i]``.

    Parameters
    ----------
    x : Tensor or TensorView
    perm : sequence of int
        Every axis of ``x`` exactly once.

    Returns
    -------
    Tensor
        A fresh compact tensor of shape ``[x.shape[p] for p in perm]``.
    """
    op = "transpose"
    resident(ctx, x, op)
    if type(perm) is not tuple and type(perm) is not list:  # no set, dict or iterator
        perm = sshapes.int_tuple(perm, op, "perm")
    return storage.permute_into(ctx, x, perm, op)

def reshape(ctx: ExecContext, x: Tensor | TensorView, shape: Sequence[int]) -> Tensor:
    """The elements of ``x`` in row-major order with a new ``shape``.

    Shares ``x``'s buffer when ``x`` is its whole buffer in row-major order; otherwise
    the result is a fresh compact copy (module docstring). Raises ValidationError when
    the element counts differ.
    """
    op = "reshape"
    resident(ctx, x, op)
    dims = sshapes.reshape(x.shape, shape, op)
    base = x.base
    if sshapes.shares_storage(x.shape, x.strides, x.offset, base.size):
        return Tensor._make(x.dtype, dims, buffer=base.buffer)
    out = ctx.alloc(x.dtype, dims, op)
    if out.size:
        storage.copy_into(ctx, x, TensorView(out, x.shape, compact_strides(x.shape)), op)
    return out

def broadcast_in_dim(ctx: ExecContext, x: Tensor | TensorView, shape: Sequence[int],
                 dims: Sequence[int]) -> Tensor:
    """StableHLO ``broadcast_in_dim``: operand axis i becomes output axis ``dims[i]``.

    ``dims`` has one entry per operand axis, unique, in ``range(len(shape))`` (any
    order); each operand extent is 1 (broadcast) or equal to ``shape[dims[i]]``.
    Returns a fresh compact tensor of ``shape``.
    """
    op = "broadcast_in_dim"
    resident(ctx, x, op)
    out_shape, d = sshapes.broadcast_in_dim(x.shape, shape, dims, op, x.itemsize)
    out = ctx.alloc(x.dtype, out_shape, op)
    if out.size:
        st = sshapes.broadcast_strides(x.shape, x.strides, out_shape, d)
        storage.copy_into(ctx, TensorView(x.base, out_shape, st, x.offset), out, op)
    return out

def extract_diagonal(ctx: ExecContext, x: Tensor | TensorView, axis_a: int,
                 axis_b: int) -> Tensor:
    """The diagonal of axes (``axis_a``, ``axis_b``): axis_b is removed and the
    diagonal (extent ``min(n_a, n_b)``) takes axis_a's place; see shapes/structural.
    """
    op = "extract_diagonal"
    resident(ctx, x, op)
    out_shape, _ = sshapes.extract_diagonal(x.shape, axis_a, axis_b, op)
    out = ctx.alloc(x.dtype, out_shape, op)
    if out.size:
        sh, st = sshapes.diagonal_view(x.shape, x.strides, axis_a, axis_b)
        storage.copy_into(ctx, TensorView(x.base, sh, st, x.offset), out, op)
    return out


def embed_diagonal(ctx: ExecContext, x: Tensor | TensorView, axis_a: int,
               axis_b: int) -> Tensor:
    """Insert an axis of extent ``n_a`` at position ``axis_b`` and place ``x`` on the
    diagonal of that axis and input axis ``axis_a``; zeros elsewhere (the inverse of
    extract_diagonal; exact rule in shapes/structural).
    """
    op = "embed_diagonal"
    resident(ctx, x, op)
    out_shape, _ = sshapes.embed_diagonal(x.shape, axis_a, axis_b, op)
    out = ctx.alloc(x.dtype, out_shape, op)
    if out.size:
        storage.fill(ctx, out, 0, op)
        st = sshapes.embed_view_strides(out.strides, axis_a, axis_b)
        storage.copy_into(ctx, x, TensorView(out, x.shape, st), op)
    return out


def tril(ctx: ExecContext, x: Tensor | TensorView, k: int = 0) -> Tensor:
    """Lower triangle of the last two axes: keep (r, c) where ``c - r <= k``."""
    return _triangle(ctx, x, k, "tril", upper=False)

def triu(ctx: ExecContext, x: Tensor | TensorView, k: int = 0) -> Tensor:
    """Upper triangle of the last two axes: keep (r, c) where ``c - r >= k``."""
    return _triangle(ctx, x, k, "triu", upper=True)


def _triangle(ctx: ExecContext, x, k, op: str, upper: bool) -> Tensor:
    resident(ctx, x, op)
    kk = sshapes.triangular(x.shape, k, op)
    out = ctx.alloc(x.dtype, x.shape, op)
    n = out.size
    if n == 0:
        return out
    index = "tf::u32" if max(x.base.size, n) <= U32_LIMIT else "tf::u64"
    src = Operand(x.strides, x.offset, x.base.size, alignment(device_ptr(x.base, op)))
    params = plan_tri(x.shape, src, kk, upper, index)
    fn = ctx.function("structural", tri_expression(x.itemsize, index))
    ctx.launch(fn, f"PPS{len(params)}", (ctx.grid(n), 1, 1),
               (device_ptr(out, op), device_ptr(x.base, op), params), op)
    return out

def to_contiguous_read(ctx: ExecContext, x: Tensor | TensorView) -> Tensor:
    """A fresh compact copy of a tensor or view (``cuMemcpyAsync`` when compact)."""
    op = "to_contiguous_read"
    resident(ctx, x, op)
    return storage.materialize(ctx, x, op)

def copy_read_into(ctx: ExecContext, src: Tensor | TensorView,
               dst: Tensor | TensorView) -> None:
    """Overwrite every element of ``dst`` (a tensor or view) with ``src``.

    ``src`` and ``dst`` must have the same shape and dtype. Raises ValidationError when
    ``dst`` shares any device memory with ``src`` (also through another tensor object
    over the same buffer: a reshape, two adoptions of one foreign array) or addresses an
    element more than once (stride 0, say); nothing is written then.
    """
    op = "copy_read_into"
    resident(ctx, src, op, "src")
    resident(ctx, dst, op, "dst")
    shapes.check_out(dst.shape, dst.dtype, src.shape, src.dtype, op)
    check_distinct_elements(dst, op, "dst")
    check_output(dst, (src,), ("src",), op, what="dst")
    storage.copy_into(ctx, src, dst, op)


METHODS: tuple[tuple[str, Callable], ...] = (
    ("transpose", transpose), ("transpose_read", transpose), ("reshape", reshape),
    ("reshape_read", reshape), ("broadcast_in_dim", broadcast_in_dim),
    ("broadcast_in_dim_read", broadcast_in_dim), ("extract_diagonal", extract_diagonal),
    ("embed_diagonal", embed_diagonal), ("tril", tril), ("triu", triu),
    ("to_contiguous_read", to_contiguous_read), ("copy_read_into", copy_read_into),
)
