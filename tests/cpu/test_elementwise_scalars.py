"""Scalar operands on the emulated device (tests/gpu/test_elementwise_emu.py): every binary
kind x dtype with a Python scalar in either slot, select and clamp with scalars in every
slot pattern, every form and kernel path, complex128's high word, numpy scalars and special
values. The emulator decodes a by-value operand from the packed parameters as the kernel
does (pointer slot + tail word, flag bit), so these tests check that the value reaching
the kernel is the scalar rounded to the dtype; they also check that nothing is uploaded
and only the output is allocated, and that the fast path serves repeated scalar calls
with the launch the general path makes. Errors: test_elementwise_scalar_errors.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_elementwise_emu import emulated_session, get, put
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.ops.elementwise import engine as elementwise_engine
from tenferro_cuda.ops.elementwise import fast as elementwise_fast
from tenferro_cuda.shapes.elementwise import KINDS, ORDERED

D = DType
VALUE = elementwise_engine.VALUE
SHAPE = (3, 5)
BINARY = [(k, d, slot) for k in KINDS if KINDS[k].arity == 2 for d in ALL_DTYPES
          if KINDS[k].instantiable(d) for slot in (0, 1)]
TERNARY = [("select", d, slots) for d in ALL_DTYPES
           for slots in ((0,), (1,), (2,), (0, 1), (0, 2))]
TERNARY += [("clamp", d, slots) for d in ALL_DTYPES if d in ORDERED
            for slots in ((0,), (1,), (2,), (1, 2), (0, 1), (0, 2))]


@pytest.fixture
def emu(monkeypatch):
    s, dev, ctx = emulated_session(monkeypatch)

    def refuse(*args, **kwargs):
        raise AssertionError("a scalar operand must not be uploaded or copied")

    monkeypatch.setattr(ctx, "upload", refuse)
    monkeypatch.setattr(ctx, "copy", refuse)
    return s, dev, ctx


def _call(s, key, *args, out=None):
    kind = KINDS[key]
    name = kind.name + ("_into" if out is not None else "")
    extra = (kind.direction,) if kind.direction is not None else ()
    tail = (out,) if out is not None else ()
    return getattr(s, name)(*args, *extra, *tail)


def _scalar_case(key, dtype, slots, seed=3):
    """(operands with the scalars in ``slots``, the numpy operands they stand for)."""
    arrays = inputs_for(np.random.default_rng(seed), key, dtype.numpy, SHAPE)
    args, full = [], []
    for k, a in enumerate(arrays):
        if k in slots:
            args.append(a.reshape(-1)[0].item())  # a Python scalar of the element's kind
            full.append(np.full(SHAPE, a.reshape(-1)[0], a.dtype))
        else:
            args.append(a)
            full.append(a)
    return args, full


@pytest.mark.parametrize("key,dtype,slot", BINARY,
                         ids=[f"{k}-{d.value}-{'lhs' if s == 0 else 'rhs'}" for k, d, s in BINARY])
def test_binary_scalar(emu, monkeypatch, key, dtype, slot):
    s, dev, ctx = emu
    args, full = _scalar_case(key, dtype, (slot,))
    ops = [a if k == slot else put(s, a) for k, a in enumerate(args)]
    want, err = REF[key](*full)
    assert not err
    for path in ("general", "fast"):
        allocs, launches = ctx.allocs, len(dev.launches)
        got = get(s, _call(s, key, *ops))
        assert mismatch(got, want, tolerance(key, dtype.numpy)) is None, path
        assert ctx.allocs == allocs + 1 and len(dev.launches) == launches + 1  # the output
        entry, _, _, _, launch = dev.launches[-1]
        assert entry == "small" and launch[5] & (VALUE << slot) and launch[4] == 15
        monkeypatch.setattr(elementwise_engine, "run", _no_general_path)


def _no_general_path(*args, **kwargs):
    raise AssertionError("the fast path should have served this call")


@pytest.mark.parametrize("key,dtype,slots", TERNARY,
                         ids=[f"{k}-{d.value}-{'+'.join(map(str, s))}" for k, d, s in TERNARY])
def test_ternary_scalars(emu, key, dtype, slots):
    s, dev, ctx = emu
    args, full = _scalar_case(key, dtype, slots)
    if key == "select" and 0 in slots:
        args[0], full[0] = True, np.ones(SHAPE, bool)
    ops = [a if k in slots else put(s, a) for k, a in enumerate(args)]
    want, _ = REF[key](*full)
    allocs = ctx.allocs
    out = getattr(s, key)(*ops)
    assert mismatch(get(s, out), want, tolerance(key, dtype.numpy)) is None
    assert ctx.allocs == allocs + 1
    flags = dev.launches[-1][4][5]
    assert all(flags & (VALUE << k) for k in slots)
    target = put(s, np.zeros(SHAPE, want.dtype))
    getattr(s, key + "_read_into")(*ops, target)
    assert mismatch(get(s, target), want, tolerance(key, dtype.numpy)) is None


FORMS = ["", "_read", "_into", "_read_into", "elementwise_read_into"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", ["add-rhs", "sub-lhs", "compare", "select", "clamp"])
def test_forms(emu, case, form):
    s, dev, ctx = emu
    x = np.linspace(-2, 2, 15, dtype=np.float32).reshape(SHAPE)
    mask = x > 0
    op, record, args, want = {
        "add-rhs": ("add", ElementwiseReadOp.ADD, [put(s, x), 1.25], x + np.float32(1.25)),
        "sub-lhs": ("sub", ElementwiseReadOp.SUB, [3, put(s, x)], np.float32(3) - x),
        "compare": ("compare", ElementwiseReadOp.compare(CompareDir.GE), [put(s, x), 0.5],
                    x >= 0.5),
        "select": ("select", ElementwiseReadOp.SELECT, [put(s, mask), put(s, x), -1.0],
                   np.where(mask, x, np.float32(-1))),
        "clamp": ("clamp", ElementwiseReadOp.CLAMP, [put(s, x), -1, 0.75], np.clip(x, -1, 0.75)),
    }[case]
    extra = [CompareDir.GE] if op == "compare" else []
    if form == "elementwise_read_into":
        out = put(s, np.zeros(SHAPE, want.dtype))
        s.elementwise_read_into(record, args, out)
    elif form.endswith("into"):
        out = put(s, np.zeros(SHAPE, want.dtype))
        getattr(s, op + form)(*args, *extra, out)
    else:
        out = getattr(s, op + form)(*args, *extra)
    assert np.array_equal(get(s, out), want)


IN_PLACE = {"add": lambda x, m: (x, 1.5), "sub": lambda x, m: (2, x),
            "select": lambda x, m: (m, x, 0.0), "clamp": lambda x, m: (x, -0.5, 0.5),
            "maximum": lambda x, m: (-1.0, x)}


@pytest.mark.parametrize("op", list(IN_PLACE))
def test_in_place_with_a_scalar(emu, op):
    """``op_into(..., out)`` where ``out`` is the tensor operand itself."""
    s, dev, ctx = emu
    a = np.linspace(-1, 1, 15, dtype=np.float32).reshape(SHAPE)
    args = IN_PLACE[op]
    x, m = put(s, a), put(s, a > 0)
    want = get(s, getattr(s, op)(*args(x, m)))
    allocs = ctx.allocs
    for _ in range(2):  # the general path, then the fast path of the binary ops
        x_ = put(s, a)
        call = args(x_, m)
        getattr(s, op + "_into")(*call, x_)
        assert np.array_equal(get(s, x_), want)
    assert ctx.allocs == allocs + 2  # the two inputs made here, nothing else


LAYOUTS = {  # name: (base shape, view, kernel path)
    "transposed": ((5, 7), lambda t: t.T, "strided"),
    "tiled": ((48, 40), lambda t: t.T, "strided"),
    "negative": ((6, 5), lambda t: t[::-1, ::-2], "strided"),
    "slice": ((9,), lambda t: t[1:8], "small"),
    "rank0": ((), lambda t: t, "small"),
}


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.INT8, D.COMPLEX128, D.BFLOAT16], ids=str)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_kernel_paths(emu, layout, dtype):
    s, dev, ctx = emu
    shape, view, path = LAYOUTS[layout]
    a = inputs_for(np.random.default_rng(1), "sub", dtype.numpy, shape)[0]
    v = a.reshape(-1)[-1].item()
    got = get(s, s.sub(v, view(put(s, a))))
    want, _ = REF["sub"](np.full(view(a).shape, np.asarray(v, dtype.numpy)), view(a))
    assert mismatch(got, want, None) is None
    entry, _, _, _, args = dev.launches[-1]
    flags = args[5] if entry in ("contig", "small") else args[9]
    assert entry == path and flags & VALUE
    if layout == "tiled":
        assert flags & 1 and flags & 4  # tiled, the tensor (slot 1) staged


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.UINT8, D.COMPLEX128], ids=str)
def test_broadcast_rows_path(emu, dtype):
    """clamp(x, a row broadcast through a stride-0 view, scalar): the bcast kernel."""
    s, dev, ctx = emu
    rng = np.random.default_rng(2)
    if dtype.is_complex:
        x = rng.standard_normal((4, 8)) + 1j * rng.standard_normal((4, 8))
        row = rng.standard_normal(8) + 0j
        x, row = x.astype(dtype.numpy), row.astype(dtype.numpy)
        got = get(s, s.select(put(s, x.real > 0), put(s, row).view((4, 8), (0, 1)), 2 - 3j))
        want = np.where(x.real > 0, row[None, :], np.complex128(2 - 3j))
        slot = 2
    else:
        x = rng.integers(0, 200, (4, 8)).astype(dtype.numpy)
        row = rng.integers(0, 60, 8).astype(dtype.numpy)
        got = get(s, s.clamp(put(s, x), put(s, row).view((4, 8), (0, 1)), 150))
        want = np.minimum(np.maximum(x, row[None, :]), dtype.numpy.type(150))
        slot = 2
    assert np.array_equal(got, want.astype(dtype.numpy))
    entry, _, _, _, args = dev.launches[-1]
    assert entry == "bcast" and args[9] & (VALUE << slot)


@pytest.mark.parametrize("shape,view", [((1000,), lambda t: t), ((10, 100), lambda t: t.T)],
                         ids=["contig", "strided"])
def test_chunked_launches_keep_the_value(emu, monkeypatch, shape, view):
    s, dev, ctx = emu
    monkeypatch.setattr(elementwise_engine, "SMALL", 0)  # the contiguous kernel
    monkeypatch.setattr(elementwise_engine, "CHUNK", 64)
    monkeypatch.setattr(elementwise_fast, "CHUNK", 64)
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    before = len(dev.launches)
    got = get(s, s.mul(view(put(s, a)), -0.5))
    assert np.array_equal(got, view(a) * -0.5)
    assert len(dev.launches) - before >= 1000 // 64


def test_complex128_high_word(emu):
    """The high half of a complex128 scalar is a tail word of the launch: written for
    every scalar call (fast and general path, either slot), never stale."""
    s, dev, ctx = emu
    z = (np.arange(6) * (1 + 1j) - 2j).astype(np.complex128)
    x = put(s, z)
    for value in (2 - 1j, 2 - 1j, 3.0, -1j, 0.5):
        assert np.array_equal(get(s, s.mul(x, value)), z * value)
        assert np.array_equal(get(s, s.sub(value, x)), value - z)
    assert np.array_equal(get(s, s.add(put(s, z.reshape(2, 3)).T, 1 + 4j)),
                          z.reshape(2, 3).T + (1 + 4j))
    m = put(s, np.array([True, False] * 3))
    assert np.array_equal(get(s, s.select(m, 7 + 7j, x)), np.where([True, False] * 3, 7 + 7j, z))
    assert np.array_equal(get(s, s.select(m, x, -3j)), np.where([True, False] * 3, z, -3j))
    assert np.array_equal(get(s, s.select(False, 1j, x)), z)


def test_fast_path_is_the_general_launch(emu):
    """The fast path writes the same launch the general path plans for the same call."""
    s, dev, ctx = emu
    x = put(s, np.arange(64, dtype=np.float32))
    out = put(s, np.zeros(64, np.float32))
    for call in (lambda: s.add_into(x, 0.25, out), lambda: s.sub_into(4, x, out),
                 lambda: s.compare_into(x, 9.0, "LT", put(s, np.zeros(64, bool))),
                 lambda: s.mul(x, -2)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(elementwise_fast, "scalar", lambda *a: None)
            call()
        general = dev.launches[-1]
        calls: list = []
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(elementwise_engine, "run", lambda *a, c=calls, **k: c.append(a))
            call()
        assert not calls and dev.launches[-1][:4] == general[:4]
        assert dev.launches[-1][4][1:] == general[4][1:]  # all but the output pointer


BF16 = ml_dtypes.bfloat16
NUMPY_SCALARS = [  # tensor dtype, scalar, the element it stands for
    (D.FLOAT32, np.float32(1.5), np.float32(1.5)),
    (D.FLOAT32, np.float64(0.1), np.float32(0.1)),
    (D.FLOAT16, np.float64(1 / 3), np.float16(1 / 3)),
    (D.BFLOAT16, BF16(2.5), BF16(2.5)),
    (D.BFLOAT16, 1.00390625, BF16(1.0)),  # halfway: ties to even
    (D.FLOAT64, np.float16(0.1), np.float64(np.float16(0.1))),
    (D.INT8, np.int64(-3), np.int8(-3)),
    (D.UINT8, np.uint16(200), np.uint8(200)),
    (D.INT64, 2**63 - 1, np.int64(2**63 - 1)),
    (D.INT32, True, np.int32(1)),
    (D.FLOAT32, np.bool_(True), np.float32(1)),
    (D.COMPLEX64, np.complex128(1 / 3 + 2j), np.complex64(1 / 3 + 2j)),
    (D.COMPLEX128, 3, np.complex128(3)),
    (D.FLOAT32, 2**24 + 1, np.float32(2**24)),
]


@pytest.mark.parametrize("dtype,value,element", NUMPY_SCALARS,
                         ids=[f"{d.value}-{type(v).__name__}-{v}" for d, v, _ in NUMPY_SCALARS])
def test_scalar_types_and_rounding(emu, dtype, value, element):
    s, dev, ctx = emu
    a = np.ones(4, dtype.numpy)
    got = get(s, s.mul(put(s, a), value))
    want, _ = REF["mul"](a, np.full(4, element, dtype.numpy))
    assert mismatch(got, want, None) is None


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64], ids=str)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), -0.0, 5e-324],
                         ids=["nan", "inf", "-inf", "-0", "tiny"])
@pytest.mark.parametrize("key", ["add", "maximum", "minimum", "compare_eq", "compare_lt"])
def test_special_scalars(emu, key, dtype, value):
    s, dev, ctx = emu
    a = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan], np.float64).astype(
        dtype.numpy)
    for slot in (0, 1):
        full = np.full(a.shape, np.asarray(value).astype(dtype.numpy))
        args = (value, put(s, a)) if slot == 0 else (put(s, a), value)
        want, _ = REF[key](*((full, a) if slot == 0 else (a, full)))
        assert mismatch(get(s, _call(s, key, *args)), want, None) is None


def test_the_last_scalar_is_remembered_by_identity_only(emu, monkeypatch):
    """The fast path converts a Python scalar once and reuses its bits for the same object
    (a constant in a loop); another object is converted, even an equal one of other bits
    (-0.0 after 0.0); numpy scalars and complex values are converted every time."""
    s, dev, ctx = emu
    base = np.arange(8, dtype=np.float32) - 4
    x = put(s, base)
    s.add(x, 1.0)  # prepared
    p = ctx.memo.get(("add", "add"))[D.FLOAT32]
    converted = []
    real = p.bits
    monkeypatch.setattr(p, "bits", lambda v: converted.append(v) or real(v))
    one, zero, nzero, half = 1.5, 0.0, -0.0, np.float32(0.5)
    for value in (one, one, one, zero, nzero, nzero, 7, 7, True, half, half):
        assert np.array_equal(get(s, s.add(x, value)), base + np.float32(value))
    assert [type(v) for v in converted] == [float, float, float, int, bool, np.float32,
                                            np.float32]
    assert converted[:3] == [one, zero, nzero] and np.signbit(converted[2])
    assert np.signbit(get(s, s.add(put(s, np.full(2, -0.0, np.float32)), nzero))).all()
