"""Running a ``GemmPlan``: staging copies, the cuBLAS call or the integer kernel, and the
copy back of a staged output.

- cuBLAS runs on one handle per (runtime, thread), i.e. per session stream, created on
  first use: bound to the stream, host pointer mode, default math mode, a 32 MiB
  workspace from the runtime's pool kept alive by the handle. float16/bfloat16 compute
  in float32 (CUBLAS_COMPUTE_32F), float32 in exact float32 unless the config asks for
  ``precision="tf32"`` (CUBLAS_COMPUTE_32F_FAST_TF32), float64/complex128 in
  CUBLAS_COMPUTE_64F, complex64 in CUBLAS_COMPUTE_32F.
- Staging (a permutation the strides do not allow) copies ``view.permute(perm)`` into a
  compact temporary with ``_dot_copy`` (the structural family's ``_perm_copy``: row copies
  with 16-byte vectors or a tiled transpose; ``_copy_into``, the element-wise strided copy,
  when that family is absent); a staged output is read into its temporary first
  when ``beta != 0`` and copied back after the product, so bytes outside ``out`` are never
  written. Temporaries may be kept by a cache slot and reused (same stream, in order).
- ``k == 0`` gives ``beta * out``: a fill with 0 when beta is 0 (out is not read), a
  scale otherwise, nothing when beta is 1.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from .. import _cublas, _cublas_lt
from ..dtypes import DType
from ..errors import BackendSourceError
from ..tensor import _Strided
from .dot_plan import GemmPlan
from .transfer import TransferOps

__all__ = ["DotExecOps", "BLAS_TYPES", "INT_CODES", "INTEGER", "COMPLEX"]

_HANDLE_KEY = ("dot", "cublas-handle")
_SCALARS_KEY = ("dot", "scalars")
_INT_TILE = 64
_GRID_YZ = 65535
_GRID_X = (1 << 31) - 1
# tf::dot_int parameters: out, lhs, rhs; batch, m, n, k; 9 strides; alpha, beta in the
# accumulator type (u32, or u64 for int64); beta_zero.
INT_CODES = {False: "PPP" + "q" * 13 + "II" + "i", True: "PPP" + "q" * 13 + "QQ" + "i"}

# dtype -> (cudaDataType, compute type, compute type with tf32, alpha|beta host layout,
#           is complex, itemsize)
BLAS_TYPES: dict[DType, tuple[Any, ...]] = {
    DType.FLOAT16: (_cublas.R_16F, _cublas.COMPUTE_32F, None, struct.Struct("<f12xf"),
                    False, 2),
    DType.BFLOAT16: (_cublas.R_16BF, _cublas.COMPUTE_32F, None, struct.Struct("<f12xf"),
                     False, 2),
    DType.FLOAT32: (_cublas.R_32F, _cublas.COMPUTE_32F, _cublas.COMPUTE_32F_FAST_TF32,
                    struct.Struct("<f12xf"), False, 4),
    DType.FLOAT64: (_cublas.R_64F, _cublas.COMPUTE_64F, None, struct.Struct("<d8xd"),
                    False, 8),
    DType.COMPLEX64: (_cublas.C_32F, _cublas.COMPUTE_32F, _cublas.COMPUTE_32F_FAST_TF32,
                      struct.Struct("<ff8xff"), True, 8),
    DType.COMPLEX128: (_cublas.C_64F, _cublas.COMPUTE_64F, None, struct.Struct("<dddd"),
                       True, 16),
}
INTEGER = frozenset(d for d in DType if d.is_integer)
COMPLEX = frozenset(d for d in DType if d.is_complex)


def _ptr(t, item: int) -> int:
    """Device address of element (0, ..., 0) (``data_ptr`` without the property chain)."""
    return t.base.buffer.ptr + t.offset * item


class DotExecOps(TransferOps):
    """Plan execution shared by the dot methods and grouped GEMM."""

    def _dot_handle(self, op: str) -> _cublas.Handle:
        """This stream's cuBLAS handle (BackendSourceError naming a missing library)."""
        h = self._state.prepared.get(_HANDLE_KEY)
        if h is None:
            try:
                _cublas.load()
            except BackendSourceError as exc:  # name the op; keep the library's message
                raise BackendSourceError(str(exc.args[0]), op=op) from exc.__cause__
            state = self._state
            ws = self._rt.pool.alloc(_cublas.WORKSPACE_BYTES, state.stream, op)
            h = _cublas.Handle(int(state.stream), ws.ptr, ws.nbytes, ws, op)
            state.prepared[_HANDLE_KEY] = h
        return h

    def _dot_resident(self, op: str, lhs, rhs, out=None) -> tuple:
        """``_resident`` of ``lhs``, ``rhs`` and ``out`` (when given), in that order; one
        pass over all three when they are resident (the common case), the per-operand
        checks (and their errors) otherwise. Returns their base tensors (None for no
        ``out``)."""
        if isinstance(lhs, _Strided) and isinstance(rhs, _Strided) and (
                out is None or isinstance(out, _Strided)):
            lb, rb = lhs.base, rhs.base
            ob = None if out is None else out.base
            a, b = lb.buffer, rb.buffer
            c = b if ob is None else ob.buffer
            domain = self._rt.domain.value
            stream = self._state.stream
            if a is not None and b is not None and c is not None and not (
                    a.freed or b.freed or c.freed) and a.domain == domain and \
                    b.domain == domain and c.domain == domain and a.stream is stream and \
                    b.stream is stream and c.stream is stream:
                return lb, rb, ob
        self._resident(lhs, op, "lhs")
        self._resident(rhs, op, "rhs")
        if out is not None:
            self._resident(out, op, "out")
        return lhs.base, rhs.base, None if out is None else out.base

    def _dot_scalars(self):
        """(buffer, address) of this thread's 32-byte host block for alpha/beta."""
        entry = self._state.prepared.get(_SCALARS_KEY)
        if entry is None:
            buf = ctypes.create_string_buffer(48)
            entry = self._state.prepared[_SCALARS_KEY] = (buf, ctypes.addressof(buf))
        return entry

    def _dot_copy(self, src, dst, op: str) -> None:
        """``dst[...] = src[...]`` for staging (equal shapes, no overlap)."""
        perm_copy = getattr(self, "_perm_copy", None)
        if perm_copy is not None:
            perm_copy(src, dst, op)
        else:
            self._copy_into(src, dst, op)

    def _dot_temp(self, shape, dtype: DType, temps, i: int, op: str):
        if temps is not None:
            t = temps[i]
            if t is None or t.buffer.freed:
                t = temps[i] = self._alloc(dtype, shape, op)
            return t
        return self._alloc(dtype, shape, op)

    def _dot_stage(self, view, perm, temps, i: int, op: str):
        src = view.permute(perm)
        tmp = self._dot_temp(src.shape, view.dtype, temps, i, op)
        self._dot_copy(src, tmp, op)
        return tmp

    def _dot_kzero(self, out, beta, op: str) -> None:
        if beta == 0:
            self._fill(out, 0, op)
        elif beta != 1:
            self._scale(out, beta, op)

    def _dot_run(self, plan: GemmPlan, lhs, rhs, out, dtype: DType, alpha, beta,
                 precision: str, op: str, temps=None) -> None:
        """Enqueue ``out = alpha * lhs . rhs + beta * out`` as planned."""
        if plan.empty:
            return
        if plan.kzero:
            self._dot_kzero(out, beta, op)
            return
        if plan.lhs_perm is None and plan.rhs_perm is None and plan.out_perm is None:
            a, b, target, back = lhs, rhs, out, None
        else:
            a, b, target, back = self._dot_operands(plan, lhs, rhs, out, dtype, beta, op,
                                                    temps)
        if dtype in INTEGER:
            self._dot_int(plan, a, b, target, dtype, alpha, beta, op)
        else:
            self._dot_blas(plan, a, b, target, dtype, alpha, beta, precision, op)
        if back is not None:
            self._dot_copy(target, back, op)

    def _dot_operands(self, plan: GemmPlan, lhs, rhs, out, dtype: DType, beta, op: str,
                      temps=None):
        """(lhs side, rhs side, output target, view to copy the target back to or None),
        staging what the plan says (the output's old values only when beta != 0)."""
        a = lhs if plan.lhs_perm is None else self._dot_stage(lhs, plan.lhs_perm, temps, 0, op)
        b = rhs if plan.rhs_perm is None else self._dot_stage(rhs, plan.rhs_perm, temps, 1, op)
        if plan.out_perm is None:
            return a, b, out, None
        back = out.permute(plan.out_perm)
        target = self._dot_temp(back.shape, dtype, temps, 2, op)
        if beta != 0:
            self._dot_copy(back, target, op)
        return a, b, target, back

    def _dot_prepared(self, plan: GemmPlan, dtype: DType, precision: str, op: str):
        """The bound cuBLAS call of a plan that runs without staging, else None."""
        if (plan.empty or plan.kzero or dtype in INTEGER or plan.lhs_perm is not None
                or plan.rhs_perm is not None or plan.out_perm is not None):
            return None
        h = self._dot_handle(op)
        cuda_type, compute, compute_tf32, layout, is_complex, _ = BLAS_TYPES[dtype]
        if precision == "tf32":
            compute = compute_tf32
        call = _cublas.PreparedGemm(h, plan, cuda_type, compute, layout, is_complex)
        return _cublas_lt.bind(h, plan, cuda_type, compute, call) or call

    def _dot_blas(self, plan: GemmPlan, a, b, c, dtype: DType, alpha, beta, precision: str,
                  op: str) -> None:
        h = self._state.prepared.get(_HANDLE_KEY) or self._dot_handle(op)
        cuda_type, compute, compute_tf32, layout, is_complex, item = BLAS_TYPES[dtype]
        if precision == "tf32":
            compute = compute_tf32
        buf, addr = self._state.prepared.get(_SCALARS_KEY) or self._dot_scalars()
        if is_complex:
            layout.pack_into(buf, 0, alpha.real, alpha.imag, beta.real, beta.imag)
        else:
            layout.pack_into(buf, 0, alpha, beta)
        if plan.swap:
            a, b = b, a
        if plan.batch == 1:
            _cublas.gemm(h, plan.transa, plan.transb, plan.m, plan.n, plan.k, addr,
                         _ptr(a, item), cuda_type, plan.lda, _ptr(b, item), plan.ldb, addr + 16,
                         _ptr(c, item), plan.ldc, compute, op, plan.use64)
        else:
            _cublas.gemm_strided_batched(
                h, plan.transa, plan.transb, plan.m, plan.n, plan.k, addr, _ptr(a, item),
                cuda_type, plan.lda, plan.stride_a, _ptr(b, item), plan.ldb, plan.stride_b,
                addr + 16, _ptr(c, item), plan.ldc, plan.stride_c, plan.batch, compute, op,
                plan.use64)

    def _dot_int(self, plan: GemmPlan, a, b, c, dtype: DType, alpha: int, beta: int,
                 op: str) -> None:
        fn = self._fn("dot_int", f"tf::dot_int<{dtype.ctype}>")
        wide = dtype is DType.INT64
        mask = (1 << (64 if wide else 32)) - 1
        pack = self._pack(("dot_int", wide), INT_CODES[wide])
        params = pack.pack(c.data_ptr(), a.data_ptr(), b.data_ptr(), plan.batch, plan.m,
                           plan.n, plan.k, *plan.int_strides, alpha & mask, beta & mask,
                           int(beta == 0))
        grid = (min(-(-plan.n // _INT_TILE), _GRID_X), min(-(-plan.m // _INT_TILE), _GRID_YZ),
                min(plan.batch, _GRID_YZ))
        self._launch(fn, grid, (256, 1, 1), params, op)
