"""Elementwise ops on the GPU against the numpy reference (test_elementwise_ref.py): every
op x every dtype it accepts on random data and on all pairs of special values (NaN, +-inf,
-0.0, integer min/max, subnormals), bit-exact where the contract says so (integer ops,
+ - * / of real floats incl. half/bfloat16, comparisons, max/min, select, clamp, sign),
and the deferred device errors of integer div/rem."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from stablehlo_ref import TRANSCENDENTAL
from test_elementwise_ref import REF, inputs_for, mismatch, pairs, specials, tolerance

import tenferro_cuda as tc
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.shapes.elementwise import KINDS

D = DType
ANALYTIC = {"exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1", "log1p", "pow",
            *TRANSCENDENTAL}  # the last four: test_elementwise_stablehlo.py
CASES = [(k, d) for k in KINDS if k not in ANALYTIC for d in ALL_DTYPES
         if KINDS[k].instantiable(d)]
IDS = [f"{k}-{d.value}" for k, d in CASES]


def call(s, key, *tensors):
    kind = KINDS[key]
    if kind.direction is not None:
        return s.compare(*tensors, kind.direction)
    return getattr(s, kind.name)(*tensors)


def special_operands(key: str, dtype: DType, every_triple: bool = False) -> list[np.ndarray]:
    """Edge-value operands of ``key``: every pair (binary), every triple of a subset (of
    all of them with ``every_triple``)."""
    vals = specials(dtype.numpy)
    arity = KINDS[key].arity
    if arity == 1:
        return [vals]
    if key == "select":
        a, b = pairs(vals)
        return [np.arange(a.size) % 3 == 0, a, b]
    if key == "clamp":
        sub = vals if every_triple else vals[:: max(1, vals.size // 8)]
        x, lo, hi = (g.reshape(-1) for g in np.meshgrid(sub, sub, sub, indexing="ij"))
        return [x, lo, hi]
    a, b = pairs(vals)
    if key in ("div", "rem") and dtype.is_integer:
        keep = b != 0
        a, b = a[keep], b[keep]
    return [a, b]


@pytest.mark.parametrize("key,dtype", CASES, ids=IDS)
def test_random(s, key, dtype):
    arrays = inputs_for(np.random.default_rng(11), key, dtype.numpy, (37, 29))
    got = down(s, call(s, key, *[up(s, a) for a in arrays]))
    want, _ = REF[key](*arrays)
    assert mismatch(got, want, tolerance(key, dtype.numpy)) is None


@pytest.mark.parametrize("key,dtype", CASES, ids=IDS)
def test_special_values(s, key, dtype):
    arrays = special_operands(key, dtype)
    got = down(s, call(s, key, *[up(s, a) for a in arrays]))
    want, _ = REF[key](*arrays)
    assert mismatch(got, want, tolerance(key, dtype.numpy)) is None


INTS = [d for d in ALL_DTYPES if d.is_integer]


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_division_edges(s, dtype):
    info = np.iinfo(dtype.numpy)
    a = np.array([info.min, info.min, info.max, 7, -7 if info.min else 7, 0], dtype.numpy)
    b = np.array([-1 if info.min else 1, 1, -1 if info.min else 3, -2 if info.min else 2, 2,
                  5], dtype.numpy)
    x, y = up(s, a), up(s, b)
    for op in ("div", "rem"):
        want, err = REF[op](a, b)
        assert not err and np.array_equal(down(s, getattr(s, op)(x, y)), want)
    if info.min:
        assert down(s, s.div(x, y))[0] == info.min  # INT_MIN / -1 wraps
        assert down(s, s.rem(x, y))[0] == 0


@pytest.mark.parametrize("op", ["div", "rem", "div_read", "rem_read"])
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_division_by_zero_is_deferred(s, op, dtype):
    a = up(s, np.array([4, 5, 6], dtype.numpy))
    b = up(s, np.array([2, 0, 3], dtype.numpy))
    out = getattr(s, op)(a, b)  # enqueues; never raises here
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and info.value.op == op
    assert "division by zero" in str(info.value)
    s.synchronize()  # the error word was cleared
    want, _ = REF[op.split("_")[0]](np.array([4, 5, 6], dtype.numpy),
                                    np.array([2, 0, 3], dtype.numpy))
    assert np.array_equal(down(s, out), want)


def test_first_deferred_error_wins(s):
    z = up(s, np.zeros(4, np.int32))
    s.rem_into(z, z, up(s, np.ones(4, np.int32)))
    s.div(z, z)
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.op == "rem_into"


def test_float_division_by_zero_is_not_an_error(s):
    x = up(s, np.array([1.0, -1.0, 0.0], np.float32))
    got = down(s, s.div(x, up(s, np.zeros(3, np.float32))))
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


def test_a_deferred_error_after_a_clean_synchronize_still_surfaces(s):
    """synchronize skips reading the error word when no fallible kernel ran since the
    last read; one that ran after a clean synchronize is still reported, once."""
    a = up(s, np.array([1, 2], np.int32))
    z = up(s, np.array([1, 0], np.int32))
    f = up(s, np.ones(2, np.float32))
    s.div(a, a)
    s.synchronize()  # read: clean
    s.add(f, f)
    s.synchronize()  # nothing fallible since: not read
    s.rem(a, z)
    s.mul(f, f)
    with pytest.raises(ValidationError, match="division by zero") as info:
        s.synchronize()
    assert info.value.op == "rem"
    s.add(f, f)
    s.synchronize()


def test_deferred_errors_stay_on_their_own_thread(s):
    """Each thread's session has its own error word: an error raised by a kernel of one
    thread's session surfaces at that session's synchronize only."""
    import threading

    errors: list = []

    def other() -> None:
        with tc.cuda_exec_session(0) as t:
            x = t.upload_host_tensor(np.array([1, 2], np.int32))
            t.div(x, t.upload_host_tensor(np.array([0, 1], np.int32)))
            try:
                t.synchronize()
            except ValidationError as exc:
                errors.append(exc.op)

    a = up(s, np.array([1, 2], np.int32))
    s.div(a, a)
    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert errors == ["div"]
    s.synchronize()  # ours is clean
