"""Bad input never crashes and never faults the GPU (property-based).

Hypothesis draws random shapes, dtypes, views and configs, many of them invalid. Every
call must either match the numpy reference or raise one of tenferro_cuda's typed errors,
and the session must keep working afterwards. ``test_zz_report`` prints the number of
examples each family ran (run with ``-s`` to see it).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from gpu_util import down, up
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenferro_cuda as tc

EXAMPLES = collections.Counter()
OUTCOMES = collections.Counter()
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
DTYPES = [np.float32, np.float64, np.int32, np.int8, np.complex64]
shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)
dtypes = st.sampled_from(DTYPES)


def values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5, 6, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def maybe_view(s, arr, flip: bool):
    t = up(s, arr)
    if flip and arr.ndim:
        return t[..., ::-1], arr[..., ::-1]
    return t, arr


def attempt(family, s, call, reference, rtol=1e-5):
    """Run ``call``; a typed error is fine, anything else must equal ``reference()``."""
    EXAMPLES[family] += 1
    try:
        got = call()
    except (tc.ValidationError, tc.UnsupportedDTypeError, tc.UnsupportedError,
            tc.UnsupportedDTypeConversionError) as exc:
        OUTCOMES[family, type(exc).__name__] += 1
        return
    OUTCOMES[family, "ok"] += 1
    want = np.asarray(reference())
    value = down(s, got)
    assert value.shape == want.shape
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(value, want, rtol=rtol, atol=1e-5)
    else:
        np.testing.assert_array_equal(value, want)


def still_works(s):
    x = up(s, np.arange(4, dtype=np.float32))
    assert down(s, s.add(x, x)).tolist() == [0.0, 2.0, 4.0, 6.0]
    s.synchronize()


@SETTINGS
@given(sa=shapes, sb=shapes, da=dtypes, db=dtypes, op=st.sampled_from(
    ["add", "sub", "mul", "maximum", "minimum"]), flip=st.booleans(), seed=st.integers(0, 99))
def test_binary_elementwise(s, sa, sb, da, db, op, flip, seed):
    rng = np.random.default_rng(seed)
    a, b = values(rng, sa, da), values(rng, sb, db)
    if np.dtype(da).kind == "c" and op in ("maximum", "minimum"):
        a = a.real.astype(np.float32)
    x, a = maybe_view(s, a, flip)
    y = up(s, b)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum}[op]
    with np.errstate(over="ignore"):
        attempt("elementwise", s, lambda: getattr(s, op)(x, y), lambda: ref(a, b))
    still_works(s)


@SETTINGS
@given(shape=shapes, dtype=dtypes, op=st.sampled_from(["exp", "sin", "tanh", "sqrt"]),
       seed=st.integers(0, 99))
def test_analytic(s, shape, dtype, op, seed):
    a = values(np.random.default_rng(seed), shape, dtype)
    if op == "sqrt" and np.dtype(dtype).kind == "f":
        a = np.abs(a)
    with np.errstate(all="ignore"):
        attempt("analytic", s, lambda: getattr(s, op)(up(s, a)), lambda: getattr(np, op)(a),
                rtol=1e-4)
    still_works(s)


@SETTINGS
@given(shape=shapes, dtype=st.sampled_from([np.float64, np.int32]),
       axes=st.lists(st.integers(-1, 4), max_size=4), seed=st.integers(0, 99))
def test_reduce_sum(s, shape, dtype, axes, seed):
    a = values(np.random.default_rng(seed), shape, dtype)
    attempt("reduction", s, lambda: s.reduce_sum(up(s, a), axes),
            lambda: np.sum(a, axis=tuple(axes), dtype=a.dtype))
    still_works(s)


@SETTINGS
@given(shape=shapes, perm=st.lists(st.integers(-1, 4), max_size=5),
       target=st.lists(st.integers(0, 6), max_size=4), seed=st.integers(0, 99))
def test_structural(s, shape, perm, target, seed):
    a = values(np.random.default_rng(seed), shape, np.float32)
    attempt("structural", s, lambda: s.transpose(up(s, a), perm),
            lambda: np.transpose(a, perm))
    attempt("structural", s, lambda: s.reshape(up(s, a), target),
            lambda: np.reshape(a, target))
    still_works(s)


@SETTINGS
@given(shape=shapes, starts=st.lists(st.integers(0, 6), max_size=4),
       limits=st.lists(st.integers(0, 6), max_size=4), axis=st.integers(-1, 4),
       seed=st.integers(0, 99))
def test_indexing(s, shape, starts, limits, axis, seed):
    a = values(np.random.default_rng(seed), shape, np.float32)

    def sliced():
        return s.slice(up(s, a), tc.SliceConfig(starts, limits))

    def ref_slice():
        return a[tuple(slice(b, e) for b, e in zip(starts, limits))]

    attempt("indexing", s, sliced, ref_slice)
    attempt("indexing", s, lambda: s.concatenate([up(s, a), up(s, a)], axis),
            lambda: np.concatenate([a, a], axis))
    still_works(s)


@SETTINGS
@given(sa=shapes, sb=shapes, lc=st.lists(st.integers(-1, 3), max_size=2),
       rc=st.lists(st.integers(-1, 3), max_size=2), dtype=st.sampled_from(
           [np.float64, np.complex64, np.int32]), seed=st.integers(0, 99))
def test_dot_general(s, sa, sb, lc, rc, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = values(rng, sa, dtype), values(rng, sb, dtype)

    def call():
        return s.dot_general(up(s, a), up(s, b), tc.DotGeneralConfig(lc, rc))

    attempt("dot", s, call, lambda: np.tensordot(a, b, (lc, rc)), rtol=1e-4)
    still_works(s)


def test_zz_report():
    lines = [f"{family}: {n} examples" for family, n in sorted(EXAMPLES.items())]
    outcomes = [f"{f}/{kind}: {n}" for (f, kind), n in sorted(OUTCOMES.items())]
    print("\nfuzz examples per family:", "; ".join(lines))
    print("fuzz outcomes:", "; ".join(outcomes))
    assert EXAMPLES and all(n > 0 for n in EXAMPLES.values())


pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
