"""An emulated device for the CPU tier of the elementwise tests (defines no tests).

``emulated_session(monkeypatch)`` builds a real ``CudaExecSession`` (its facade methods,
entry checks and scope) over a fake execution context (``tests/reference/fake_context``):
memory is host bytearrays at fake device addresses, ``function`` returns the name
expression, the library's own prepared launches pack the parameters, and each launch is
decoded from the packed block **parameter by parameter at the sizes of the kernel's C++
signature** (ptx/elementwise.cu, ptx/cast.cu) and executed with the numpy reference. So the
host logic (fast paths, plans, layouts, flags, alignment claims, grids, shared memory,
chunking, error words, scalar operands by value) runs for real without a GPU, and every
access is bounds-checked against its allocation. A by-value operand (flag bit 16 << k) is
decoded as the kernel reads it: the value's bytes 0-7 from its pointer slot, bytes 8-15
from the word ``ha``/``hb``/``hc``; the bits above its size must be 0.
"""

from __future__ import annotations

import ctypes
import re
import struct
import threading

import numpy as np
from reference.fake_context import FakeContext
from test_cast_ref import cast_ref
from test_elementwise_ref import REF

from tenferro_cuda.authority import Scope
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.exec import entry
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.ops.elementwise import engine
from tenferro_cuda.ops.elementwise.engine import operand_dtypes
from tenferro_cuda.ops.elementwise.layout import tile_bytes
from tenferro_cuda.runtime import AllocationDomainId, CudaRuntimeIdentity, error_message
from tenferro_cuda.session import CudaExecSession
from tenferro_cuda.shapes.elementwise import CAST_KINDS, KINDS
from tenferro_cuda.tensor import Tensor

LAYOUT = struct.Struct("<8q8qqii")
SIGS = {"contig": "PPPPIiPiQQQ", "strided": "PLPLPLPLIiPiQQQ", "bcast": "PLPLPLPLIiPiQQQ",
        "small": "PPPPIiPiQQQ"}
SIZES = {"P": 8, "Q": 8, "I": 4, "i": 4, "L": LAYOUT.size}
VALUE = 16  # TF_EW_VALUE
FUNCTORS = {k.functor: k for k in (*KINDS.values(), *CAST_KINDS.values())}
CTYPES = {d.ctype: d for d in ALL_DTYPES}
EXPR = re.compile(r"tf::(\w+)_(contig|strided|bcast|small)<(.+), ([^,]+)>$")


class Memory:
    def __init__(self) -> None:
        self.blocks: dict[int, bytearray] = {}
        self.next = 1 << 32

    def alloc(self, nbytes: int) -> int:
        ptr = self.next
        self.blocks[ptr] = bytearray(max(nbytes, 1))
        self.next += (nbytes + 4095) // 4096 * 4096 + 4096
        return ptr

    def _bytes(self, ptr: int, n: int) -> np.ndarray:
        arr, i = self.array(ptr, DType.UINT8)
        assert i + n <= len(arr), "byte range past the allocation"
        return arr[i: i + n]

    def copy(self, dst: int, src: int, n: int) -> None:
        if n:
            self._bytes(dst, n)[:] = self._bytes(src, n)

    def memset(self, dst: int, value: int, n: int) -> None:
        if n:
            self._bytes(dst, n)[:] = value

    def array(self, ptr: int, dtype: DType) -> tuple[np.ndarray, int]:
        """(the allocation holding ``ptr`` as elements, element index of ``ptr``)."""
        for base, data in self.blocks.items():
            if base <= ptr < base + len(data):
                off = ptr - base
                assert off % dtype.itemsize == 0, "misaligned element pointer"
                return np.frombuffer(data, dtype.numpy)[: len(data) // dtype.itemsize], \
                    off // dtype.itemsize
        raise AssertionError(f"pointer {ptr:#x} is in no allocation")


class Runtime:
    """What the facade and the families ask of the runtime."""

    def __init__(self) -> None:
        self.domain = AllocationDomainId(4242)
        self.identity = CudaRuntimeIdentity(0, "emulated", 4242, 0)
        self.closed = False
        self.ordinal = 0

    def check_alive(self, op: str = "") -> None:
        pass


class Context(FakeContext):
    """The fake execution context: counts allocations, records compiled expressions."""

    def __init__(self, mem: Memory) -> None:
        super().__init__(mem, None, real_launches=True)
        self.runtime = Runtime()
        self.thread = threading.get_ident()
        self.context = self.context_id = 1
        self.domain = 4242
        self.stream = object()
        self.compiled: list[tuple[str, str]] = []
        self.registers = 36

    @property
    def allocs(self) -> int:
        return self.home.allocations

    def function(self, family, expression):
        self.compiled.append((family, expression))
        return (family, expression)


class Device:
    """Decodes and runs launches; ``launches`` records (entry, grid, block, smem, args)."""

    def __init__(self, mem: Memory, ctx: Context) -> None:
        self.mem, self.state = mem, ctx
        self.launches: list[tuple] = []

    def err_code(self) -> int:
        arr, i = self.mem.array(self.state.err_word.ptr, DType.INT32)
        return int(arr[i])

    def raw_launch(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        """``cuLaunchKernel`` as the prepared launches call it."""
        self.launch(fn, (gx, gy, gz), (bx, by, bz), shared, stream, params)
        return (0,)

    def launch(self, fn, grid, block, smem, stream, params, op=""):
        assert stream is self.state.stream
        family, expr = fn
        entry, path, functor, ctype = EXPR.match(expr).groups()
        kind, primary = FUNCTORS[functor], CTYPES[ctype]
        codes = SIGS[path]
        ptrs = (ctypes.c_void_p * len(codes)).from_address(params)
        args = []
        for code, p in zip(codes, ptrs):
            raw = ctypes.string_at(p, SIZES[code])
            if code == "L":
                vals = LAYOUT.unpack(raw)
                ndim = vals[17]  # shape[8], stride[8], offset, ndim, pad
                args.append((vals[:ndim], vals[8: 8 + ndim], vals[16], ndim))
            else:
                args.append(struct.unpack({"P": "<Q", "Q": "<Q", "I": "<I", "i": "<i"}[code],
                                          raw)[0])
        args, self.hi = args[:-3], args[-3:]
        self.launches.append((path, tuple(grid), tuple(block), smem, args))
        assert all(g >= 1 for g in grid) and block == (256, 1, 1)
        reason = kind.error_reason(primary)
        err, code = args[-2], args[-1]
        assert (err != 0) == bool(reason) and (err == 0 or err == self.state.err_word.ptr)
        by_value = (args[5] if path in ("contig", "small") else args[9]) >> 4 & 7
        assert by_value < (1 << kind.arity) and (kind.arity > 1 or not by_value), \
            "by-value bit of a unary op or an unused slot"
        if path == "small":  # one thread per element, no vector path
            n = args[4]
            assert grid == (-(-n // 256), 1, 1) and n <= engine.SMALL, (grid, n)
            self._contig(kind, primary, grid, smem, args[:5] + [args[5] & ~8] + args[6:])
        elif path == "contig":
            assert args[4] > engine.SMALL or kind.family == "cast", \
                "a small run on the contiguous kernel"
            self._contig(kind, primary, grid, smem, args)
        elif path == "bcast":
            self._bcast(kind, primary, grid, smem, args)
        else:
            self._strided(kind, primary, grid, smem, args)

    def _run(self, kind, primary, values):
        if kind.family == "cast":
            return cast_ref(values[0], kind.to.numpy), False
        return REF[kind.key](*values)

    def _value(self, kind, flags, k, slot, dtype):
        """Operand k's value if it is passed by value (flag bit), else None."""
        if not flags & (VALUE << k):
            return None
        raw = slot | self.hi[k] << 64
        assert raw >> (8 * dtype.itemsize) == 0, "by-value bits beyond the dtype's size"
        return np.frombuffer(raw.to_bytes(16, "little")[:dtype.itemsize], dtype.numpy)[0]

    def _raise(self, err, code):
        arr, i = self.mem.array(err, DType.INT32)
        if arr[i] == 0:
            arr[i] = code

    def _contig(self, kind, primary, grid, smem, args):
        out, a, b, c, n, flags, err, code = args
        assert grid[1] == grid[2] == 1 and smem == 0 and 0 < n < 1 << 31 and grid[0] <= 132 * 6
        dts = operand_dtypes(kind, primary)
        outd = kind.out_dtype(primary)
        vals = []
        for k, (p, d) in enumerate(zip((a, b, c), dts)):
            value = self._value(kind, flags, k, p, d)
            if value is not None:
                vals.append(np.full(n, value, d.numpy))
                continue
            arr, i = self.mem.array(p, d)
            if flags & (1 << k):
                vals.append(np.repeat(arr[i: i + 1].copy(), n))
            else:
                assert i + n <= len(arr), "contiguous read past the allocation"
                vals.append(arr[i: i + n].copy())
                assert not flags & 8 or p % 16 == 0, "vector path with a misaligned input"
        oarr, oi = self.mem.array(out, outd)
        assert oi + n <= len(oarr) and (not flags & 8 or out % 16 == 0)
        res, failed = self._run(kind, primary, vals)
        oarr[oi: oi + n] = res
        if failed:
            self._raise(err, code)

    def _bcast(self, kind, primary, grid, smem, args):
        """ew_bcast: checks the layouts (rank 3, unit-stride rows in the output, unit or
        zero stride in the inputs), the grid (n / per-block elements) and, on the vector
        path (flags bit 0), every claim the kernel relies on (rows a multiple of VEC long,
        each unit-stride operand's rows aligned to its vector); then runs the strided
        emulation on the same layouts."""
        lays = [args[1], args[3], args[5], args[7]][: 1 + kind.arity]
        ptrs = [args[0], args[2], args[4], args[6]][: 1 + kind.arity]
        n, flags = args[8], args[9]
        dts = (kind.out_dtype(primary), *operand_dtypes(kind, primary))
        items = [d.itemsize for d in dts]
        vec = 16 // max(items)
        shape = lays[0][0]
        assert len(shape) == 3 and all(ndim == 3 for *_, ndim in lays)
        assert flags & ~(7 * VALUE) in (0, 1)
        assert lays[0][1][2] == 1 and all(st[2] in (0, 1) for _, st, _, _ in lays[1:])
        assert grid == (-(-n // (256 * 2 * vec)), 1, 1) and smem == 0
        if flags & 1:
            assert shape[2] % vec == 0, "vector path with rows that are not whole vectors"
            for (_, st, off, _), ptr, item in zip(lays, ptrs, items):
                if st[2]:
                    assert (ptr + off * item) % (item * vec) == 0, "misaligned vector row"
                    assert all(e == 1 or s % vec == 0 for e, s in zip(shape[:2], st[:2]))
        self._strided(kind, primary, (1, 1, 1), 0, [*args[:9], flags & 7 * VALUE, *args[10:]])

    def _strided(self, kind, primary, grid, smem, args):
        lays = [args[1], args[3], args[5], args[7]]
        ptrs = [args[0], args[2], args[4], args[6]]
        n, mode, err, code = args[8:]
        shape = lays[0][0]
        dts = (kind.out_dtype(primary), *operand_dtypes(kind, primary))
        values = [self._value(kind, mode, k, ptrs[k + 1], dts[k + 1])
                  for k in range(kind.arity)]
        if mode & 1:
            assert len(shape) == 3 and grid == (-(-shape[2] // 32), -(-shape[1] // 32), shape[0])
            staged = [k for k in range(3) if mode & (2 << k)]
            assert staged and smem == sum(tile_bytes(dts[k + 1].itemsize) for k in staged)
            for k in staged:
                st = lays[k + 1][1]
                assert 0 < abs(st[1]) < abs(st[2]), "staged input is not column-major"
                assert values[k] is None, "a by-value operand is staged"
        else:
            assert grid[1] == grid[2] == 1 and smem == 0 and n == int(np.prod(shape))
            assert mode & ~(7 * VALUE) == 0
        offs = []
        for lshape, lstrides, loff, ndim in lays[: 1 + kind.arity]:
            assert lshape == shape and ndim == len(shape)
            idx = np.full(shape, loff, np.int64)
            for d, st in enumerate(lstrides):
                idx = idx + (np.arange(shape[d]) * st).reshape([-1 if e == d else 1
                                                                for e in range(len(shape))])
            offs.append(idx.reshape(-1))
        arrays = []
        for k, (p, d, v) in enumerate(zip(ptrs, dts, [None, *values])):
            if v is not None:
                arrays.append(np.array([v], dtype=d.numpy))
                continue
            arr, start = self.mem.array(p, d)  # the layout's offsets count from ``p``
            arrays.append(arr)
            offs[k] = offs[k] + start
        for k, v in enumerate(values):
            if v is not None:
                offs[k + 1] = np.zeros_like(offs[0])  # read once, whatever its layout
        for k, (arr, off) in enumerate(zip(arrays, offs)):
            assert off.size == 0 or (off.min() >= 0 and off.max() < len(arr)), f"slot {k} OOB"
        assert len(np.unique(offs[0])) == offs[0].size, "output element written twice"
        res, failed = self._run(kind, primary, [arr[o] for arr, o in zip(arrays[1:], offs[1:])])
        arrays[0][offs[0]] = res
        if failed:
            self._raise(err, code)


def emulated_session(monkeypatch):
    """(session, device, context) with the fakes installed for this test."""
    mem = Memory()
    ctx = Context(mem)
    dev = Device(mem, ctx)
    monkeypatch.setitem(entry.SHARED, "_current", lambda: ctx.context_id)
    monkeypatch.setattr(entry.guard, "current_id", lambda: ctx.context_id)
    monkeypatch.setattr(launch_mod, "_launch", dev.raw_launch)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    s = object.__new__(CudaExecSession)
    s._rt, s._ctx, s._scope = ctx.runtime, ctx, Scope("session")

    def synchronize():  # the real one's contract: raise the deferred error, clear the word
        entry.check(s, "synchronize")
        code = dev.err_code()
        if code:
            arr, i = mem.array(ctx.err_word.ptr, DType.INT32)
            arr[i] = 0
            raise ValidationError(f"deferred device error: {error_message(code)}",
                                  op=error_message(code).rsplit(" in ", 1)[-1],
                                  kind="device_data")
    return _Emulated(s, synchronize), dev, ctx


class _Emulated:
    """The session with ``synchronize`` replaced (the real one reads device memory)."""

    def __init__(self, session: CudaExecSession, synchronize) -> None:
        self._session, self.synchronize = session, synchronize

    def __getattr__(self, name: str):
        return getattr(self.__dict__["_session"], name)


def put(session, array: np.ndarray) -> Tensor:
    """A device tensor (in emulated memory) holding ``array``."""
    array = np.array(array, order="C")  # (ascontiguousarray would make rank 0 rank 1)
    dtype = DType.of(array.dtype)
    ctx = session._ctx
    t = ctx.alloc(dtype, tuple(array.shape), "put")
    buf = t.buffer
    if array.nbytes:
        arr, i = ctx.memory.array(buf.ptr, dtype)
        arr[i: i + array.size] = array.reshape(-1)
    return t


def get(session, t) -> np.ndarray:
    """The elements of a device tensor or view (emulated memory) as numpy."""
    if t.size == 0:
        return np.empty(t.shape, t.dtype.numpy)
    arr, i = session._ctx.memory.array(t.base.buffer.ptr, t.dtype)
    idx = np.full(t.shape, t.offset, np.int64)
    for d, st in enumerate(t.strides):
        idx = idx + (np.arange(t.shape[d]) * st).reshape([-1 if e == d else 1
                                                          for e in range(t.ndim)])
    return arr[idx].copy()
