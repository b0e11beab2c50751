"""The module of ``cuda.bindings.driver`` (with ``_driver_memory``, and ``_driver_fast``
for the calls of the hot paths).

Contract: every driver call goes through ``check`` (or a wrapper here that uses it), which
unpacks cuda-python's ``(status, *values)`` tuple and raises a typed error naming the API
and the CUresult. Sticky errors mark the current context as lost (``lost_contexts``) and
raise ``ContextLostError``. Values returned to callers are plain Python ints or the
binding's handle objects; nothing above this layer touches ``cuda.bindings``.
"""

from __future__ import annotations

import os
import threading
from typing import NoReturn

from cuda.bindings import driver as _d

from .errors import (
    BackendSourceError,
    ContextLostError,
    CudaDeviceError,
    CudaError,
    OutOfMemoryError,
)

NOT_READY = _d.CUresult.CUDA_ERROR_NOT_READY
OUT_OF_MEMORY = int(_d.CUresult.CUDA_ERROR_OUT_OF_MEMORY)
# Codes after which the context is unusable until the process restarts.
STICKY_CODES = frozenset({700, 702, 714, 715, 716, 717, 718, 719})
# Codes that mean the environment lacks a driver or a device.
ENVIRONMENT_CODES = frozenset({3, 4, 34, 46, 100, 101, 803, 804})
# Codes of a call that a stream capture refused (CUDA_ERROR_STREAM_CAPTURE_* and
# CUDA_ERROR_CAPTURED_EVENT): the call may be fine outside the capture.
CAPTURE_CODES = frozenset(range(900, 909))
LOST_MESSAGE = "the device context is lost and the process must restart to use this GPU"

lost_contexts: set[int] = set()  # int(CUcontext) of contexts hit by a sticky error
sync_policy = threading.local()  # .forbid / .allow counters (see tenferro_cuda.debug)
# TENFERRO_CUDA_FORBID_HOST_SYNC (anything but "" or "0"): every thread, from import on
forbid_everywhere = os.environ.get("TENFERRO_CUDA_FORBID_HOST_SYNC", "") not in ("", "0")
_init_lock = threading.Lock()
_init_error: CudaDeviceError | None = None
_initialised = False


def status_name(code: int) -> str:
    """The CUresult name of ``code`` (``CUDA_ERROR_...``), or ``CUresult(code)``."""
    try:
        return _d.CUresult(code).name
    except ValueError:
        return f"CUresult({code})"


def refused_by_capture(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by a checked call) is a refusal by a stream capture."""
    return getattr(exc.__cause__, "code", None) in CAPTURE_CODES


def error_for(api: str, code: int, op: str = "", nbytes: int = 0) -> Exception:
    """The tenferro error for a failed driver call (pure: usable without a GPU)."""
    code = int(code)
    cause = CudaError(api, code, status_name(code))
    if code in STICKY_CODES:
        err: Exception = ContextLostError(f"{cause}: {LOST_MESSAGE}", op=op)
    elif code == OUT_OF_MEMORY:
        err = OutOfMemoryError(f"{cause} (requested {nbytes} bytes)", op=op,
                               requested_bytes=nbytes)
    elif code in ENVIRONMENT_CODES:
        err = CudaDeviceError(str(cause), op=op)
    else:
        err = BackendSourceError(str(cause), op=op)
    err.__cause__ = cause
    return err


def _fail(api: str, status, op: str = "", nbytes: int = 0) -> NoReturn:
    code = int(status)
    if code in STICKY_CODES:
        _mark_current_lost()
    raise error_for(api, code, op, nbytes)


def _mark_current_lost() -> None:
    try:
        status, ctx = _d.cuCtxGetCurrent()
        if not status and int(ctx):
            lost_contexts.add(int(ctx))
    except Exception:  # noqa: BLE001 - already failing; the original error matters
        pass


def check(result, api: str, op: str = ""):
    """Unpack ``(status, *values)``; raise on failure; return None, a value or a tuple."""
    status = result[0]
    if status:
        _fail(api, status, op)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return result[1:]


def _checked(api: str):
    """A wrapper that calls ``cuda.bindings.driver.<api>`` and ``check``s its result."""
    fn = getattr(_d, api)

    def call(*args):
        return check(fn(*args), api)

    call.__name__ = call.__qualname__ = api
    return call


# --- initialisation and devices -------------------------------------------------------

def init() -> None:
    """``cuInit(0)`` once per process; a failure is recorded and re-raised clearly."""
    global _initialised, _init_error
    if _initialised:
        return
    with _init_lock:
        if _init_error is not None:
            raise _init_error
        if _initialised:
            return
        try:
            result = _d.cuInit(0)
        except Exception as exc:  # the loader raises when libcuda.so is absent
            _init_error = CudaDeviceError(
                f"no NVIDIA driver: libcuda could not be loaded ({type(exc).__name__}: {exc})",
                op="cuInit",
            )
            raise _init_error from exc
        if result[0]:
            code = int(result[0])
            what = "no CUDA device" if code == 100 else "the NVIDIA driver is unusable"
            _init_error = CudaDeviceError(
                f"{what}: cuInit failed: {status_name(code)} ({code})", op="cuInit"
            )
            raise _init_error
        _initialised = True


def driver_version() -> int:
    init()
    return int(check(_d.cuDriverGetVersion(), "cuDriverGetVersion"))


def device_count() -> int:
    init()
    return int(check(_d.cuDeviceGetCount(), "cuDeviceGetCount"))


def device(ordinal: int):
    init()
    return check(_d.cuDeviceGet(ordinal), "cuDeviceGet")


def device_name(dev) -> str:
    raw = check(_d.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return bytes(raw).split(b"\0", 1)[0].decode()


def device_uuid(dev) -> str:
    h = bytes(check(_d.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


device_total_mem = _checked("cuDeviceTotalMem")  # (dev) -> bytes
# Our key -> the CU_DEVICE_ATTRIBUTE_* suffix.
_ATTRIBUTE_NAMES = {
    "cc_major": "COMPUTE_CAPABILITY_MAJOR", "cc_minor": "COMPUTE_CAPABILITY_MINOR",
    "sm_count": "MULTIPROCESSOR_COUNT", "l2_bytes": "L2_CACHE_SIZE",
    "bus_width_bits": "GLOBAL_MEMORY_BUS_WIDTH", "memory_clock_khz": "MEMORY_CLOCK_RATE",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK", "max_block_x": "MAX_BLOCK_DIM_X",
    "max_block_y": "MAX_BLOCK_DIM_Y", "max_block_z": "MAX_BLOCK_DIM_Z",
    "max_grid_x": "MAX_GRID_DIM_X", "max_grid_y": "MAX_GRID_DIM_Y", "max_grid_z": "MAX_GRID_DIM_Z",
    "max_shared_per_block_optin": "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "memory_pools": "MEMORY_POOLS_SUPPORTED",
}
ATTRIBUTES = {k: getattr(_d.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + v)
              for k, v in _ATTRIBUTE_NAMES.items()}


def device_attributes(dev) -> dict[str, int]:
    return {
        key: int(check(_d.cuDeviceGetAttribute(attr, dev), "cuDeviceGetAttribute"))
        for key, attr in ATTRIBUTES.items()
    }


def can_access_peer(dev, peer) -> bool:
    return bool(check(_d.cuDeviceCanAccessPeer(dev, peer), "cuDeviceCanAccessPeer"))


# --- contexts ---------------------------------------------------------------------------

primary_ctx_retain = _checked("cuDevicePrimaryCtxRetain")  # (dev)
primary_ctx_release = _checked("cuDevicePrimaryCtxRelease")  # (dev)
ctx_get_current = _checked("cuCtxGetCurrent")  # ()


def current_context_id() -> int:
    """The calling thread's current context as an int (0 when none)."""
    status, ctx = _d.cuCtxGetCurrent()
    return _fail("cuCtxGetCurrent", status) if status else int(ctx)


ctx_push = _checked("cuCtxPushCurrent")  # (ctx)
ctx_pop = _checked("cuCtxPopCurrent")  # () -> the popped context
ctx_set_current = _checked("cuCtxSetCurrent")  # (ctx)
ctx_destroy = _checked("cuCtxDestroy")  # (ctx)
NO_CONTEXT = _d.CUcontext(0)  # cuCtxSetCurrent(NO_CONTEXT) takes the top entry off
_STACK_LIMIT = 1 << 16  # no thread holds this many contexts; bounds a runaway loop


def ctx_create(dev):
    """A new (non-primary) context, made current; for tests and foreign-context callers."""
    return check(_d.cuCtxCreate(None, 0, dev), "cuCtxCreate")


def ctx_stack_take() -> list:
    """Pop the calling thread's whole context stack; its entries, bottom to top. When a
    call fails part-way, what was popped is pushed back before the error is raised."""
    taken: list = []
    popping = None  # the entry being popped (an interrupt may come right after the pop)
    try:
        for _ in range(_STACK_LIMIT):
            status, current = _d.cuCtxGetCurrent()
            if status:
                _fail("cuCtxGetCurrent", status)
            if not int(current):
                break
            popping = current
            taken.append(check(_d.cuCtxPopCurrent(), "cuCtxPopCurrent"))
            popping = None
    except BaseException as exc:
        if popping is not None and not isinstance(exc, Exception) \
                and int(_d.cuCtxGetCurrent()[1]) != int(popping):
            taken.append(popping)  # it was popped: it goes back with the others
        ctx_stack_put(reversed(taken), strict=False)
        raise
    taken.reverse()
    return taken


def ctx_stack_put(contexts, strict: bool = True) -> Exception | None:
    """Push ``contexts`` (bottom to top). With ``strict=False`` every entry is tried and
    the first failure is returned instead of raised (restoration is best effort). An
    interrupt (KeyboardInterrupt, ...) that arrives part-way is raised once every entry is
    back; the entry it interrupted counts as pushed when it is current."""
    failed = interrupt = None
    for ctx in contexts:
        try:
            check(_d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        except Exception as exc:  # noqa: BLE001 - returned to the best-effort caller
            if strict:
                raise
            failed = failed or exc
        except BaseException as exc:  # noqa: BLE001 - held until the stack is whole
            interrupt = interrupt or exc
            if int(_d.cuCtxGetCurrent()[1]) != int(ctx):
                _d.cuCtxPushCurrent(ctx)
    if interrupt is not None:
        raise interrupt
    return failed


# --- streams and events -----------------------------------------------------------------

def stream_create():
    flags = _d.CUstream_flags.CU_STREAM_NON_BLOCKING
    return check(_d.cuStreamCreate(flags), "cuStreamCreate")


stream_destroy = _checked("cuStreamDestroy")  # (stream)


def guard_blocking(api: str, op: str = "") -> None:
    """Raise when a host-blocking call happens where the debug switch forbids it."""
    forbid: int = forbid_everywhere or getattr(sync_policy, "forbid", 0)
    if forbid and not getattr(sync_policy, "allow", 0):
        from .errors import RuntimeStateError

        raise RuntimeStateError(
            f"host synchronization ({api}) inside an op while forbid_host_sync is active",
            op=op)


def stream_synchronize(stream, op: str = "") -> None:
    guard_blocking("cuStreamSynchronize", op)
    stream_barrier(stream, op)


def stream_barrier(stream, op: str = "") -> None:
    """``cuStreamSynchronize`` as an explicit barrier (a session's ``synchronize``, a
    download): the ``forbid_host_sync`` debug switch, which catches hidden ones, does not
    apply."""
    status = _d.cuStreamSynchronize(stream)[0]
    if status:
        _fail("cuStreamSynchronize", status, op)


def stream_query(stream) -> bool:
    """True when all work on ``stream`` is complete; False while it still runs."""
    status = _d.cuStreamQuery(stream)[0]
    if status == NOT_READY:
        return False
    if status:
        _fail("cuStreamQuery", status)
    return True


def event_create(timing: bool = False):
    flags = 0 if timing else _d.CUevent_flags.CU_EVENT_DISABLE_TIMING
    return check(_d.cuEventCreate(flags), "cuEventCreate")


event_record = _checked("cuEventRecord")  # (event, stream)


def event_synchronize(event) -> None:
    guard_blocking("cuEventSynchronize")
    check(_d.cuEventSynchronize(event), "cuEventSynchronize")


def event_elapsed_ms(start, end) -> float:
    return float(check(_d.cuEventElapsedTime(start, end), "cuEventElapsedTime"))


event_destroy = _checked("cuEventDestroy")  # (event)


def stream_wait_event(stream, event) -> None:
    check(_d.cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent")


def stream_handle(value: int):
    """A CUstream for a raw handle value (for streams owned by others)."""
    return _d.CUstream(value)


# --- modules and launches ---------------------------------------------------------------

def module_load_data(image: bytes, op: str = ""):
    return check(_d.cuModuleLoadData(image), "cuModuleLoadData", op)


def module_unload(module) -> int:
    """Unload; returns the CUresult as an int (called from finalizers)."""
    return int(_d.cuModuleUnload(module)[0])


def module_get_function(module, name: str, op: str = ""):
    return check(_d.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction", op)


def function_attributes(fn) -> dict[str, int]:
    attr = _d.CUfunction_attribute
    keys = {
        "max_threads_per_block": attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        "shared_bytes": attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        "registers": attr.CU_FUNC_ATTRIBUTE_NUM_REGS,
        "local_bytes": attr.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        "max_dynamic_shared": attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    }
    api = "cuFuncGetAttribute"
    return {k: int(check(_d.cuFuncGetAttribute(a, fn), api)) for k, a in keys.items()}


def function_allow_dynamic_shared(fn, nbytes: int, op: str = "") -> None:
    """Let ``fn`` launch with ``nbytes`` of dynamic shared memory (the opt-in above the
    default 48 KiB)."""
    attr = _d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(_d.cuFuncSetAttribute(fn, attr, nbytes), "cuFuncSetAttribute", op)


def launch_failed(status, op: str = "") -> NoReturn:
    """Raise the typed error of a failed launch (``_driver_fast.launch``, the launcher's
    call: ``kernels/launch.py`` is the one path to the GPU)."""
    _fail("cuLaunchKernel", status, op)
