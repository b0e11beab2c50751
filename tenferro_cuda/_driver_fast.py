"""The driver calls of the hot paths: a kernel launch, the calling thread's current
context, one stream waiting for another, and the device of an address.

cuda-bindings 13.5 added ``cuda.bindings._v2.driver`` (documented by cuda-bindings as its
new, still experimental driver module: "Migrating to the _v2 Bindings"). Its functions
take and return integer handles and raise an exception (``DriverError``, with the
CUresult in ``.status``) instead of returning a status tuple, and cost less per call:
with the driver stubbed, 0.20 us for a launch against 0.33, 0.15 for an ordering (record
and wait) against 0.45, 0.08 for a pointer query against 0.49 (docs/perf-notes.md, "Hot
driver calls"). This module uses it when it is importable and has every call used here;
otherwise, or with ``TENFERRO_CUDA_DRIVER_BINDINGS=legacy`` in the environment, it wraps
``cuda.bindings.driver`` in the same calling convention. ``BINDINGS`` says which.

- ``launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)``: ``f`` and
  ``stream`` as ``handle`` gives them (ints for the _v2 module; the legacy module's own
  handle objects, which it takes faster than ints), ``params`` the address of the
  parameter-pointer array; returns None, raises ``Failure`` (``.status``: the CUresult as
  an int). Used by ``kernels/launch.py`` alone, which turns a failure into the typed
  error.
- ``current()``: the calling thread's current context as an int, 0 when none; raises
  ``Failure``. ``current_id()`` is the same call raising the typed error (what the
  context guard asks before and after other libraries' code and around an ordering).
- ``order(event, producer, waiter)``: ``event`` recorded on ``producer``, then waited on
  by ``waiter`` (ints or the binding's handle objects); raises the typed error.
- ``pointer_ordinal(address)``: the device ordinal of a device address (what an import
  checks); raises the typed error (``BackendSourceError`` for memory the driver does not
  know, such as plain host memory).
- ``stream_query(stream)``: True when all work on ``stream`` is complete, False while it
  still runs (what the release of an adopted array asks); raises the typed error.
"""

from __future__ import annotations

import os
from typing import Any

from cuda.bindings import driver as _d

from . import _driver
from ._driver import _fail

__all__ = ["BINDINGS", "Failure", "handle", "launch", "current", "current_id", "order",
           "pointer_ordinal", "stream_query"]

# The calls this module takes from the _v2 module (all must be there to use it).
V2_CALLS = ("launch_kernel", "ctx_get_current", "event_record", "stream_wait_event",
            "pointer_get_attribute", "stream_query")
DEVICE_ORDINAL = 9  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
NOT_READY = 600  # CUDA_ERROR_NOT_READY


class LegacyFailure(Exception):
    """A failed call through ``cuda.bindings.driver`` (the legacy module's form)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _v2_module() -> Any:
    """``cuda.bindings._v2.driver`` when it is importable, has the calls and is not
    turned off; else None."""
    if os.environ.get("TENFERRO_CUDA_DRIVER_BINDINGS", "") == "legacy":
        return None
    try:
        from cuda.bindings._v2 import driver as v2
    except ImportError:
        return None
    if not all(callable(getattr(v2, name, None)) for name in V2_CALLS):
        return None
    failure = getattr(v2, "DriverError", None)
    if not (isinstance(failure, type) and issubclass(failure, Exception)):
        return None
    return v2


def _same(obj: Any) -> Any:
    return obj


def _legacy_launch(f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                   shared: int, stream: Any, params: int, extra: int) -> None:
    status = _d.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)[0]
    if status:
        raise LegacyFailure(int(status))


def _legacy_current() -> int:
    status, ctx = _d.cuCtxGetCurrent()
    if status:
        raise LegacyFailure(int(status))
    return int(ctx)


def _legacy_order(event: Any, producer: Any, waiter: Any) -> None:
    _driver.event_record(event, producer)
    _driver.stream_wait_event(waiter, event)


def _legacy_stream_query(stream: Any) -> bool:
    return _driver.stream_query(stream)


def _legacy_pointer_ordinal(address: int) -> int:
    status, value = _d.cuPointerGetAttribute(
        _d.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address)
    if status:
        _fail("cuPointerGetAttribute", status)
    return int(value)


_v2 = _v2_module()

if _v2 is not None:
    BINDINGS = "cuda.bindings._v2.driver"
    Failure: type[Exception] = _v2.DriverError
    handle: Any = int
    launch = _v2.launch_kernel
    current = _v2.ctx_get_current
    _record, _wait = _v2.event_record, _v2.stream_wait_event

    def current_id() -> int:
        try:
            return current()
        except Failure as exc:
            return _fail("cuCtxGetCurrent", exc.status)  # type: ignore[attr-defined]

    def order(event: Any, producer: Any, waiter: Any) -> None:
        event = int(event)
        try:
            _record(event, int(producer))
        except Failure as exc:
            _fail("cuEventRecord", exc.status)  # type: ignore[attr-defined]
        try:
            _wait(int(waiter), event, 0)
        except Failure as exc:
            _fail("cuStreamWaitEvent", exc.status)  # type: ignore[attr-defined]

    _attribute = _v2.pointer_get_attribute

    def pointer_ordinal(address: int) -> int:
        try:
            return _attribute(DEVICE_ORDINAL, address)
        except Failure as exc:
            return _fail("cuPointerGetAttribute", exc.status)  # type: ignore[attr-defined]

    _query = _v2.stream_query

    def stream_query(stream: Any) -> bool:
        try:
            _query(int(stream))
        except Failure as exc:
            if exc.status == NOT_READY:  # type: ignore[attr-defined]
                return False
            _fail("cuStreamQuery", exc.status)  # type: ignore[attr-defined]
        return True
else:
    BINDINGS = "cuda.bindings.driver"
    Failure = LegacyFailure
    handle = _same
    launch = _legacy_launch
    current = _legacy_current
    current_id = _driver.current_context_id
    order = _legacy_order
    pointer_ordinal = _legacy_pointer_ordinal
    stream_query = _legacy_stream_query
