"""argmax/argmin, the cumulative ops and sort of int16, uint16, uint32 and uint64 end to
end on the CPU: the real op code with the real kernels of ptx/argreduce.cu, scan.cu and
sort.cu run by the host emulation (reduction_axis_emu.py), against numpy. The unsigned
dtypes order as unsigned numbers (values with the top bit set are the largest: the radix
sort's key policy is ``Unsigned`` for them, ``Signed`` for int16), the extremes of every
dtype take part, sums and products wrap. Skipped when no C++17 compiler is present."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels.families import sort as sort_family

_spec = importlib.util.spec_from_file_location(
    "reduction_axis_emu_ints", Path(__file__).with_name("reduction_axis_emu.py"))
axis_emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(axis_emu)
emu = axis_emu.emu

NEW = ["int16", "uint16", "uint32", "uint64"]


s = axis_emu.session_fixture(__name__)


CASES = {  # name -> (shape, view, axis): split passes, rows, columns, a reversed view
    "vector_split": ((3001,), lambda a: a, 0),
    "rows_many": ((60, 37), lambda a: a, 1),
    "cols_split": ((2000, 3), lambda a: a, 0),
    "negative": ((29, 31), lambda a: a[::-1, ::-2], 1),
}


def device_view(s, a, make):
    t, v = s.up(a), make(a)
    off = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // a.itemsize
    return (t if v is a else t.view(v.shape, [st // a.itemsize for st in v.strides], off)), v


def extremes(dt: str, shape, seed: int = 0) -> np.ndarray:
    """Many ties among the extremes (and the top bit of unsigned dtypes), the rest full
    range."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    pool = np.array([info.min, info.max, 0, 1, info.max - 1, info.max // 2 + 1,
                     info.max // 2, info.min + 1], dt)
    wide = np.uint64 if dt == "uint64" else np.int64
    full = rng.integers(info.min, info.max, shape, dtype=wide, endpoint=True).astype(dt)
    return np.where(rng.random(shape) < 0.5, rng.choice(pool, shape), full)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("case", list(CASES))
def test_arg_matches_numpy(s, kind, dt, case):
    shape, make, axis = CASES[case]
    t, v = device_view(s, extremes(dt, shape), make)
    got = s.down(getattr(s, kind)(t, axis))
    want = getattr(np, kind)(v, axis=axis)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


SCANS = {"sum": (np.cumsum, "cumsum"), "prod": (np.cumprod, "cumprod"),
         "max": (np.maximum.accumulate, "cummax"), "min": (np.minimum.accumulate, "cummin")}


@pytest.mark.parametrize("kind", list(SCANS))
@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("case", list(CASES))
def test_scan_matches_numpy(s, kind, dt, case):
    shape, make, axis = CASES[case]
    a = extremes(dt, shape, 1) if kind in ("max", "min") else emu.sample(dt, shape, kind)
    t, v = device_view(s, a, make)
    ref, name = SCANS[kind]
    extra = {"dtype": v.dtype} if kind in ("sum", "prod") else {}
    with np.errstate(over="ignore"):
        want = ref(v, axis=axis, **extra)
        back = np.flip(ref(np.flip(v, axis), axis=axis, **extra), axis)
    np.testing.assert_array_equal(s.down(getattr(s, name)(t, axis)), want)
    np.testing.assert_array_equal(s.down(getattr(s, f"{name}_read")(t, axis, reverse=True)),
                                  back)


def test_scans_wrap_and_order_unsigned(s):
    u64 = np.array([1, 2**63, 5, 2**64 - 1, 0, 2**63 - 1], np.uint64)
    t = s.up(u64)
    np.testing.assert_array_equal(s.down(s.cummax(t, 0)), np.maximum.accumulate(u64))
    np.testing.assert_array_equal(s.down(s.cummin(t, 0)), np.minimum.accumulate(u64))
    np.testing.assert_array_equal(s.down(s.cumsum(t, 0)), np.cumsum(u64, dtype=np.uint64))
    u16 = np.full(3000, 65535, np.uint16)
    np.testing.assert_array_equal(s.down(s.cumsum(s.up(u16), 0)),
                                  np.cumsum(u16, dtype=np.uint16))


def reference(v: np.ndarray, axis: int, descending: bool):
    """numpy's stable sort (descending: of the reversed row, reversed)."""
    a = np.moveaxis(v, axis, -1)
    if descending:
        n = a.shape[-1]
        idx = (n - 1 - np.argsort(a[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    else:
        idx = np.argsort(a, axis=-1, kind="stable")
    vals = np.take_along_axis(a, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


SORTS = {"small": ((37, 50), lambda a: a, 1), "radix": ((2, 700), lambda a: a, 1),
         "radix_view": ((4, 1200), lambda a: a[:, ::-3], 1)}
# a radix pass per byte: the strided view on one dtype only (time in emulation)
SORT_PARAMS = [(dt, c, d) for dt in NEW for c in SORTS for d in (False, True)
               if c != "radix_view" or (dt == "uint16" and not d)]


@pytest.mark.parametrize("dt,case,descending", SORT_PARAMS,
                         ids=[f"{dt}-{c}-{'desc' if d else 'asc'}" for dt, c, d in SORT_PARAMS])
def test_sort_matches_numpy(s, dt, case, descending):
    shape, make, axis = SORTS[case]
    t, v = device_view(s, extremes(dt, shape, 2), make)
    vals, idx = s.sort_with_indices(t, axis, descending)
    want_vals, want_idx = reference(v, axis, descending)
    np.testing.assert_array_equal(s.down(idx), want_idx)
    np.testing.assert_array_equal(s.down(vals), want_vals)


def test_radix_key_policies():
    assert sort_family.policy(DType.INT16) == "tf::st::Signed<unsigned short>"
    for d, key in ((DType.UINT16, "unsigned short"), (DType.UINT32, "tf::u32"),
                   (DType.UINT64, "tf::u64")):
        assert sort_family.policy(d) == f"tf::st::Unsigned<{key}>"
