"""The elementwise host logic on an emulated device (tests/gpu/test_elementwise_emu.py):
every kind x dtype through the real session methods, layouts and views, fast paths,
forms, promotion, chunking, deferred error words and the error paths (nothing launched,
nothing allocated, output untouched). Values come from the numpy reference, so these
tests check what the host asks the kernels to do; the GPU tier checks the kernels."""

from __future__ import annotations

import numpy as np
import pytest
from test_cast_ref import cast_ref
from test_elementwise_emu import emulated_session, get, put
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops.elementwise import engine as elementwise_engine
from tenferro_cuda.ops.elementwise import fast as elementwise_fast
from tenferro_cuda.runtime import error_code, error_message
from tenferro_cuda.shapes.elementwise import KINDS

D = DType
KIND_CASES = [(k, d) for k in KINDS for d in ALL_DTYPES if KINDS[k].instantiable(d)]


@pytest.fixture
def emu(monkeypatch):
    return emulated_session(monkeypatch)


def _method(s, key):
    kind = KINDS[key]
    if kind.direction is not None:
        return lambda *xs: s.compare(*xs, kind.direction)
    return getattr(s, kind.name)


@pytest.mark.parametrize("key,dtype", KIND_CASES,
                         ids=[f"{k}-{d.value}" for k, d in KIND_CASES])
def test_every_kind_and_dtype(emu, key, dtype):
    s, dev, rt = emu
    rng = np.random.default_rng(7)
    arrays = inputs_for(rng, key, dtype.numpy, (3, 5))
    tensors = [put(s, a) for a in arrays]
    out = _method(s, key)(*tensors)
    want, _ = REF[key](*arrays)
    assert mismatch(get(s, out), want, tolerance(key, dtype.numpy)) is None
    compiled = set(family("elementwise").all_expressions())
    assert rt.compiled and all(expr in compiled for _, expr in rt.compiled)
    assert dev.launches[-1][0] == "small"  # 15 elements: one thread each


PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{a.value}-{b.value}" for a, b in PAIRS])
def test_cast_every_pair(emu, src, dst):
    s, dev, rt = emu
    a = np.random.default_rng(3).standard_normal((4, 3)) * 50
    a = (a > 0) if src is D.BOOL else a.astype(src.numpy)
    x = put(s, a)
    got = get(s, s.cast(x.T, dst))  # a strided read
    assert mismatch(got, cast_ref(a.T, dst.numpy), None) is None
    assert set(e for _, e in rt.compiled) <= set(family("cast").all_expressions())


LAYOUTS = {
    # name: (base shape, view builder over a base tensor/array, kernel path)
    "rank0": ((), lambda t: t, "small"),
    "empty": ((0, 3), lambda t: t, None),
    "one": ((1,), lambda t: t, "small"),
    "odd": ((7, 3), lambda t: t, "small"),
    "rank6": ((2, 3, 1, 2, 3, 2), lambda t: t, "small"),
    "transposed": ((5, 7), lambda t: t.T, "strided"),
    "big transposed": ((48, 40), lambda t: t.T, "strided"),
    "negative": ((6, 5), lambda t: t[::-1, ::-2], "strided"),
    "offset slice": ((9,), lambda t: t[1:8], "small"),
    "rank6 permuted": ((2, 3, 2, 3, 2, 2), lambda t: _permute(t, (5, 3, 1, 0, 2, 4)),
                       "strided"),
}


def _permute(t, perm):
    return t.transpose(perm) if isinstance(t, np.ndarray) else t.permute(perm)


@pytest.mark.parametrize("op", ["add", "neg", "select", "exp"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts(emu, op, layout):
    s, dev, rt = emu
    shape, build, path = LAYOUTS[layout]
    rng = np.random.default_rng(5)
    arrays = inputs_for(rng, op, np.float32, shape)
    views = [build(put(s, a)) for a in arrays]
    want, _ = REF[op](*[build(a) for a in arrays])
    before = len(dev.launches)
    out = getattr(s, op + "_read")(*views)
    assert out.shape == want.shape and out.is_contiguous
    assert mismatch(get(s, out), want, tolerance(op, np.float32)) is None
    if path is None:
        assert len(dev.launches) == before
    else:
        assert dev.launches[-1][0] == path


@pytest.mark.parametrize("layout", ["odd", "transposed", "big transposed", "negative",
                                    "rank6 permuted"])
@pytest.mark.parametrize("form", ["into", "read_into"])
def test_into_strided_out(emu, layout, form):
    s, dev, rt = emu
    shape, build, _ = LAYOUTS[layout]
    rng = np.random.default_rng(9)
    a, b = inputs_for(rng, "mul", np.float64, shape)
    base = put(s, np.zeros(shape, np.float64))
    out = build(base)
    want, _ = REF["mul"](build(a), build(b))
    getattr(s, "mul_" + form)(build(put(s, a)), put(s, np.ascontiguousarray(build(b))), out)
    assert mismatch(get(s, out), want, None) is None


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize("cplx", [D.COMPLEX64, D.COMPLEX128])
def test_real_scalar_with_complex(emu, op, cplx):
    s, dev, rt = emu
    rng = np.random.default_rng(2)
    z = inputs_for(rng, op, cplx.numpy, (4, 3))[0]
    r = np.array(1.5, cplx.real.numpy)
    want, _ = REF[op](z, r.astype(cplx.numpy))
    got = get(s, getattr(s, op)(put(s, z), put(s, r)))
    assert got.dtype == cplx.numpy and mismatch(got, want, tolerance(op, cplx.numpy)) is None
    assert [x[0] for x in dev.launches[-2:]] == ["contig", "small"]  # promote (a cast), op


def test_rank0_broadcast_flags(emu):
    s, dev, rt = emu
    x = put(s, np.arange(10, dtype=np.int32))
    got = get(s, s.sub(put(s, np.array(100, np.int32)), x))
    assert np.array_equal(got, 100 - np.arange(10, dtype=np.int32))
    assert dev.launches[-1][4][5] & 7 == 1  # a is the broadcast operand
    got = get(s, s.clamp(x, put(s, np.array(2, np.int32)), put(s, np.array(6, np.int32))))
    assert np.array_equal(got, np.clip(np.arange(10), 2, 6))
    assert dev.launches[-1][4][5] & 7 == 6


def test_fast_path_reuses_everything(emu, monkeypatch):
    s, dev, rt = emu
    x, y = put(s, np.ones(64, np.float32)), put(s, np.full(64, 2, np.float32))
    out = put(s, np.zeros(64, np.float32))
    s.add(x, y)
    s.add_into(x, y, out)
    calls = []
    monkeypatch.setattr(elementwise_engine, "run", lambda *a, **k: calls.append(a))
    compiled = len(rt.compiled)
    for _ in range(3):
        z = s.add(x, y)
        s.add_into(x, y, out)
    assert calls == [] and len(rt.compiled) == compiled
    assert np.array_equal(get(s, z), np.full(64, 3, np.float32))
    assert np.array_equal(get(s, out), np.full(64, 3, np.float32))
    s.add(x[1:], y[1:])  # a view: the general path
    assert len(calls) == 1


def test_the_fast_path_plans_each_shape_it_meets(emu, monkeypatch):
    """The fast path keeps the plan of the last shape it launched (``Prep.plan``): shapes
    that alternate, a run past the small kernel's limit and a rank change all launch what
    the general path would, each result right, and the general path is never asked."""
    s, dev, rt = emu
    monkeypatch.setattr(elementwise_engine, "SMALL", 64)
    shapes = [(64,), (3, 5), (65,), (3, 5), (1, 1, 64), (65,)]
    arrays = {sh: np.arange(np.prod(sh), dtype=np.float32).reshape(sh) for sh in shapes}
    tensors = {sh: put(s, a) for sh, a in arrays.items()}
    for x in tensors.values():  # prepares both launches (general path)
        s.add(x, x)
    calls = []
    monkeypatch.setattr(elementwise_engine, "run", lambda *a, **k: calls.append(a))
    for sh in shapes * 2:
        got = get(s, s.add(tensors[sh], tensors[sh]))
        n = int(np.prod(sh))
        assert got.shape == sh and np.array_equal(got, arrays[sh] * 2), sh
        entry, grid, block, _, args = dev.launches[-1]
        assert entry == ("small" if n <= 64 else "contig"), sh
        assert args[4] == n and grid[0] * block[0] >= (n if n <= 64 else 1), sh
    assert calls == []


def test_misaligned_views_use_the_scalar_path(emu, monkeypatch):
    s, dev, rt = emu
    monkeypatch.setattr(elementwise_engine, "SMALL", 0)  # the contiguous kernel
    a = np.arange(40, dtype=np.float32)
    got = get(s, s.add(put(s, a)[1:36], put(s, a)[3:38]))
    assert np.array_equal(got, a[1:36] + a[3:38])
    assert dev.launches[-1][0] == "contig" and not dev.launches[-1][4][5] & 8


@pytest.mark.parametrize("shape,build", [((1000,), lambda t: t), ((10, 100), lambda t: t.T),
                                         ((10, 10, 10), lambda t: t[:, ::-1, :])],
                         ids=["flat", "transposed", "reversed"])
def test_chunked_launches(emu, monkeypatch, shape, build):
    s, dev, rt = emu
    monkeypatch.setattr(elementwise_engine, "SMALL", 0)  # the contiguous kernel
    monkeypatch.setattr(elementwise_engine, "CHUNK", 64)
    monkeypatch.setattr(elementwise_fast, "CHUNK", 64)
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    before = len(dev.launches)
    got = get(s, s.add(build(put(s, a)), build(put(s, b))))
    assert np.array_equal(got, build(a) + build(b))
    assert len(dev.launches) - before >= 1000 // 64
    assert all(0 < args[-4] <= 64 for _, _, _, _, args in dev.launches[before:])


@pytest.mark.parametrize("key,dtype,a,b", [
    ("div", D.INT32, [1, 2, 3], [1, 0, 1]), ("rem", D.INT8, [5, 5], [0, 2]),
    ("div", D.UINT8, [9], [0]), ("pow", D.INT64, [2, 2], [3, -1]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_deferred_error_word(emu, key, dtype, a, b):
    s, dev, rt = emu
    x, y = put(s, np.array(a, dtype.numpy)), put(s, np.array(b, dtype.numpy))
    assert dev.err_code() == 0
    out = getattr(s, key)(x, y)
    want, err = REF[key](np.array(a, dtype.numpy), np.array(b, dtype.numpy))
    assert err and dev.err_code() == error_code(key, KINDS[key].error_reason(dtype))
    assert error_message(dev.err_code()).endswith(f" in {key}")
    assert np.array_equal(get(s, out), want)


def test_no_error_word_for_infallible(emu):
    s, dev, rt = emu
    s.div(put(s, np.ones(3, np.float32)), put(s, np.zeros(3, np.float32)))
    assert dev.launches[-1][4][-2:] == [0, 0] and dev.err_code() == 0


READ_OPS = [ElementwiseReadOp(n) for n in ("add", "sub", "mul", "div", "rem", "pow", "maximum",
                                          "minimum", "neg", "conj", "abs", "sign", "exp", "log",
                                          "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1",
                                          "log1p", "select", "clamp")] + \
    [ElementwiseReadOp.compare(d) for d in CompareDir]


@pytest.mark.parametrize("rec", READ_OPS, ids=repr)
def test_elementwise_read_into(emu, rec):
    s, dev, rt = emu
    key = rec.name if rec.direction is None else f"compare_{rec.direction.value}"
    arrays = inputs_for(np.random.default_rng(6), key, np.float32, (4, 6))
    want, _ = REF[key](*[a.T for a in arrays])
    out = put(s, np.zeros((6, 4), want.dtype))
    assert s.elementwise_read_into(rec, [put(s, a).T for a in arrays], out) is None
    assert mismatch(get(s, out), want, tolerance(key, np.float32)) is None


AGREE = [(op, form) for op in ("add", "mul", "sub", "maximum", "neg", "exp", "abs")
         for form in ("owned", "into", "in_place")
         if not (op == "exp" and form != "owned")]  # analytic ops have no into form


@pytest.mark.parametrize("op,form", AGREE, ids=[f"{o}-{f}" for o, f in AGREE])
def test_fast_and_general_paths_agree(emu, monkeypatch, op, form):
    """DESIGN 9: the fast path is the general path with the planning skipped. Run both on
    the same inputs: the same kernel, geometry and launch head, the same bits."""
    s, dev, rt = emu
    kind = KINDS[op]
    rng = np.random.default_rng(9)
    data = [rng.standard_normal(257).astype(np.float32) for _ in range(kind.arity)]
    name = op if form == "owned" else op + "_into"

    def operands():
        xs = [put(s, a) for a in data]
        out = None if form == "owned" else xs[0] if form == "in_place" else \
            put(s, np.zeros(257, np.float32))
        return xs, out

    def run(path):
        xs, out = operands()
        before = len(dev.launches)
        if path == "general":
            res = elementwise_engine.run(s._ctx, kind, name, tuple(xs), out)
        else:
            res = getattr(s, name)(*xs, *([] if out is None else [out]))
        return get(s, out if out is not None else res), dev.launches[before:]

    run("fast")  # the first call prepares (general path)
    general_calls = []
    real = elementwise_engine.run
    monkeypatch.setattr(elementwise_engine, "run",
                        lambda *a, **k: general_calls.append(a) or real(*a, **k))
    fast_bits, fast_launches = run("fast")
    assert general_calls == [], "the repeated call did not take the fast path"
    monkeypatch.setattr(elementwise_engine, "run", real)
    general_bits, general_launches = run("general")
    assert fast_bits.tobytes() == general_bits.tobytes()
    (fpath, fgrid, fblock, fsmem, fargs), = fast_launches
    (gpath, ggrid, gblock, gsmem, gargs), = general_launches
    assert (fpath, fgrid, fblock, fsmem) == (gpath, ggrid, gblock, gsmem)
    assert fargs[4:] == gargs[4:]  # n, flags, error word and code (the pointers differ)


def test_sign_keeps_negative_zero(emu):
    """sign(-0.0) is -0.0 (jax.lax.sign; numpy gives +0.0); sign(+0.0) is +0.0; NaN stays
    NaN."""
    s, dev, rt = emu
    for dt in (np.float16, np.float32, np.float64):
        x = np.array([-0.0, 0.0, np.nan, -2.0, 3.0], dt)
        got = get(s, s.sign(put(s, x)))
        assert list(np.signbit(got)) == [True, False, False, True, False]
        assert np.isnan(got[2]) and list(got[[0, 1, 3, 4]]) == [0, 0, -1, 1]
