"""An emulated device for the CPU tier of the fusion tests (defines no tests).

``fusion_session(monkeypatch)`` runs the fusion family (and, for the unfused comparisons,
the elementwise and analytic families) unchanged over a fake execution context
(``tests/reference/fake_context``, with the library's own ``PreparedLaunch`` objects):
memory is host bytearrays at fake device addresses, every access bounds-checked against
its allocation; ``source_function`` keeps the generated source; every launch reaches
``kernels.launch._launch`` (patched) with the packed parameter block exactly as
``cuLaunchKernel`` would get it. A fused launch is decoded **parameter by parameter from the
generated C signature** (so argument codes that disagree with it read garbage), then
executed by interpreting the generated body line by line with the numpy reference of each
functor. The interpreter checks that every functor gets operands of the dtypes its C++
signature declares (C++ would convert silently), that float values pass a contraction
fence, the alignment the host claims for the vector path, and every access against its
allocation. Unfused launches (``tf::ew_*``/``tf::cast_*``) are decoded at the sizes of
their C++ signatures (ptx/elementwise.cu, ptx/cast.cu) and run with the same reference.
"""

from __future__ import annotations

import ctypes
import re
import struct

import numpy as np
from reference.fake_context import FakeContext, FakeSession
from test_cast_ref import cast_ref
from test_elementwise_emu import Memory  # one emulated memory for both emulators
from test_elementwise_ref import REF

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.ops import analytic, elementwise, fusion
from tenferro_cuda.ops.elementwise.engine import operand_dtypes
from tenferro_cuda.ops.elementwise.layout import tile_bytes
from tenferro_cuda.runtime import error_message
from tenferro_cuda.shapes.elementwise import CAST_KINDS, KINDS
from tenferro_cuda.tensor import Tensor

LAYOUT = struct.Struct("<8q8qqii")
SIZES = {"P": 8, "Q": 8, "L": LAYOUT.size, "I": 4, "i": 4}
UNPACK = {"P": "<Q", "Q": "<Q", "I": "<I", "i": "<i"}
EW_CODES = {"contig": "PPPPIiPiQQQ", "strided": "PLPLPLPLIiPiQQQ",
            "bcast": "PLPLPLPLIiPiQQQ", "small": "PPPPIiPiQQQ"}
FUNCTORS = {k.functor: k for k in (*KINDS.values(), *CAST_KINDS.values())}
CTYPES = {d.ctype: d for d in ALL_DTYPES}
EW_EXPR = re.compile(r"tf::(\w+)_(contig|strided|bcast|small)<(.+), ([^,]+)>$")
_CALL = re.compile(r"^(tf::\w+(?:<.+?>)?)::apply<(.+?)>\((.*)\)$")
_VALUE = re.compile(r"^  (.+?) ([vc][\d_]+) = (.+);$", re.M)
_RESULT = re.compile(r"^  r(\d+) = v(\d+);$", re.M)
CAP = 132 * 6  # multiprocessors x resident blocks of a 36-register kernel


class Context(FakeContext):
    """The fake context: real prepared launches, generated sources recorded."""

    def __init__(self, mem: Memory) -> None:
        super().__init__(mem, None, real_launches=True)
        self.stream = object()
        self.registers = 36
        self.sources: list[tuple[str, str, str]] = []

    @property
    def allocs(self) -> int:
        return self.home.allocations

    def source_function(self, source, name, expression, options=(), op="", waits=False):
        self.sources.append((source, name, expression))
        return Kernel(source, expression)


def _split(args: str) -> list[str]:
    """Top-level comma-separated arguments."""
    out, depth, cur = [], 0, ""
    for ch in args:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _ptr_dtype(decl: str) -> DType:
    return CTYPES[decl.replace("const ", "").split("*")[0].strip()]


def decode(codes, params: int) -> list:
    """The parameters of a ``void*[]`` block, read at the sizes of ``codes``."""
    ptrs = (ctypes.c_void_p * len(codes)).from_address(params)
    out = []
    for code, p in zip(codes, ptrs):
        raw = ctypes.string_at(p, SIZES[code])
        if code == "L":
            v = LAYOUT.unpack(raw)  # shape[8], stride[8], offset, ndim, pad
            out.append((v[: v[17]], v[8: 8 + v[17]], v[16]))
        else:
            out.append(struct.unpack(UNPACK[code], raw)[0])
    return out


def _indices(shape, strides, offset) -> np.ndarray:
    idx = np.full(shape, offset, np.int64)
    for d, st in enumerate(strides):
        idx = idx + (np.arange(shape[d]) * st).reshape(
            [-1 if e == d else 1 for e in range(len(shape))])
    return idx.reshape(-1)


class Kernel:
    """A generated source, parsed once: signature, slots, body."""

    def __init__(self, source: str, expression: str) -> None:
        self.source, self.expression = source, expression
        self.path = source.splitlines()[0].split(": ")[1].split()[0]  # "<path> kernel; ..."
        assert self.path in ("contig", "bcast", "strided")
        vec = re.search(r"nvec = n / (\d+);", source)
        self.vec = int(vec.group(1)) if vec else 0
        sig = source[source.index("kernel(\n") + 7: source.index(") {", source.index("kernel(\n"))]
        self.params = []
        for decl in (p.strip() for p in sig.replace("\n", " ").split(",")):
            name = decl.split()[-1]
            code = ("L" if decl.startswith("tf::Layout") else "P" if "*" in decl
                    else "I" if decl.startswith("tf::u32") else "i")
            self.params.append((code, name, _ptr_dtype(decl) if code == "P" else None))
        self.codes = "".join(code for code, _, _ in self.params)
        start = source.index("void body(") + 10
        head = source[start: source.index(") {", start)]
        ins = [p for p in head.split(", ") if p.startswith("const ") and " v" in p]
        self.body_inputs = [(CTYPES[p[6:p.rindex(" ")]], int(p[p.rindex(" v") + 2:]))
                            for p in ins]
        body = source[source.index("void body("): source.index("__global__")]
        self.values = [(CTYPES[t], v, e) for t, v, e in _VALUE.findall(body)]
        self.results = [(int(j), int(v)) for j, v in _RESULT.findall(body)]
        calls = re.findall(r"body\((.*?)\);", source[source.index("__global__"):])
        elem = [c for c in calls if "[k]" not in c]
        assert len(elem) == 1 and len(calls) == (1 if self.path == "strided" else 2)
        self.slots = []  # per body input: (class, kernel slot k)
        for arg in _split(elem[0])[: len(self.body_inputs)]:
            m = re.fullmatch(r"p(\d+)\[(i|f(\d+))\]|s(\d+)", arg)
            row = re.fullmatch(r"p(\d+)\[tf::bc_offset\(l(\d+), i0, i1, i2\)\]", arg)
            assert m or row, arg
            if row:
                assert row.group(1) == row.group(2) and self.path == "bcast"
                self.slots.append(("r", int(row.group(1))))
            elif m.group(4) is not None:
                self.slots.append(("s", int(m.group(4))))
            else:
                k = int(m.group(1))
                assert m.group(2) == "i" or int(m.group(3)) == k
                self.slots.append(("c" if m.group(2) == "i" else "l", k))
        assert "asm" not in body  # contraction is disabled by the compile options instead


class FusionDevice:
    """Runs generated kernels; records (path, grid, args dict) in ``launches``."""

    def __init__(self, mem: Memory, ctx: Context, cap: int) -> None:
        self.mem, self.state, self.cap = mem, ctx, cap
        self.launches: list[tuple] = []

    def launch(self, kernel: Kernel, grid, block, smem, params) -> None:
        args = dict(zip((name for _, name, _ in kernel.params), decode(kernel.codes, params)))
        self.launches.append((kernel.path, tuple(grid), args))
        n = args["n"]
        assert block == (256, 1, 1) and smem == 0 and grid[1:] == (1, 1)
        assert 1 <= grid[0] <= self.cap and 0 < n < 1 << 31
        dtypes = {name: dt for code, name, dt in kernel.params if code == "P"}
        env = {}
        for (dtype, vid), (cls, k) in zip(kernel.body_inputs, kernel.slots):
            assert dtypes[f"p{k}"] is dtype
            env[f"v{vid}"] = self._read(kernel, args, cls, k, dtype, n)
        for dtype, name, expr in kernel.values:
            env[name] = value = self._eval(expr, env, args)
            assert value.dtype == dtype.numpy, (expr, value.dtype, dtype)
        outs = [name for code, name, _ in kernel.params if name.startswith("q")]
        if kernel.path == "contig" and args["flags"] & 1:
            aligned = [args[o] for o in outs] + [args[f"p{k}"] for c, k in kernel.slots
                                                 if c == "c"]
            assert all(p % 16 == 0 for p in aligned), "vector path with a misaligned pointer"
        if kernel.path == "bcast" and args["flags"] & 1:
            self._check_row_vectors(kernel, args, dtypes, outs)
        for j, vid in kernel.results:
            arr, i = self.mem.array(args[f"q{j}"], dtypes[f"q{j}"])
            assert i + n <= len(arr), "output written past its allocation"
            arr[i: i + n] = env[f"v{vid}"]

    @staticmethod
    def _check_row_vectors(kernel, args, dtypes, outs) -> None:
        """What the broadcast-rows vector path needs (layout.bcast_vectors): rows a
        multiple of the vector, every unit-stride operand's rows vector-aligned."""
        vec = kernel.vec
        first = next(k for c, k in kernel.slots if c == "r")
        shape = args[f"l{first}"][0]
        assert len(shape) == 3 and shape[-1] % vec == 0, "vector path over ragged rows"
        for o in outs:
            assert args[o] % (dtypes[o].itemsize * vec) == 0, "misaligned output rows"
        for c, k in kernel.slots:
            lshape, lstrides, loff = args[f"l{k}"] if c == "r" else (None, None, None)
            if c != "r" or lstrides[-1] == 0:
                continue
            item = dtypes[f"p{k}"].itemsize
            assert (args[f"p{k}"] + loff * item) % (item * vec) == 0, "misaligned input rows"
            assert all(st % vec == 0 for e, st in zip(lshape[:-1], lstrides) if e > 1), \
                "input rows off the vector grid"

    def _read(self, kernel, args, cls, k, dtype, n) -> np.ndarray:
        arr, i = self.mem.array(args[f"p{k}"], dtype)
        if cls == "s":
            return np.repeat(arr[i: i + 1].copy(), n)
        if cls == "c":
            assert kernel.path == "contig" and i + n <= len(arr), "read past the allocation"
            return arr[i: i + n].copy()
        first = next(kk for c, kk in kernel.slots if c == cls)
        assert cls == ("r" if kernel.path == "bcast" else "l")
        shape = args[f"l{first}"][0]
        lshape, lstrides, loff = args[f"l{k}"]
        assert lshape == shape and n == int(np.prod(shape)) and i == 0
        idx = _indices(shape, lstrides, loff)
        assert idx.size == 0 or (idx.min() >= 0 and idx.max() < len(arr)), "strided OOB"
        return arr[idx].copy()

    def _eval(self, expr: str, env: dict, args: dict) -> np.ndarray:
        if re.fullmatch(r"[vc][\d_]+", expr):
            return env[expr]
        functor, ctype, inner = _CALL.match(expr).groups()
        kind, primary = FUNCTORS[functor], CTYPES[ctype]
        parts = _split(inner)
        err = parts.pop()
        vals = [self._eval(p, env, args) for p in parts]
        want = operand_dtypes(kind, primary) if kind.family != "cast" else (primary,)
        assert [v.dtype for v in vals] == [d.numpy for d in want], (expr, want)
        if kind.family == "cast":
            return np.asarray(cast_ref(vals[0], kind.to.numpy))
        result, failed = REF[kind.key](*vals)
        reason = kind.error_reason(primary)
        assert err == {"integer division by zero": "ed", "negative integer exponent": "ep",
                       None: err}[reason]
        if failed:
            assert args["err"] == self.state.err_word.ptr, "fallible op without an error word"
            code = args["code_div"] if err == "ed" else args["code_pow"]
            word, i = self.mem.array(args["err"], DType.INT32)
            if word[i] == 0:
                word[i] = code
        return np.asarray(result)


class Device:
    """Runs the unfused elementwise/cast kernels; ``launches``: (path, grid, args)."""

    def __init__(self, mem: Memory, ctx: Context) -> None:
        self.mem, self.state = mem, ctx
        self.launches: list[tuple] = []

    def err_code(self) -> int:
        arr, i = self.mem.array(self.state.err_word.ptr, DType.INT32)
        return int(arr[i])

    def launch(self, expr: str, grid, block, smem, params) -> None:
        _, path, functor, ctype = EW_EXPR.match(expr).groups()
        small = path == "small"  # one thread per element: the contiguous run, no vectors
        path = "contig" if small else path
        kind, primary = FUNCTORS[functor], CTYPES[ctype]
        args = decode(EW_CODES[path], params)[:-3]  # the by-value words: no scalars here
        flags = args[5] if path == "contig" else args[9]
        assert not flags & (7 << 4), "a by-value operand in an unfused launch of these tests"
        self.launches.append((path, tuple(grid), args))
        assert all(g >= 1 for g in grid) and block == (256, 1, 1)
        err, code = args[-2], args[-1]
        assert (err != 0) == bool(kind.error_reason(primary))
        assert err == 0 or err == self.state.err_word.ptr
        dts = (kind.out_dtype(primary), *operand_dtypes(kind, primary))
        if path == "contig":
            out, n, flags = args[0], args[4], args[5] & ~(8 if small else 0)
            assert grid[1:] == (1, 1) and smem == 0 and 0 < n < 1 << 31
            assert not small or grid[0] == -(-n // 256)
            vals = []
            for k, (p, d) in enumerate(zip(args[1:4], dts[1:])):
                arr, i = self.mem.array(p, d)
                if flags & (1 << k):
                    vals.append(np.repeat(arr[i: i + 1].copy(), n))
                else:
                    assert i + n <= len(arr), "contiguous read past the allocation"
                    assert not flags & 8 or p % 16 == 0, "vector path with a misaligned input"
                    vals.append(arr[i: i + n].copy())
            oarr, oi = self.mem.array(out, dts[0])
            assert oi + n <= len(oarr) and (not flags & 8 or out % 16 == 0)
            targets = (oarr, np.arange(oi, oi + n))
        else:
            # ew_bcast: rank-3 layouts, flags bit 0 = vectors (claims checked by
            # test_elementwise_emu); run like a plain strided walk
            lays, ptrs = args[1:8:2], args[0:8:2]
            mode = args[9] if path == "strided" else 0
            shape = lays[0][0]
            if mode & 1:
                staged = [k for k in range(3) if mode & (2 << k)]
                assert len(shape) == 3 and staged
                assert smem == sum(tile_bytes(dts[k + 1].itemsize) for k in staged)
            else:
                assert grid[1:] == (1, 1) and smem == 0 and args[8] == int(np.prod(shape))
            arrays, offs = [], []
            for (lshape, lstrides, loff), p, d in zip(lays, ptrs, dts):
                assert lshape == shape
                arr, start = self.mem.array(p, d)  # the layout's offsets count from ``p``
                off = _indices(shape, lstrides, loff) + start
                assert off.size == 0 or (off.min() >= 0 and off.max() < len(arr)), "OOB"
                arrays.append(arr)
                offs.append(off)
            assert len(np.unique(offs[0])) == offs[0].size, "output element written twice"
            vals = [arr[o] for arr, o in zip(arrays[1:], offs[1:])]
            targets = (arrays[0], offs[0])
        if kind.family == "cast":
            res, failed = cast_ref(vals[0], kind.to.numpy), False
        else:
            res, failed = REF[kind.key](*vals)
        targets[0][targets[1]] = res
        if failed:
            word, i = self.mem.array(err, DType.INT32)
            if word[i] == 0:
                word[i] = code


class Session(FakeSession):
    """The fusion, elementwise and analytic functions bound to the fake context, and a
    ``synchronize`` that raises the deferred error and clears the word (the real one's
    contract)."""

    def __init__(self, ctx: Context, dev: Device) -> None:
        super().__init__(ctx, fusion.METHODS, elementwise.METHODS, analytic.METHODS)
        self.__dict__["dev"] = dev

    def synchronize(self) -> None:
        dev = self.__dict__["dev"]
        code = dev.err_code()
        if code:
            arr, i = dev.mem.array(dev.state.err_word.ptr, DType.INT32)
            arr[i] = 0
            raise ValidationError(f"deferred device error: {error_message(code)}",
                                  op=error_message(code).rsplit(" in ", 1)[-1],
                                  kind="device_data")


def fusion_session(monkeypatch):
    """(session, fusion device, elementwise device, context) on the emulated device."""
    mem = Memory()
    ctx = Context(mem)
    fdev = FusionDevice(mem, ctx, CAP)
    dev = Device(mem, ctx)

    def raw_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert stream is ctx.stream
        if isinstance(fn, Kernel):
            fdev.launch(fn, (gx, gy, gz), (bx, by, bz), shared, params)
        else:
            dev.launch(fn, (gx, gy, gz), (bx, by, bz), shared, params)
        return (0,)
    monkeypatch.setattr(launch_mod, "_launch", raw_launch)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    return Session(ctx, dev), fdev, dev, ctx


def put(session, array: np.ndarray) -> Tensor:
    """A device tensor (in emulated memory) holding ``array``."""
    array = np.array(array, order="C")  # (ascontiguousarray would make rank 0 rank 1)
    ctx = session.ctx
    t = ctx.alloc(DType.of(array.dtype), tuple(array.shape), "put")
    if array.nbytes:
        arr, i = ctx.memory.array(t.buffer.ptr, t.dtype)
        arr[i: i + array.size] = array.reshape(-1)
    return t


def get(session, t) -> np.ndarray:
    """The elements of a device tensor or view (emulated memory) as numpy."""
    if t.size == 0:
        return np.empty(t.shape, t.dtype.numpy)
    arr, i = session.ctx.memory.array(t.base.buffer.ptr, t.dtype)
    return arr[_indices(t.shape, t.strides, t.offset)].reshape(t.shape).copy()
