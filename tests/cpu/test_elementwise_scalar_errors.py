"""Scalar operands that are refused, on the emulated device: a kind the tensor's dtype does
not take, a value out of range, no tensor operand, values that are not scalars, unary ops.
Each error is the typed one with its kind, names the method and the operand, and comes
before anything is launched or allocated (the output untouched) -- also when an earlier
call armed the fast path of the same op and dtype."""

from __future__ import annotations

import numpy as np
import pytest
from test_elementwise_emu import emulated_session, get, put

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.tensor import Tensor

D = DType
EQ, LT = CompareDir.EQ, CompareDir.LT
CASES = {
    # id: (method, operands (a DType stands for a (3, 4) tensor of it), error, kind, says)
    "float-with-int": ("add", (D.INT32, 1.5), ValidationError, "dtype_mismatch", "rhs=1.5"),
    "integral-float-with-int": ("sub", (2.0, D.INT8), ValidationError, "dtype_mismatch",
                                "lhs=2.0"),
    "numpy-float-with-int": ("mul", (D.INT64, np.float32(2)), ValidationError,
                             "dtype_mismatch", "float scalar"),
    "complex-with-real": ("add", (D.FLOAT32, 1j), ValidationError, "dtype_mismatch",
                          "complex scalar"),
    "real-complex-with-real": ("div", (D.FLOAT64, 1 + 0j), ValidationError,
                               "dtype_mismatch", "complex scalar"),
    "int-with-bool": ("maximum", (D.BOOL, 1), ValidationError, "dtype_mismatch",
                      "bool takes True or False"),
    "float-with-bool": ("bitwise_and", (D.BOOL, 1.0), ValidationError, "dtype_mismatch",
                        "rhs=1.0"),
    "int8-high": ("add", (D.INT8, 128), ValidationError, "overflow", "[-128, 127]"),
    "int8-low": ("add", (-129, D.INT8), ValidationError, "overflow", "lhs=-129"),
    "uint8-negative": ("sub", (D.UINT8, -1), ValidationError, "overflow", "[0, 255]"),
    "numpy-uint8-into-int8": ("add", (D.INT8, np.uint8(200)), ValidationError, "overflow",
                              "int8"),
    "int64-high": ("add", (D.INT64, 2**63), ValidationError, "overflow", "int64"),
    "shift-amount": ("shift_left", (D.UINT8, 256), ValidationError, "overflow", "uint8"),
    "float16": ("mul", (D.FLOAT16, 65520.0), ValidationError, "overflow", "float16"),
    "float16-int": ("mul", (D.FLOAT16, 70000), ValidationError, "overflow", "float16"),
    "bfloat16": ("mul", (D.BFLOAT16, 3.4e38), ValidationError, "overflow", "bfloat16"),
    "float32": ("add", (D.FLOAT32, -1e39), ValidationError, "overflow", "float32"),
    "float32-int": ("add", (D.FLOAT32, 2**128), ValidationError, "overflow", "float32"),
    "complex64-part": ("add", (D.COMPLEX64, 1e39j), ValidationError, "overflow", "float32"),
    "compare-kind": ("compare", (D.FLOAT32, 2j, EQ), ValidationError, "dtype_mismatch",
                     "rhs=2j"),
    "complex-parts": ("complex", (D.FLOAT32, 1j), ValidationError, "dtype_mismatch",
                      "float32"),
    "clamp-kind": ("clamp", (D.INT32, 0.5, 3), ValidationError, "dtype_mismatch",
                   "lower=0.5"),
    "select-pred-int": ("select", (1, D.FLOAT32, D.FLOAT32), ValidationError,
                        "dtype_mismatch", "pred=1"),
    "select-pred-float": ("select", (1.0, D.FLOAT32, 0.0), ValidationError,
                          "dtype_mismatch", "pred=1.0"),
    "select-branch-kind": ("select", (D.BOOL, D.INT8, 0.5), ValidationError,
                           "dtype_mismatch", "on_false=0.5"),
    "both-scalars": ("add", (1.0, 2.0), ValidationError, "invalid_argument",
                     "at least one must be a tensor"),
    "all-scalars-clamp": ("clamp", (1.0, 0.0, 2.0), ValidationError, "invalid_argument",
                          "at least one must be a tensor"),
    "select-scalar-branches": ("select", (D.BOOL, 1.0, 2.0), ValidationError,
                               "invalid_argument", "both scalars"),
    "string": ("add", (D.FLOAT32, "1"), ValidationError, "invalid_argument", "got str"),
    "none": ("add", (None, D.FLOAT32), ValidationError, "invalid_argument", "got NoneType"),
    "0d-array": ("add", (D.FLOAT32, np.array(1.0)), RuntimeStateError, None,
                 "found a ndarray host array (upload it"),
    "longdouble": ("add", (D.FLOAT32, np.longdouble(1)), ValidationError,
                   "invalid_argument", "got longdouble"),
    "list": ("mul", (D.FLOAT32, [2.0]), ValidationError, "invalid_argument", "got list"),
    "unary": ("neg", (1.0,), ValidationError, "invalid_argument",
              "Tensor or TensorView (got float)"),
    "bool-arithmetic": ("add", (D.BOOL, True), UnsupportedDTypeError, None, "bool"),
    "complex-ordering": ("compare", (D.COMPLEX64, 1, LT), UnsupportedDTypeError, None,
                         "EQ or NE"),
    "tensor-dtypes": ("clamp", (D.FLOAT32, D.FLOAT64, 1.0), ValidationError,
                      "dtype_mismatch", "float32, float64"),
}
FORMS = ("", "_read", "_into", "_read_into")


@pytest.fixture
def emu(monkeypatch):
    return emulated_session(monkeypatch)


def _tensor(s, dtype: DType):
    return put(s, np.ones((3, 4), dtype.numpy))


def _operands(s, spec):
    return [_tensor(s, a) if isinstance(a, DType) else a for a in spec]


def _warm(s, method, ops, direction):
    """Arm the fast path of ``method`` for the tensor operand's dtype (binary ops)."""
    tensors = [x for x in ops if isinstance(x, Tensor)]
    if len(ops) == 2 and tensors:
        try:
            getattr(s, method)(tensors[0], tensors[0], *direction)
        except (ValidationError, UnsupportedDTypeError):
            pass


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", list(CASES))
def test_refused(emu, case, form):
    s, dev, ctx = emu
    method, spec, exc, kind, says = CASES[case]
    ops = _operands(s, spec)
    direction = [op for op in ops if isinstance(op, CompareDir)]
    ops = [op for op in ops if not isinstance(op, CompareDir)]
    _warm(s, method, ops, direction)
    out = put(s, np.full((3, 4), 7, np.float32))
    launches, allocs = len(dev.launches), ctx.allocs
    tail = [out] if form.endswith("into") else []
    with pytest.raises(exc) as info:
        getattr(s, method + form)(*ops, *direction, *tail)
    assert info.value.op == method + form and says in str(info.value)
    if kind is not None:
        assert info.value.kind == kind
    assert len(dev.launches) == launches and ctx.allocs == allocs
    assert np.array_equal(get(s, out), np.full((3, 4), 7, np.float32))


@pytest.mark.parametrize("inputs,kind", [
    ([1.0, 2.0], "invalid_argument"), (["x", "t"], "invalid_argument"),
    (["t", 1j], "dtype_mismatch"), (["t", 1e39], "overflow")], ids=str)
def test_elementwise_read_into_refuses(emu, inputs, kind):
    s, dev, ctx = emu
    x = _tensor(s, D.FLOAT32)
    out = put(s, np.zeros((3, 4), np.float32))
    args = [x if a == "t" else a for a in inputs]
    with pytest.raises(ValidationError) as info:
        s.elementwise_read_into(ElementwiseReadOp.ADD, args, out)
    assert info.value.kind == kind and info.value.op == "elementwise_read_into"
    assert not dev.launches


def test_misfit_after_fitting_calls(emu):
    """A scalar that does not fit, after the same op served fitting ones (fast path)."""
    s, dev, ctx = emu
    x = put(s, np.arange(12, dtype=np.int8))
    for v in (1, -128, 127, True):
        s.add(x, v)
    n = len(dev.launches)
    for bad in (128, 1.0, 1j):
        with pytest.raises(ValidationError):
            s.add(x, bad)
        with pytest.raises(ValidationError):
            s.sub(bad, x)
    assert len(dev.launches) == n


def test_empty_tensor_still_checks_the_scalar(emu):
    s, dev, ctx = emu
    x = put(s, np.zeros((0, 3), np.int32))
    assert s.add(x, 5).shape == (0, 3) and not dev.launches
    with pytest.raises(ValidationError) as info:
        s.add(x, 0.5)
    assert info.value.kind == "dtype_mismatch"
