"""The hot path of ``execute_elementwise_fusion``: the general path with its preparation
cached, one closure per prepared contiguous kernel.

The general path keeps the closure of a plan's last contiguous launch over compact
``Tensor`` operands under the plan itself in ``ctx.memo``, so a repeated call costs one
dict lookup (the plan's hash is computed once, at construction) and one call. The closure
answers a call over compact ``Tensor`` operands of one shape whose dtypes are the
prepared ones (classes as prepared: ``c`` inputs of that shape, ``s`` inputs of rank 0,
``u`` inputs of that shape or of rank 0 as when prepared: a rank-0 operand promotes), all
resident on the context (``buffer.home is home``: the residency rule of
``exec/residency.py``), with fewer than ``CHUNK`` elements.
For such a call the general path plans one contiguous launch over the whole run; the
closure allocates the outputs (``home.alloc``) and calls that launch -- the prep's
``PreparedLaunch``, whose tail holds the error word and codes -- with the same head
(output pointers, input pointers, ``n``, ``flags``). For anything else it returns None
and the caller takes the general path, which validates and raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ...tensor import Tensor
from ..elementwise.layout import CHUNK

__all__ = ["Hot", "hot_path"]

OP = "execute_elementwise_fusion"
_new = object.__new__
_prod = math.prod
Hot = Callable[[Sequence], "list[Tensor] | None"]


def hot_path(prep: Any, unused_scalars: tuple[bool, ...]) -> Hot:
    """The hot-path closure of ``prep`` (a contiguous ``FusionPrep``) for calls whose
    unused inputs are of rank 0 exactly where ``unused_scalars`` says (the plan's typing
    depends on it: a rank-0 operand promotes)."""
    nin, outs, classes = prep.nin, prep.outs, prep.classes
    # The launch's arguments, refilled per call (a launch copies its parameters): the
    # grid, then the head (output pointers, c/s input pointers, n, flags).
    ochecks = tuple((dt, item, 1 + j) for j, (dt, item) in enumerate(outs))
    slot, checks = 1 + len(outs), []
    for k, (dt, c) in enumerate(zip(prep.dtypes, classes)):  # (input, dtype, class, slot)
        checks.append((k, dt, True if c == "c" else False if c == "s" else None, slot))
        slot += c != "u"
    inputs_checks = tuple(checks)
    unused = tuple(zip((k for k, c in enumerate(classes) if c == "u"), unused_scalars))
    args = [0] * (slot + 2)
    cap, per, home = prep.cap, prep.per_block, prep.home
    alloc, run = home.alloc, prep.launch.run

    def hot(inputs: Sequence) -> list[Tensor] | None:
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != nin:
            return None
        shape: tuple[int, ...] | None = None
        strides: tuple[int, ...] = ()
        acc = 0
        for k, dt, c, i in inputs_checks:  # (a prepared tuple: no zip per call)
            x = inputs[k]
            if type(x) is not Tensor or x.dtype is not dt:
                return None
            b = x.buffer
            if b is None or b.home is not home:
                return None
            if c:  # compact: the one shape
                if shape is None:
                    shape = x.shape
                    if not shape:
                        return None
                    strides = x.strides
                elif x.shape != shape:
                    return None
                p = b.ptr
                acc |= p
                args[i] = p
            elif c is False:  # rank 0, read once per thread
                if x.shape:
                    return None
                args[i] = b.ptr
        if shape is None:
            shape = ()
        for k, scalar in unused:  # resident, and of the shape or rank 0 as typed
            x = inputs[k]
            if type(x) is not Tensor:
                return None
            b = x.buffer
            s = x.shape
            if b is None or b.home is not home or (not s) is not scalar or (s and s != shape):
                return None
        n = _prod(shape)
        if not 0 < n < CHUNK:
            return None
        result = []
        for dt, item, j in ochecks:
            buf = alloc(n * item, OP)
            t = _new(Tensor)
            t.dtype, t.shape, t.strides, t.offset, t.buffer, t.host, t._kit = \
                dt, shape, strides, 0, buf, None, None
            result.append(t)
            p = buf.ptr
            acc |= p
            args[j] = p
        blocks = (n + per - 1) // per
        args[0] = blocks if blocks < cap else cap
        args[-2] = n
        args[-1] = 0 if acc & 15 else 1
        run(*args)
        return result
    return hot
