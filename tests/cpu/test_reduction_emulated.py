"""Reductions end to end on the CPU: the real op code, planner and argument packing with the
real kernels run by the host emulation of tests/cpu/reduction_emu.py (every op x dtype x
layout case against numpy; NaN propagation; identities of empty reductions; the call
cache; the same bits every run; skipped when no C++17 compiler is present); validation
before anything is allocated, residency, and the occupancy model (no compiler needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.ops.reduction import resident_blocks

_spec = importlib.util.spec_from_file_location("reduction_emu",
                                               Path(__file__).with_name("reduction_emu.py"))
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)
KINDS, check, sample = emu.KINDS, emu.check, emu.sample


s = emu.session_fixture(__name__)


# (shape, view(a) -> view, axes): rows, cols, flat runs, block groups, splits, views
CASES = {
    "all_1d": ((3001,), lambda a: a, (0,)),
    "rows_long": ((7, 1003), lambda a: a, (1,)),
    "rows_many": ((300, 37), lambda a: a, (1,)),
    "rows_short": ((500, 3), lambda a: a, (1,)),
    "cols": ((517, 24), lambda a: a, (0,)),
    "cols_odd": ((301, 5), lambda a: a, (0,)),
    "middle": ((6, 41, 8), lambda a: a, (1,)),
    "outer_inner": ((9, 5, 23), lambda a: a, (0, 2)),
    "flat_runs": ((200, 3, 3), lambda a: a, (0, 2)),
    "all_3d": ((13, 11, 7), lambda a: a, (0, 1, 2)),
    "transposed": ((40, 33), lambda a: a.T, (0,)),
    "transposed_rows": ((40, 33), lambda a: a.T, (1,)),
    "negative": ((29, 31), lambda a: a[::-1, ::-2], (1,)),
    "negative_cols": ((29, 31), lambda a: a[::-3, ::-1], (0,)),
    "sliced_offset": ((12, 50, 4), lambda a: a[3:, 7:41, 1:], (1,)),
    "no_unit_stride": ((20, 30), lambda a: a[::2, ::3], (1,)),
    "rank6": ((2, 3, 1, 4, 5, 3), lambda a: a.transpose(5, 1, 0, 3, 2, 4), (0, 3, 4)),
    "extent1_axes": ((1, 9, 1), lambda a: a, (0, 2)),
    "no_axes": ((4, 5), lambda a: a.T, ()),
}


def device_view(s, a: np.ndarray, make):
    t, v = s.up(a), make(a)
    off = (v.__array_interface__["data"][0] - a.__array_interface__["data"][0]) // a.itemsize
    return (t if v is a else t.view(v.shape, [st // a.itemsize for st in v.strides], off)), v


def _params():
    out = [pytest.param(k, dt, c, id=f"{k}-{dt}-{c}") for dt in emu.DTYPES for k in KINDS
           if k not in ("and", "or") and not (k in ("max", "min") and dt.startswith("complex"))
           for c in CASES]
    return out + [pytest.param(k, dt, c, id=f"{k}-{dt}-{c}") for dt in emu.BIT_DTYPES
                  for k in ("and", "or") for c in CASES]


@pytest.mark.parametrize("kind,dt,case", _params())
def test_reductions_match_numpy(s, kind, dt, case):
    shape, make, axes = CASES[case]
    t, v = device_view(s, sample(dt, shape, kind), make)
    check(kind, s.down(getattr(s, f"reduce_{kind}_read")(t, axes)), v, axes)


def test_every_path_is_taken(s):
    s.launched.clear()
    for case in ("all_1d", "cols", "flat_runs", "rows_short", "no_axes"):
        shape, make, axes = CASES[case]
        s.reduce_sum(device_view(s, sample("float32", shape), make)[0], axes)
    # the copy of the transposed view (no axes) is the storage family's tiled permutation
    assert {"tf::reduce_rows", "tf::reduce_cols", "tf::permute_tiled"} <= set(s.launched)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("case", ["rows_long", "cols", "all_3d"])
def test_nan_propagates(s, kind, case):
    shape, make, axes = CASES[case]
    a = sample("float32", shape, kind)
    a.reshape(-1)[a.size // 3] = np.nan
    t, v = device_view(s, a, make)
    got = s.down(getattr(s, f"reduce_{kind}")(t, axes))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(KINDS[kind](v, axis=axes)))


def test_empty_reductions_fill_identities(s):
    z = s.up(np.zeros((3, 0, 2), np.float32))
    np.testing.assert_array_equal(s.down(s.reduce_sum(z, (1,))), np.zeros((3, 2)))
    np.testing.assert_array_equal(s.down(s.reduce_prod(z, (1,))), np.ones((3, 2)))
    assert s.down(s.reduce_max(z, (0,))).shape == (0, 2)
    for dt, every in (("bool", True), ("int8", -1), ("uint8", 255), ("int64", -1)):
        e = s.up(np.zeros((0, 3), dt))
        np.testing.assert_array_equal(s.down(s.reduce_and(e, (0,))), np.full(3, every, dt))
        np.testing.assert_array_equal(s.down(s.reduce_or_read(e, (0, 1))), np.zeros((), dt))


def test_cached_calls_still_validate(s):
    t = s.up(np.ones((3, 4), np.float32))
    s.reduce_sum(t, (1,))
    s.reduce_sum(t, (1,))  # served from the call cache
    for bad in ((True,), (np.int64(1), 1), [1, 1]):
        with pytest.raises(ValidationError):
            s.reduce_sum(t, bad)
    np.testing.assert_array_equal(s.down(s.reduce_sum(t, [np.int64(1)])), np.full(3, 4.0))


def test_same_bits_every_run(s):
    t = s.up(sample("float32", (5, 4099), "sum", 3))
    for ax in ((1,), (0, 1), (0,)):
        runs = [s.down(s.reduce_sum(t, ax)).tobytes() for _ in range(3)]
        assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("dt", ["int8", "float32", "complex64"])
def test_unaligned_buffers(s, dt):
    a = sample(dt, (37, 24), "sum", 8)
    t = s.up(a, shift=np.dtype(dt).itemsize)  # like an adopted foreign buffer
    for axes in ((0,), (1,), (0, 1)):
        check("sum", s.down(s.reduce_sum(t, axes)), a, axes)


# --- no compiler needed: a recording context ---------------------------------------------
def test_validation_before_any_allocation_or_launch():
    s = emu.EmuSession()
    t = s.up(np.ones((3, 4), np.float32))
    before = s.ctx.home.allocations
    for op in ("reduce_sum", "reduce_sum_read", "reduce_max_read"):
        with pytest.raises(ValidationError) as err:
            getattr(s, op)(t, (2,))
        assert err.value.op == op
    with pytest.raises(ValidationError):
        s.reduce_min(s.up(np.ones((3, 0), np.float32)), (1,))  # nothing to reduce
    assert s.ctx.home.allocations == before + 1  # the upload above only
    assert s.launched == []


def test_input_of_another_context_is_not_resident():
    s, other = emu.EmuSession(), emu.EmuSession()
    with pytest.raises(RuntimeStateError) as err:
        s.reduce_prod_read(other.up(np.ones(4, np.float32)), (0,))
    assert err.value.op == "reduce_prod_read"
    assert s.launched == []


@pytest.mark.parametrize("regs,cc,per_sm", [(32, (9, 0), 8), (128, (9, 0), 2),
                                            (32, (8, 6), 6), (255, (8, 0), 1)])
def test_resident_blocks_from_registers(regs, cc, per_sm):
    ctx = emu.EmuContext(multiprocessor_count=5, compute_capability=cc)
    ctx.registers = regs
    ctx.runtime.identity.serial = ("occupancy test", regs, cc)  # a device of its own
    assert resident_blocks(ctx, "reduce", "tf::some_kernel<float>") == per_sm * 5
