"""execute_elementwise_fusion on the emulated device (tests/gpu/test_fusion_emu.py): the
real session method, walk, code generation, argument packing and launches, with the
generated kernels interpreted against the numpy reference. Fused results are compared,
bit for bit, with the same plan run op by op through the (emulated) unfused methods:
named plans x dtypes, random plans (hypothesis), strided and broadcast views, rank-0
inputs, the hot path, chunking and deferred errors. The GPU tier repeats the value
checks on the device."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_elementwise_ref import mismatch
from test_fusion_emu import fusion_session, get, put
from test_fusion_plans import PLAN_CASES, PLAN_IDS, PLANS, make_inputs, random_plans, unfused

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.fusion_views import broadcast_view
from tenferro_cuda.ops import fusion as fusion_ops
from tenferro_cuda.runtime import error_code, error_message

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction
OP = "execute_elementwise_fusion"


@pytest.fixture
def emu(monkeypatch):
    return fusion_session(monkeypatch)


def check_same(s, fused, want) -> None:
    """Fused outputs equal the unfused ones bit for bit (NaN payloads aside)."""
    assert fused is not None and len(fused) == len(want)
    for f, w in zip(fused, want):
        assert f.is_contiguous and f.shape == w.shape and f.dtype is w.dtype
        assert mismatch(get(s, f), get(s, w), None) is None


@pytest.mark.parametrize("name,dtype", PLAN_CASES, ids=PLAN_IDS)
def test_named_plans(emu, name, dtype):
    s, fdev, dev, ctx = emu
    plan = PLANS[name]
    arrays = make_inputs(3, [dtype] * plan.num_inputs, (7, 9))
    if name in ("div_rem", "pow") and dtype.is_integer:  # stay in the defined domain
        arrays[1] = (np.abs(arrays[1].astype(np.int64)) % 4 + 1).astype(dtype.numpy)
    xs = [put(s, a) for a in arrays]
    before = len(fdev.launches)
    got = s.execute_elementwise_fusion(xs, plan)
    assert len(fdev.launches) == before + 1 and fdev.launches[-1][0] == "contig"
    assert fdev.launches[-1][2]["flags"] & 1  # pool allocations: 16-byte vectors
    check_same(s, got, unfused(s, plan, xs))
    s.synchronize()


VIEWS = {
    "compact": lambda s, a: put(s, a),
    "transposed": lambda s, a: put(s, np.ascontiguousarray(a.T)).T,
    "reversed": lambda s, a: put(s, a[::-1].copy())[::-1],
    "strided": lambda s, a: put(s, np.repeat(a, 2, axis=1))[:, ::2],
    "offset": lambda s, a: put(s, np.concatenate([a.reshape(-1)[:1], a.reshape(-1)])
                               ).view(a.shape, (a.shape[1], 1), 1),
    "scalar": None,
}


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_plans(), views=st.lists(st.sampled_from(list(VIEWS)), min_size=3,
                                           max_size=3), seed=st.integers(0, 1 << 30))
def test_random_plans_match_unfused(emu, case, views, seed):
    s, fdev, dev, ctx = emu
    plan, dtypes = case
    scalar = [k for k in range(plan.num_inputs) if views[k] == "scalar"]
    arrays = make_inputs(seed, dtypes, (5, 6), scalar)
    xs = [put(s, a) if views[k] == "scalar" else VIEWS[views[k]](s, a)
          for k, a in enumerate(arrays)]
    want = unfused(s, plan, xs)
    got = s.execute_elementwise_fusion(xs, plan)
    if got is None:  # declined: only because the outputs have different shapes
        assert len({w.shape for w in want}) > 1
        return
    check_same(s, got, want)


def _plan_add():
    return P(2, [Ins("add", (0, 1))], (2,))


BROADCASTS = {
    # name: (x shape, operand shape, dims, kernel path, 16-byte vectors)
    "row bias": ((30, 40), (40,), (1,), "bcast", True),
    "column scale": ((30, 40), (30,), (0,), "bcast", True),
    "column scale 1": ((30, 40), (30, 1), (0, 1), "bcast", True),
    "scalar as view": ((30, 40), (), (), "contig", True),
    "extent 1 to n": ((50,), (1,), (0,), "contig", True),
    "batch": ((4, 5, 6), (5, 6), (1, 2), "bcast", False),
    "middle": ((4, 5, 6), (5,), (1,), "bcast", False),
    "middle, rows of 8": ((4, 5, 8), (5,), (1,), "bcast", True),
    "leading": ((4, 5, 6), (4, 1, 1), (0, 1, 2), "bcast", False),
    "ragged rows": ((7, 13), (13,), (1,), "bcast", False),
    "four axes": ((2, 3, 4, 8), (3, 8), (1, 3), "strided", False),
}


@pytest.mark.parametrize("name", list(BROADCASTS))
def test_broadcast_views(emu, name):
    s, fdev, dev, ctx = emu
    shape, bs, dims, path, vectors = BROADCASTS[name]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    b = np.arange(np.prod(bs), dtype=np.float32).reshape(bs) * 0.5 + 1
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = bs[i]
    view = broadcast_view(put(s, b), shape, dims)
    got = s.execute_elementwise_fusion([put(s, x), view], _plan_add())
    assert np.array_equal(get(s, got[0]), x + b.reshape(expanded))
    assert fdev.launches[-1][0] == path
    if path != "strided":
        assert bool(fdev.launches[-1][2]["flags"] & 1) == vectors
    if path == "contig":
        assert "s1 = *p1" in ctx.sources[-1][0]  # read once per thread


@pytest.mark.parametrize("shift", [0, 1, 4])
@pytest.mark.parametrize("dtype", [D.INT8, D.FLOAT16, D.FLOAT64, D.COMPLEX128])
def test_broadcast_rows_vectors_need_aligned_rows(emu, shift, dtype):
    """A bias row that starts ``shift`` elements into its buffer, beside a compact input
    (and a scalar): vectors only when every unit-stride row is vector-aligned; the
    values equal numpy's either way."""
    s, fdev, dev, ctx = emu
    rows, cols = 6, 32
    x = np.arange(rows * cols).reshape(rows, cols).astype(dtype.numpy)
    b = (np.arange(cols + shift) % 7).astype(dtype.numpy)
    row = put(s, b).view((cols,), (1,), shift)
    plan = P(3, [Ins("add", (0, 1)), Ins("mul", (3, 2))], (4,))
    two = put(s, np.array(2, dtype.numpy))
    bias = broadcast_view(row, (rows, cols), (1,))
    got = s.execute_elementwise_fusion([put(s, x), bias, two], plan)
    want = (x + b[shift:]) * np.array(2, dtype.numpy)
    assert np.array_equal(get(s, got[0]), want.astype(dtype.numpy))
    path, _, args = fdev.launches[-1]
    vec = 16 // dtype.itemsize
    assert path == "bcast" and bool(args["flags"] & 1) == (shift % vec == 0)


def test_hot_path_reuses_everything(emu, monkeypatch):
    s, fdev, dev, ctx = emu
    plan = PLANS["exp_mul_add"]
    a, b = put(s, np.full(64, 0.5, np.float32)), put(s, np.full(64, 2, np.float32))
    s.execute_elementwise_fusion([a, b], plan)
    calls = []
    general = fusion_ops.general
    monkeypatch.setattr(fusion_ops, "general", lambda *args: calls.append(1) or general(*args))
    sources = len(ctx.sources)
    for _ in range(3):
        out, = s.execute_elementwise_fusion((a, b), plan)
    twin = P(2, list(plan.instructions), plan.outputs)  # an equal plan object
    out2, = s.execute_elementwise_fusion([a, b], twin)
    assert calls == [] and len(ctx.sources) == sources
    want = np.float32(np.exp(np.float32(0.5))) * np.float32(2) + np.float32(0.5)
    assert np.array_equal(get(s, out), np.full(64, want, np.float32))
    assert np.array_equal(get(s, out2), get(s, out))
    s.execute_elementwise_fusion([a[1:], b[1:]], plan)  # a view: the general path, same kernel
    s.execute_elementwise_fusion([a, put(s, np.array(2, np.float32))], plan)  # new class
    assert len(calls) == 2 and len(ctx.sources) == sources + 1


def test_misaligned_views_use_the_element_path(emu):
    s, fdev, dev, ctx = emu
    a = np.arange(40, dtype=np.float32)
    got = s.execute_elementwise_fusion([put(s, a)[1:36], put(s, a)[3:38]], _plan_add())
    assert np.array_equal(get(s, got[0]), a[1:36] + a[3:38])
    assert fdev.launches[-1][0] == "contig" and not fdev.launches[-1][2]["flags"] & 1


@pytest.mark.parametrize("build", [lambda t: t, lambda t: t.T, lambda t: t[:, ::-1]],
                         ids=["contig", "transposed", "reversed"])
def test_chunked_launches(emu, monkeypatch, build):
    s, fdev, dev, ctx = emu
    monkeypatch.setattr(fusion_ops, "CHUNK", 64)
    a = np.random.default_rng(4).standard_normal((20, 30)).astype(np.float32)
    before = len(fdev.launches)
    ta = build(put(s, a))
    got = s.execute_elementwise_fusion([ta, ta], P(2, [Ins("mul", (0, 1)), Ins("sub", (2, 0))],
                                                   (3,)))
    want = build(a) * build(a) - build(a)
    assert np.array_equal(get(s, got[0]), want)
    launches = fdev.launches[before:]
    assert len(launches) >= 600 // 64 and all(0 < x[2]["n"] <= 64 for x in launches)


@pytest.mark.parametrize("shape,bs,dims", [((20, 32), (32,), (1,)), ((6, 5, 8), (5,), (1,)),
                                           ((9, 4, 24), (9, 1, 24), (0, 1, 2))],
                         ids=["row", "middle", "outer and inner"])
def test_chunked_broadcast_rows(emu, monkeypatch, shape, bs, dims):
    s, fdev, dev, ctx = emu
    monkeypatch.setattr(fusion_ops, "CHUNK", 64)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    b = np.random.default_rng(6).standard_normal(bs).astype(np.float32)
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = bs[i]
    before = len(fdev.launches)
    got = s.execute_elementwise_fusion([put(s, x), broadcast_view(put(s, b), shape, dims)],
                                       _plan_add())
    assert np.array_equal(get(s, got[0]), x + b.reshape(expanded))
    launches = fdev.launches[before:]
    assert len(launches) >= x.size // 64 and all(0 < a["n"] <= 64 for _, _, a in launches)
    assert all(path == "bcast" and a["flags"] & 1 for path, _, a in launches)


def test_rank0_inputs_and_outputs(emu):
    s, fdev, dev, ctx = emu
    plan = P(2, [Ins("mul", (0, 1)), Ins("neg", (2,))], (3, 2))
    x, y = put(s, np.array(3, np.int32)), put(s, np.array(-5, np.int32))
    got = s.execute_elementwise_fusion([x, y], plan)
    assert [t.shape for t in got] == [(), ()]
    assert [int(get(s, t)) for t in got] == [15, -15]
    assert fdev.launches[-1][2]["n"] == 1


def test_empty_inputs_launch_nothing(emu):
    s, fdev, dev, ctx = emu
    x = put(s, np.zeros((0, 3), np.float32))
    before = len(fdev.launches)
    got = s.execute_elementwise_fusion([x, x], PLANS["exp_mul_add"])
    assert [t.shape for t in got] == [(0, 3)] and len(fdev.launches) == before
    assert ctx.sources == []


@pytest.mark.parametrize("cplx", [D.COMPLEX64, D.COMPLEX128])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
def test_real_scalar_meets_complex(emu, op, cplx):
    s, fdev, dev, ctx = emu
    z = make_inputs(8, [cplx], (4, 5))[0]
    xs = [put(s, z), put(s, np.array(1.5, cplx.real.numpy))]
    plan = P(2, [Ins(op, (1, 0)), Ins("mul", (2, 0))], (3,))
    check_same(s, s.execute_elementwise_fusion(xs, plan), unfused(s, plan, xs))
    assert "c2_0 = tf::CastOp<" in ctx.sources[-1][0]


@pytest.mark.parametrize("op,dtype,b,reason", [
    ("div", D.INT32, [1, 0, 2], "integer division by zero"),
    ("rem", D.UINT8, [0, 1, 1], "integer division by zero"),
    ("pow", D.INT64, [1, -1, 2], "negative integer exponent"),
], ids=["div", "rem", "pow"])
def test_deferred_errors(emu, op, dtype, b, reason):
    s, fdev, dev, ctx = emu
    plan = P(2, [Ins(op, (0, 1)), Ins("add", (2, 0))], (3,))
    x, y = put(s, np.array([7, 8, 9], dtype.numpy)), put(s, np.array(b, dtype.numpy))
    out, = s.execute_elementwise_fusion([x, y], plan)
    assert dev.err_code() == error_code(OP, reason)
    assert error_message(dev.err_code()) == f"{reason} in {OP}"
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and info.value.op == OP
    assert get(s, out)[1] == 8  # the failing element is 0, then + x


def test_infallible_plans_pass_no_error_word(emu):
    s, fdev, dev, ctx = emu
    x = put(s, np.ones(3, np.float32))
    s.execute_elementwise_fusion([x, x], P(2, [Ins("div", (0, 1))], (2,)))
    assert fdev.launches[-1][2]["err"] == 0


def test_dead_instructions_do_not_run(emu):
    s, fdev, dev, ctx = emu
    x, z = put(s, np.arange(4, dtype=np.int32)), put(s, np.zeros(4, np.int32))
    plan = P(2, [Ins("div", (0, 1)), Ins("add", (0, 0))], (3,))  # v2 (x / 0) is dead
    out, = s.execute_elementwise_fusion([x, z], plan)
    assert np.array_equal(get(s, out), 2 * np.arange(4)) and dev.err_code() == 0
    assert "DivOp" not in ctx.sources[-1][0] and "p1" not in ctx.sources[-1][0]
