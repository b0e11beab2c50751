"""cuBLAS for one execution context: the only way op families reach the cuBLAS bindings.

- ``Blas(ctx, op)`` loads cuBLAS (``BackendSourceError`` naming the op and the missing
  library) and creates one handle bound to the context's stream: host pointer mode,
  default math mode, a 32 MiB workspace from the context's pool kept alive by the handle.
- ``gemm`` runs one planned product (``ops/dot/plan.py``'s ``GemmPlan``: transposes, sizes,
  leading dimensions, strided batch) as cublasGemmEx or cublasGemmStridedBatchedEx.
- ``bind`` prepares a plan's call once (``PreparedGemm``, or ``LtGemm`` through cuBLASLt
  with the algorithm chosen once): what cache slots and repeated products run.
- ``pointer_call`` binds the products of a grouped call over device arrays of operand
  addresses (``blas_groups.PointerGemm``: cublasGemmBatchedEx per uniform group, or one
  cublasGemmGroupedBatchedEx); ``upload_pointers`` copies such an array through this
  handle's pinned staging (``blas_groups.PinnedRing``), asynchronously.

float16/bfloat16 compute in float32 (CUBLAS_COMPUTE_32F), float32 in exact float32 unless
``precision="tf32"`` (CUBLAS_COMPUTE_32F_FAST_TF32), float64/complex128 in
CUBLAS_COMPUTE_64F, complex64 in CUBLAS_COMPUTE_32F.
"""

from __future__ import annotations

import ctypes
import struct
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import _cublas, _cublas_lt
from ..authority import Authority
from ..dtypes import DType
from ..errors import BackendSourceError
from .blas_groups import PinnedRing, PointerGemm

if TYPE_CHECKING:
    from ..memory import DeviceBuffer

__all__ = ["Blas", "BLAS_TYPES", "GROUPED_DTYPES", "has_grouped"]

# dtype -> (cudaDataType, compute type, compute type with tf32, alpha|beta host layout,
#           is complex)
BLAS_TYPES: dict[DType, tuple[Any, ...]] = {
    DType.FLOAT16: (_cublas.R_16F, _cublas.COMPUTE_32F, None, struct.Struct("<f12xf"), False),
    DType.BFLOAT16: (_cublas.R_16BF, _cublas.COMPUTE_32F, None, struct.Struct("<f12xf"),
                     False),
    DType.FLOAT32: (_cublas.R_32F, _cublas.COMPUTE_32F, _cublas.COMPUTE_32F_FAST_TF32,
                    struct.Struct("<f12xf"), False),
    DType.FLOAT64: (_cublas.R_64F, _cublas.COMPUTE_64F, None, struct.Struct("<d8xd"), False),
    DType.COMPLEX64: (_cublas.C_32F, _cublas.COMPUTE_32F, _cublas.COMPUTE_32F_FAST_TF32,
                      struct.Struct("<ff8xff"), True),
    DType.COMPLEX128: (_cublas.C_64F, _cublas.COMPUTE_64F, None, struct.Struct("<dddd"), True),
}
# Scalar type of alpha/beta of the grouped call, by dtype (cuBLAS has no complex groups).
GROUPED_DTYPES = {DType.FLOAT16: ctypes.c_float, DType.BFLOAT16: ctypes.c_float,
                  DType.FLOAT32: ctypes.c_float, DType.FLOAT64: ctypes.c_double}


def has_grouped() -> bool:
    """Whether the loaded cuBLAS has cublasGemmGroupedBatchedEx (12.5 and later)."""
    return _cublas.has_grouped()


def _types(dtype: DType, precision: str) -> tuple[int, int, Any, bool]:
    cuda_type, compute, compute_tf32, layout, is_complex = BLAS_TYPES[dtype]
    if precision == "tf32" and compute_tf32 is not None:
        compute = compute_tf32
    return cuda_type, compute, layout, is_complex


class Owner(Protocol):
    """What cuBLAS uses of its execution context (``exec/context.ExecContext``): the
    stream, scratch memory, host-to-device copies, and the capture in progress."""

    stream: Any
    capture: Any  # a CaptureState while the stream is captured, else None

    def alloc_bytes(self, nbytes: int, op: str) -> DeviceBuffer: ...

    def upload(self, dst: int, host: int, nbytes: int, op: str) -> None: ...


class Blas(Authority):
    """One cuBLAS handle on one execution context's stream (see the module docstring)."""

    __slots__ = ("handle", "_scalars", "_address", "_ring")

    def __init__(self, ctx: Owner, op: str) -> None:
        try:
            _cublas.load()
        except BackendSourceError as exc:  # name the op; keep the library's message
            raise BackendSourceError(str(exc.args[0]), op=op) from exc.__cause__
        workspace = ctx.alloc_bytes(_cublas.WORKSPACE_BYTES, op)
        stream: Any = ctx.stream
        self.handle = _cublas.Handle(int(stream), workspace.ptr, workspace.nbytes,
                                     workspace, op)
        self._scalars = ctypes.create_string_buffer(48)  # alpha at 0, beta at 16
        self._address = ctypes.addressof(self._scalars)
        self._ring: PinnedRing | None = None  # made on the first upload_pointers

    @property
    def workspace_bytes(self) -> int:
        return self.handle.workspace_bytes

    def use_workspace(self, workspace: int | None, op: str) -> None:
        """Run on ``workspace`` (a graph's, during a capture), or on the handle's own
        (None)."""
        own: Any = self.handle.owner
        self.handle.use_workspace(own.ptr if workspace is None else workspace, op)

    def gemm(self, plan: Any, a: int, b: int, c: int, dtype: DType, alpha: Any, beta: Any,
             precision: str, op: str) -> None:
        """Enqueue ``c = alpha * a . b + beta * c`` as planned (device addresses of element
        0 of the lhs side, the rhs side and the output)."""
        cuda_type, compute, layout, is_complex = _types(dtype, precision)
        if is_complex:
            layout.pack_into(self._scalars, 0, alpha.real, alpha.imag, beta.real, beta.imag)
        else:
            layout.pack_into(self._scalars, 0, alpha, beta)
        if plan.swap:
            a, b = b, a
        addr = self._address
        if plan.batch == 1:
            _cublas.gemm(self.handle, plan.transa, plan.transb, plan.m, plan.n, plan.k, addr,
                         a, cuda_type, plan.lda, b, plan.ldb, addr + 16, c, plan.ldc, compute,
                         op, plan.use64)
        else:
            _cublas.gemm_strided_batched(
                self.handle, plan.transa, plan.transb, plan.m, plan.n, plan.k, addr, a,
                cuda_type, plan.lda, plan.stride_a, b, plan.ldb, plan.stride_b, addr + 16, c,
                plan.ldc, plan.stride_c, plan.batch, compute, op, plan.use64)

    def bind(self, plan: Any, dtype: DType, precision: str) -> Any:
        """The prepared call of ``plan``: ``.run(pa, pb, pc, alpha, beta, op)``."""
        cuda_type, compute, layout, is_complex = _types(dtype, precision)
        call = _cublas.PreparedGemm(self.handle, plan, cuda_type, compute, layout, is_complex)
        return _cublas_lt.bind(self.handle, plan, cuda_type, compute, call) or call

    def pointer_call(self, keys: list, sizes: list, dtype: DType,
                     precision: str) -> PointerGemm:
        """The bound products of uniform groups ``keys`` (transa, transb, m, n, k, lda,
        ldb, ldc, alpha, beta) of ``sizes`` problems each, over pointer arrays:
        ``.run(pointers, op)`` (``blas_groups.PointerGemm``)."""
        cuda_type, compute, layout, is_complex = _types(dtype, precision)
        return PointerGemm(self.handle, keys, sizes, cuda_type, compute, layout, is_complex,
                           GROUPED_DTYPES.get(dtype))

    def upload_pointers(self, ctx: Owner, dst: int, data: np.ndarray, op: str) -> None:
        """Enqueue the copy of the host array ``data`` to ``dst`` through pinned staging
        (never waits; ``blas_groups.PinnedRing``). During a capture the array is a
        constant of the graph instead: copied once into graph memory, outside the graph
        (``CaptureState.upload_constant``)."""
        if ctx.capture is not None:
            ctx.capture.upload_constant(dst, data, op)
            return
        ring = self._ring
        if ring is None:
            ring = self._ring = PinnedRing()
        ring.upload(ctx, dst, data, op)

    def has_grouped(self) -> bool:
        """Whether this cuBLAS has cublasGemmGroupedBatchedEx (``has_grouped()``)."""
        return _cublas.has_grouped()

    def close(self) -> None:
        self.handle.close()
        if self._ring is not None:
            self._ring.close()

