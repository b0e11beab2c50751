"""sort / sort_with_indices end to end on the CPU: the real op code, planners and argument
packing with the real kernels of ptx/sort.cu (and the scan of the digit counts) run by the
host emulation (reduction_axis_emu.py, radix sort from 101 elements a row), against
numpy's stable sort for every dtype the emulation builds: both directions, NaN, +-inf,
-0.0 before or after +0.0 as in the input, INT_MIN/INT_MAX, ties, views, other axes than
the last, several blocks per row; validation before anything is allocated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError

_spec = importlib.util.spec_from_file_location(
    "reduction_axis_emu_sort", Path(__file__).with_name("reduction_axis_emu.py"))
axis_emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(axis_emu)
emu = axis_emu.emu

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float32", "float64"]


s = axis_emu.session_fixture(__name__)


def sample(dt: str, shape, seed: int = 0) -> np.ndarray:
    """Values with many ties and every special value of the dtype."""
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    if d.kind == "b":
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        pool = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], d)
        return np.where(rng.random(shape) < 0.5, rng.choice(pool, shape),
                        rng.integers(info.min, info.max, shape, dtype=d, endpoint=True))
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0,
                     np.finfo(d).max, np.finfo(d).tiny], d)
    return np.where(rng.random(shape) < 0.4, rng.choice(pool, shape),
                    rng.standard_normal(shape).astype(d))


def reference(v: np.ndarray, axis: int, descending: bool):
    """numpy's stable sort with NaNs last in both directions: (values, indices)."""
    a = np.moveaxis(v, axis, -1)
    if a.dtype.kind == "f":
        key = np.where(np.isnan(a), np.inf, -a if descending else a)
        nan = np.isnan(a)
        idx = np.lexsort((key, nan.astype(np.int8)), axis=-1)  # NaN flag first
    elif descending:  # stable descending: the ascending sort of the reversed row, reversed
        n = a.shape[-1]
        idx = (n - 1 - np.argsort(a[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    else:
        idx = np.argsort(a, axis=-1, kind="stable")
    vals = np.take_along_axis(a, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    u = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(u),
                                  np.ascontiguousarray(want).view(u))


CASES = {  # name -> (shape, view, axis)
    "small_rows": ((37, 50), lambda a: a, 1),
    "small_one_row": ((90,), lambda a: a, 0),
    "small_cols": ((60, 7), lambda a: a, 0),
    "small_view": ((20, 80), lambda a: a[::-2, 3:], -1),
    "tiny_rows": ((300, 3), lambda a: a, 1),
    "length_one": ((5, 1), lambda a: a, 1),
    "radix_row": ((9000,), lambda a: a, 0),
    "radix_rows": ((2, 700), lambda a: a, 1),
    "radix_axis0": ((500, 3), lambda a: a, 0),
    "radix_view": ((4, 1200), lambda a: a[:, ::-3], 1),
    "rank3_middle": ((2, 150, 2), lambda a: a, 1),
    "zero_rows": ((0, 500), lambda a: a, 1),
}


def device_view(s, a, make):
    t, v = s.up(a), make(a)
    off = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // a.itemsize
    return (t if v is a else t.view(v.shape, [st // a.itemsize for st in v.strides], off)), v


# (dtype, case, descending): every dtype on a short and a radix case, every case on float32;
# a radix pass per byte, so the 8-byte dtypes take one direction each (time in emulation)
PARAMS = ([(dt, "small_rows", d) for dt in DTYPES for d in (False, True)]
          + [(dt, "radix_rows", d) for dt in DTYPES[:5] + ["float32"] for d in (False, True)
             if not (dt == "int64" and d)]
          + [("float64", "radix_rows", True)]
          + [("float32", c, c in ("small_view", "radix_axis0", "radix_view")) for c in CASES
             if c not in ("small_rows", "radix_rows")])


@pytest.mark.parametrize("dt,case,descending", PARAMS,
                         ids=[f"{dt}-{c}-{'desc' if d else 'asc'}" for dt, c, d in PARAMS])
def test_sort_matches_numpy(s, dt, case, descending):
    shape, make, axis = CASES[case]
    t, v = device_view(s, sample(dt, shape), make)
    vals, idx = s.sort_with_indices(t, axis, descending)
    want_vals, want_idx = reference(v, axis % v.ndim, descending)
    got_idx = s.down(idx)
    assert got_idx.dtype == np.int64
    np.testing.assert_array_equal(got_idx, want_idx)
    same_bits(s.down(vals), want_vals)


@pytest.mark.parametrize("dt,case,descending", [("int8", "small_rows", True),
                                                ("float32", "radix_view", False),
                                                ("uint8", "radix_axis0", True)])
def test_values_only(s, dt, case, descending):
    shape, make, axis = CASES[case]
    t, v = device_view(s, sample(dt, shape, 5), make)
    same_bits(s.down(s.sort_read(t, axis, descending=descending)),
              reference(v, axis % v.ndim, descending)[0])


def test_signed_zeros_and_nans_keep_their_order_and_bits(s):
    nan2 = np.frombuffer(np.uint32(0x7FC00123).tobytes(), np.float32)[0]
    a = np.array([0.0, -0.0, np.nan, 1.0, -0.0, nan2, 0.0, -np.inf], np.float32)
    for size, desc in ((a.size, False), (a.size, True), (300, False)):
        x = np.resize(a, size)
        vals, idx = s.sort_with_indices(s.up(x), 0, desc)
        want_vals, want_idx = reference(x, 0, desc)
        np.testing.assert_array_equal(s.down(idx), want_idx)
        same_bits(s.down(vals), want_vals)


def test_radix_sort_takes_several_blocks_and_tiles(s):
    s.launched.clear()
    x = sample("float32", (9000,), 3)
    same_bits(s.down(s.sort(s.up(x))), reference(x, 0, False)[0])
    assert s.launched.count("tf::radix_scatter") == 4 and "tf::scan_rows" in s.launched


BAD = [  # (args, kwargs, exception, ValidationError kind)
    (((3, 4), "complex64", 0), {}, UnsupportedDTypeError, None),
    (((3, 4), "float32", 2), {}, ValidationError, "axis_out_of_bounds"),
    (((3, 4), "float32", -3), {}, ValidationError, "axis_out_of_bounds"),
    (((), "float32", -1), {}, ValidationError, "axis_out_of_bounds"),
    (((3, 4), "float32", 0.0), {}, ValidationError, "invalid_argument"),
    (((3, 4), "int8", 0), {"descending": 1}, ValidationError, "invalid_argument"),
]


@pytest.mark.parametrize("op", ["sort", "sort_read", "sort_with_indices",
                                "sort_with_indices_read"])
@pytest.mark.parametrize("case", range(len(BAD)))
def test_validation_before_any_allocation_or_launch(op, case):
    (shape, dt, axis), kwargs, exc, kind = BAD[case]
    s = emu.EmuSession()
    t = s.up(np.zeros(shape, dt))
    before = s.ctx.home.allocations
    with pytest.raises(exc) as err:
        getattr(s, op)(t, axis, **kwargs)
    assert type(err.value) is exc and err.value.op == op
    if kind:
        assert err.value.kind == kind
    assert s.ctx.home.allocations == before and s.launched == []
