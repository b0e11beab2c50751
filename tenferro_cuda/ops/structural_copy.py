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

from ..errors import RuntimeStateError
from ..kernels import device
from ..shapes import check_permutation
from ..shapes.structural import int_tuple
from ..tensor import Tensor, _Strided
from .structural_plan import Operand, alignment, cached_plan
from .transfer import TransferOps

THREADS = (256, 1, 1)


def _compact(shape, strides) -> bool:
    expect = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def device_ptr(base: Tensor, op: str) -> int:
    """The device address of a (residency-checked) tensor's buffer."""
    buf = base.buffer
    if buf is None:
        raise RuntimeStateError("expected a device tensor; found a host tensor", op=op)
    return buf.ptr


class PermuteCopyOps(TransferOps):
    """Internal permutation copies shared by the structural ops and other families."""

    def _operand(self, t: _Strided) -> Operand:
        return Operand(t.strides, t.offset, t.base.size,
                       alignment(device_ptr(t.base, "structural")))

    def _perm_copy(self, src: _Strided, dst: _Strided, op: str) -> None:
        """Enqueue ``dst[...] = src[...]`` (validated by the caller; see module docs)."""
        self._copy_layout(src.shape, src.base, src.strides, src.offset, dst.base,
                          dst.strides, dst.offset, op)

    def _copy_layout(self, shape, sbase: Tensor, ss, so: int, dbase: Tensor, ds, do: int,
                     op: str) -> None:
        """``_perm_copy`` on raw layouts (shape, strides and offsets over two bases)."""
        n = 1
        for e in shape:
            n *= e
        if n == 0:
            return
        item = sbase.dtype.itemsize
        sptr, dptr = device_ptr(sbase, op), device_ptr(dbase, op)
        if _compact(shape, ss) and _compact(shape, ds):
            device.memcpy_dtod_async(dptr + do * item, sptr + so * item, n * item,
                                      self._state.stream, op)
            return
        plan = cached_plan((tuple(shape), tuple(ss), so, sbase.size, alignment(sptr),
                            tuple(ds), do, dbase.size, alignment(dptr), item))
        if plan is None:  # more tiles than a grid holds: the generic element-wise copy
            TransferOps._copy_into(self, sbase.view(shape, ss, so), dbase.view(shape, ds, do),
                                   op)
            return
        pack = self._pack(("permute", plan.codes), plan.codes)
        self._launch(self._fn("permute", plan.expression), plan.grid, THREADS,
                     pack.pack(dptr, sptr, plan.params), op)

    # The session's storage copies (downloads of views, copy_to, other families) take the
    # permutation kernels; TransferOps keeps the generic element-wise copy as the fallback.
    def _copy_into(self, src: _Strided, dst: _Strided, op: str) -> None:
        self._perm_copy(src, dst, op)

    def _compact(self, view: _Strided, op: str) -> Tensor:
        return self._materialize(view, op)

    def _materialize(self, view: _Strided, op: str) -> Tensor:
        out = self._alloc(view.dtype, view.shape, op)
        self._perm_copy(view, out, op)
        return out

    def _permute_into(self, src: _Strided, perm, op: str) -> Tensor:
        """A compact tensor holding ``src`` permuted (output axis i = src axis perm[i])."""
        shape, strides = src.shape, src.strides
        try:
            p = tuple(perm)
            ok = sorted(p) == list(range(len(shape))) and all(type(a) is int for a in p)
        except TypeError:
            ok = False
        if not ok:  # the precise error
            p = check_permutation(int_tuple(perm, op, "perm"), len(shape), op)
        out_shape = tuple(shape[a] for a in p)
        out = self._alloc(src.dtype, out_shape, op)
        self._copy_layout(out_shape, src.base, tuple(strides[a] for a in p), src.offset,
                          out, out.strides, 0, op)
        return out

