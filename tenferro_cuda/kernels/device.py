"""The device calls the op families make, and the only way they reach the driver
(DESIGN 1: ops validate with shapes/, allocate with memory.py and launch through
kernels/). Plain re-exports of ``_driver``'s checked calls, so the hot paths pay nothing
for the indirection."""

from __future__ import annotations

from .. import _driver

launch = _driver.launch
launch3 = _driver.launch3
# The fastest 1-D launch: ``raw_launch(fn, gx, 1, 1, bx, 1, 1, 0, stream, params, 0)[0]`` is
# the CUresult; a nonzero one goes to ``launch_failed(status, op)``, which raises.
raw_launch = _driver._launch
current_context_id = _driver.current_context_id
function_attributes = _driver.function_attributes
memcpy_htod_async = _driver.memcpy_htod_async
memcpy_dtoh_async = _driver.memcpy_dtoh_async
memcpy_dtod_async = _driver.memcpy_dtod_async
memcpy_peer_async = _driver.memcpy_peer_async
memset_d8_async = _driver.memset_d8_async
stream_synchronize = _driver.stream_synchronize
stream_handle = _driver.stream_handle
event_create = _driver.event_create
event_record = _driver.event_record
event_destroy = _driver.event_destroy
stream_wait_event = _driver.stream_wait_event
pointer_device_ordinal = _driver.pointer_device_ordinal


def lost_contexts() -> set[int]:
    """Contexts hit by a sticky error (shared set; membership test only)."""
    return _driver.lost_contexts


def launch_failed(status, op: str) -> None:
    """Raise the typed error for a failed ``raw_launch``."""
    _driver._fail("cuLaunchKernel", status, op)
