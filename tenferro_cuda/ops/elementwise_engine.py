"""The engine behind every elementwise-shaped op (elementwise, analytic, cast).

``_ew_run`` is the general path: residency of every operand, ``shapes.elementwise.infer``,
the output checks (shape, dtype, no stride 0, no overlap with an input), the layout plan
(which may still reject an unsupported layout) and only then allocation and launches.
``_ew_prep`` compiles/loads the kernel once per (kind, method, dtype) and keeps, in this
thread's state, everything a repeated call needs: the CUfunction, its parameter block,
the grid constants and the error word; the methods' fast paths (elementwise_methods.py)
use it directly and never build anything per call.

Kernel signatures (ptx/elementwise.cu, ptx/cast.cu), three input slots each:
  *_contig (out, a, b, c, u32 n, int flags, int* err, int code)      Prep.block (see Prep)
  *_strided(out, Lo, a, La, b, Lb, c, Lc, u32 n, int mode, int* err, int code)
                                                                       ArgPack "PLPLPLPLIiPi"
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any

from ..dtypes import DType
from ..errors import RuntimeStateError, ValidationError
from ..kernels import device
from ..kernels.args import ArgPack, layout_bytes
from ..runtime import error_code
from ..shapes import elementwise as ew_shapes
from ..shapes.elementwise import CAST_KINDS, Kind
from ..tensor import Tensor, _Strided, compact_strides
from ._base import BLOCK, OpsBase
from .elementwise_layout import CHUNK, Plan, chunks, plan, tile_bytes, tiled_grid

STRIDED_CODES = "PLPLPLPLIiPi"
# The contiguous kernels' parameters (out, a, b, c: pointers; u32 n; int flags; int* err;
# int code) at their natural alignment: head at 0..40, tail at 40..52.
_HEAD = struct.Struct("<QQQQIi")
_TAIL = struct.Struct("<Qi")
_TAIL_AT = _HEAD.size
_SLOTS = (0, 8, 16, 24, 32, 36, 40, 48)
UNROLL = 2  # TF_EW_UNROLL in ewkernel.cuh
MAX_GRID = (1 << 31) - 1
SM_THREADS, SM_REGISTERS = 2048, 65536  # per multiprocessor on sm_80 and sm_90
_EMPTY_LAYOUT = layout_bytes((), (), 0)
_ENTRIES = {"elementwise": ("ew_contig", "ew_strided"), "cast": ("cast_contig", "cast_strided")}


def resident_blocks(fn) -> int:
    """Blocks of BLOCK threads of ``fn`` that fit on one multiprocessor at once (registers
    are allocated per warp in units of 256, i.e. per thread in multiples of 8)."""
    regs = max(1, device.function_attributes(fn)["registers"])
    per_block = BLOCK * ((regs + 7) // 8 * 8)
    return max(1, min(SM_THREADS // BLOCK, SM_REGISTERS // per_block))


class Prep:
    """Per (kind, method, primary dtype) and thread: kernel, packing and constants.

    ``block`` is the contiguous kernel's parameter block: the varying head (out, a, b, c,
    n, flags) is rewritten per launch with ``head.pack_into(block, 0, ...)``; the tail
    (err, code) is written once. ``address`` is the ``void*[]`` for cuLaunchKernel.
    """

    __slots__ = ("kind", "name", "dtype", "out_dtype", "out_item", "items", "fn", "head",
                 "block", "ptrs", "address", "fn_s", "pack_s", "per_block", "cap", "pool",
                 "stream", "dom", "err", "code")
    kind: Kind
    name: str
    dtype: DType  # the primary dtype
    out_dtype: DType
    out_item: int
    items: tuple[int, ...]  # itemsize of each input slot
    fn: Any
    head: struct.Struct
    block: Any  # ctypes char array
    ptrs: Any  # ctypes void* array
    address: int
    fn_s: Any
    pack_s: ArgPack | None
    per_block: int  # elements per block and grid-stride step on the contiguous path
    cap: int  # most blocks per launch (MAX_GRID: one grid step covers n)
    pool: Any
    stream: Any
    dom: int
    err: int
    code: int

    def pack(self, *head) -> int:
        """Fill the head (out, a, b, c, n, flags); the launch address."""
        self.head.pack_into(self.block, 0, *head)
        return self.address


def base_ptr(t: _Strided) -> int:
    """Device address of ``t``'s base buffer (residency was checked by the caller)."""
    buf = t.base.buffer
    if buf is None:
        raise RuntimeStateError("a host tensor has no device address", op="elementwise")
    return buf.ptr


def operand_dtypes(kind: Kind, primary: DType) -> tuple[DType, ...]:
    """Dtypes of the kernel's input slots for ``kind`` over ``primary``."""
    if kind.name == "select":
        return (DType.BOOL, primary, primary)
    return (primary,) * kind.arity


def overlaps(a: _Strided, b: _Strided) -> bool:
    """Whether the device byte ranges addressed by ``a`` and ``b`` intersect."""
    if a.size == 0 or b.size == 0:
        return False
    alo, ahi = a.span()
    blo, bhi = b.span()
    pa, pb = base_ptr(a), base_ptr(b)
    ia, ib = a.dtype.itemsize, b.dtype.itemsize
    return pa + alo * ia < pb + bhi * ib and pb + blo * ib < pa + ahi * ia


class ElementwiseEngine(OpsBase):
    """Shared machinery of ElementwiseOps, AnalyticOps and CastOps."""

    def _ew_prep(self, kind: Kind, name: str, primary: DType) -> Prep:
        state = self._state
        key = (kind.key, name, primary.value)
        prep = state.prepared.get(key)
        if prep is not None:
            return prep
        entry = _ENTRIES[kind.family][0]
        fn = self._fn(kind.family, f"tf::{entry}<{kind.functor}, {primary.ctype}>")
        prep = Prep()
        prep.kind, prep.name, prep.dtype = kind, name, primary
        prep.out_dtype = kind.out_dtype(primary)
        prep.out_item = prep.out_dtype.itemsize
        prep.items = tuple(d.itemsize for d in operand_dtypes(kind, primary))
        prep.fn = fn
        prep.fn_s = prep.pack_s = None
        vec = 16 // max(prep.out_item, *prep.items)
        prep.per_block = BLOCK * UNROLL * vec
        # Measured on the H200 (tools/experiments/ew_variants.py): a grid that covers n in
        # one step beats a one-wave grid-stride grid, 4,339 vs 3,987 GB/s for add and
        # 4,115 vs 3,778 for exp on 2^28 float32; so the grid is not capped.
        prep.cap = MAX_GRID
        prep.pool, prep.stream, prep.dom = self._rt.pool, state.stream, self._rt.domain.value
        reason = kind.error_reason(primary)
        prep.err = state.err_word.ptr if reason else 0
        prep.code = error_code(name, reason) if reason else 0
        prep.head = _HEAD
        prep.block = ctypes.create_string_buffer(_TAIL_AT + _TAIL.size)
        _TAIL.pack_into(prep.block, _TAIL_AT, prep.err, prep.code)
        base = ctypes.addressof(prep.block)
        prep.ptrs = (ctypes.c_void_p * len(_SLOTS))(*[base + off for off in _SLOTS])
        prep.address = ctypes.addressof(prep.ptrs)
        state.prepared[key] = prep
        return prep

    def _ew_strided_fn(self, prep: Prep):
        if prep.fn_s is None:
            kind = prep.kind
            entry = _ENTRIES[kind.family][1]
            prep.fn_s = self._fn(kind.family, f"tf::{entry}<{kind.functor}, {prep.dtype.ctype}>")
            prep.pack_s = ArgPack(STRIDED_CODES)
        return prep.fn_s

    # --- the general path --------------------------------------------------------------
    def _ew_run(self, kind: Kind, name: str, inputs, out=None, into: bool = False) -> Tensor:
        """Validate, plan, allocate (unless ``into``) and launch; returns the output."""
        roles = kind.roles
        if len(inputs) != kind.arity:
            raise ValidationError(f"{kind.name} takes {kind.arity} input(s) (got "
                                  f"{len(inputs)})", op=name)
        for x, role in zip(inputs, roles):
            self._resident(x, name, role)
        if into:
            self._resident(out, name, "out")
        inf = ew_shapes.infer(kind, [x.dtype for x in inputs], [x.shape for x in inputs], name)
        if out is not None:
            ew_shapes.check_out_view(out.shape, out.strides, out.dtype, inf.shape, inf.dtype,
                                     name)
            for x, role in zip(inputs, roles):
                if overlaps(out, x):
                    raise ValidationError(f"out overlaps {role} in device memory; outputs "
                                          "must not alias inputs", op=name)
        ndim = len(inf.shape)
        target = (out.strides, out.offset) if out is not None else (compact_strides(inf.shape), 0)
        walk = plan(inf.shape, target, [
            (x.strides if len(x.shape) == ndim else None, 0 if promote else x.offset)
            for x, promote in zip(inputs, inf.promote)], name)
        if math.prod(inf.shape) == 0:  # validated: nothing to compile or launch
            return out if out is not None else self._alloc(inf.dtype, inf.shape, name)
        prep = self._ew_prep(kind, name, inf.primary)  # compiles on first use
        if not walk.contiguous:
            self._ew_strided_fn(prep)
        if out is None:
            out = self._alloc(inf.dtype, inf.shape, name)
        if any(inf.promote):
            inputs = [self._ew_promote(x, inf.primary, name) if p else x
                      for x, p in zip(inputs, inf.promote)]
        if walk.contiguous:
            self._ew_contig(prep, walk, out, inputs, name)
        else:
            self._ew_strided(prep, walk, out, inputs, name)
        return out

    def _ew_promote(self, x: _Strided, target: DType, name: str) -> Tensor:
        """A rank-0 real operand as its complex counterpart (one-element cast kernel)."""
        prep = self._ew_prep(CAST_KINDS[target], name, x.dtype)
        tmp = self._alloc(target, (), name)
        params = prep.pack(base_ptr(tmp), x.data_ptr(), 0, 0, 1, 0)
        self._launch1d(prep.fn, 1, params, name)
        return tmp

    def _ew_contig(self, prep: Prep, walk: Plan, out: _Strided, inputs, name: str) -> None:
        po = base_ptr(out) + walk.offsets[0] * prep.out_item
        ptrs = [0, 0, 0]
        steps = [0, 0, 0]  # bytes per element: 0 for a broadcast (or unused) slot
        flags = 0
        aligned = po
        for k, x in enumerate(inputs):
            ptrs[k] = base_ptr(x) + walk.offsets[k + 1] * prep.items[k]
            if walk.broadcast[k]:
                flags |= 1 << k
            else:
                steps[k] = prep.items[k]
                aligned |= ptrs[k]
        if not aligned & 15:
            flags |= 8
        n = walk.size
        for start in range(0, n, CHUNK):
            count = min(CHUNK, n - start)
            blocks = min(-(-count // prep.per_block), prep.cap)
            params = prep.pack(po + start * prep.out_item, ptrs[0] + start * steps[0],
                               ptrs[1] + start * steps[1], ptrs[2] + start * steps[2], count,
                               flags)
            self._launch1d(prep.fn, blocks, params, name)

    def _ew_strided(self, prep: Prep, walk: Plan, out: _Strided, inputs, name: str) -> None:
        bases = [base_ptr(out)] + [base_ptr(x) for x in inputs]
        pack = prep.pack_s
        assert pack is not None  # _ew_strided_fn ran during planning
        bases += [0] * (4 - len(bases))
        if walk.tiled:
            lays = [layout_bytes(walk.shape, st, off)
                    for st, off in zip(walk.strides, walk.offsets)]
            lays += [_EMPTY_LAYOUT] * (4 - len(lays))
            smem = sum(tile_bytes(item) for k, item in enumerate(prep.items)
                       if walk.tiled & (2 << k))
            params = pack.pack(bases[0], lays[0], bases[1], lays[1], bases[2], lays[2],
                               bases[3], lays[3], 0, walk.tiled, prep.err, prep.code)
            device.launch(prep.fn_s, tiled_grid(walk), (BLOCK, 1, 1), smem, self._state.stream,
                           params, name)
            return
        for shape, strides, offsets in chunks(walk.shape, walk.strides, walk.offsets, CHUNK):
            lays = [layout_bytes(shape, st, off) for st, off in zip(strides, offsets)]
            lays += [_EMPTY_LAYOUT] * (4 - len(lays))
            n = math.prod(shape)
            params = pack.pack(bases[0], lays[0], bases[1], lays[1], bases[2], lays[2],
                               bases[3], lays[3], n, 0, prep.err, prep.code)
            self._launch1d(prep.fn_s, self._grid(n), params, name)
