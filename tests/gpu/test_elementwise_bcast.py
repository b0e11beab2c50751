"""Elementwise ops with an operand broadcast through a stride-0 view (the broadcast-rows
kernel, ``tf::ew_bcast``): a bias row, a column, a scalar, a middle axis, a leading
axis, with odd sizes and misaligned offsets (the scalar path), slices and reversed rows
(unit-stride rows that are not compact), outputs that are views, in place; against
numpy, over representative ops of each arity and several dtypes. The table and
``run_case`` serve the CPU tier's emulated run too (tests/cpu/test_elementwise_bcast_
emulated.py), which also checks the path and vector claims of every launch."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance

from tenferro_cuda.dtypes import DType
from tenferro_cuda.tensor import TensorView

D = DType

LAYOUTS = {
    # name: (logical shape, broadcast operand (base shape, strides, offset), the path, whether
    #        float32 operands move in 16-byte vectors on it; the small path has none)
    "row": ((32, 64), ((64,), (0, 1), 0), "bcast", True),
    "row odd": ((7, 13), ((13,), (0, 1), 0), "bcast", False),
    "row misaligned": ((8, 64), ((65,), (0, 1), 1), "bcast", False),
    "column": ((32, 64), ((32,), (1, 0), 0), "bcast", True),
    "column odd": ((9, 7), ((9,), (1, 0), 0), "bcast", False),
    "scalar": ((16, 64), ((1,), (0, 0), 0), "small", False),  # a short compact run
    "scalar offset": ((5, 7), ((3,), (0, 0), 2), "small", False),  # read once: any address
    "scalar, long": ((96, 128), ((1,), (0, 0), 0), "contig", True),
    "middle": ((4, 8, 16), ((4, 16), (16, 0, 1), 0), "bcast", True),
    "middle odd": ((3, 5, 7), ((3, 7), (7, 0, 1), 0), "bcast", False),
    "leading": ((4, 8, 16), ((8, 16), (0, 16, 1), 0), "bcast", True),
    "inner of 3": ((5, 6, 8), ((5, 6), (6, 1, 0), 0), "bcast", True),
    "slice rows": ((8, 64), ((8, 72), (72, 1), 4), "bcast", True),
    "slice rows unaligned": ((8, 64), ((8, 70), (70, 1), 2), "bcast", False),
    "reversed rows": ((8, 64), ((8, 64), (-64, 1), 7 * 64), "bcast", True),
    "rows of 2^16+3": ((3, 2**16 + 3), ((2**16 + 3,), (0, 1), 0), "bcast", False),
}
# (op key, dtype, slot of the broadcast operand)
OPS = [("add", D.FLOAT32, 1), ("add", D.FLOAT16, 0), ("add", D.BFLOAT16, 1),
       ("sub", D.INT64, 1), ("mul", D.COMPLEX64, 0), ("add", D.COMPLEX128, 1),
       ("maximum", D.INT8, 1), ("select", D.FLOAT32, 0), ("select", D.FLOAT64, 2),
       ("clamp", D.INT32, 1), ("compare_lt", D.FLOAT32, 1), ("exp", D.FLOAT32, 0)]
CASES = [(key, dtype, slot, lay) for key, dtype, slot in OPS for lay in LAYOUTS]
IDS = [f"{k}-{d.value}-slot{i}-{lay}" for k, d, i, lay in CASES]


def logical(base: np.ndarray, shape, strides, offset: int) -> np.ndarray:
    """The values a view (shape, element strides, offset) of ``base`` addresses."""
    idx = np.full(shape, offset, np.int64)
    for axis, (n, st) in enumerate(zip(shape, strides)):
        idx = idx + (np.arange(n) * st).reshape([-1 if a == axis else 1
                                                 for a in range(len(shape))])
    return base.reshape(-1)[idx]


def call(s, key, *xs, suffix=""):
    if key.startswith("compare_"):
        from tenferro_cuda.configs.elementwise import CompareDir

        return getattr(s, "compare" + suffix)(*xs, CompareDir[key[8:].upper()])
    return getattr(s, key + suffix)(*xs)


def operands(s, put, key, dtype, slot, layout, seed=1):
    """(device operands with the broadcast view in ``slot``, numpy logical values)."""
    shape, (bshape, strides, offset), _, _ = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    arrays = inputs_for(rng, key, dtype.numpy, shape)
    base = inputs_for(rng, key, dtype.numpy, bshape)[slot]
    xs = [put(s, a) for a in arrays]
    xs[slot] = TensorView(put(s, base), shape, strides, offset)
    arrays[slot] = logical(base, shape, strides, offset)
    return xs, arrays


def run_case(s, put, get, key, dtype, slot, layout):
    """``op_read`` over the broadcast operands: (got, want, tolerance)."""
    xs, arrays = operands(s, put, key, dtype, slot, layout)
    want, _ = REF[key](*arrays)
    out = call(s, key, *xs, suffix="_read")
    assert out.shape == want.shape and out.is_contiguous
    return get(s, out), want, tolerance(key, dtype.numpy)


@pytest.mark.parametrize("key,dtype,slot,layout", CASES, ids=IDS)
def test_broadcast_view(s, key, dtype, slot, layout):
    got, want, tol = run_case(s, up, down, key, dtype, slot, layout)
    assert mismatch(got, want, tol) is None


def run_into(s, put, get, layout: str, in_place: bool):
    """``add_into`` of a float32 bias view into a padded output view (rows 8 elements
    longer than the shape: stride-1 rows that are not compact), or in place into ``x``."""
    shape, (bshape, strides, offset), _, _ = LAYOUTS[layout]
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    bias = rng.standard_normal(bshape).astype(np.float32)
    want = x + logical(bias, shape, strides, offset)
    view = TensorView(put(s, bias), shape, strides, offset)
    dx = put(s, x)
    if in_place:
        s.add_into(dx, view, dx)
        return get(s, dx), want, None
    padded = (*shape[:-1], shape[-1] + 8)
    base = put(s, np.full(padded, 3, np.float32))
    out = base[..., 4:4 + shape[-1]]
    s.add_into(dx, view, out)
    full = get(s, base)
    assert (full[..., :4] == 3).all() and (full[..., 4 + shape[-1]:] == 3).all()
    return get(s, out), want, None


@pytest.mark.parametrize("layout", ["row", "row odd", "column", "middle", "leading"])
@pytest.mark.parametrize("in_place", [False, True], ids=["padded out", "in place"])
def test_into_outputs(s, layout, in_place):
    got, want, tol = run_into(s, up, down, layout, in_place)
    assert mismatch(got, want, tol) is None


def test_large_bias_row(s):
    """A bias row over 4097 x 4099 float32 (odd rows: the scalar path) and over
    2048 x 4096 (vectors), against numpy."""
    rng = np.random.default_rng(8)
    for rows, cols in ((4097, 4099), (2048, 4096)):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        b = rng.standard_normal(cols).astype(np.float32)
        got = down(s, s.add(up(s, x), TensorView(up(s, b), (rows, cols), (0, 1), 0)))
        assert np.array_equal(got, x + b)
