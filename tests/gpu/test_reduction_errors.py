"""Every error path of the reductions and BLAS-1 ops on a device: the exception class (and
ValidationError kind), raised before anything is allocated (the pool's allocation count is
unchanged) or written (axpby's ``y`` keeps its contents)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.tensor import Tensor

V, U, R = tc.ValidationError, tc.UnsupportedDTypeError, tc.RuntimeStateError
HOST = Tensor.from_numpy(np.ones((2, 3), np.float32))
REDUCE = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_sum_read",
          "reduce_prod_read", "reduce_max_read", "reduce_min_read"]


def _arrays(s):
    return {
        "x": up(s, np.ones((2, 3, 4), np.float32)),
        "c": up(s, np.ones((3, 2), np.complex64)),
        "b": up(s, np.ones((3,), np.bool_)),
        "e": up(s, np.ones((3, 0), np.float32)),
        "r9": up(s, np.ones((1,) * 9, np.float32)),
        "i8": up(s, np.ones((2, 3), np.int8)),
    }


# (id, call(s, op, arrays), error, kind); ``op`` is each reduce_* method in turn
REDUCE_CASES = [
    ("axis-out-of-range", lambda s, f, a: f(a["x"], (3,)), V, "axis_out_of_bounds"),
    ("negative-axis", lambda s, f, a: f(a["x"], (-1,)), V, "axis_out_of_bounds"),
    ("duplicate-axes", lambda s, f, a: f(a["x"], (0, 2, 0)), V, "duplicate_axis"),
    ("axes-not-a-sequence", lambda s, f, a: f(a["x"], 1), V, "invalid_argument"),
    ("axes-not-ints", lambda s, f, a: f(a["x"], (0.0,)), V, "invalid_argument"),
    ("rank-9", lambda s, f, a: f(a["r9"], (0,)), V, "rank_mismatch"),
    ("bool", lambda s, f, a: f(a["b"], (0,)), U, None),
    ("host-tensor", lambda s, f, a: f(HOST, (0,)), R, None),
    ("host-view", lambda s, f, a: f(HOST.T, (0,)), R, None),
    ("host-array", lambda s, f, a: f(np.ones(3), (0,)), R, None),
    ("not-a-tensor", lambda s, f, a: f([1.0, 2.0, 3.0], (0,)), V, "invalid_argument"),
]
ORDERED_ONLY = [
    ("complex", lambda s, f, a: f(a["c"], (0,)), U, None),
    ("empty-axis", lambda s, f, a: f(a["e"], (1,)), V, "invalid_argument"),
    ("empty-all", lambda s, f, a: f(a["e"], (0, 1)), V, "invalid_argument"),
]


def _reduce_params():
    out = [pytest.param(op, c, id=f"{op}-{c[0]}") for op in REDUCE for c in REDUCE_CASES]
    out += [pytest.param(op, c, id=f"{op}-{c[0]}") for op in REDUCE
            if "max" in op or "min" in op for c in ORDERED_ONLY]
    return out


def _expect(s, call, error, kind):
    pool = s.runtime().pool
    before = pool.stats()["allocations"]
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error and info.value.op
    if kind is not None:
        assert info.value.kind == kind
    assert pool.stats()["allocations"] == before
    return info.value


@pytest.mark.parametrize("op,case", _reduce_params())
def test_reduce_errors(s, op, case):
    _, call, error, kind = case
    a = _arrays(s)
    err = _expect(s, lambda: call(s, getattr(s, op), a), error, kind)
    assert err.op == op


def test_sum_and_prod_of_empty_axes_are_not_errors(s):
    e = up(s, np.ones((3, 0), np.float32))
    np.testing.assert_array_equal(down(s, s.reduce_sum(e, (1,))), np.zeros(3, np.float32))
    np.testing.assert_array_equal(down(s, s.reduce_prod(e, (0, 1))), np.float32(1))


def test_reclaimed_input(s):
    t = up(s, np.ones((2, 2), np.float32))
    s.reclaim_buffer(t)
    with pytest.raises(R):
        s.reduce_sum(t, (0,))


def test_closed_session():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones((4,), np.float32))
        y = up(s, np.ones((4,), np.float32))
    for call in (lambda: s.reduce_sum(x, (0,)), lambda: s.reduce_max_read(x, ()),
                 lambda: s.vdot_read(x, y), lambda: s.norm_squared_read(x),
                 lambda: s.axpby_read_into_accum(1.0, x, 1.0, y)):
        with pytest.raises(R):
            call()


# --- BLAS-1 -------------------------------------------------------------------------------
def _blas_cases():
    return [
        ("vdot-dtype", lambda s, a: s.vdot_read(a["f"], a["d"]), V, "dtype_mismatch"),
        ("vdot-shape", lambda s, a: s.vdot_read(a["f"], a["f"][:2]), V, "shape_mismatch"),
        ("vdot-bool", lambda s, a: s.vdot_read(a["b"], a["b"]), U, None),
        ("vdot-host", lambda s, a: s.vdot_read(a["f"], HOST[0]), R, None),
        ("vdot-rank9", lambda s, a: s.vdot_read(a["r9"], a["r9"]), V, "rank_mismatch"),
        ("norm-bool", lambda s, a: s.norm_squared_read(a["b"]), U, None),
        ("norm-host", lambda s, a: s.norm_squared_read(HOST), R, None),
        ("axpby-dtype", lambda s, a: s.axpby_read_into_accum(1, a["d"], 1, a["y"]), V,
         "dtype_mismatch"),
        ("axpby-shape", lambda s, a: s.axpby_read_into_accum(1, a["f"][:2], 1, a["y"]), V,
         "shape_mismatch"),
        ("axpby-bool", lambda s, a: s.axpby_read_into_accum(1, a["b"], 1, a["b2"]), U, None),
        ("axpby-complex-alpha", lambda s, a: s.axpby_read_into_accum(1j, a["f"], 1, a["y"]),
         V, "invalid_argument"),
        ("axpby-overflow-beta", lambda s, a: s.axpby_read_into_accum(1, a["i"], 300,
                                                                      a["iy"]), V, "overflow"),
        ("axpby-fraction-int", lambda s, a: s.axpby_read_into_accum(0.5, a["i"], 1, a["iy"]),
         V, "invalid_argument"),
        ("axpby-alpha-str", lambda s, a: s.axpby_read_into_accum("2", a["f"], 1, a["y"]), V,
         "invalid_argument"),
        ("axpby-overlap", lambda s, a: s.axpby_read_into_accum(1, a["big"][1:4], 1,
                                                                a["big"][:3]), V,
         "invalid_argument"),
        ("axpby-same", lambda s, a: s.axpby_read_into_accum(1, a["y"], 1, a["y"]), V,
         "invalid_argument"),
        # another Tensor object over x's memory is x's memory (issue 13 item 5)
        ("axpby-reshape-alias", lambda s, a: s.axpby_read_into_accum(
            1, a["big"], 1, s.reshape(a["big"], (8,))), V, "invalid_argument"),
        ("axpby-shifted-alias", lambda s, a: s.axpby_read_into_accum(
            1, a["big"][1:4], 1, s.reshape(a["big"], (2, 4))[0, :3]), V, "invalid_argument"),
        ("axpby-broadcast-y", lambda s, a: s.axpby_read_into_accum(
            1, a["f"], 1, a["y"].view((3,), (0,), 0)), V, "invalid_argument"),
        ("axpby-host-y", lambda s, a: s.axpby_read_into_accum(1, a["f"], 1, HOST[0]), R,
         None),
    ]


@pytest.mark.parametrize("case", _blas_cases(), ids=[c[0] for c in _blas_cases()])
def test_blas1_errors(s, case):
    _, call, error, kind = case
    y0 = np.array([1.0, 2.0, 3.0], np.float32)
    big0 = np.arange(8, dtype=np.float32)
    a = {"f": up(s, np.ones(3, np.float32)), "d": up(s, np.ones(3, np.float64)),
         "b": up(s, np.ones(3, np.bool_)), "b2": up(s, np.ones(3, np.bool_)),
         "r9": up(s, np.ones((1,) * 9, np.float32)), "y": up(s, y0),
         "i": up(s, np.ones(3, np.int8)), "iy": up(s, np.ones(3, np.int8)),
         "big": up(s, big0)}
    _expect(s, lambda: call(s, a), error, kind)
    assert down(s, a["y"]).tobytes() == y0.tobytes()
    assert down(s, a["big"]).tobytes() == big0.tobytes()
