"""argmax/argmin and the cumulative ops end to end on the CPU: the real op code, planners
and argument packing with the real kernels run by the host emulation
(reduction_axis_emu.py), against numpy for every dtype the emulation builds (not
float16/bfloat16: their conversions are PTX) over rows, columns, split passes, views with
negative strides and offsets, negative axes and extent-1 axes; ties, NaN, the same bits
every run; validation before anything is allocated (no compiler needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError

_spec = importlib.util.spec_from_file_location(
    "reduction_axis_emu", Path(__file__).with_name("reduction_axis_emu.py"))
axis_emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(axis_emu)
emu = axis_emu.emu


s = axis_emu.session_fixture(__name__)


CASES = {  # name -> (shape, view, axis)
    "vector_split": ((3001,), lambda a: a, 0),
    "rows_long": ((7, 1003), lambda a: a, 1),
    "rows_many": ((60, 37), lambda a: a, 1),
    "rows_4k": ((3, 4500), lambda a: a, -1),
    "cols": ((517, 24), lambda a: a, 0),
    "cols_split": ((2000, 3), lambda a: a, 0),
    "short_rows": ((50, 10), lambda a: a, 1),
    "middle": ((6, 41, 8), lambda a: a, 1),
    "transposed": ((40, 33), lambda a: a.T, 0),
    "negative": ((29, 31), lambda a: a[::-1, ::-2], 1),
    "negative_cols": ((29, 31), lambda a: a[::-3, ::-1], 0),
    "sliced_offset": ((12, 50, 4), lambda a: a[3:, 7:41, 1:], -2),
    "extent1_axis": ((4, 1, 5), lambda a: a, 1),
    "rank1_len1": ((1,), lambda a: a, 0),
    "zero_kept": ((0, 5), lambda a: a, 1),
}
ARG_DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float32", "float64"]


def arg_sample(dt: str, shape, seed: int = 0) -> np.ndarray:
    """Few distinct values (many ties), NaN and signed zeros for floats."""
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    if d.kind == "b":
        return rng.random(shape) < 0.3
    if d.kind in "iu":
        info = np.iinfo(d)
        return rng.choice(np.array([info.min, info.max, 0, 1, 2, info.max - 1], d), shape)
    a = rng.choice(np.array([-0.0, 0.0, 1.5, -2.0, np.inf, -np.inf, 3.0], d), shape)
    return a


def device_view(s, a, make):
    t, v = s.up(a), make(a)
    off = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // a.itemsize
    return (t if v is a else t.view(v.shape, [st // a.itemsize for st in v.strides], off)), v


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dt", ARG_DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_arg_matches_numpy(s, kind, dt, case):
    shape, make, axis = CASES[case]
    t, v = device_view(s, arg_sample(dt, shape), make)
    got = s.down(getattr(s, kind)(t, axis))
    want = getattr(np, kind)(v, axis=axis)
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["argmax", "argmin_read"])
@pytest.mark.parametrize("case", ["vector_split", "rows_long", "cols_split", "negative"])
def test_first_nan_wins(s, kind, case):
    shape, make, axis = CASES[case]
    a = arg_sample("float32", shape, 1)
    flat = a.reshape(-1)
    flat[flat.size // 3::flat.size // 4 + 1] = np.nan
    t, v = device_view(s, a, make)
    got = s.down(getattr(s, kind)(t, axis))
    np.testing.assert_array_equal(got, getattr(np, kind.split("_")[0])(v, axis=axis))


def scan_sample(dt: str, shape, kind: str, seed: int = 0) -> np.ndarray:
    if kind in ("max", "min") and np.dtype(dt).kind == "f":
        return arg_sample(dt, shape, seed) * np.asarray(1.0, dt)
    return emu.sample(dt, shape, "prod" if kind == "prod" else "sum", seed)


def scan_ref(kind: str, v: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    if reverse:
        return np.flip(scan_ref(kind, np.flip(v, axis), axis, False), axis)
    if kind in ("max", "min"):
        return {"max": np.maximum, "min": np.minimum}[kind].accumulate(v, axis=axis)
    fn = np.cumsum if kind == "sum" else np.cumprod
    if v.dtype.kind in "iu":
        return fn(v, axis=axis, dtype=v.dtype)
    wide = np.complex128 if v.dtype.kind == "c" else np.float64
    return fn(v.astype(wide), axis=axis)


def scan_check(kind: str, got: np.ndarray, v: np.ndarray, axis: int, reverse: bool) -> None:
    ref = scan_ref(kind, v, axis, reverse)
    assert got.dtype == v.dtype and got.shape == v.shape
    if v.dtype.kind in "iu" or kind in ("max", "min"):
        np.testing.assert_array_equal(got, ref)
        return
    eps = np.finfo(got.dtype).eps
    w = np.complex128 if v.dtype.kind == "c" else np.float64
    if kind == "sum":
        scale = scan_ref("sum", np.abs(v.astype(w)), axis, reverse)
    else:
        scale = np.abs(ref) * np.sqrt(v.shape[axis] if v.ndim else 1)
    assert (np.abs(got.astype(w) - ref) <= 8 * eps * np.real(scale) + 1e-300).all()


SCAN_DTYPES = ["int8", "uint8", "int32", "int64", "float32", "float64", "complex64",
               "complex128"]


# every operator x dtype on the cases of distinct kernels and passes; every case on a few
SCAN_PATHS = ["vector_split", "rows_many", "cols_split", "negative"]
SCAN_LAYOUTS = [("sum", "int32"), ("sum", "float32"), ("max", "float64"),
                ("prod", "complex64"), ("min", "int8")]


def _scan_params():
    out = []
    for kind in ("sum", "prod", "max", "min"):
        for dt in SCAN_DTYPES:
            if kind in ("max", "min") and dt.startswith("complex"):
                continue
            out += [pytest.param(kind, dt, c, id=f"{kind}-{dt}-{c}") for c in SCAN_PATHS]
    out += [pytest.param(k, dt, c, id=f"{k}-{dt}-{c}") for k, dt in SCAN_LAYOUTS
            for c in CASES if c not in SCAN_PATHS]
    return out


@pytest.mark.parametrize("kind,dt,case", _scan_params())
def test_scan_matches_numpy(s, kind, dt, case):
    shape, make, axis = CASES[case]
    t, v = device_view(s, scan_sample(dt, shape, kind), make)
    ax = axis % len(shape)
    name = {"sum": "cumsum", "prod": "cumprod", "max": "cummax", "min": "cummin"}[kind]
    scan_check(kind, s.down(getattr(s, name)(t, axis)), v, ax, False)
    scan_check(kind, s.down(getattr(s, f"{name}_read")(t, axis, reverse=True)), v, ax, True)


@pytest.mark.parametrize("case", ["vector_split", "rows_4k", "cols_split"])
def test_scan_propagates_nan(s, case):
    shape, make, axis = CASES[case]
    a = scan_sample("float32", shape, "max", 2)
    a.reshape(-1)[a.size // 2] = np.nan
    t, v = device_view(s, a, make)
    for name, fn in (("cummax", np.maximum), ("cummin", np.minimum)):
        np.testing.assert_array_equal(s.down(getattr(s, name)(t, axis)),
                                      fn.accumulate(v, axis=axis % v.ndim))


def test_scan_same_bits_every_run(s):
    t = s.up(emu.sample("float32", (3, 5000), "sum", 3))
    for axis in (0, 1):
        runs = [s.down(s.cumsum(t, axis)).tobytes() for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]


def test_multi_level_scans_take_every_kernel(s):
    s.launched.clear()
    s.cumsum(s.up(np.ones(5000, np.float32)), 0)
    # the tiles' totals, their scan (3 totals: the column kernel), the scan with carries
    assert s.launched == ["tf::scan_rows", "tf::scan_cols", "tf::scan_rows"]
    s.launched.clear()
    s.cumsum(s.up(np.ones((3000, 2), np.float32)), 0)
    assert s.launched.count("tf::scan_cols") >= 3
    s.launched.clear()
    got = s.down(s.cumsum(s.up(np.ones((3, 4500), np.int32)), 1))  # chained: one pass
    assert s.launched == ["tf::scan_rows"]
    np.testing.assert_array_equal(got, np.tile(np.arange(1, 4501, dtype=np.int32), (3, 1)))


def test_integer_scans_wrap(s):
    got = s.down(s.cumsum(s.up(np.full(3000, 100, np.int8)), 0))
    np.testing.assert_array_equal(got, np.cumsum(np.full(3000, 100, np.int8), dtype=np.int8))


# --- no compiler needed: a recording context -----------------------------------------
BAD = [  # (method, args, exception, ValidationError kind)
    ("argmax", ((3, 4), "float32", 2), ValidationError, "axis_out_of_bounds"),
    ("argmin", ((3, 4), "float32", -3), ValidationError, "axis_out_of_bounds"),
    ("argmax", ((3, 0), "float32", 1), ValidationError, "invalid_argument"),
    ("argmax", ((3, 4), "complex64", 0), UnsupportedDTypeError, None),
    ("argmax_read", ((3, 4), "float32", 1.0), ValidationError, "invalid_argument"),
    ("argmin", ((3, 4), "int8", True), ValidationError, "invalid_argument"),
    ("argmax", ((), "float32", 0), ValidationError, "axis_out_of_bounds"),
    ("cumsum", ((3, 4), "bool", 0), UnsupportedDTypeError, None),
    ("cummax", ((3, 4), "complex128", 0), UnsupportedDTypeError, None),
    ("cummin_read", ((3, 4), "bool", 0), UnsupportedDTypeError, None),
    ("cumprod", ((3, 4), "float32", 5), ValidationError, "axis_out_of_bounds"),
    ("cumsum", ((), "float32", 0), ValidationError, "axis_out_of_bounds"),
    ("cumsum_read", ((3,), "float32", None), ValidationError, "invalid_argument"),
]


@pytest.mark.parametrize("op,args,exc,kind", BAD, ids=[f"{b[0]}-{i}" for i, b in
                                                       enumerate(BAD)])
def test_validation_before_any_allocation_or_launch(op, args, exc, kind):
    s = emu.EmuSession()
    shape, dt, axis = args
    t = s.up(np.zeros(shape, dt))
    before = s.ctx.home.allocations
    with pytest.raises(exc) as err:
        getattr(s, op)(t, axis)
    assert type(err.value) is exc and err.value.op == op
    if kind:
        assert err.value.kind == kind
    assert s.ctx.home.allocations == before and s.launched == []


def test_scan_reverse_must_be_a_bool():
    s = emu.EmuSession()
    t = s.up(np.zeros(3, np.float32))
    with pytest.raises(ValidationError, match="reverse"):
        s.cumsum(t, 0, reverse=1)
    assert s.launched == []
