"""The hot path of ``execute_elementwise_fusion``: one closure per prepared contiguous kernel.

The session keeps the closure of a plan's last contiguous launch over compact ``Tensor``
operands under the plan itself in the thread's ``prepared`` map, so a repeated call costs
one dict lookup (the plan's hash is computed once, at construction) and one call. The
closure answers a call over compact ``Tensor`` operands of one shape (rank-0 operands
broadcast, classes ``c``/``s``/``u`` as prepared) whose dtypes are the prepared ones, all
resident on the prepared stream, with fewer than ``CHUNK`` elements. It allocates the
outputs, rewrites the varying head of the kernel's parameter block (one
``struct.pack_into``) and launches. For anything else it returns None and the caller takes
the general path, which validates and raises. Everything constant (function, grid cap,
error word, dtypes, pool, stream) is bound when the closure is made; the commonest shapes,
one, two or three compact inputs and one output, have a closure each with the checks
written out (no loops, no per-call branches on the operand count). Like the elementwise
fast path, a closure calls ``cuLaunchKernel`` itself (``device.raw_launch``: grid, block,
shared memory, stream, parameter block) and raises through ``device.launch_failed``.

``HotBlock`` is the contiguous kernel's parameter block (``fusion_codegen.arg_codes``:
pointers, ``u32 n``, ``int flags``, ``int* err``, ``int code_div``, ``int code_pow``) with the
constant tail (error word and codes) written once. Launches pass its address, so every
closure holds its block (the ``_block`` default argument).
"""

from __future__ import annotations

import ctypes
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

from ..kernels import device
from ..tensor import Tensor
from ._base import BLOCK
from .elementwise_layout import CHUNK

OP = "execute_elementwise_fusion"
_TAIL = struct.Struct("<Qii")  # err, code_div, code_pow
_new = object.__new__
_prod = math.prod
_failed = device.launch_failed
Hot = Callable[[Sequence], "list[Tensor] | None"]


class HotBlock:
    """Parameter block of a contiguous fused kernel with ``nptr`` pointer parameters."""

    __slots__ = ("head", "block", "ptrs", "address")

    def __init__(self, nptr: int, err: int, cdiv: int, cpow: int) -> None:
        self.head = struct.Struct("<" + "Q" * nptr + "Ii")
        tail_at = self.head.size  # 8 * nptr + 8: the int* is 8-aligned
        self.block = ctypes.create_string_buffer(tail_at + _TAIL.size)
        _TAIL.pack_into(self.block, tail_at, err, cdiv, cpow)
        offsets = [8 * i for i in range(nptr)] + [8 * nptr, 8 * nptr + 4, tail_at,
                                                  tail_at + 8, tail_at + 12]
        base = ctypes.addressof(self.block)
        self.ptrs = (ctypes.c_void_p * len(offsets))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self.ptrs)

    def pack(self, *head) -> int:
        """Write the pointers, ``n`` and ``flags``; the ``void*[]`` address for the launch."""
        self.head.pack_into(self.block, 0, *head)
        return self.address


def hot_path(prep: Any) -> Hot:
    """The hot-path closure of ``prep`` (a contiguous FusionPrep)."""
    blk = HotBlock(len(prep.outs) + sum(c != "u" for c in prep.classes), prep.err, prep.cdiv,
                   prep.cpow)
    if len(prep.outs) == 1 and set(prep.classes) == {"c"} and prep.nin <= 3:
        return (_one, _two, _three)[prep.nin - 1](prep, blk, device.raw_launch)
    return _general(prep, blk, device.raw_launch)


def _one(prep: Any, blk: HotBlock, launch: Callable) -> Hot:
    (d0,) = prep.dtypes
    ((odt, item),) = prep.outs
    fn, cap, per = prep.fn, prep.cap, prep.per_block
    alloc, st, dom = prep.pool.alloc, prep.stream, prep.dom
    pack_into, block, address = blk.head.pack_into, blk.block, blk.address

    def hot(inputs, _block=blk):
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != 1:
            return None
        (x,) = inputs
        if type(x) is not Tensor or x.dtype is not d0:
            return None
        shape = x.shape
        bx = x.buffer
        if not shape or bx is None or bx.freed or bx.domain != dom or bx.stream is not st:
            return None
        n = _prod(shape)
        if not 0 < n < CHUNK:
            return None
        buf = alloc(n * item, st, OP)
        out = _new(Tensor)
        out.dtype, out.shape, out.strides, out.offset, out.buffer, out.host = \
            odt, shape, x.strides, 0, buf, None
        po, pa = buf.ptr, bx.ptr
        pack_into(block, 0, po, pa, n, 0 if (po | pa) & 15 else 1)
        blocks = (n + per - 1) // per
        status = launch(fn, blocks if blocks < cap else cap, 1, 1, BLOCK, 1, 1, 0, st, address,
                        0)[0]
        if status:
            _failed(status, OP)
        return [out]
    return hot


def _two(prep: Any, blk: HotBlock, launch: Callable) -> Hot:
    d0, d1 = prep.dtypes
    ((odt, item),) = prep.outs
    fn, cap, per = prep.fn, prep.cap, prep.per_block
    alloc, st, dom = prep.pool.alloc, prep.stream, prep.dom
    pack_into, block, address = blk.head.pack_into, blk.block, blk.address

    def hot(inputs, _block=blk):
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != 2:
            return None
        x, y = inputs
        if type(x) is not Tensor or type(y) is not Tensor or x.dtype is not d0 \
                or y.dtype is not d1:
            return None
        shape = x.shape
        if not shape or y.shape != shape:
            return None
        bx, by = x.buffer, y.buffer
        if bx is None or by is None or bx.freed or by.freed or bx.domain != dom \
                or by.domain != dom or bx.stream is not st or by.stream is not st:
            return None
        n = _prod(shape)
        if not 0 < n < CHUNK:
            return None
        buf = alloc(n * item, st, OP)
        out = _new(Tensor)
        out.dtype, out.shape, out.strides, out.offset, out.buffer, out.host = \
            odt, shape, x.strides, 0, buf, None
        po, pa, pb = buf.ptr, bx.ptr, by.ptr
        pack_into(block, 0, po, pa, pb, n, 0 if (po | pa | pb) & 15 else 1)
        blocks = (n + per - 1) // per
        status = launch(fn, blocks if blocks < cap else cap, 1, 1, BLOCK, 1, 1, 0, st, address,
                        0)[0]
        if status:
            _failed(status, OP)
        return [out]
    return hot


def _three(prep: Any, blk: HotBlock, launch: Callable) -> Hot:
    d0, d1, d2 = prep.dtypes
    ((odt, item),) = prep.outs
    fn, cap, per = prep.fn, prep.cap, prep.per_block
    alloc, st, dom = prep.pool.alloc, prep.stream, prep.dom
    pack_into, block, address = blk.head.pack_into, blk.block, blk.address

    def hot(inputs, _block=blk):
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != 3:
            return None
        x, y, z = inputs
        if type(x) is not Tensor or type(y) is not Tensor or type(z) is not Tensor \
                or x.dtype is not d0 or y.dtype is not d1 or z.dtype is not d2:
            return None
        shape = x.shape
        if not shape or y.shape != shape or z.shape != shape:
            return None
        bx, by, bz = x.buffer, y.buffer, z.buffer
        if bx is None or by is None or bz is None or bx.freed or by.freed or bz.freed \
                or bx.domain != dom or by.domain != dom or bz.domain != dom \
                or bx.stream is not st or by.stream is not st or bz.stream is not st:
            return None
        n = _prod(shape)
        if not 0 < n < CHUNK:
            return None
        buf = alloc(n * item, st, OP)
        out = _new(Tensor)
        out.dtype, out.shape, out.strides, out.offset, out.buffer, out.host = \
            odt, shape, x.strides, 0, buf, None
        po, pa, pb, pc = buf.ptr, bx.ptr, by.ptr, bz.ptr
        pack_into(block, 0, po, pa, pb, pc, n, 0 if (po | pa | pb | pc) & 15 else 1)
        blocks = (n + per - 1) // per
        status = launch(fn, blocks if blocks < cap else cap, 1, 1, BLOCK, 1, 1, 0, st, address,
                        0)[0]
        if status:
            _failed(status, OP)
        return [out]
    return hot


def _general(prep: Any, blk: HotBlock, launch: Callable) -> Hot:
    nin, checks, outs = prep.nin, tuple(zip(prep.dtypes, prep.classes)), prep.outs
    fn, cap, per = prep.fn, prep.cap, prep.per_block
    alloc, st, dom = prep.pool.alloc, prep.stream, prep.dom

    def hot(inputs, _block=blk):
        if (type(inputs) is not list and type(inputs) is not tuple) or len(inputs) != nin:
            return None
        shape: tuple[int, ...] = ()
        strides: tuple[int, ...] = ()
        ptrs = []
        acc = 0
        for x, (dt, c) in zip(inputs, checks):
            if type(x) is not Tensor or x.dtype is not dt:
                return None
            b = x.buffer
            if b is None or b.freed or b.domain != dom or b.stream is not st:
                return None
            if c == "c":
                if not x.shape or (shape and x.shape != shape):
                    return None
                shape, strides = x.shape, x.strides
                acc |= b.ptr
                ptrs.append(b.ptr)
            elif c == "s":
                if x.shape:
                    return None
                ptrs.append(b.ptr)
        n = _prod(shape)
        if not 0 < n < CHUNK:
            return None
        result, optrs = [], []
        for dt, item in outs:
            buf = alloc(n * item, st, OP)
            t = _new(Tensor)
            t.dtype, t.shape, t.strides, t.offset, t.buffer, t.host = \
                dt, shape, strides, 0, buf, None
            result.append(t)
            optrs.append(buf.ptr)
            acc |= buf.ptr
        blocks = (n + per - 1) // per
        status = launch(fn, blocks if blocks < cap else cap, 1, 1, BLOCK, 1, 1, 0, st,
                        _block.pack(*optrs, *ptrs, n, 0 if acc & 15 else 1), 0)[0]
        if status:
            _failed(status, OP)
        return result
    return hot
