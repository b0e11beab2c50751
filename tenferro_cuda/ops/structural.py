"""Structural ops: transpose, reshape, broadcast_in_dim, diagonals, tril/triu, compaction
and copies between views. Semantics in ``shapes/structural.py``; kernels in
``ptx/permute.cu`` (permutation copies) and ``ptx/structural.cu`` (triangular masks).

Every op accepts owned tensors and views (the ``*_read`` names are the same methods), works
for all 11 dtypes (a permutation moves bits), validates everything before allocating or
launching, and only enqueues. Each op except ``reshape`` returns a fresh compact tensor.
``reshape`` returns a Tensor that *shares the buffer* of its input when the input is its
whole buffer in row-major order (an owned tensor, or a view equal to one): no copy, and
reclaiming either tensor reclaims the storage of both. Any other view is copied into a
fresh compact tensor first (a Tensor cannot describe a strided layout).
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import shapes
from ..errors import ValidationError
from ..kernels.families.structural import tri_expression
from ..shapes import structural as sshapes
from ..tensor import Tensor, TensorView, compact_strides
from ._layout import may_overlap
from .structural_copy import PermuteCopyOps, device_ptr
from .structural_plan import U32_LIMIT, plan_tri


class StructuralOps(PermuteCopyOps):
    def transpose(self, x: Tensor | TensorView, perm: Sequence[int]) -> Tensor:
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
        self._begin(op)
        self._resident(x, op)
        return self._permute_into(x, perm, op)

    transpose_read = transpose

    def reshape(self, x: Tensor | TensorView, shape: Sequence[int]) -> Tensor:
        """The elements of ``x`` in row-major order with a new ``shape``.

        Shares ``x``'s buffer when ``x`` is its whole buffer in row-major order; otherwise
        the result is a fresh compact copy (module docstring). Raises ValidationError when
        the element counts differ.
        """
        op = "reshape"
        self._begin(op)
        self._resident(x, op)
        dims = sshapes.reshape(x.shape, shape, op)
        base = x.base
        if sshapes.shares_storage(x.shape, x.strides, x.offset, base.size):
            return Tensor._make(x.dtype, dims, buffer=base.buffer)
        out = self._alloc(x.dtype, dims, op)
        if out.size:
            self._perm_copy(x, TensorView(out, x.shape, compact_strides(x.shape)), op)
        return out

    reshape_read = reshape

    def broadcast_in_dim(self, x: Tensor | TensorView, shape: Sequence[int],
                         dims: Sequence[int]) -> Tensor:
        """StableHLO ``broadcast_in_dim``: operand axis i becomes output axis ``dims[i]``.

        ``dims`` has one entry per operand axis, unique, in ``range(len(shape))`` (any
        order); each operand extent is 1 (broadcast) or equal to ``shape[dims[i]]``.
        Returns a fresh compact tensor of ``shape``.
        """
        op = "broadcast_in_dim"
        self._begin(op)
        self._resident(x, op)
        out_shape, d = sshapes.broadcast_in_dim(x.shape, shape, dims, op)
        out = self._alloc(x.dtype, out_shape, op)
        if out.size:
            st = sshapes.broadcast_strides(x.shape, x.strides, out_shape, d)
            self._perm_copy(TensorView(x.base, out_shape, st, x.offset), out, op)
        return out

    broadcast_in_dim_read = broadcast_in_dim

    def extract_diagonal(self, x: Tensor | TensorView, axis_a: int, axis_b: int) -> Tensor:
        """The diagonal of axes (``axis_a``, ``axis_b``): axis_b is removed and the
        diagonal (extent ``min(n_a, n_b)``) takes axis_a's place; see shapes/structural.
        """
        op = "extract_diagonal"
        self._begin(op)
        self._resident(x, op)
        out_shape, _ = sshapes.extract_diagonal(x.shape, axis_a, axis_b, op)
        out = self._alloc(x.dtype, out_shape, op)
        if out.size:
            sh, st = sshapes.diagonal_view(x.shape, x.strides, axis_a, axis_b)
            self._perm_copy(TensorView(x.base, sh, st, x.offset), out, op)
        return out


    def embed_diagonal(self, x: Tensor | TensorView, axis_a: int, axis_b: int) -> Tensor:
        """Insert an axis of extent ``n_a`` at position ``axis_b`` and place ``x`` on the
        diagonal of that axis and input axis ``axis_a``; zeros elsewhere (the inverse of
        extract_diagonal; exact rule in shapes/structural).
        """
        op = "embed_diagonal"
        self._begin(op)
        self._resident(x, op)
        out_shape, _ = sshapes.embed_diagonal(x.shape, axis_a, axis_b, op)
        out = self._alloc(x.dtype, out_shape, op)
        if out.size:
            self._fill(out, 0, op)
            st = sshapes.embed_view_strides(out.strides, axis_a, axis_b)
            self._perm_copy(x, TensorView(out, x.shape, st), op)
        return out


    def tril(self, x: Tensor | TensorView, k: int = 0) -> Tensor:
        """Lower triangle of the last two axes: keep (r, c) where ``c - r <= k``."""
        return self._triangle(x, k, "tril", upper=False)

    def triu(self, x: Tensor | TensorView, k: int = 0) -> Tensor:
        """Upper triangle of the last two axes: keep (r, c) where ``c - r >= k``."""
        return self._triangle(x, k, "triu", upper=True)


    def _triangle(self, x, k, op: str, upper: bool) -> Tensor:
        self._begin(op)
        self._resident(x, op)
        kk = sshapes.triangular(x.shape, k, op)
        out = self._alloc(x.dtype, x.shape, op)
        n = out.size
        if n == 0:
            return out
        index = "tf::u32" if max(x.base.size, n) <= U32_LIMIT else "tf::u64"
        params = plan_tri(x.shape, self._operand(x), kk, upper, index)
        fn = self._fn("structural", tri_expression(x.itemsize, index))
        pack = self._pack(("tri_copy", len(params)), f"PPS{len(params)}")
        packed = pack.pack(device_ptr(out, op), device_ptr(x.base, op), params)
        self._launch1d(fn, self._grid(n), packed, op)
        return out

    def to_contiguous_read(self, x: Tensor | TensorView) -> Tensor:
        """A fresh compact copy of a tensor or view (``cuMemcpyAsync`` when compact)."""
        op = "to_contiguous_read"
        self._begin(op)
        self._resident(x, op)
        return self._materialize(x, op)

    def copy_read_into(self, src: Tensor | TensorView, dst: Tensor | TensorView) -> None:
        """Overwrite every element of ``dst`` (a tensor or view) with ``src``.

        ``src`` and ``dst`` must have the same shape and dtype. Raises ValidationError when
        ``dst`` overlaps ``src`` or addresses an element more than once (stride 0, say);
        nothing is written then.
        """
        op = "copy_read_into"
        self._begin(op)
        self._resident(src, op, "src")
        self._resident(dst, op, "dst")
        shapes.check_out(dst.shape, dst.dtype, src.shape, src.dtype, op)
        if may_overlap(src, dst):
            raise ValidationError("dst overlaps src (copy through to_contiguous_read first)",
                                  op=op)
        if sshapes.self_overlapping(dst.shape, dst.strides):
            raise ValidationError(f"dst (shape {dst.shape}, strides {dst.strides}) addresses "
                                  "some elements more than once", op=op)
        self._perm_copy(src, dst, op)
