"""The residency rule, in one place.

A tensor or view is resident on an execution context when its base buffer's ``home`` is
that context's home: the buffer is live (``home`` becomes None when it is released), it
belongs to this runtime's allocation domain and device, and to this thread's stream
(memory adopted from another library is given the adopting context's home, after its
producer was ordered before the session stream). ``resident`` is the check every op
makes; it never transfers, and its error names the op, what was expected and what was
found (for a tensor of another device, both devices and the way to move it: copy_to).
"""

from __future__ import annotations

from typing import Any

from ..errors import RuntimeStateError, ValidationError
from ..shapes import describe_array
from ..tensor import _Strided

__all__ = ["resident", "not_resident"]


def resident(ctx: Any, t: object, op: str, what: str = "input") -> Any:
    """The DeviceBuffer under ``t`` if ``t`` is resident on ``ctx``; raise otherwise."""
    if isinstance(t, _Strided):
        buf = t.base.buffer
        if buf is not None and buf.home is ctx.home:
            return buf
    raise not_resident(ctx, t, op, what)


def not_resident(ctx: Any, t: object, op: str, what: str) -> Exception:
    """The error for a ``t`` that is not resident on ``ctx`` (returned, not raised):
    RuntimeStateError for arrays in the wrong place (host, another runtime, device or
    thread, reclaimed, another library's memory not adopted), ValidationError for an
    object that is no array at all."""
    here = f"runtime {ctx.runtime.identity.serial} on device {ctx.ordinal}"
    if not isinstance(t, _Strided):
        foreign, hint = describe_array(t)
        if not foreign:
            return ValidationError(f"{what} must be a Tensor or TensorView (got "
                                   f"{type(t).__name__})", op=op)
        return RuntimeStateError(f"{what}: expected a device tensor resident on {here}; "
                                 f"found {foreign} ({hint})", op=op)
    buf = t.base.buffer
    move = " (nothing moves between runtimes implicitly: copy it with copy_to)"
    if buf is None:
        found = "a host tensor (upload it with upload_host_tensor first)"
    elif buf.freed:
        found = "a reclaimed tensor (its buffer was released)"
    elif buf.ordinal != ctx.ordinal:
        found = f"a tensor on device {buf.ordinal}, not device {ctx.ordinal}{move}"
    elif buf.domain != ctx.domain:
        found = f"a tensor of another runtime (allocation domain {buf.domain}){move}"
    else:
        found = "a tensor created on another thread's stream"
    return RuntimeStateError(f"{what}: expected a device tensor resident on {here} "
                             f"(allocation domain {ctx.domain}); found {found}", op=op)
