"""The permutation-copy engine under the structural ops (and for other families).

``PermuteCopyOps`` gives every op family three internal methods; they enqueue only and
assume the caller has entered the op (``_begin``) and checked residency:

- ``_perm_copy(src, dst, op)``: ``dst[...] = src[...]`` for two layouts of one shape and
  dtype (any strides, including negative and, for ``src``, zero), ``dst`` not
  overlapping ``src`` nor itself. Both compact: one ``cuMemcpyAsync``. Otherwise one launch
  of ``ptx/permute.cu`` planned by ``structural_plan.plan_copy`` (row copy with 16-byte
  vectors, or the tiled transpose). The generic element-wise ``strided_copy`` of
  ``ops/transfer.py`` is used only when a tiled plan would need more than 2^31 - 1 tiles.
- ``_materialize(view, op) -> Tensor``: a fresh compact copy of any view.
- ``_permute_into(src_view, perm, op) -> Tensor``: a fresh compact tensor holding
  ``src_view`` with its axes permuted (output axis i = input axis ``perm[i]``); ``perm``
  is validated (``ValidationError`` naming ``op``) before anything is allocated. This is
  what dot_general uses to bring operands into [batch, free, contracted] order.
"""

from __future__ import annotations

from .. import _driver
from ..shapes import structural as sshapes
from ..tensor import Tensor, TensorView, _Strided
from .structural_plan import Operand, alignment, plan_copy
from .transfer import TransferOps

THREADS = (256, 1, 1)


class PermuteCopyOps(TransferOps):
    """Internal permutation copies shared by the structural ops and other families."""

    def _operand(self, t: _Strided) -> Operand:
        base = t.base
        return Operand(t.strides, t.offset, base.size, alignment(base.buffer.ptr))

    def _perm_copy(self, src: _Strided, dst: _Strided, op: str) -> None:
        """Enqueue ``dst[...] = src[...]`` (validated by the caller; see module docs)."""
        if src.size == 0:
            return
        if src.is_contiguous and dst.is_contiguous:
            _driver.memcpy_dtod_async(dst.data_ptr(), src.data_ptr(), src.nbytes,
                                      self._state.stream, op)
            return
        plan = plan_copy(src.shape, self._operand(src), self._operand(dst), src.itemsize)
        if plan is None:
            self._copy_into(src, dst, op)
            return
        fn = self._fn("permute", plan.expression)
        pack = self._pack(("permute", plan.codes), plan.codes)
        params = pack.pack(dst.base.buffer.ptr, src.base.buffer.ptr, plan.params)
        self._launch(fn, plan.grid, THREADS, params, op)

    def _materialize(self, view: _Strided, op: str) -> Tensor:
        out = self._alloc(view.dtype, view.shape, op)
        self._perm_copy(view, out, op)
        return out

    def _permute_into(self, src: _Strided, perm, op: str) -> Tensor:
        """A compact tensor holding ``src`` permuted (output axis i = src axis perm[i])."""
        p, _ = sshapes.transpose(src.shape, perm, op)
        shape, strides = sshapes.permuted(src.shape, src.strides, p)
        out = self._alloc(src.dtype, shape, op)
        if out.size:
            self._perm_copy(TensorView(src.base, shape, strides, src.offset), out, op)
        return out
