"""Scalar operands on the GPU against the numpy reference (test_elementwise_ref.py): every
binary op x dtype with a scalar in either slot (random tensors, and every special value of
the dtype as the scalar), select and clamp with scalars in every slot pattern, every form
and kernel path (vector and scalar contiguous, strided, tiled, broadcast rows), the
high word of complex128 scalars, deferred errors caused by a scalar, in-place ``_into``
with a scalar, the refused scalars, and a scalar captured in a graph (a constant of the
replay)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_elementwise_ref import REF, inputs_for, mismatch, specials, tolerance

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.session import CudaExecSession
from tenferro_cuda.shapes.elementwise import KINDS, ORDERED
from tenferro_cuda.tensor import TensorView

D = DType
BINARY = [(k, d) for k in KINDS if KINDS[k].arity == 2 for d in ALL_DTYPES
          if KINDS[k].instantiable(d)]
IDS = [f"{k}-{d.value}" for k, d in BINARY]
TERNARY = [("select", d, slots) for d in ALL_DTYPES
           for slots in ((0,), (1,), (2,), (0, 1), (0, 2))]
TERNARY += [("clamp", d, slots) for d in ALL_DTYPES if d in ORDERED
            for slots in ((0,), (1,), (2,), (1, 2), (0, 1), (0, 2))]


# the kinds with an ``_into`` form (pow, an analytic op, has ``pow`` and ``pow_read`` only)
INTO = {k for k, kind in KINDS.items() if hasattr(CudaExecSession, kind.name + "_into")}


def call(s, key, *args, out=None):
    kind = KINDS[key]
    extra = (kind.direction,) if kind.direction is not None else ()
    if out is None:
        return getattr(s, kind.name)(*args, *extra)
    getattr(s, kind.name + "_into")(*args, *extra, out)
    return out


def _with_scalar(arrays, slot, value):
    """The numpy operands with ``value`` (as an element of the slot's dtype) at ``slot``."""
    a = arrays[slot]
    full = np.full(arrays[1 - slot].shape, np.asarray(value).astype(a.dtype))
    return [full if k == slot else x for k, x in enumerate(arrays)]


@pytest.mark.parametrize("slot", [0, 1], ids=["lhs", "rhs"])
@pytest.mark.parametrize("key,dtype", BINARY, ids=IDS)
def test_random(s, key, dtype, slot):
    arrays = inputs_for(np.random.default_rng(17), key, dtype.numpy, (37, 29))
    for value in (arrays[slot].reshape(-1)[0].item(), arrays[slot].reshape(-1)[-1].item()):
        ops = [value if k == slot else up(s, a) for k, a in enumerate(arrays)]
        want, _ = REF[key](*_with_scalar(arrays, slot, value))
        tol = tolerance(key, dtype.numpy)
        assert mismatch(down(s, call(s, key, *ops)), want, tol) is None  # general path
        assert mismatch(down(s, call(s, key, *ops)), want, tol) is None  # fast path
        if key in INTO:
            out = up(s, np.zeros(want.shape, want.dtype))
            assert mismatch(down(s, call(s, key, *ops, out=out)), want, tol) is None


SPECIAL = [(k, d) for k, d in BINARY if k not in ("pow", "atan2")]  # test_analytic.py


@pytest.mark.parametrize("slot", [0, 1], ids=["lhs", "rhs"])
@pytest.mark.parametrize("key,dtype", SPECIAL, ids=[f"{k}-{d.value}" for k, d in SPECIAL])
def test_special_scalars(s, key, dtype, slot):
    """Every special value of the dtype as the scalar, against all of them as the tensor
    (no integer division by zero: test_deferred_errors_from_scalars)."""
    tensor = specials(dtype.numpy)
    divides = key in ("div", "rem") and dtype.is_integer
    if divides and slot == 0:
        tensor = tensor[tensor != 0]  # the tensor is the divisor
    x = up(s, tensor)
    for v in specials(dtype.numpy):
        if divides and slot == 1 and v == 0:
            continue
        full = np.full(tensor.shape, v)
        want, _ = REF[key](*((full, tensor) if slot == 0 else (tensor, full)))
        got = down(s, call(s, key, *((v.item(), x) if slot == 0 else (x, v.item()))))
        assert mismatch(got, want, tolerance(key, dtype.numpy)) is None, v


@pytest.mark.parametrize("key,dtype,slots", TERNARY,
                         ids=[f"{k}-{d.value}-{'+'.join(map(str, s))}" for k, d, s in TERNARY])
def test_ternary(s, key, dtype, slots):
    arrays = inputs_for(np.random.default_rng(19), key, dtype.numpy, (33, 7))
    ops, full = [], []
    for k, a in enumerate(arrays):
        if k in slots:
            value = True if key == "select" and k == 0 else a.reshape(-1)[3].item()
            ops.append(value)
            full.append(np.full(a.shape, np.asarray(value).astype(a.dtype)))
        else:
            ops.append(up(s, a))
            full.append(a)
    want, _ = REF[key](*full)
    assert mismatch(down(s, getattr(s, key)(*ops)), want, None) is None
    out = up(s, np.zeros(want.shape, want.dtype))
    getattr(s, key + "_read_into")(*ops, out)
    assert mismatch(down(s, out), want, None) is None


def _bcast_row(s, a):
    row = up(s, a[0])
    return TensorView(row, a.shape, (0, 1), 0)


PATHS = {  # name: (shape, view of the tensor operand on the device and in numpy)
    "vector": ((1024,), lambda s, t, a: (t, a)),
    "misaligned": ((1025,), lambda s, t, a: (t[1:], a[1:])),
    "strided": ((33, 17), lambda s, t, a: (t.T, a.T)),
    "tiled": ((96, 80), lambda s, t, a: (t.T, a.T)),
    "negative": ((40, 30), lambda s, t, a: (t[::-1, ::3], a[::-1, ::3])),
    "broadcast-row": ((64, 48), lambda s, t, a: (_bcast_row(s, a),
                                                 np.broadcast_to(a[0], a.shape))),
}


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT16, D.INT8, D.INT64, D.COMPLEX64,
                                   D.COMPLEX128, D.BFLOAT16], ids=str)
@pytest.mark.parametrize("path", list(PATHS))
def test_kernel_paths(s, path, dtype):
    shape, view = PATHS[path]
    a = inputs_for(np.random.default_rng(23), "mul", dtype.numpy, shape)[0]
    value = {"c": 1.5 - 2j, "f": -1.75, "i": 3, "u": 3}[np.dtype(dtype.numpy).kind
                                                       if dtype is not D.BFLOAT16 else "f"]
    t, ref = view(s, up(s, a), a)
    for op in ("mul", "sub"):
        tol = tolerance(op, dtype.numpy)  # complex mul is not exact by contract
        want, _ = REF[op](np.full(ref.shape, np.asarray(value).astype(a.dtype)), ref)
        assert mismatch(down(s, getattr(s, op)(value, t)), want, tol) is None
        want, _ = REF[op](ref, np.full(ref.shape, np.asarray(value).astype(a.dtype)))
        assert mismatch(down(s, getattr(s, op)(t, value)), want, tol) is None


def test_complex128_high_word_is_never_stale(s):
    z = np.arange(8) * (1 + 1j) - 2j
    x, pick = up(s, z), np.arange(8) % 3 == 0
    m = up(s, pick)
    for value in (2 - 1j, 3.0, -1j, 0.5, 1e300 + 1e-300j, 2 - 1j):
        assert mismatch(down(s, s.mul(x, value)), z * value,
                        tolerance("mul", np.complex128)) is None
        assert np.array_equal(down(s, s.sub(value, x)), value - z)
        assert np.array_equal(down(s, s.add(up(s, z.reshape(2, 4)).T, value)),
                              z.reshape(2, 4).T + value)
        assert np.array_equal(down(s, s.select(m, value, x)), np.where(pick, value, z))


@pytest.mark.parametrize("op,args,want", [
    ("div", lambda x: (x, 0), "division by zero"),
    ("rem", lambda x: (x, 0), "division by zero"),
    ("div", lambda x: (7, x), "division by zero"),
    ("pow", lambda x: (x, -1), "negative integer exponent"),
], ids=["div-rhs", "rem-rhs", "div-lhs", "pow"])
def test_deferred_errors_from_scalars(s, op, args, want):
    x = up(s, np.array([4, 0, 6], np.int32))
    out = getattr(s, op)(*args(x))
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and info.value.op == op and want in str(info.value)
    del out


@pytest.mark.parametrize("op,args", [
    ("add", lambda x, m: (x, 1.5)), ("sub", lambda x, m: (2, x)),
    ("select", lambda x, m: (m, x, 0.0)), ("clamp", lambda x, m: (x, -0.5, 0.5))],
    ids=["add", "sub", "select", "clamp"])
def test_in_place_into(s, op, args):
    a = np.linspace(-1, 1, 1000, dtype=np.float32)
    m = up(s, a > 0)
    want = down(s, getattr(s, op)(*args(up(s, a), m)))
    for _ in range(2):
        x = up(s, a)
        getattr(s, op + "_into")(*args(x, m), x)
        assert np.array_equal(down(s, x), want)


def test_elementwise_read_into_with_scalars(s):
    x = up(s, np.arange(6, dtype=np.float64))
    out = up(s, np.zeros(6, np.float64))
    s.elementwise_read_into(ElementwiseReadOp.POW, [x, 2], out)
    assert np.array_equal(down(s, out), np.arange(6.0) ** 2)
    flags = up(s, np.zeros(6, bool))
    s.elementwise_read_into(ElementwiseReadOp.compare(CompareDir.GT), [x, 2.5], flags)
    assert np.array_equal(down(s, flags), np.arange(6) > 2.5)


@pytest.mark.parametrize("args,error,kind", [
    (lambda x: (x, 1.5), ValidationError, "dtype_mismatch"),
    (lambda x: (x, 1j), ValidationError, "dtype_mismatch"),
    (lambda x: (x, 2**31), ValidationError, "overflow"),
    (lambda x: (1, 2), ValidationError, "invalid_argument"),
    # a 0-d numpy array is a host array, not a scalar: upload it (docs/errors.md)
    (lambda x: (x, np.array(1)), RuntimeStateError, None)],
    ids=["float", "complex", "range", "no tensor", "array"])
def test_refused(s, args, error, kind):
    x = up(s, np.arange(4, dtype=np.int32))
    s.add(x, 1)  # the fast path is armed
    with pytest.raises(error) as info:
        s.add(*args(x))
    assert kind is None or info.value.kind == kind


def test_scalar_is_a_constant_of_a_captured_graph(s):
    a = np.arange(256, dtype=np.float32)
    x, out = up(s, a), up(s, np.zeros(256, np.float32))
    with s.capture() as g:
        s.mul_into(s.add(x, 2.5), -1.0, out)
    g.replay()
    assert np.array_equal(down(s, out), -(a + np.float32(2.5)))
    x2 = up(s, np.ones(256, np.float32))
    g.replay(inputs={x: x2})
    assert np.array_equal(down(s, out), np.full(256, -3.5, np.float32))
    g.close()
