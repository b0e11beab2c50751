"""reduce_and / reduce_or on the GPU against numpy (``np.all``/``np.any`` on bool,
``np.bitwise_and/or.reduce`` on integers): every dtype x shape class (rank 0-6, zero-size
axes, split passes, transposed / negative-stride / sliced views; no, one, several and all
axes), INT_MIN/INT_MAX and all-ones words, the identities of empty reductions, the same
bits every run."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_reduction import CASES, ident

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def sample(dt: str, shape, kind: str, seed: int = 0) -> np.ndarray:
    """Mostly set bits for and, mostly clear for or, so that results vary; INT_MIN,
    INT_MAX, 0 and all-ones words among them."""
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    p = 0.97 if kind == "and" else 0.03
    if d.kind == "b":
        return rng.random(shape) < p
    nbits = 8 * d.itemsize
    bits = rng.random((*shape, nbits)) < p
    words = (bits.astype(np.uint64) << np.arange(nbits, dtype=np.uint64)).sum(
        axis=-1, dtype=np.uint64).astype(f"u{d.itemsize}").view(d)
    info = np.iinfo(d)
    flat = words.reshape(-1)
    flat[::7] = info.min
    flat[3::11] = info.max
    flat[5::13] = -1 if d.kind == "i" else info.max
    return words


def reference(kind: str, v: np.ndarray, axes) -> np.ndarray:
    if v.dtype.kind == "b":
        return np.asarray((np.all if kind == "and" else np.any)(v, axis=axes))
    return np.asarray((np.bitwise_and if kind == "and" else np.bitwise_or).reduce(v, axis=axes))


def _params():
    return [pytest.param(k, dt, c, id=f"{k}-{dt}-{c}") for k in ("and", "or") for dt in DTYPES
            for c in CASES]


@pytest.mark.parametrize("kind,dt,case", _params())
def test_matches_numpy(s, kind, dt, case):
    shape, make, axes = CASES[case]
    a = sample(dt, shape, kind)
    v, tv = make(a), make(up(s, a))
    fn = getattr(s, f"reduce_{kind}" + ("" if make is ident else "_read"))
    got = down(s, fn(tv, axes))
    want = reference(kind, v, axes)
    assert got.dtype == v.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt,every", [("bool", True), ("int8", -1), ("uint8", 255),
                                      ("int16", -1), ("uint16", 65535), ("int32", -1),
                                      ("uint32", 2**32 - 1), ("int64", -1),
                                      ("uint64", 2**64 - 1)])
def test_empty_reductions_give_the_identities(s, dt, every):
    e = up(s, np.zeros((3, 0), dt))
    np.testing.assert_array_equal(down(s, s.reduce_and(e, (1,))), np.full(3, every, dt))
    np.testing.assert_array_equal(down(s, s.reduce_or(e, (1,))), np.zeros(3, dt))
    assert down(s, s.reduce_and(e, (0,))).shape == (0,)


def test_long_bool_rows_split_and_agree(s):
    a = np.ones((3, 1 << 22), np.bool_)
    a[1, -1] = False  # the last element of a long row decides it
    a[2, 12345] = False
    t = up(s, a)
    np.testing.assert_array_equal(down(s, s.reduce_and(t, (1,))), [True, False, False])
    np.testing.assert_array_equal(down(s, s.reduce_or(t, (0, 1))), True)
    runs = [down(s, s.reduce_or(up(s, ~a), (1,))).tobytes() for _ in range(2)]
    assert runs[0] == runs[1] == np.array([False, True, True]).tobytes()
