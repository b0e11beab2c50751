"""Elementwise kernels over every layout on the GPU: rank 0, 0-size, 1, odd sizes, both
sides of the small kernel's limit (engine.SMALL), 2^20 + 3, rank 6, transposed (plain and
tiled), negative strides, unaligned offsets, rank-0 broadcast, real scalar x complex, and
the four forms with strided outputs and elementwise_read_into; representative ops of each
arity and several dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_cast_ref import cast_ref
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import DType

D = DType


def _perm(t, p):
    return t.transpose(p) if isinstance(t, np.ndarray) else t.permute(p)


LAYOUTS = {
    # name: (base shape, view of the base (numpy array or device tensor))
    "rank0": ((), lambda t: t),
    "empty": ((0, 5), lambda t: t),
    "one": ((1,), lambda t: t),
    "odd": ((7, 13), lambda t: t),
    "2^20+3": ((2**20 + 3,), lambda t: t),
    "rank6": ((2, 3, 4, 3, 2, 5), lambda t: t),
    "transposed": ((9, 7), lambda t: t.T),
    "tiled": ((300, 170), lambda t: t.T),
    "tiled batch": ((4, 67, 45), lambda t: _perm(t, (0, 2, 1))),
    "negative": ((12, 11), lambda t: t[::-1, ::-2]),
    "unaligned": ((1001,), lambda t: t[1:1000]),
    "small limit": ((8192,), lambda t: t),  # the largest run of the small kernel
    "small limit + 1": ((8193,), lambda t: t),  # the smallest of the contiguous one
    "small, partial block": ((8191,), lambda t: t),
    "rank6 permuted": ((2, 3, 4, 3, 2, 5), lambda t: _perm(t, (5, 3, 1, 0, 2, 4))),
}
OPS = [("add", D.FLOAT32), ("mul", D.COMPLEX64), ("neg", D.INT8), ("select", D.BFLOAT16),
       ("exp", D.FLOAT16), ("compare_lt", D.INT64), ("clamp", D.FLOAT64), ("abs", D.COMPLEX128)]
CASES = [(op, d, lay) for op, d in OPS for lay in LAYOUTS]


def _call(s, key, *xs, suffix=""):
    if key.startswith("compare_"):
        return getattr(s, "compare" + suffix)(*xs, CompareDir[key[8:].upper()])
    return getattr(s, key + suffix)(*xs)


@pytest.mark.parametrize("key,dtype,layout", CASES,
                         ids=[f"{k}-{d.value}-{lay}" for k, d, lay in CASES])
def test_read(s, key, dtype, layout):
    shape, view = LAYOUTS[layout]
    arrays = inputs_for(np.random.default_rng(1), key, dtype.numpy, shape)
    xs = [view(up(s, a)) for a in arrays]
    want, _ = REF[key](*[view(a) for a in arrays])
    out = _call(s, key, *xs, suffix="_read")
    assert out.shape == want.shape and out.is_contiguous
    assert mismatch(down(s, out), want, tolerance(key, dtype.numpy)) is None


INTO = ["odd", "transposed", "tiled", "tiled batch", "negative", "unaligned", "rank6 permuted"]


@pytest.mark.parametrize("layout", INTO)
@pytest.mark.parametrize("form", ["_into", "_read_into"])
@pytest.mark.parametrize("key,dtype", [("sub", D.INT32), ("sign", D.FLOAT32),
                                       ("select", D.COMPLEX64)], ids=str)
def test_into_strided_output(s, key, dtype, layout, form):
    shape, view = LAYOUTS[layout]
    arrays = inputs_for(np.random.default_rng(2), key, dtype.numpy, shape)
    want, _ = REF[key](*[view(a) for a in arrays])
    base = up(s, np.full(shape, 3, dtype.numpy))
    out = view(base)
    inputs = [up(s, np.ascontiguousarray(view(a))) for a in arrays]  # compact inputs
    assert getattr(s, key + form)(*inputs, out) is None
    assert mismatch(down(s, out), want, tolerance(key, dtype.numpy)) is None
    untouched = np.full(shape, 3, dtype.numpy)  # outside the view nothing changed
    full = down(s, base)
    mask = np.ones(shape, bool)
    view(mask)[...] = False  # numpy views write through
    assert np.array_equal(full[mask], untouched[mask])


@pytest.mark.parametrize("which", [0, 1, 2])
def test_rank0_broadcast_each_slot(s, which):
    shape = (5, 33)
    x, lo, hi = inputs_for(np.random.default_rng(3), "clamp", np.float32, shape)
    arrays = [x, lo, hi]
    arrays[which] = np.array(arrays[which].ravel()[7], np.float32)
    got = down(s, s.clamp(*[up(s, a) for a in arrays]))
    want, _ = REF["clamp"](*[np.broadcast_to(a, shape) for a in arrays])
    assert mismatch(got, want, None) is None


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("cplx", [D.COMPLEX64, D.COMPLEX128], ids=str)
@pytest.mark.parametrize("scalar_first", [True, False])
def test_real_scalar_times_complex(s, op, cplx, scalar_first):
    z = inputs_for(np.random.default_rng(4), op, cplx.numpy, (6, 9))[0]
    r = np.array(-1.25, cplx.real.numpy)
    args = [r, z] if scalar_first else [z, r]
    got = down(s, getattr(s, op)(*[up(s, a) for a in args]))
    want, _ = REF[op](*[a.astype(cplx.numpy) for a in args])
    assert mismatch(got, want, tolerance(op, cplx.numpy)) is None


@pytest.mark.parametrize("rec,dtype", [
    (ElementwiseReadOp.ADD, D.FLOAT32), (ElementwiseReadOp.EXP, D.COMPLEX64),
    (ElementwiseReadOp.compare(CompareDir.GE), D.BFLOAT16), (ElementwiseReadOp.SELECT, D.INT64),
    (ElementwiseReadOp.REM, D.INT32), (ElementwiseReadOp.POW, D.FLOAT64),
    (ElementwiseReadOp.ABS, D.COMPLEX64), (ElementwiseReadOp.MINIMUM, D.BOOL)], ids=repr)
def test_elementwise_read_into(s, rec, dtype):
    key = rec.name if rec.direction is None else f"compare_{rec.direction.value}"
    arrays = inputs_for(np.random.default_rng(5), key, dtype.numpy, (40, 24))
    want, _ = REF[key](*[a.T for a in arrays])
    out = up(s, np.zeros(want.shape, want.dtype))
    s.elementwise_read_into(rec, [up(s, a).T for a in arrays], out)
    assert mismatch(down(s, out), want, tolerance(key, dtype.numpy)) is None


def test_large_cast_and_repeated_fast_path(s):
    a = np.random.default_rng(6).standard_normal(2**20 + 3).astype(np.float32)
    x = up(s, a)
    for _ in range(3):
        y = s.cast(x, D.BFLOAT16)
    assert mismatch(down(s, y), cast_ref(a, y.dtype.numpy), None) is None
    acc = up(s, np.zeros_like(a))
    for _ in range(4):
        s.add_into(x, x, acc)
    assert np.array_equal(down(s, acc), a + a)
