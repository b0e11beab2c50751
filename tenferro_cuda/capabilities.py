"""``supports(runtime, capability)``: answered from device and library queries."""

from __future__ import annotations

import functools

from . import _driver
from .errors import CudaDeviceError, ValidationError
from .runtime import Capability, CudaRuntime


@functools.lru_cache(maxsize=1)
def _cublas_loadable() -> bool:
    try:
        from . import _cublas

        _cublas.load()
    except Exception:  # noqa: BLE001 - "not loadable" is the answer, whatever the reason
        return False
    return True


def _nvrtc_works() -> bool:
    try:
        from . import _nvrtc

        _nvrtc.version()
    except Exception:  # noqa: BLE001
        return False
    return True


def _peer_copy(rt: CudaRuntime) -> bool:
    """Whether some other device is a peer of ``rt``'s (``peer_copy_with``: both ways)."""
    return any(peer_copy_with(rt, other) for other in range(_driver.device_count())
               if other != rt.ordinal)


def peer_copy_with(rt: CudaRuntime, ordinal: object, op: str = "supports") -> bool:
    """Whether copies between ``rt``'s device and device ``ordinal`` go directly, both
    ways (``cuDeviceCanAccessPeer`` in each direction). False for ``rt``'s own device:
    a device is not its own peer (copies within it are SAME_DEVICE_ASYNC_COPY)."""
    if type(ordinal) is not int or ordinal < 0:
        raise ValidationError(f"peer must be a session or a device ordinal >= 0 (got "
                              f"{ordinal!r})", op=op)
    count = _driver.device_count()
    if ordinal >= count:
        raise CudaDeviceError(f"no CUDA device {ordinal} ({count} present)", op=op)
    if ordinal == rt.ordinal:
        return False
    other = _driver.device(ordinal)
    return _driver.can_access_peer(rt.device, other) and \
        _driver.can_access_peer(other, rt.device)


def supports(rt: CudaRuntime, cap: Capability) -> bool:
    info = rt.info
    if cap in (Capability.RAW_MODULE, Capability.RAW_STREAM, Capability.KERNEL_SESSION):
        return True  # the driver loaded modules and created streams for this runtime
    if cap is Capability.RUNTIME_COMPILATION:
        return _nvrtc_works()
    if cap is Capability.SAME_DEVICE_ASYNC_COPY:
        return info.memory_pools_supported
    if cap is Capability.STREAM_ORDERED_MEMORY:
        return info.memory_pools_supported
    if cap is Capability.PEER_COPY:
        return _peer_copy(rt)
    if cap is Capability.BF16_ARITHMETIC:
        return info.compute_capability >= (8, 0)
    if cap is Capability.CUBLAS:
        return _cublas_loadable()
    if cap is Capability.COLLECTIVES:
        from . import _nccl

        return _nccl.available()
    return False
