"""The only module that imports cuBLAS bindings (NVIDIA's nvmath-python), lazily (the
cuBLASLt bindings too, for ``_cublas_lt``'s bound calls: ``load_lt``).

Contract:
- Importing this module loads nothing. ``load()`` imports ``nvmath.bindings.cublas``,
  locates libcublas (through ``cuda.pathfinder``, the loader nvmath itself uses) and asks
  the library for its version. Any failure raises ``BackendSourceError`` naming what is
  missing ("libcublas.so.13 ... not found", "nvmath-python not found"); the result is
  remembered, so a missing library is reported the same way on every call and never
  replaced by a slower path.
- Every cuBLAS call goes through a wrapper here that turns a ``cublasStatus_t`` into a
  typed error: ``OutOfMemoryError`` for ALLOC_FAILED, ``BackendSourceError`` otherwise,
  each naming the API and the status with a ``CublasError`` as ``__cause__``.
- Handles are ``Handle`` objects: created in the current (primary) context, bound to one
  stream, host pointer mode, default math mode (no TF32 unless a call's compute type asks
  for it), a caller-provided workspace; ``cublasDestroy`` runs from a ``weakref.finalize``
  holding only the raw handle, never at interpreter exit.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import sys
import threading
import types
import weakref

from ._library import load_once
from .authority import Authority
from .errors import BackendSourceError, CublasError, OutOfMemoryError

__all__ = ["load", "version", "Handle", "PreparedGemm", "gemm", "gemm_strided_batched",
           "gemm_batched", "gemm_grouped",
           "OP_N", "OP_T", "OP_C", "R_16F", "R_16BF", "R_32F", "R_64F", "C_32F", "C_64F",
           "COMPUTE_32F", "COMPUTE_32F_FAST_TF32", "COMPUTE_64F", "WORKSPACE_BYTES",
           "LIBRARY"]

# ABI constants of cublas_api.h / library_types.h (checked against the bindings in load()).
OP_N, OP_T, OP_C = 0, 1, 2
R_16F, R_16BF, R_32F, R_64F, C_32F, C_64F = 2, 14, 0, 1, 4, 5
COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F = 68, 77, 70
GEMM_DEFAULT = -1
DEFAULT_MATH = 0
POINTER_MODE_HOST = 0
STATUS_ALLOC_FAILED = 3
WORKSPACE_BYTES = 32 << 20  # what PyTorch gives cuBLAS on Hopper
LIBRARY = "libcublas.so.13"
_PACKAGE = "nvmath"  # the distribution nvmath-python's import name

_lock = threading.Lock()
_state: dict = {}  # "lib": the bindings module; "version": (major, minor, patch); "error"


def _missing(what: str, exc: BaseException | None) -> BackendSourceError:
    detail = f": {exc}" if exc is not None else ""
    err = BackendSourceError(f"cuBLAS is unavailable: {what}{detail}", op="cublas")
    err.__cause__ = exc
    return err


def _import_bare():
    """Import the binding extension module without running nvmath's package
    ``__init__`` (which imports cuda.core, nvmath.fft, ...: not needed for BLAS calls).

    Used only when the regular import fails for a reason other than nvmath itself being
    absent. Registers plain package modules for ``nvmath`` and ``nvmath.bindings``.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"No module named {_PACKAGE!r}", name=_PACKAGE)
    root = list(spec.submodule_search_locations)[0]
    packages = ((_PACKAGE, root), (_PACKAGE + ".bindings", os.path.join(root, "bindings")))
    for name, path in packages:
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [path]
            pkg.__package__ = name
            sys.modules[name] = pkg
    return importlib.import_module(_PACKAGE + ".bindings.cublas")


def _import_bindings():
    name = _PACKAGE + ".bindings.cublas"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if exc.name is None or (name + ".").startswith(exc.name + "."):
            raise _missing("nvmath-python not found (pip install nvmath-python>=1.0)",
                           exc) from exc
        cached = sys.modules.get(name)
        if cached is not None:
            return cached
        try:
            return _import_bare()
        except ImportError as bare:
            raise _missing("nvmath-python could not be imported", bare) from exc


def _locate_library() -> None:
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return  # older cuda-bindings: nvmath finds the library itself (checked below)
    try:
        load_nvidia_dynamic_lib("cublas")
    except Exception as exc:  # noqa: BLE001 - DynamicLibNotFoundError and relatives
        raise _missing(f"{LIBRARY} / libcublasLt.so.13 not found (install the "
                       "nvidia-cublas wheel or a CUDA 13 toolkit)", exc) from exc


def _load_now():
    lib = _import_bindings()
    _locate_library()
    try:
        ver = tuple(lib.get_property(i) for i in range(3))
    except Exception as exc:  # noqa: BLE001 - NotSupportedError, FunctionNotFoundError
        raise _missing(f"{LIBRARY} could not be loaded through nvmath-python", exc) from exc
    enums = ((lib.Operation.C, OP_C), (lib.ComputeType.COMPUTE_32F_FAST_TF32,
                                       COMPUTE_32F_FAST_TF32),
             (lib.ComputeType.COMPUTE_64F, COMPUTE_64F), (lib.GemmAlgo.DEFAULT, GEMM_DEFAULT))
    for got, want in enums:
        if int(got) != want:
            raise _missing(f"unexpected cuBLAS ABI ({got!r} != {want})", None)
    return lib, ver


def load():
    """The cuBLAS bindings module, loading it on first use (``BackendSourceError`` when
    nvmath-python or libcublas is missing; the failure is remembered)."""
    return load_once(_state, _lock, _load_now, BackendSourceError)


def load_lt():
    """nvmath's cuBLASLt bindings, or None when they cannot be used (remembered; callers
    then keep cublasGemmEx, which ``load`` guarantees)."""
    if "lt" not in _state:
        name = getattr(load(), "__name__", None)  # only beside nvmath's own cuBLAS module
        with _lock:
            if "lt" not in _state:
                lt = None
                if name == _PACKAGE + ".bindings.cublas":
                    try:
                        lt = importlib.import_module(_PACKAGE + ".bindings.cublasLt")
                        lt.get_version()
                    except Exception:  # noqa: BLE001 - ImportError, FunctionNotFoundError
                        lt = None
                _state["lt"] = lt
    return _state["lt"]


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the loaded libcublas."""
    load()
    return _state["version"]


def has_grouped() -> bool:
    """Whether cublasGemmGroupedBatchedEx exists (cuBLAS 12.5 and later)."""
    return version() >= (12, 5, 0)


def _reset_for_tests() -> None:
    with _lock:
        _state.clear()


def error(api: str, exc: BaseException, op: str) -> BackendSourceError:
    """The tenferro error for a failed cuBLAS call (``exc``: nvmath's cuBLASError)."""
    status = int(getattr(exc, "status", -1))
    name = f"CUBLAS_STATUS({status})"
    lib = _state.get("lib")
    if lib is not None:
        try:
            name = "CUBLAS_STATUS_" + lib.Status(status).name
        except ValueError:
            pass
    cause = CublasError(api, status, name)
    if status == STATUS_ALLOC_FAILED:
        err: BackendSourceError = OutOfMemoryError(f"{cause}", op=op)
    else:
        err = BackendSourceError(f"{cause}", op=op)
    err.__cause__ = cause
    return err


def _destroy(handle: int) -> None:
    lib = _state.get("lib")
    if lib is None or sys.is_finalizing():
        return
    try:
        lib.destroy(handle)
    except Exception:  # noqa: BLE001 - a finalizer never raises
        pass


class Handle(Authority):
    """A cuBLAS handle bound to one stream with a workspace (kept alive by ``owner``)."""

    __slots__ = ("value", "stream", "owner", "workspace", "workspace_bytes", "_finalizer",
                 "__weakref__")

    def __init__(self, stream: int, workspace: int, workspace_bytes: int, owner: object,
                 op: str) -> None:
        lib = load()
        try:
            value = lib.create()
        except Exception as exc:  # noqa: BLE001 - cuBLASError
            raise error("cublasCreate", exc, op) from exc
        self.value = value
        self.stream = stream
        self.owner = owner
        self.workspace, self.workspace_bytes = workspace, workspace_bytes
        self._finalizer = weakref.finalize(self, _destroy, value)
        self._finalizer.atexit = False
        steps = (("cublasSetStream", lib.set_stream, (value, stream)),
                 ("cublasSetPointerMode", lib.set_pointer_mode, (value, POINTER_MODE_HOST)),
                 ("cublasSetMathMode", lib.set_math_mode, (value, DEFAULT_MATH)),
                 ("cublasSetWorkspace", lib.set_workspace,
                  (value, workspace, workspace_bytes)))
        for api, fn, args in steps:
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001
                raise error(api, exc, op) from exc


    def use_workspace(self, workspace: int, op: str) -> None:
        """Point the handle (and the cuBLASLt calls bound to it) at another workspace of
        ``workspace_bytes`` bytes."""
        try:
            load().set_workspace(self.value, workspace, self.workspace_bytes)
        except Exception as exc:  # noqa: BLE001 - cuBLASError
            raise error("cublasSetWorkspace", exc, op) from exc
        self.workspace = workspace

    def close(self) -> None:
        """Destroy the handle now (idempotent); for a runtime closing before its streams
        and pool go away. The workspace is released with ``owner``."""
        self._finalizer()
        self.owner = None


def gemm(h: Handle, ta: int, tb: int, m: int, n: int, k: int, alpha: int, a: int,
         dtype: int, lda: int, b: int, ldb: int, beta: int, c: int, ldc: int,
         compute: int, op: str, use64: bool = False) -> None:
    """cublasGemmEx (``_64`` when a size exceeds int32); alpha/beta are host addresses."""
    lib = _state["lib"]
    fn = lib.gemm_ex_64 if use64 else lib.gemm_ex
    try:
        fn(h.value, ta, tb, m, n, k, alpha, a, dtype, lda, b, dtype, ldb, beta, c, dtype,
           ldc, compute, GEMM_DEFAULT)
    except Exception as exc:  # noqa: BLE001 - cuBLASError
        raise error("cublasGemmEx", exc, op) from exc


def gemm_strided_batched(h: Handle, ta: int, tb: int, m: int, n: int, k: int, alpha: int,
                         a: int, dtype: int, lda: int, sa: int, b: int, ldb: int, sb: int,
                         beta: int, c: int, ldc: int, sc: int, batch: int, compute: int,
                         op: str, use64: bool = False) -> None:
    """cublasGemmStridedBatchedEx (``_64`` when a size exceeds int32)."""
    lib = _state["lib"]
    fn = lib.gemm_strided_batched_ex_64 if use64 else lib.gemm_strided_batched_ex
    try:
        fn(h.value, ta, tb, m, n, k, alpha, a, dtype, lda, sa, b, dtype, ldb, sb, beta, c,
           dtype, ldc, sc, batch, compute, GEMM_DEFAULT)
    except Exception as exc:  # noqa: BLE001
        raise error("cublasGemmStridedBatchedEx", exc, op) from exc


def gemm_batched(h: Handle, ta: int, tb: int, m: int, n: int, k: int, alpha: int,
                 a_array: int, dtype: int, lda: int, b_array: int, ldb: int, beta: int,
                 c_array: int, ldc: int, batch: int, compute: int, op: str) -> None:
    """cublasGemmBatchedEx: A/B/C pointer arrays in device memory, alpha/beta host
    addresses."""
    lib = _state["lib"]
    try:
        lib.gemm_batched_ex(h.value, ta, tb, m, n, k, alpha, a_array, dtype, lda, b_array,
                            dtype, ldb, beta, c_array, dtype, ldc, batch, compute,
                            GEMM_DEFAULT)
    except Exception as exc:  # noqa: BLE001
        raise error("cublasGemmBatchedEx", exc, op) from exc


def gemm_grouped(h: Handle, ta: int, tb: int, m: int, n: int, k: int, alpha: int,
                 a_array: int, dtype: int, lda: int, b_array: int, ldb: int, beta: int,
                 c_array: int, ldc: int, groups: int, sizes: int, compute: int,
                 op: str) -> None:
    """cublasGemmGroupedBatchedEx: per-group parameters (``ta`` ... ``ldc``, ``sizes``:
    int32) and alpha/beta (one scalar per group) as host array addresses, A/B/C pointer
    arrays in device memory."""
    lib = _state["lib"]
    try:
        lib.gemm_grouped_batched_ex(h.value, ta, tb, m, n, k, alpha, a_array, dtype, lda,
                                    b_array, dtype, ldb, beta, c_array, dtype, ldc, groups,
                                    sizes, compute)
    except Exception as exc:  # noqa: BLE001
        raise error("cublasGemmGroupedBatchedEx", exc, op) from exc


class PreparedGemm:
    """One cuBLAS GEMM with everything bound except the operand addresses and the
    scalars (a cache slot's call, a repeated ``dot_general``).

    ``run`` calls cublasGemmEx or cublasGemmStridedBatchedEx directly with a prebuilt
    argument list. alpha/beta live in this call's own host block and are packed again
    only when the objects passed differ from the last ones (the block holds their values
    while they are referenced here, so an identical object means identical bytes).
    """

    __slots__ = ("fn", "api", "args", "slots", "layout", "is_complex", "swap", "buf", "alpha",
                 "beta", "handle")

    def __init__(self, h: Handle, plan, cuda_type: int, compute: int, layout,
                 is_complex: bool) -> None:
        lib = load()
        self.buf = ctypes.create_string_buffer(48)
        addr = ctypes.addressof(self.buf)
        head = [h.value, plan.transa, plan.transb, plan.m, plan.n, plan.k, addr]
        if plan.batch > 1:
            self.fn = lib.gemm_strided_batched_ex_64 if plan.use64 else lib.gemm_strided_batched_ex
            self.api = "cublasGemmStridedBatchedEx"
            self.args = head + [0, cuda_type, plan.lda, plan.stride_a, 0, cuda_type, plan.ldb,
                                plan.stride_b, addr + 16, 0, cuda_type, plan.ldc,
                                plan.stride_c, plan.batch, compute, GEMM_DEFAULT]
            self.slots = (7, 11, 16)
        else:
            self.fn = lib.gemm_ex_64 if plan.use64 else lib.gemm_ex
            self.api = "cublasGemmEx"
            self.args = head + [0, cuda_type, plan.lda, 0, cuda_type, plan.ldb, addr + 16, 0,
                                cuda_type, plan.ldc, compute, GEMM_DEFAULT]
            self.slots = (7, 10, 14)
        self.layout, self.is_complex, self.swap = layout, is_complex, plan.swap
        self.alpha = self.beta = None  # nothing packed yet
        self.handle = h  # the handle must outlive the bound call

    def pack(self, alpha, beta) -> None:
        """Write alpha (at ``buf``) and beta (at ``buf + 16``) in the compute's scalar type;
        callers skip it while the same objects are passed (``LtGemm`` shares the block)."""
        if self.is_complex:
            self.layout.pack_into(self.buf, 0, alpha.real, alpha.imag, beta.real, beta.imag)
        else:
            self.layout.pack_into(self.buf, 0, alpha, beta)
        self.alpha, self.beta = alpha, beta

    def run(self, pa: int, pb: int, pc: int, alpha, beta, op: str) -> None:
        """Enqueue ``c = alpha * a . b + beta * c`` for the device addresses of element 0
        of the lhs side ``pa``, the rhs side ``pb`` and the output ``pc``."""
        if alpha is not self.alpha or beta is not self.beta:
            self.pack(alpha, beta)
        args = self.args
        ia, ib, ic = self.slots
        if self.swap:
            pa, pb = pb, pa
        args[ia] = pa
        args[ib] = pb
        args[ic] = pc
        try:
            self.fn(*args)
        except Exception as exc:  # noqa: BLE001 - cuBLASError
            raise error(self.api, exc, op) from exc
