"""Error paths of the elementwise, analytic and cast methods on the GPU: for each op, a
dtype mismatch, a shape mismatch, a host tensor, a tensor of a foreign runtime, an output
overlapping an input and a closed session raise the documented exception, and the output
(downloaded before and after) is unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.errors import (
    RuntimeStateError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.runtime import CudaRuntime
from tenferro_cuda.tensor import Tensor

# method -> (number of inputs, extra trailing args before out, takes out)
METHODS = {
    "add": (2, (), False), "sub_read": (2, (), False), "mul_into": (2, (), True),
    "div_read_into": (2, (), True), "rem": (2, (), False), "maximum_into": (2, (), True),
    "minimum_read": (2, (), False), "neg_into": (1, (), True), "conj_read": (1, (), False),
    "abs_read_into": (1, (), True), "sign": (1, (), False),
    "compare_into": (2, (CompareDir.LE,), True), "select_read_into": (3, (), True),
    "clamp": (3, (), False), "exp": (1, (), False), "pow_read": (2, (), False),
    "elementwise_read_into": (2, (), True),
}
ERRORS = ["dtype", "shape", "host", "foreign", "overlap"]
CASES = [(m, e) for m in METHODS for e in ERRORS
         if not (e == "overlap" and not METHODS[m][2])
         and not (e in ("dtype", "shape") and METHODS[m][0] == 1 and not METHODS[m][2])]
EXPECT = {"dtype": ValidationError, "shape": ValidationError, "host": RuntimeStateError,
          "foreign": RuntimeStateError, "overlap": ValidationError}


@pytest.fixture(scope="module")
def foreign_runtime():
    rt2 = CudaRuntime.create_separate(0)
    yield rt2
    rt2.close()


def _foreign(rt2, dtype, shape):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = rt2.pool.alloc(n, rt2.exec_context().stream)
    return Tensor._make(tc.DType.of(dtype), tuple(shape), buffer=buf)


def _inputs(s, method, n):
    rng = np.random.default_rng(0)
    xs = [up(s, (rng.random((4, 5)) + 0.5).astype(np.float32)) for _ in range(n)]
    if method.startswith("select"):
        xs[0] = up(s, rng.random((4, 5)) < 0.5)
    return xs


def _invoke(s, method, xs, extra, out):
    if method == "elementwise_read_into":
        return s.elementwise_read_into(ElementwiseReadOp.ADD, xs, out)
    return getattr(s, method)(*xs, *extra, *([out] if out is not None else []))


@pytest.mark.parametrize("method,err", CASES, ids=[f"{m}-{e}" for m, e in CASES])
def test_error_leaves_output_unchanged(s, request, method, err):
    n, extra, takes_out = METHODS[method]
    xs = _inputs(s, method, n)
    out_dtype = np.bool_ if method.startswith("compare") else np.float32
    out = up(s, np.full((4, 5), 3, out_dtype)) if takes_out else None
    k = n - 1
    if err == "dtype":
        xs[k] = up(s, np.ones((4, 5), np.float64))
    elif err == "shape":
        xs[k] = up(s, np.ones((5, 4), np.float32))
    elif err == "host":
        xs[k] = Tensor.from_numpy(np.ones((4, 5), np.float32))
    elif err == "foreign":
        xs[k] = _foreign(request.getfixturevalue("foreign_runtime"), np.float32, (4, 5))
    elif err == "overlap":
        if method.startswith("compare"):
            xs = [up(s, np.ones((4, 5), bool)) for _ in xs]
        out = xs[k].view((4, 5), (1, 4))  # the input's memory in another order
    before = down(s, out) if out is not None else None
    with pytest.raises(EXPECT[err]) as info:
        _invoke(s, method, xs, extra, out)
    assert info.value.op == method
    if before is not None:
        assert np.array_equal(down(s, out), before)


@pytest.mark.parametrize("method", ["add_into", "exp", "cast", "select", "compare"])
def test_closed_session(method):
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones((3, 3), np.float32))
        out = up(s, np.full((3, 3), 5, np.float32))
        s.synchronize()
    calls = {
        "add_into": lambda: s.add_into(x, x, out), "exp": lambda: s.exp(x),
        "cast": lambda: s.cast(x, tc.float64),
        "select": lambda: s.select(x, x, x), "compare": lambda: s.compare(x, x, CompareDir.EQ),
    }
    with pytest.raises(RuntimeStateError):
        calls[method]()
    with tc.cuda_exec_session(0) as s2:
        assert np.array_equal(down(s2, out), np.full((3, 3), 5, np.float32))


def test_partial_overlap_is_rejected(s):
    base = up(s, np.arange(20, dtype=np.float32))
    before = down(s, base)
    with pytest.raises(ValidationError):
        s.add_into(base[0:10], base[10:20], base[5:15])
    with pytest.raises(ValidationError):
        s.neg_read_into(base[::2], base[1::2])  # interleaved spans overlap (conservative)
    assert np.array_equal(down(s, base), before)
    s.add_into(base[0:5], base[5:10], base[10:15])  # disjoint spans are fine
    assert np.array_equal(down(s, base)[10:15], before[0:5] + before[5:10])


@pytest.mark.parametrize("op", ["add", "maximum", "compare"])
def test_unsupported_dtypes(s, op):
    b = up(s, np.array([True, False]))
    c = up(s, np.array([1 + 1j, 2], np.complex64))
    if op == "add":
        with pytest.raises(UnsupportedDTypeError):
            s.add(b, b)
    elif op == "maximum":
        with pytest.raises(UnsupportedDTypeError):
            s.maximum(c, c)
    else:
        with pytest.raises(UnsupportedDTypeError):
            s.compare(c, c, CompareDir.LT)
        assert down(s, s.compare(c, c, CompareDir.EQ)).tolist() == [True, True]


def test_empty_tensors_validated_then_no_launch(s):
    e = up(s, np.zeros((0, 3), np.float32))
    assert s.add(e, e).shape == (0, 3)
    with pytest.raises(ValidationError):
        s.add(e, up(s, np.zeros((3, 0), np.float32)))
    with pytest.raises(ValidationError):
        s.add(e, up(s, np.zeros((0, 3), np.float64)))
