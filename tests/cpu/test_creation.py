"""Creation ops (iota, full, zeros, ones, empty) without a GPU: validation of shape, dtype,
dimension and value before anything is allocated or launched; the family functions on a
fake context whose kernels (ptx/creation.cu iota, ptx/copy.cu fill) are emulated from
their sources, against numpy; which path each op takes (memset, fill kernel, iota kernel,
nothing for empty); ptx/creation.cu compiled with NVRTC for sm_80 and sm_90."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from reference import nvrtc_builds
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops import creation
from tenferro_cuda.shapes.creation import IOTA_DTYPES

D = DType
NUMERIC = [d for d in ALL_DTYPES if d.is_numeric]


class Device:
    """Runs the creation family's launches on host memory; records them."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, tuple]] = []
        self.memsets = 0

    def __call__(self, fn, grid, block, shared, args) -> None:
        self.launches.append((fn, args))
        name, targs = re.match(r"tf::(\w+)<(.+)>$", fn).groups()
        if name == "iota":
            ctype = targs.rsplit(", ", 1)[0]
            dtype = next(d for d in ALL_DTYPES if d.ctype == ctype)
            ptr, inner, extent, n = args
            out = _host_array(ptr, dtype, n)
            vals = (np.arange(n, dtype=np.int64) // inner) % extent
            out[:] = vals.astype(dtype.numpy)  # tf::convert: integers exact, floats RNE
        elif name == "fill":
            ptr, raw, n = args
            ctypes.memmove(ptr, raw * n, len(raw) * n)
        else:
            raise AssertionError(f"unexpected kernel {fn}")


def _host_array(ptr: int, dtype: DType, n: int) -> np.ndarray:
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype.numpy, n)


class Memory(HostMemory):
    def __init__(self, dev: Device) -> None:
        super().__init__()
        self.dev = dev

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        self.dev.memsets += 1
        super().memset(dst, value, nbytes)


@pytest.fixture
def env():
    dev = Device()
    ctx = FakeContext(Memory(dev), dev)
    return FakeSession(ctx, creation.METHODS), dev, ctx


def _get(t) -> np.ndarray:
    return _host_array(t.buffer.ptr, t.dtype, t.size).reshape(t.shape).copy() if t.size \
        else np.empty(t.shape, t.dtype.numpy)


def _iota_ref(dtype: DType, shape, dim) -> np.ndarray:
    shp = [1] * len(shape)
    shp[dim] = shape[dim]
    idx = np.arange(shape[dim], dtype=np.int64).reshape(shp)
    return np.ascontiguousarray(np.broadcast_to(idx, shape).astype(dtype.numpy))


IOTA_SHAPES = [((5,), 0), ((4, 5), 0), ((4, 5), 1), ((2, 3, 4), 1), ((3, 1, 2), 1),
               ((0, 3), 1), ((6, 7, 1, 2), 3), ((3000,), 0)]
IOTA_CASES = [(d, shape, dim) for d in NUMERIC for shape, dim in IOTA_SHAPES
              if not d.is_integer or shape[dim] <= np.iinfo(d.numpy).max + 1]


@pytest.mark.parametrize("dtype,shape,dim", IOTA_CASES,
                         ids=[f"{d.value}-{s}-{a}" for d, s, a in IOTA_CASES])
def test_iota_values(env, dtype, shape, dim):
    s, dev, ctx = env
    t = s.iota(dtype, shape, dim)
    assert t.dtype is dtype and t.shape == shape and t.is_contiguous
    want = _iota_ref(dtype, shape, dim)
    got = _get(t)
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    if t.size == 0:
        assert not dev.launches and not dev.memsets
    elif shape[dim] == 1:
        assert not dev.launches and dev.memsets == 1  # every index is 0
    else:
        (fn, args), = dev.launches
        assert fn in family("creation").all_expressions() and fn.endswith("tf::u32>")
        assert args[1:] == (int(np.prod(shape[dim + 1:])), shape[dim], t.size)


def test_iota_rounds_large_indices_in_float16(env):
    s, dev, ctx = env
    got = _get(s.iota("float16", 2051, 0))
    assert got[2049] == 2048 and got[2050] == 2050  # nearest even, as numpy


@pytest.mark.parametrize("dtype,steps", [(D.INT8, 128), (D.UINT8, 256)], ids=str)
def test_iota_overflow(env, dtype, steps):
    s, dev, ctx = env
    assert _get(s.iota(dtype, steps, 0))[-1] == steps - 1
    allocs = ctx.home.allocations
    with pytest.raises(ValidationError) as info:
        s.iota(dtype, (2, steps + 1), 1)
    assert info.value.kind == "overflow" and info.value.op == "iota"
    assert ctx.home.allocations == allocs
    s.iota(dtype, (steps + 1, 2), 1)  # only the counting axis has to fit


BAD_IOTA = [
    (("bool", (3,), 0), UnsupportedDTypeError, None),
    (("float8", (3,), 0), UnsupportedDTypeError, None),
    ((D.INT32, (), 0), ValidationError, "axis_out_of_bounds"),
    ((D.INT32, (3, 4), 2), ValidationError, "axis_out_of_bounds"),
    ((D.INT32, (3, 4), -1), ValidationError, "axis_out_of_bounds"),
    ((D.INT32, (3, 4), 1.0), ValidationError, "invalid_argument"),
    ((D.INT32, (3, 4), True), ValidationError, "invalid_argument"),
    ((D.INT32, (3, -4), 0), ValidationError, "invalid_argument"),
    ((D.INT32, (1,) * 9, 0), ValidationError, "rank_mismatch"),
]


@pytest.mark.parametrize("args,exc,kind", BAD_IOTA, ids=[str(a[0]) for a in BAD_IOTA])
def test_iota_rejects(env, args, exc, kind):
    s, dev, ctx = env
    allocs = ctx.home.allocations
    with pytest.raises(exc) as info:
        s.iota(*args)
    assert info.value.op == "iota" and getattr(info.value, "kind", None) == kind
    assert ctx.home.allocations == allocs and not dev.launches


FULL = [(D.BOOL, True), (D.BOOL, 0), (D.INT8, -128), (D.UINT8, 255), (D.INT32, 7.0),
        (D.INT64, -(1 << 63)), (D.FLOAT16, 65504.0), (D.BFLOAT16, -1.5),
        (D.FLOAT32, float("inf")), (D.FLOAT64, float("nan")), (D.FLOAT32, -0.0),
        (D.COMPLEX64, 1 - 2j), (D.COMPLEX128, 3), (D.FLOAT32, np.float32(0.25)),
        (D.INT32, np.int64(-3))]


@pytest.mark.parametrize("dtype,value", FULL, ids=str)
def test_full(env, dtype, value):
    s, dev, ctx = env
    t = s.full((3, 5), value, dtype)
    want = np.full((3, 5), value, dtype.numpy)
    assert t.dtype is dtype and np.array_equal(_get(t).view(np.uint8), want.view(np.uint8))
    zero = not want.view(np.uint8).any()
    assert (dev.memsets, len(dev.launches)) == ((1, 0) if zero else (0, 1))


@pytest.mark.parametrize("op,value", [("zeros", 0), ("ones", 1)])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_zeros_ones(env, op, value, dtype):
    s, dev, ctx = env
    t = getattr(s, op)([2, 4], dtype)
    assert t.shape == (2, 4) and t.dtype is dtype
    assert np.array_equal(_get(t), np.full((2, 4), value, dtype.numpy))
    assert (dev.memsets, len(dev.launches)) == ((1, 0) if op == "zeros" else (0, 1))


@pytest.mark.parametrize("shape", [7, (0,), (), (2, 0, 3), np.int64(4), (np.int32(2), 3)],
                         ids=str)
def test_shapes(env, shape):
    s, dev, ctx = env
    want = (int(shape),) if np.ndim(shape) == 0 and not isinstance(shape, tuple) else \
        tuple(int(x) for x in shape)
    for t in (s.zeros(shape, "int32"), s.ones(shape, D.FLOAT32), s.empty(shape, np.float64),
              s.full(shape, 2, "uint8")):
        assert t.shape == want and t.is_contiguous


def test_empty_writes_nothing(env):
    s, dev, ctx = env
    t = s.empty((64, 3), D.COMPLEX128)
    assert t.shape == (64, 3) and t.dtype is D.COMPLEX128 and t.buffer.nbytes >= t.nbytes
    assert not dev.launches and not dev.memsets


class Opaque:
    """An object that is no dtype, with a repr that names it the same in every process
    (test ids must agree between pytest-xdist workers)."""

    def __repr__(self) -> str:
        return "Opaque()"


BAD_FILL = [
    ("full", ((3,), 300, D.INT8), ValidationError, "overflow"),
    ("full", ((3,), -1, D.UINT8), ValidationError, "overflow"),
    ("full", ((3,), 1e6, D.FLOAT16), ValidationError, "overflow"),
    ("full", ((3,), 1.5, D.INT32), ValidationError, "invalid_argument"),
    ("full", ((3,), 1j, D.FLOAT32), ValidationError, "invalid_argument"),
    ("full", ((3,), 2, D.BOOL), ValidationError, "invalid_argument"),
    ("full", ((3,), True, D.INT32), ValidationError, "invalid_argument"),
    ("full", ((3,), "1", D.INT32), ValidationError, "invalid_argument"),
    ("full", ((3,), 1, "float8"), UnsupportedDTypeError, None),
    ("zeros", ((-1,), D.INT8), ValidationError, "invalid_argument"),
    ("zeros", ("ab", D.INT8), ValidationError, "invalid_argument"),
    ("ones", ((2.5,), D.INT8), ValidationError, "invalid_argument"),
    ("ones", ((2, True), D.INT8), ValidationError, "invalid_argument"),
    ("ones", (True, D.INT8), ValidationError, "invalid_argument"),
    ("empty", ((3,), None), UnsupportedDTypeError, None),
    ("empty", ((3,), Opaque()), UnsupportedDTypeError, None),
    ("empty", ((1,) * 9, D.INT8), ValidationError, "rank_mismatch"),
]


@pytest.mark.parametrize("op,args,exc,kind", BAD_FILL,
                         ids=[f"{c[0]}-{c[1]!r}" for c in BAD_FILL])
def test_fill_rejects(env, op, args, exc, kind):
    s, dev, ctx = env
    allocs = ctx.home.allocations
    with pytest.raises(exc) as info:
        getattr(s, op)(*args)
    assert info.value.op == op and getattr(info.value, "kind", None) == kind
    assert ctx.home.allocations == allocs and not dev.launches and not dev.memsets


def test_registry_instantiates_every_numeric_dtype_lazily():
    exprs = family("creation").all_expressions()
    assert set(IOTA_DTYPES) == set(NUMERIC)
    assert len(exprs) == 2 * len(NUMERIC)  # (dtype, u32/u64): compiled one by one on use


def creation_program(arch: int) -> nvrtc_builds.Build:
    return nvrtc_builds.check_build("creation", arch)


@nvrtc_builds.ahead(creation_program)
@pytest.mark.parametrize("arch", [80, 90])
def test_creation_family_compiles(arch):
    exprs = tuple(family("creation").all_expressions())
    prog = nvrtc_builds.get(creation_program(arch))
    assert set(prog.lowered) == set(exprs) and prog.image[:4] == b"\x7fELF"
