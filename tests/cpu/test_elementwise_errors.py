"""Error paths of every elementwise, analytic and cast method on the emulated device: the
exception class and kind, and that nothing was launched, nothing allocated and the
output is unchanged."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from reference.fake_context import FakeBuffer, _Home
from test_elementwise_emu import emulated_session, get, put

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import (
    RuntimeStateError,
    UnsupportedDTypeConversionError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.tensor import Tensor

D = DType
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "rem": 2, "maximum": 2, "minimum": 2,
         "compare": 2, "neg": 1, "conj": 1, "abs": 1, "sign": 1, "select": 3, "clamp": 3,
         "exp": 1, "sqrt": 1, "pow": 2}
ANALYTIC = ("exp", "sqrt", "pow")
FORMS = ("", "_read", "_into", "_read_into")
ERRORS = {
    # name: (exception, validation kind or None, applies to arities, into forms only)
    "dtype_mismatch": (ValidationError, "dtype_mismatch", (2, 3), False),
    "shape_mismatch": (ValidationError, "shape_mismatch", (2, 3), False),
    "host": (RuntimeStateError, None, (1, 2, 3), False),
    "foreign": (RuntimeStateError, None, (1, 2, 3), False),
    "reclaimed": (RuntimeStateError, None, (1, 2, 3), False),
    "not_a_tensor": (ValidationError, "invalid_argument", (1, 2, 3), False),
    "host_array": (RuntimeStateError, None, (1, 2, 3), False),
    "closed": (RuntimeStateError, None, (1, 2, 3), False),
    "unsupported": (UnsupportedDTypeError, None, (1, 2, 3), False),
    "overlap": (ValidationError, "invalid_argument", (1, 2, 3), True),
    "out_shape": (ValidationError, "shape_mismatch", (1, 2, 3), True),
    "out_dtype": (ValidationError, "dtype_mismatch", (1, 2, 3), True),
    "out_host": (RuntimeStateError, None, (1, 2, 3), True),
}
CASES = [(op, form, err) for op in ARITY for form in FORMS for err in ERRORS
         if (op not in ANALYTIC or form in ("", "_read")) and ARITY[op] in ERRORS[err][2]
         and (form.endswith("into") or not ERRORS[err][3])
         and not (op == "conj" and err == "unsupported")]  # conj takes every dtype


@pytest.fixture
def emu(monkeypatch):
    return emulated_session(monkeypatch)


def _operands(s, op, dtype=D.FLOAT32, shape=(3, 4)):
    rng = np.random.default_rng(0)
    xs = [put(s, (rng.random(shape) + 0.5).astype(dtype.numpy)) for _ in range(ARITY[op])]
    if op == "select":
        xs[0] = put(s, rng.random(shape) < 0.5)
    return xs


def _foreign(s, like):
    """A tensor of another execution context (another runtime or thread)."""
    other = _Home(s._ctx.memory)
    buf = FakeBuffer(s._ctx.memory.alloc(like.nbytes), like.nbytes, other)
    buf.domain = 999
    return Tensor._make(like.dtype, like.shape, buffer=buf)


def _break(s, op, err, xs, out):
    """Apply error ``err``; returns (inputs, out)."""
    k = len(xs) - 1  # break the last input (never the select predicate)
    if err == "dtype_mismatch":
        xs[k] = put(s, np.ones((3, 4), np.float64))
    elif err == "shape_mismatch":
        xs[k] = put(s, np.ones((4, 3), np.float32))
    elif err == "host":
        xs[k] = Tensor.from_numpy(np.ones((3, 4), np.float32))
    elif err == "foreign":
        xs[k] = _foreign(s, xs[k])
    elif err == "reclaimed":
        xs[k].buffer.release()
    elif err == "not_a_tensor":
        xs[k] = "not a tensor"
    elif err == "host_array":
        xs[k] = np.ones((3, 4), np.float32)
    elif err == "closed":
        s._scope.alive = False
    elif err == "unsupported":
        bad = D.COMPLEX64 if op in ("rem", "maximum", "minimum", "clamp", "compare") \
            else D.BOOL  # compare: LT on complex
        xs[:] = _operands(s, op, bad)
        if op == "select":
            xs[0] = put(s, np.ones((3, 4), np.int8))
    elif err == "overlap":  # the input's memory, read in another order: not in place
        if op == "compare":  # the output is bool: compare bool operands
            xs[:] = [put(s, np.ones((3, 4), bool)) for _ in xs]
        out = xs[k].view((3, 4), (1, 3))
    elif err == "out_shape":
        out = put(s, np.zeros((4, 3), out.dtype.numpy))
    elif err == "out_dtype":
        out = put(s, np.zeros((3, 4), np.int32))
    elif err == "out_host":
        out = Tensor.from_numpy(np.zeros((3, 4), out.dtype.numpy))
    return xs, out


def _call(s, op, form, xs, out):
    fn = getattr(s, op + form)
    args = list(xs)
    if op == "compare":
        args.append(CompareDir.LT)
    if form.endswith("into"):
        args.append(out)
    return fn(*args)


@pytest.mark.parametrize("op,form,err", CASES, ids=[f"{o}{f}-{e}" for o, f, e in CASES])
def test_error(emu, op, form, err):
    s, dev, rt = emu
    xs = _operands(s, op)
    out_dtype = D.BOOL if op == "compare" else D.FLOAT32
    out = put(s, np.full((3, 4), 7, out_dtype.numpy))
    xs, out = _break(s, op, err, xs, out)
    before = get(s, out) if isinstance(out, Tensor) and out.is_device else None
    launches, allocs = len(dev.launches), rt.allocs
    exc, kind, _, _ = ERRORS[err]
    with pytest.raises(exc) as info:
        _call(s, op, form, xs, out)
    if kind is not None:
        assert info.value.kind == kind
    assert info.value.op == op + form
    assert len(dev.launches) == launches and rt.allocs == allocs
    if before is not None:
        s._scope.alive = True
        assert np.array_equal(get(s, out), before)


def test_wrong_thread(emu):
    s, dev, rt = emu
    x, y = _operands(s, "add")
    box = []
    t = threading.Thread(target=lambda: box.append(_catch(lambda: s.add(x, y))))
    t.start()
    t.join()
    assert isinstance(box[0], RuntimeStateError) and not dev.launches


def _catch(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc
    return None


@pytest.mark.parametrize("direction", ["sideways", None, 3, [1]], ids=str)
def test_compare_bad_direction(emu, direction):
    s, dev, rt = emu
    x, y = _operands(s, "compare")
    with pytest.raises(ValidationError):
        s.compare(x, y, direction)
    assert not dev.launches


@pytest.mark.parametrize("d", [CompareDir.LT, CompareDir.LE, CompareDir.GT, CompareDir.GE],
                         ids=lambda d: d.name)
def test_complex_ordering_rejected(emu, d):
    s, dev, rt = emu
    x, y = _operands(s, "compare", D.COMPLEX64)
    with pytest.raises(UnsupportedDTypeError):
        s.compare(x, y, d)
    with pytest.raises(UnsupportedDTypeError):
        s.elementwise_read_into(ElementwiseReadOp.compare(d), [x, y],
                                put(s, np.zeros((3, 4), bool)))
    assert not dev.launches


@pytest.mark.parametrize("op,inputs", [
    ("bad-op", 2), (ElementwiseReadOp.ADD, 1), (ElementwiseReadOp.ADD, 3),
    (ElementwiseReadOp.NEG, 2), (ElementwiseReadOp.ADD, "tensor")], ids=str)
def test_elementwise_read_into_rejects(emu, op, inputs):
    s, dev, rt = emu
    x = _operands(s, "add")[0]
    out = put(s, np.zeros((3, 4), np.float32))
    arg = x if inputs == "tensor" else [x] * inputs
    with pytest.raises(ValidationError):
        s.elementwise_read_into(op, arg, out)
    assert not dev.launches


@pytest.mark.parametrize("to", ["float8", 3.5, object()], ids=["float8", "3.5", "object"])
def test_cast_bad_target(emu, to):
    s, dev, rt = emu
    with pytest.raises(UnsupportedDTypeError):
        s.cast(_operands(s, "neg")[0], to)
    assert not dev.launches


@pytest.mark.parametrize("src,dst", [(D.FLOAT32, D.INT32), (D.INT64, D.FLOAT64),
                                     (D.COMPLEX64, D.FLOAT32), (D.FLOAT64, D.FLOAT32),
                                     (D.INT32, D.BOOL), (D.FLOAT16, D.BFLOAT16)], ids=str)
def test_convert_rejects_lossy(emu, src, dst):
    s, dev, rt = emu
    x = put(s, np.ones(4, src.numpy))
    allocs = rt.allocs
    with pytest.raises(UnsupportedDTypeConversionError) as info:
        s.convert(x, dst)
    assert info.value.op == "convert" and not dev.launches and rt.allocs == allocs


def test_convert_host_tensor_is_residency_error(emu):
    s, dev, rt = emu
    with pytest.raises(RuntimeStateError):
        s.convert(Tensor.from_numpy(np.ones(3, np.float32)), D.FLOAT64)


def test_out_with_stride_zero(emu):
    s, dev, rt = emu
    x, y = _operands(s, "add", shape=(4,))
    base = put(s, np.zeros(4, np.float32))
    with pytest.raises(ValidationError):
        s.add_into(x, y, base.view((4,), (0,), 1))
    assert not dev.launches


@pytest.mark.parametrize("op", ["add", "mul", "neg", "select", "clamp"])
def test_in_place_exact_view_is_allowed(emu, op):
    """DESIGN 9: an elementwise output may be exactly an input (in place)."""
    s, dev, rt = emu
    xs = _operands(s, op)
    k = len(xs) - 1
    want = get(s, _call(s, op, "", xs, None))
    _call(s, op, "_into", xs, xs[k])
    assert np.array_equal(get(s, xs[k]), want)


def test_in_place_through_another_tensor_object(emu):
    """The same memory under a second Tensor object is the same view: allowed in place;
    a shifted view of it is not."""
    s, dev, rt = emu
    x, y = _operands(s, "add")
    twin = Tensor._make(x.dtype, x.shape, buffer=x.buffer)
    want = get(s, s.add(x, y))
    s.add_into(x, y, twin)
    assert np.array_equal(get(s, x), want)
    base = put(s, np.zeros(13, np.float32))
    a = base.view((3, 4), (4, 1), 0)
    shifted = base.view((3, 4), (4, 1), 1)
    with pytest.raises(ValidationError):
        s.add_into(a, y, shifted)


def test_in_place_with_another_dtype_is_rejected(emu):
    """Same bytes, other dtype (uint8 input, bool output of compare): not the same view."""
    s, dev, rt = emu
    x, y = (put(s, np.ones((3, 4), np.uint8)) for _ in range(2))
    out = Tensor._make(D.BOOL, x.shape, buffer=x.buffer)
    with pytest.raises(ValidationError):
        s.compare_into(x, y, CompareDir.EQ, out)
    assert not dev.launches
