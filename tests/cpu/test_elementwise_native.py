"""The real elementwise and cast kernels of ptx/ run on the CPU: ptx/elementwise.cu and
ptx/cast.cu (ewkernel.cuh: the contiguous path with its 16-byte vectors, unrolled steps
and tail, the small path (one thread per element), the strided path, the tiled path
through shared memory and a barrier, the broadcast-rows path, scalar operands passed by
value) compiled by the host C++ compiler against the emulation of
tests/reference/cuda_emu.py, and called through the real session: its facade, plans and
prepared launches pack the parameters as for ``cuLaunchKernel``, and each kernel reads
them at the types of its own C++ signature. Values against the numpy references of the
GPU tier (tests/gpu/test_elementwise_ref.py, test_cast_ref.py) with its tolerances, for
the dtypes of ``DTYPES`` (float16 and bfloat16 convert through PTX and are left to the
GPU tier). Skipped when no host C++ compiler is present."""

from __future__ import annotations

import ctypes
import re
import threading

import numpy as np
import pytest
from reference import cuda_emu
from reference.fake_context import FakeContext, HostMemory, host_download, host_upload
from test_cast import cast_inputs
from test_cast_ref import cast_ref
from test_elementwise_bcast import CASES, IDS, call, run_case, run_into
from test_elementwise_emu import Runtime
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance

from tenferro_cuda.authority import Scope
from tenferro_cuda.dtypes import DType
from tenferro_cuda.exec import entry
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops.elementwise import engine
from tenferro_cuda.session import CudaExecSession
from tenferro_cuda.shapes.elementwise import KINDS
from tenferro_cuda.tensor import Tensor, TensorView

D = DType
DTYPES = (D.BOOL, D.UINT8, D.INT16, D.INT32, D.UINT64, D.INT64, D.FLOAT16, D.BFLOAT16,
          D.FLOAT32, D.FLOAT64, D.COMPLEX64, D.COMPLEX128)
CASTS = [(a, b) for a in (D.INT32, D.UINT64, D.FLOAT64, D.FLOAT16, D.COMPLEX64, D.BOOL)
         for b in (D.UINT8, D.BFLOAT16, D.FLOAT16, D.FLOAT32, D.COMPLEX128, D.INT64)]
_EXPR = re.compile(r"tf::(\w+)_(contig|strided|bcast|small)<(.+), ([^,]+)>$")
_CTYPES = {d.ctype: d for d in DTYPES}


def _expressions() -> list[str]:
    out = [e for e in family("elementwise").all_expressions()
           if _EXPR.match(e).group(4) in _CTYPES]
    casts = {f"{a.ctype}|{b.ctype}" for a, b in CASTS}
    for e in family("cast").all_expressions():
        m = re.match(r"tf::cast_(contig|strided)<tf::CastOp<(.+)>, (.+)>$", e)
        if m and f"{m.group(3)}|{m.group(2)}" in casts:
            out.append(e)
    return out


def _build_args() -> dict:
    head = '#include "shim.h"\n#include "elementwise.cu"\n#include "cast.cu"\n'
    return dict(name="elementwise_native", wrappers=head + cuda_emu.launchers(_expressions()),
                sources=("elementwise.cu", "cast.cu"), overrides=cuda_emu.DYNAMIC_SHARED,
                optimize="-O0")


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def native():
    lib = cuda_emu.build(**_build_args())
    return lib, {e: f"w{i}" for i, e in enumerate(_expressions())}


class _Context(FakeContext):
    """A fake execution context over host memory whose launches run the native kernels."""

    def __init__(self) -> None:
        super().__init__(HostMemory(), None, real_launches=True)
        self.runtime = Runtime()
        self.thread = threading.get_ident()
        self.context = self.context_id = 1
        self.domain = 4242
        self.stream = object()
        self.launched: list[str] = []


@pytest.fixture
def s(native, monkeypatch):
    lib, index = native
    ctx = _Context()

    def raw_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert stream is ctx.stream and bz == 1 and shared <= 227 << 10
        ctx.launched.append(fn)
        f = getattr(lib, index[fn])
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 5
        f(params, gx, gy, gz, bx, by)
        return (0,)

    monkeypatch.setitem(entry.SHARED, "_current", lambda: ctx.context_id)
    monkeypatch.setattr(entry.guard, "current_id", lambda: ctx.context_id)
    monkeypatch.setattr(launch_mod, "_launch", raw_launch)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    session = object.__new__(CudaExecSession)
    session._rt, session._ctx, session._scope = ctx.runtime, ctx, Scope("session")
    return session


def put(s, array: np.ndarray) -> Tensor:
    return host_upload(s._ctx, array)


def get(s, t) -> np.ndarray:
    return host_download(t)


# --- every op on every dtype, on each path -----------------------------------------------
OPS = [(k, d) for k in KINDS for d in DTYPES if KINDS[k].instantiable(d)]


def _check(s, key, dtype, xs, arrays, path):
    want, _ = REF[key](*arrays)
    before = len(s._ctx.launched)
    got = get(s, call(s, key, *xs, suffix="_read"))
    assert mismatch(got, want, tolerance(key, dtype.numpy)) is None, \
        mismatch(got, want, tolerance(key, dtype.numpy))
    assert [_EXPR.match(f).group(2) for f in s._ctx.launched[before:]] == [path]


@pytest.fixture
def few_small(monkeypatch):
    """Runs above 64 elements take the contiguous kernel (its paths on short inputs)."""
    monkeypatch.setattr(engine, "SMALL", 64)


@pytest.mark.parametrize("key,dtype", OPS, ids=[f"{k}-{d.value}" for k, d in OPS])
def test_contiguous_with_vectors_and_a_tail(s, few_small, key, dtype):
    arrays = inputs_for(np.random.default_rng(5), key, dtype.numpy, (4 * 2 * 256 + 37,))
    _check(s, key, dtype, [put(s, a) for a in arrays], arrays, "contig")


@pytest.mark.parametrize("key,dtype", OPS, ids=[f"{k}-{d.value}" for k, d in OPS])
def test_small_runs(s, key, dtype):
    """A run of at most engine.SMALL elements: one thread per element (a partial block)."""
    arrays = inputs_for(np.random.default_rng(9), key, dtype.numpy, (2 * 256 + 37,))
    _check(s, key, dtype, [put(s, a) for a in arrays], arrays, "small")


@pytest.mark.parametrize("key,dtype", OPS, ids=[f"{k}-{d.value}" for k, d in OPS])
def test_strided_views(s, key, dtype):
    """Every operand a reversed, stepped view: the strided path."""
    arrays = inputs_for(np.random.default_rng(6), key, dtype.numpy, (2 * 301,))
    xs = [TensorView(put(s, a), (301,), (-2,), 600) for a in arrays]
    _check(s, key, dtype, xs, [a[600::-2] for a in arrays], "strided")


@pytest.mark.parametrize("key,dtype", [o for o in OPS if KINDS[o[0]].arity >= 2],
                         ids=[f"{k}-{d.value}" for k, d in OPS if KINDS[k].arity >= 2])
def test_tiled_transposes(s, key, dtype):
    """A column-major operand (a transposed view) against row-major ones: the tiled path
    (tiles staged through shared memory behind a barrier)."""
    rng = np.random.default_rng(7)
    arrays = inputs_for(rng, key, dtype.numpy, (70, 45))
    xs = [put(s, a) for a in arrays]
    flipped = np.ascontiguousarray(arrays[0].T)
    xs[0] = TensorView(put(s, flipped), (70, 45), (1, 70), 0)
    _check(s, key, dtype, xs, arrays, "strided")


@pytest.mark.parametrize("key,dtype", [o for o in OPS if KINDS[o[0]].arity >= 2],
                         ids=[f"{k}-{d.value}" for k, d in OPS if KINDS[k].arity >= 2])
@pytest.mark.parametrize("layout", ["small", "contig", "strided"])
def test_scalar_operands_by_value(s, monkeypatch, key, dtype, layout):
    """The last operand a Python scalar (the predicate of select: the first), passed in
    the parameters; 64-bit and complex128 values use the high word."""
    if layout == "contig":
        monkeypatch.setattr(engine, "SMALL", 64)
    rng = np.random.default_rng(8)
    n = 2 * 1024 + 5
    arrays = inputs_for(rng, key, dtype.numpy, (n,))
    slot = 0 if key == "select" else len(arrays) - 1
    value = arrays[slot][3].item()
    arrays[slot] = np.full(n, value, arrays[slot].dtype)
    xs = [put(s, a) for a in arrays]
    if layout == "strided":
        xs = [TensorView(put(s, np.repeat(a, 2)), (n,), (2,), 0) for a in arrays]
    xs[slot] = value
    _check(s, key, dtype, xs, arrays, layout)


# --- broadcast views, _into outputs, casts ------------------------------------------------
BCAST = [(i, c) for i, c in zip(IDS, CASES) if c[1] in DTYPES]


@pytest.mark.parametrize("key,dtype,slot,layout", [c for _, c in BCAST],
                         ids=[i for i, _ in BCAST])
def test_broadcast_views(s, key, dtype, slot, layout):
    got, want, tol = run_case(s, put, get, key, dtype, slot, layout)
    assert mismatch(got, want, tol) is None


@pytest.mark.parametrize("layout", ["row", "row odd", "column", "middle", "leading"])
@pytest.mark.parametrize("in_place", [False, True], ids=["padded out", "in place"])
def test_into_outputs(s, layout, in_place):
    got, want, tol = run_into(s, put, get, layout, in_place)
    assert mismatch(got, want, tol) is None


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{a.value}-{b.value}" for a, b in CASTS])
def test_casts(s, src, dst):
    """The GPU tier's cast inputs (specials, the edges of rounding once, random values),
    compact and as a stepped view."""
    a = np.concatenate([cast_inputs(src)] * 3)
    n = a.size // 3
    for x, ref in ((put(s, a), a), (TensorView(put(s, a), (n,), (3,), 0), a[::3])):
        got = get(s, s.cast(x, dst))
        assert mismatch(got, cast_ref(ref, dst.numpy), None) is None
