"""An emulated device for the CPU tier of the fusion tests (defines no tests).

``fusion_session(monkeypatch)`` is the elementwise tests' emulated session
(test_elementwise_emu.py) that also runs **generated** kernels: ``function_from_source``
keeps the source, and a launch is decoded **parameter by parameter from the generated C
signature** (so ArgPack codes that disagree with it read garbage), then executed by
interpreting the generated body line by line with the numpy reference of each functor.
The interpreter checks that every functor gets operands of the dtypes its C++ signature
declares (C++ would convert silently), that float values pass a contraction fence, the
alignment the host claims for the vector path, and every access against its allocation.
Unfused ops in the same session run on the elementwise emulator.
"""

from __future__ import annotations

import ctypes
import re
import struct

import numpy as np
from test_cast_ref import cast_ref
from test_elementwise_emu import CTYPES, FUNCTORS, LAYOUT, emulated_session
from test_elementwise_ref import REF

from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels import device
from tenferro_cuda.ops.elementwise_engine import operand_dtypes

SIZES = {"P": 8, "L": LAYOUT.size, "I": 4, "i": 4}
_CALL = re.compile(r"^(tf::\w+(?:<.+?>)?)::apply<(.+?)>\((.*)\)$")
_VALUE = re.compile(r"^  (.+?) ([vc][\d_]+) = (.+);$", re.M)
_RESULT = re.compile(r"^  r(\d+) = v(\d+);$", re.M)


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


class Kernel:
    """A generated source, parsed once: signature, slots, body."""

    def __init__(self, source: str, expression: str) -> None:
        self.source, self.expression = source, expression
        self.path = "contig" if "contig kernel" in source.splitlines()[0] else "strided"
        sig = source[source.index("kernel(\n") + 7: source.index(") {", source.index("kernel(\n"))]
        self.params = []
        for decl in (p.strip() for p in sig.replace("\n", " ").split(",")):
            name = decl.split()[-1]
            code = ("L" if decl.startswith("tf::Layout") else "P" if "*" in decl
                    else "I" if decl.startswith("tf::u32") else "i")
            self.params.append((code, name, _ptr_dtype(decl) if code == "P" else None))
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
        assert len(elem) == 1 and len(calls) == (2 if self.path == "contig" else 1)
        self.slots = []  # per body input: (class, kernel slot k)
        for arg in _split(elem[0])[: len(self.body_inputs)]:
            m = re.fullmatch(r"p(\d+)\[(i|f(\d+))\]|s(\d+)", arg)
            assert m, arg
            if m.group(4) is not None:
                self.slots.append(("s", int(m.group(4))))
            else:
                k = int(m.group(1))
                assert m.group(2) == "i" or int(m.group(3)) == k
                self.slots.append(("c" if m.group(2) == "i" else "l", k))
        assert "asm" not in body  # contraction is disabled by the compile options instead


class FusionDevice:
    """Runs generated kernels; records (path, grid, args dict) in ``launches``."""

    def __init__(self, mem, state, cap: int) -> None:
        self.mem, self.state, self.cap = mem, state, cap
        self.launches: list[tuple] = []

    def launch(self, kernel: Kernel, grid, block, smem, params) -> None:
        ptrs = (ctypes.c_void_p * len(kernel.params)).from_address(params)
        args = {}
        for (code, name, _), p in zip(kernel.params, ptrs):
            raw = ctypes.string_at(p, SIZES[code])
            if code == "L":
                v = LAYOUT.unpack(raw)
                args[name] = (v[: v[17]], v[8: 8 + v[17]], v[16])
            else:
                args[name] = struct.unpack({"P": "<Q", "I": "<I", "i": "<i"}[code], raw)[0]
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
        for j, vid in kernel.results:
            arr, i = self.mem.array(args[f"q{j}"], dtypes[f"q{j}"])
            assert i + n <= len(arr), "output written past its allocation"
            arr[i: i + n] = env[f"v{vid}"]

    def _read(self, kernel, args, cls, k, dtype, n) -> np.ndarray:
        arr, i = self.mem.array(args[f"p{k}"], dtype)
        if cls == "s":
            return np.repeat(arr[i: i + 1].copy(), n)
        if cls == "c":
            assert kernel.path == "contig" and i + n <= len(arr), "read past the allocation"
            return arr[i: i + n].copy()
        first = next(kk for c, kk in kernel.slots if c == "l")
        shape = args[f"l{first}"][0]
        lshape, lstrides, loff = args[f"l{k}"]
        assert lshape == shape and n == int(np.prod(shape)) and i == 0
        idx = np.full(shape, loff, np.int64)
        for d, st in enumerate(lstrides):
            idx = idx + (np.arange(shape[d]) * st).reshape(
                [-1 if e == d else 1 for e in range(len(shape))])
        idx = idx.reshape(-1)
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


def fusion_session(monkeypatch):
    """(session, fusion device, elementwise device, runtime) on the emulated device."""
    s, dev, rt = emulated_session(monkeypatch)
    fdev = FusionDevice(dev.mem, dev.state, 132 * 6)
    sources: list[tuple[str, str, str]] = []

    def function_from_source(source, name, expression, extra_options=(), op=""):
        sources.append((source, name, expression))
        return Kernel(source, expression)
    rt.function_from_source = function_from_source
    rt.sources = sources
    ew_launch = dev.launch

    def launch(fn, grid, block, smem, stream, params, op=""):
        if isinstance(fn, Kernel):
            assert stream is dev.state.stream
            fdev.launch(fn, grid, block, smem, params)
        else:
            ew_launch(fn, grid, block, smem, stream, params, op)
    dev.launch = launch
    monkeypatch.setattr(device, "launch", launch)

    def raw_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        launch(fn, (gx, gy, gz), (bx, by, bz), shared, stream, params)
        return (0,)
    monkeypatch.setattr(device, "raw_launch", raw_launch)  # the hot path's launch
    return s, fdev, dev, rt
