"""Reductions and BLAS-1 of int16, uint16, uint32 and uint64 end to end on the CPU: the
real op code with the real kernels run by the host emulation of tests/cpu/reduction_emu.py
(the kernels' own accumulator widths and combine trees), against numpy: sums and products
wrap in the dtype, max/min compare unsigned values as unsigned (the top bit is a large
value, not a sign), and/or are bitwise with the all-ones identity of the width; vdot,
norm_squared and axpby wrap the same way. Skipped when no C++17 compiler is present."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location("reduction_emu",
                                               Path(__file__).with_name("reduction_emu.py"))
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)
check, close, sample, wide = emu.check, emu.close, emu.sample, emu.wide

NEW = ["int16", "uint16", "uint32", "uint64"]


s = emu.session_fixture(__name__)


# (shape, view(a) -> view, axes): the row, column, flat and split paths, a reversed view
CASES = {
    "all_1d": ((3001,), lambda a: a, (0,)),
    "rows_long": ((7, 1003), lambda a: a, (1,)),
    "cols": ((517, 24), lambda a: a, (0,)),
    "negative": ((29, 31), lambda a: a[::-1, ::-2], (1,)),
}


def device_view(s, a: np.ndarray, make):
    t, v = s.up(a), make(a)
    off = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // a.itemsize
    return (t if v is a else t.view(v.shape, [st // a.itemsize for st in v.strides], off)), v


PARAMS = [(k, dt, c) for dt in NEW for k in emu.KINDS for c in CASES]


@pytest.mark.parametrize("kind,dt,case", PARAMS, ids=[f"{k}-{d}-{c}" for k, d, c in PARAMS])
def test_reductions_match_numpy(s, kind, dt, case):
    shape, make, axes = CASES[case]
    t, v = device_view(s, sample(dt, shape, kind), make)
    check(kind, s.down(getattr(s, f"reduce_{kind}_read")(t, axes)), v, axes)


def extremes(dt: str, n: int, seed: int = 1) -> np.ndarray:
    """Full-range values with the dtype's extremes (and, unsigned, the top bit) mixed in."""
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    wide_int = np.uint64 if dt == "uint64" else np.int64
    a = rng.integers(info.min, info.max, n, dtype=wide_int, endpoint=True).astype(dt)
    special = np.array([info.min, info.max, info.max - 1, 0, 1, info.max // 2 + 1,
                        info.max // 2], dt)[:n]
    a[rng.choice(n, special.size, replace=False)] = special
    return a


@pytest.mark.parametrize("dt", NEW)
@pytest.mark.parametrize("shape,axes", [((4000,), (0,)), ((300, 13), (0,)), ((13, 300), (1,))],
                         ids=["flat", "cols", "rows"])
def test_full_range_values(s, dt, shape, axes):
    a = extremes(dt, int(np.prod(shape))).reshape(shape)
    t = s.up(a)
    np.testing.assert_array_equal(s.down(s.reduce_max(t, axes)), a.max(axis=axes))
    np.testing.assert_array_equal(s.down(s.reduce_min(t, axes)), a.min(axis=axes))
    np.testing.assert_array_equal(s.down(s.reduce_sum(t, axes)), a.sum(axis=axes, dtype=dt))
    np.testing.assert_array_equal(s.down(s.reduce_prod(t, axes)), a.prod(axis=axes, dtype=dt))


@pytest.mark.parametrize("dt", NEW)
def test_sums_wrap(s, dt):
    info = np.iinfo(dt)
    a = np.full(1000, info.max, dt)
    got = s.down(s.reduce_sum(s.up(a), (0,)))
    want = (int(info.max) * 1000) % (1 << (8 * a.itemsize))
    want = want - (1 << (8 * a.itemsize)) if info.min < 0 and want > info.max else want
    assert got == np.array(want, dt)


@pytest.mark.parametrize("dt", NEW)
def test_empty_reductions_fill_identities(s, dt):
    e = s.up(np.zeros((0, 3), dt))
    every = -1 if dt == "int16" else np.iinfo(dt).max
    np.testing.assert_array_equal(s.down(s.reduce_and(e, (0,))), np.full(3, every, dt))
    np.testing.assert_array_equal(s.down(s.reduce_or(e, (0,))), np.zeros(3, dt))
    np.testing.assert_array_equal(s.down(s.reduce_sum(e, (0,))), np.zeros(3, dt))
    np.testing.assert_array_equal(s.down(s.reduce_prod(e, (0,))), np.ones(3, dt))


@pytest.mark.parametrize("size", [1, 37, 5000])
@pytest.mark.parametrize("dt", NEW)
def test_vdot_and_norm_squared(s, dt, size):
    a, b = extremes(dt, size, 2), extremes(dt, size, 3)
    wa, wb = a.astype(wide(dt)), b.astype(wide(dt))  # int64: wraps modulo 2**64
    with np.errstate(over="ignore"):
        close(s.down(s.vdot_read(s.up(a), s.up(b))), np.asarray(np.sum(wa * wb)).astype(dt),
              None)
        close(s.down(s.norm_squared_read(s.up(a))), np.asarray(np.sum(wa * wa)).astype(dt),
              None)


@pytest.mark.parametrize("dt", NEW)
def test_axpby_wraps(s, dt):
    info = np.iinfo(dt)
    x, y = extremes(dt, 9 * 70, 4).reshape(9, 70), extremes(dt, 9 * 70, 5).reshape(9, 70)
    alpha, beta = int(info.max), 3
    ty = s.up(y)
    s.axpby_read_into_accum(alpha, s.up(x), beta, ty)
    with np.errstate(over="ignore"):
        ref = np.int64(alpha if alpha <= np.iinfo(np.int64).max else -1) * x.astype(np.int64)
        ref = ref + beta * y.astype(np.int64)
    np.testing.assert_array_equal(s.down(ty), ref.astype(dt))
