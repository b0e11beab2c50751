"""Every error path of reduce_and/or, argmax/argmin, the cumulative ops and sort on a
device: the exception class (and ValidationError kind), raised before anything is
allocated (the pool's allocation count is unchanged); residency and closed sessions."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import up

import tenferro_cuda as tc
from tenferro_cuda.tensor import Tensor

V, U, R = tc.ValidationError, tc.UnsupportedDTypeError, tc.RuntimeStateError
HOST = Tensor.from_numpy(np.ones((2, 3), np.float32))
BITS = ["reduce_and", "reduce_or", "reduce_and_read", "reduce_or_read"]
ARG = ["argmax", "argmin", "argmax_read", "argmin_read"]
SCAN = ["cumsum", "cumprod", "cummax", "cummin", "cumsum_read", "cumprod_read",
        "cummax_read", "cummin_read"]
SORT = ["sort", "sort_read", "sort_with_indices", "sort_with_indices_read"]


def _arrays(s):
    return {"f": up(s, np.ones((2, 3, 4), np.float32)), "b": up(s, np.ones((3, 2), np.bool_)),
            "c": up(s, np.ones((3, 2), np.complex64)), "e": up(s, np.ones((3, 0), np.float32)),
            "r9": up(s, np.ones((1,) * 9, np.float32)), "r0": up(s, np.float32(1)),
            "i": up(s, np.ones((3, 4), np.int32))}


COMMON = [  # (id, call(method, arrays), error, kind) for the single-axis ops
    ("axis-too-big", lambda f, a: f(a["f"], 3), V, "axis_out_of_bounds"),
    ("axis-too-negative", lambda f, a: f(a["f"], -4), V, "axis_out_of_bounds"),
    ("axis-float", lambda f, a: f(a["f"], 1.0), V, "invalid_argument"),
    ("axis-bool", lambda f, a: f(a["f"], True), V, "invalid_argument"),
    ("axis-tuple", lambda f, a: f(a["f"], (0,)), V, "invalid_argument"),
    ("rank0", lambda f, a: f(a["r0"], 0), V, "axis_out_of_bounds"),
    ("rank9", lambda f, a: f(a["r9"], 0), V, "rank_mismatch"),
    ("host-tensor", lambda f, a: f(HOST, 0), R, None),
    ("host-view", lambda f, a: f(HOST.T, 0), R, None),
    ("host-array", lambda f, a: f(np.ones(3), 0), R, None),
    ("not-a-tensor", lambda f, a: f([1.0, 2.0, 3.0], 0), V, "invalid_argument"),
]
PER_FAMILY = {
    "bits": [
        ("float", lambda f, a: f(a["f"], (0,)), U, None),
        ("complex", lambda f, a: f(a["c"], (0,)), U, None),
        ("axis-out-of-range", lambda f, a: f(a["i"], (2,)), V, "axis_out_of_bounds"),
        ("duplicate-axes", lambda f, a: f(a["i"], (1, 1)), V, "duplicate_axis"),
        ("axes-not-a-sequence", lambda f, a: f(a["i"], 1), V, "invalid_argument"),
        ("host-tensor", lambda f, a: f(Tensor.from_numpy(np.ones(3, np.bool_)), (0,)), R,
         None),
    ],
    "arg": COMMON + [("empty-axis", lambda f, a: f(a["e"], 1), V, "invalid_argument"),
                     ("complex", lambda f, a: f(a["c"], 0), U, None)],
    "scan": COMMON + [("bool", lambda f, a: f(a["b"], 0), U, None),
                      ("reverse-int", lambda f, a: f(a["f"], 0, 1), V, "invalid_argument")],
    "sort": COMMON + [("descending-str", lambda f, a: f(a["f"], 0, "yes"), V,
                       "invalid_argument"), ("complex", lambda f, a: f(a["c"], 0), U, None)],
}
METHODS = {"bits": BITS, "arg": ARG, "scan": SCAN, "sort": SORT}


def _params():
    out = []
    for fam, methods in METHODS.items():
        out += [pytest.param(op, c, id=f"{op}-{c[0]}") for op in methods
                for c in PER_FAMILY[fam]]
    out += [pytest.param(op, ("complex", lambda f, a: f(a["c"], 0), U, None),
                         id=f"{op}-complex") for op in ("cummax", "cummin", "cummax_read")]
    return out


@pytest.mark.parametrize("op,case", _params())
def test_errors(s, op, case):
    _, call, error, kind = case
    a = _arrays(s)
    pool = s.runtime().pool
    before = pool.stats()["allocations"]
    with pytest.raises(error) as info:
        call(getattr(s, op), a)
    assert type(info.value) is error and info.value.op == op
    if kind is not None:
        assert info.value.kind == kind
    assert pool.stats()["allocations"] == before


def test_valid_edge_cases_are_not_errors(s):
    e = up(s, np.ones((3, 0), np.float32))
    assert s.cumsum(e, 1).shape == (3, 0)
    assert s.sort(e, 1).shape == (3, 0)
    assert s.argmax(e, 0).shape == (0,)  # the axis is not empty: an empty result
    values, indices = s.sort_with_indices(e, -1)
    assert values.shape == indices.shape == (3, 0) and indices.dtype is tc.DType.INT64


def test_reclaimed_input(s):
    t = up(s, np.ones((2, 2), np.float32))
    s.reclaim_buffer(t)
    for call in (lambda: s.argmax(t, 0), lambda: s.cumsum(t, 0), lambda: s.sort(t)):
        with pytest.raises(R):
            call()


def test_closed_session():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones((4,), np.float32))
        b = up(s, np.ones((4,), np.bool_))
    for call in (lambda: s.reduce_and(b, (0,)), lambda: s.argmin_read(x, 0),
                 lambda: s.cummax(x, 0), lambda: s.sort_with_indices(x)):
        with pytest.raises(R):
            call()
