"""The driver's memory calls: pools, stream-ordered allocation, copies, memsets, pinned
host memory and pointer queries.

The second half of the driver binding (``_driver.py`` holds errors, initialisation,
devices, contexts, streams, events, modules and launches): the only other module that
imports ``cuda.bindings.driver``. Every call is checked with ``_driver.check`` or
``_driver._fail``; the release calls used by finalizers return the status instead of
raising.
"""

from __future__ import annotations

from cuda.bindings import driver as _d

from ._driver import _checked, _fail, check
from .errors import OutOfMemoryError

# --- memory -----------------------------------------------------------------------------

_POOL_ATTR = _d.CUmemPool_attribute
POOL_STATS = {
    "reserved_bytes": _POOL_ATTR.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
    "reserved_bytes_high": _POOL_ATTR.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
    "used_bytes": _POOL_ATTR.CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
    "used_bytes_high": _POOL_ATTR.CU_MEMPOOL_ATTR_USED_MEM_HIGH,
}


def mem_pool_create(ordinal: int):
    """A device-local pool that keeps freed memory cached (release threshold = max)."""
    props = _d.CUmemPoolProps()
    props.allocType = _d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = _d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    props.location.id = ordinal
    pool = check(_d.cuMemPoolCreate(props), "cuMemPoolCreate")
    threshold = _d.cuuint64_t(0xFFFFFFFFFFFFFFFF)
    check(
        _d.cuMemPoolSetAttribute(pool, _POOL_ATTR.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold),
        "cuMemPoolSetAttribute",
    )
    return pool


mem_pool_destroy = _checked("cuMemPoolDestroy")  # (pool)
mem_pool_trim = _checked("cuMemPoolTrimTo")  # (pool, keep_bytes)


def mem_pool_stats(pool) -> dict[str, int]:
    return {
        key: int(check(_d.cuMemPoolGetAttribute(pool, attr), "cuMemPoolGetAttribute"))
        for key, attr in POOL_STATS.items()
    }


_alloc_async = _d.cuMemAllocFromPoolAsync
_SIZE_LIMIT = 1 << 63
_free_async = _d.cuMemFreeAsync


def mem_alloc_async(nbytes: int, pool, stream, op: str = "") -> int:
    """Stream-ordered allocation; returns the device address as an int. A size no
    address space holds is an OutOfMemoryError, as the driver's own refusal is."""
    if not 0 <= nbytes < _SIZE_LIMIT:
        raise OutOfMemoryError(f"cannot allocate {nbytes} bytes: more than any device "
                               "address space holds", op=op, requested_bytes=nbytes)
    status, ptr = _alloc_async(nbytes, pool, stream)
    if status:
        _fail("cuMemAllocFromPoolAsync", status, op, nbytes)
    return int(ptr)


def mem_free_async(ptr: int, stream) -> int:
    """Stream-ordered free; returns the CUresult as an int (finalizers must not raise)."""
    return int(_free_async(ptr, stream)[0])


def _async_call(api: str):
    """``(dst, src_or_value, nbytes, stream, op="")`` for a stream-ordered copy or memset."""
    fn = getattr(_d, api)

    def call(dst, src, nbytes: int, stream, op: str = "") -> None:
        status = fn(dst, src, nbytes, stream)[0]
        if status:
            _fail(api, status, op)

    call.__name__ = call.__qualname__ = api
    return call


memcpy_htod_async = _async_call("cuMemcpyHtoDAsync")  # (dst, host address, nbytes, stream)
memcpy_dtoh_async = _async_call("cuMemcpyDtoHAsync")  # (host address, src, nbytes, stream)
memcpy_dtod_async = _async_call("cuMemcpyDtoDAsync")  # (dst, src, nbytes, stream)
memset_d8_async = _async_call("cuMemsetD8Async")  # (dst, byte value, nbytes, stream)


def mem_pool_grant_access(pool, ordinal: int) -> None:
    """Let device ``ordinal`` read and write every allocation of ``pool`` (a pool of another
    device): peer access to stream-ordered memory, which ``cuCtxEnablePeerAccess`` does not
    give."""
    desc = _d.CUmemAccessDesc()
    desc.location.type = _d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    desc.location.id = ordinal
    desc.flags = _d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    check(_d.cuMemPoolSetAccess(pool, [desc], 1), "cuMemPoolSetAccess")


HOST_ALLOC_PORTABLE = 0x01  # CU_MEMHOSTALLOC_PORTABLE: page-locked for every context


def host_alloc_pinned(nbytes: int, portable: bool = False) -> int:
    """Page-locked host memory; ``portable`` memory is page-locked for every context (a
    staging buffer between two devices), not only the current one."""
    flags = HOST_ALLOC_PORTABLE if portable else 0
    return int(check(_d.cuMemHostAlloc(nbytes, flags), "cuMemHostAlloc"))


def host_free(ptr: int) -> int:
    return int(_d.cuMemFreeHost(ptr)[0])
