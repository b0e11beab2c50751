"""cuBLASLt matmuls whose algorithm is chosen once: the bound calls of cache slots and
of repeated ``dot_general`` requests.

``cublasGemmEx`` runs cuBLAS's heuristic and builds its descriptors on every call; a
bound call that already knows its shapes does that work once: ``LtGemm`` keeps the
matmul and layout descriptors and the algorithm the heuristic picked, and each call is a
single ``cublasLtMatmul`` with three addresses filled in. Same library, same kernels, less
host work per call.

Contract (like ``_cublas``, which it extends and which imports nvmath-python's
``cublasLt`` bindings on first use, ``_cublas.load_lt``): when they or libcublasLt cannot
be loaded, or the heuristic offers
no algorithm for a layout, ``bind`` returns None and the caller keeps
``_cublas.PreparedGemm`` (cublasGemmEx), so a missing Lt never changes results. A failed
``cublasLtMatmul`` raises the typed error of ``_cublas.error``. Descriptors and the Lt
handle are destroyed by finalizers that hold only raw handles, never at interpreter exit.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import weakref
from typing import Any

from . import _cublas
from .authority import Authority

__all__ = ["bind", "LtGemm"]

log = logging.getLogger("tenferro_cuda")
_lt_handles: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Handle -> _LtHandle
# Scale (alpha/beta) types per (compute type, complex), as cublasGemmEx implies them.
_SCALE = {(_cublas.COMPUTE_32F, False): _cublas.R_32F,
          (_cublas.COMPUTE_32F_FAST_TF32, False): _cublas.R_32F,
          (_cublas.COMPUTE_64F, False): _cublas.R_64F,
          (_cublas.COMPUTE_32F, True): _cublas.C_32F,
          (_cublas.COMPUTE_64F, True): _cublas.C_64F}


def _destroy(kind: str, value: int) -> None:
    lt = _cublas._state.get("lt")
    if lt is None or sys.is_finalizing():
        return
    try:
        getattr(lt, kind)(value)
    except Exception:  # noqa: BLE001 - a finalizer never raises
        pass


def _owned(owner: object, kind: str, value: int) -> int:
    """Tie the destruction of ``value`` (with ``lt.<kind>``) to ``owner``'s lifetime."""
    fin = weakref.finalize(owner, _destroy, kind, value)
    fin.atexit = False
    return value


class _LtHandle(Authority):
    """One cublasLtHandle_t per cuBLAS ``Handle`` (same context and stream); it cannot be
    copied or pickled (a copy would be a second owner of the handle)."""

    __slots__ = ("value", "__weakref__")

    def __init__(self, lt) -> None:
        self.value = _owned(self, "destroy", lt.create())


def _set(setter, obj: int, attr, ctype, value) -> None:
    box = ctype(value)
    setter(obj, int(attr), ctypes.addressof(box), ctypes.sizeof(box))


class LtGemm(Authority):
    """A bound ``cublasLtMatmul`` with the signature of ``PreparedGemm.run``.

    The algorithm is chosen at the first call, for the alignment of that call's addresses
    (cuBLASLt's heuristic otherwise assumes 256-byte aligned operands); a later call whose
    addresses are less aligned, or a layout the heuristic has no algorithm for, runs the
    ``fallback`` (cublasGemmEx, which adapts per call). It owns its descriptor and
    layouts: it cannot be copied or pickled."""

    __slots__ = ("lt", "h", "plan", "types", "fallback", "fn", "args", "mask", "failed",
                 "keep", "__weakref__")

    def __init__(self, lt, h: _cublas.Handle, plan, cuda_type: int, compute: int,
                 fallback: _cublas.PreparedGemm) -> None:
        self.lt, self.h, self.plan, self.fallback = lt, h, plan, fallback
        self.types = (cuda_type, compute)
        self.fn = lt.matmul
        self.args: list | None = None
        self.mask, self.failed = 0, False
        self.keep: tuple = ()

    def _setup(self, align: int) -> None:
        """Descriptors and the heuristic's algorithm for operands aligned to ``align``."""
        lt, h, plan = self.lt, self.h, self.plan
        cuda_type, compute = self.types
        lth = _lt_handles.get(h)
        if lth is None:
            lth = _lt_handles[h] = _LtHandle(lt)
        desc = _owned(self, "matmul_desc_destroy", lt.matmul_desc_create(
            compute, _SCALE[(compute, self.fallback.is_complex)]))
        _set(lt.matmul_desc_set_attribute, desc, lt.MatmulDescAttribute.TRANSA,
             ctypes.c_int32, plan.transa)
        _set(lt.matmul_desc_set_attribute, desc, lt.MatmulDescAttribute.TRANSB,
             ctypes.c_int32, plan.transb)
        m, n, k = plan.m, plan.n, plan.k
        shapes = (((m, k) if plan.transa == _cublas.OP_N else (k, m), plan.lda,
                   getattr(plan, "stride_a", 0)),
                  ((k, n) if plan.transb == _cublas.OP_N else (n, k), plan.ldb,
                   getattr(plan, "stride_b", 0)),
                  ((m, n), plan.ldc, getattr(plan, "stride_c", 0)))
        lays = []
        for (rows, cols), ld, stride in shapes:
            lay = _owned(self, "matrix_layout_destroy",
                         lt.matrix_layout_create(cuda_type, rows, cols, ld))
            if plan.batch > 1:
                attr = lt.MatrixLayoutAttribute
                _set(lt.matrix_layout_set_attribute, lay, attr.BATCH_COUNT, ctypes.c_int32,
                     plan.batch)
                _set(lt.matrix_layout_set_attribute, lay, attr.STRIDED_BATCH_OFFSET,
                     ctypes.c_int64, stride)
            lays.append(lay)
        ws: Any = h.owner  # the handle's workspace buffer (a DeviceBuffer)
        pref = lt.matmul_preference_create()
        try:
            pa = lt.MatmulPreferenceAttribute
            _set(lt.matmul_preference_set_attribute, pref, pa.MAX_WORKSPACE_BYTES,
                 ctypes.c_uint64, ws.nbytes)
            for name in ("A", "B", "C", "D"):
                _set(lt.matmul_preference_set_attribute, pref,
                     getattr(pa, f"MIN_ALIGNMENT_{name}_BYTES"), ctypes.c_uint32, align)
            result = lt.MatmulHeuristicResult()
            count = ctypes.c_int(0)
            lt.matmul_algo_get_heuristic(lth.value, desc, lays[0], lays[1], lays[2], lays[2],
                                         pref, 1, result.ptr, ctypes.addressof(count))
        finally:
            lt.matmul_preference_destroy(pref)
        if count.value < 1:
            raise LookupError("cuBLASLt offers no algorithm for this layout")
        addr = ctypes.addressof(self.fallback.buf)  # alpha/beta: the fallback's scalar block
        # (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, ws,
        #  ws bytes, stream); A, B, C and D (= C) are filled per call.
        self.args = [lth.value, desc, addr, 0, lays[0], 0, lays[1], addr + 16, 0, lays[2], 0,
                     lays[2], result.ptr, ws.ptr, ws.nbytes, h.stream]
        self.mask = align - 1
        self.keep = (lth, result)  # the Lt handle and the algorithm outlive the call

    def run(self, pa: int, pb: int, pc: int, alpha, beta, op: str) -> None:
        """Enqueue ``c = alpha * a . b + beta * c`` (see ``PreparedGemm.run``)."""
        args = self.args
        if args is None or (pa | pb | pc) & self.mask:
            if args is None and not self.failed:
                bits = pa | pb | pc
                try:
                    self._setup(min(bits & -bits, 256) if bits else 256)
                except Exception as exc:  # noqa: BLE001 - no algorithm, a rejected layout
                    self.failed = True
                    log.info("cuBLASLt not used for a %s GEMM (%s); cublasGemmEx runs it",
                             self.plan, exc)
            args = self.args
            if args is None or (pa | pb | pc) & self.mask:
                self.fallback.run(pa, pb, pc, alpha, beta, op)
                return
        fb = self.fallback
        if alpha is not fb.alpha or beta is not fb.beta:
            fb.pack(alpha, beta)
        if fb.swap:
            pa, pb = pb, pa
        args[3] = pa
        args[5] = pb
        args[8] = args[10] = pc
        args[13] = self.h.workspace  # a graph's own during a capture
        try:
            self.fn(*args)
        except Exception as exc:  # noqa: BLE001 - cuBLASLtError
            raise _cublas.error("cublasLtMatmul", exc, op) from exc


def bind(h: _cublas.Handle, plan, cuda_type: int, compute: int,
         fallback: _cublas.PreparedGemm) -> LtGemm | None:
    """An ``LtGemm`` for ``plan`` (``fallback`` for what it cannot run), or None when
    cuBLASLt is unusable."""
    lt = _cublas.load_lt()
    if lt is None or (compute, fallback.is_complex) not in _SCALE:
        return None
    return LtGemm(lt, h, plan, cuda_type, compute, fallback)
