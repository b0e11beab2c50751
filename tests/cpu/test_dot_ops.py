"""The dot family's functions on the CPU, over a recording context (tests/gpu/
dot_fakes.py): fake device tensors (buffers with addresses but no memory), the real
validation, planning and slot logic, and recorders in place of allocation, cuBLAS
(``exec.blas.Blas``) and launches.

Checks: every error path raises before anything is allocated, planned into a slot, or
launched; the recorded calls of the success paths; cached slots are reused on equal keys
and re-planned otherwise; an output that shares device memory with an input is refused
on every path, whatever tensor objects describe that memory (issue 13 item 5). Argument
assembly is in test_dot_args.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from dot_fakes import BMM, MM, Rec, is_copy, kinds, session

from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.ops.dot.plan import OP_N
from tenferro_cuda.tensor import Tensor


@pytest.fixture
def ctx():
    return Rec()


@pytest.fixture
def s(ctx):
    return session(ctx)


# --- error paths: nothing allocated, planned or launched ---------------------------------------
def _errors(ctx: Rec, s):
    f64 = DType.FLOAT64
    dev = ctx.dev
    a, b, o = dev((4, 3)), dev((3, 5)), dev((4, 5))
    host = Tensor.from_numpy(np.zeros((4, 3), np.float32))
    freed = dev((3, 5))
    freed.buffer.release()
    big = dev((8, 8))
    acc = DotGeneralAccumulation(2.0, 1.0)
    g = s.dot_general
    into = s.dot_general_read_into
    accum = s.dot_general_read_into_accum
    cached = s.dot_general_read_into_accum_cached
    return [
        ("lhs_host", lambda: g(host, b, MM), RuntimeStateError),
        ("rhs_reclaimed", lambda: g(a, freed, MM), RuntimeStateError),
        ("lhs_host_array", lambda: g(np.zeros((4, 3)), b, MM), RuntimeStateError),
        ("lhs_not_tensor", lambda: g("a", b, MM), ValidationError),
        ("dtype_mismatch", lambda: g(a, dev((3, 5), f64), MM), ValidationError),
        ("bool", lambda: g(dev((4, 3), DType.BOOL), dev((3, 5), DType.BOOL), MM),
         UnsupportedDTypeError),
        ("extent_mismatch", lambda: g(a, dev((4, 5)), MM), ValidationError),
        ("config_type", lambda: g(a, b, ((1,), (0,))), ValidationError),
        ("config_unhashable", lambda: g(a, b, [(1,), (0,)]), ValidationError),
        ("tf32_float64", lambda: g(dev((4, 3), f64), dev((3, 5), f64),
                                   DotGeneralConfig((1,), (0,), precision="tf32")),
         ValidationError),
        ("into_out_shape", lambda: into(a, b, MM, dev((5, 4))), ValidationError),
        ("into_out_dtype", lambda: into(a, b, MM, dev((4, 5), f64)), ValidationError),
        ("into_out_host", lambda: into(a, b, MM, Tensor.from_numpy(np.zeros((4, 5), "f4"))),
         RuntimeStateError),
        ("into_out_overlaps_lhs", lambda: into(big[:4, :3], b, MM, big[:4, 3:8]),
         ValidationError),
        ("into_out_self_overlap", lambda: into(a, b, MM, big.view((4, 5), (1, 1))),
         ValidationError),
        ("accum_complex_alpha", lambda: accum(a, b, MM, DotGeneralAccumulation(1j), o),
         ValidationError),
        ("accum_not_accumulation", lambda: accum(a, b, MM, (1.0, 0.0), o), ValidationError),
        ("accum_int_overflow", lambda: accum(dev((4, 3), DType.INT8), dev((3, 5), DType.INT8),
                                             MM, DotGeneralAccumulation(1000),
                                             dev((4, 5), DType.INT8)), ValidationError),
        ("cached_slot_negative", lambda: cached(-1, a, b, MM, acc, o), ValidationError),
        ("cached_slot_bool", lambda: cached(True, a, b, MM, acc, o), ValidationError),
        ("cached_slot_str", lambda: cached("0", a, b, MM, acc, o), ValidationError),
        ("cached_bad_out", lambda: cached(0, a, b, MM, acc, dev((4, 4))), ValidationError),
        ("cached_none_bad_out", lambda: cached(None, a, b, MM, acc, dev((4, 4))),
         ValidationError),
        ("cached_out_reclaimed", lambda: cached(0, a, b, MM, acc, freed), RuntimeStateError),
        ("grouped_not_config", lambda: s.grouped_gemm([GemmJob(a, b, o)]), ValidationError),
    ]


_probe = Rec()
ERROR_IDS = [c[0] for c in _errors(_probe, session(_probe))]


@pytest.mark.parametrize("name", ERROR_IDS)
def test_error_paths_do_nothing(ctx, s, name):
    case = {c[0]: c for c in _errors(ctx, s)}[name]
    with pytest.raises(case[2]) as info:
        case[1]()
    assert info.value.op.startswith(("dot_general", "grouped_gemm"))
    assert ctx.calls == []
    assert not ctx.dot_slots


def _grouped_errors(ctx: Rec):
    f32 = DType.FLOAT32
    dev = ctx.dev
    a, b, o = dev((4, 3)), dev((3, 5)), dev((4, 5))
    big = dev((8, 10))
    job = GemmJob(a, b, o)
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    return [
        ("dtype_mismatch", [job, GemmJob(dev((4, 3), DType.FLOAT64), dev((3, 5), DType.FLOAT64),
                                         dev((4, 5), DType.FLOAT64))], "jobs\\[1\\]"),
        ("job_shape", [job, GemmJob(a, dev((4, 5)), o)], "jobs\\[1\\]"),
        ("outputs_overlap", [GemmJob(a, b, big[:4, :5]), GemmJob(a, b, big[2:6, 3:8])],
         "jobs\\[1\\].out overlaps jobs\\[0\\].out"),
        ("out_overlaps_other_input", [GemmJob(big[:4, :3], b, o), GemmJob(a, b, big[:4, 2:7])],
         "overlaps"),
        ("precision_disagrees", [job, GemmJob(a, b, dev((4, 5), f32), tf32)], "precision"),
        ("host_out", [GemmJob(a, b, Tensor.from_numpy(np.zeros((4, 5), "f4")))], "jobs\\[0\\]"),
        ("bool", [GemmJob(dev((4, 3), DType.BOOL), dev((3, 5), DType.BOOL),
                          dev((4, 5), DType.BOOL))], "jobs\\[0\\]"),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _grouped_errors(Rec())])
def test_grouped_error_paths_do_nothing(ctx, s, name):
    case = {c[0]: c for c in _grouped_errors(ctx)}[name]
    with pytest.raises((ValidationError, UnsupportedDTypeError, RuntimeStateError),
                       match=case[2]) as info:
        s.grouped_gemm(GroupedGemmConfig(case[1]))
    assert info.value.op == "grouped_gemm"
    assert ctx.calls == []


# --- success paths (recorded) ---------------------------------------------------------------------
def test_dot_general_allocates_once_after_checks(ctx, s):
    out = s.dot_general(ctx.dev((2, 4, 3)), ctx.dev((2, 3, 5)), BMM)
    assert out.shape == (2, 4, 5) and out.dtype is DType.FLOAT32
    assert kinds(ctx.calls) == ["alloc", "gemm"]
    assert ctx.calls[1][2:5] == (1.0, 0.0, "default")
    assert ctx.calls[1][5][2] == out.data_ptr()


def test_repeated_dot_general_binds_once_and_still_checks(ctx, s):
    a, b = ctx.dev((2, 4, 3)), ctx.dev((2, 3, 5))
    for _ in range(4):
        s.dot_general(a, b, BMM)
    assert kinds(ctx.calls) == ["alloc", "gemm", "alloc", "gemm", "bind"] + ["alloc", "call"] * 2
    assert ctx.calls[-1][2:4] == (1.0, 0.0)
    assert ctx.calls[-1][5][:2] == (b.data_ptr(), a.data_ptr()) or \
        ctx.calls[-1][5][:2] == (a.data_ptr(), b.data_ptr())
    n = len(ctx.calls)
    freed = ctx.dev((2, 3, 5))
    freed.buffer.release()
    host = Tensor.from_numpy(np.zeros((2, 4, 3), np.float32))
    with pytest.raises(RuntimeStateError):
        s.dot_general(a, freed, BMM)
    with pytest.raises(RuntimeStateError):
        s.dot_general(host, b, BMM)
    with pytest.raises(ValidationError, match="dtype mismatch"):
        s.dot_general(a, ctx.dev((2, 3, 5), DType.FLOAT64), BMM)
    with pytest.raises(ValidationError, match="tf32"):
        s.dot_general(ctx.dev((2, 4, 3), DType.FLOAT64), ctx.dev((2, 3, 5), DType.FLOAT64),
                      DotGeneralConfig((2,), (1,), (0,), (0,), precision="tf32"))
    assert len(ctx.calls) == n
    s.dot_general(a, b, DotGeneralConfig((2,), (1,), (0,), (0,)))  # an equal config object
    assert kinds(ctx.calls[n:]) == ["alloc", "call"]
    memo = ctx.memo[("dot", "repeat")]
    assert len(memo) == 1 and memo.limit == 256


def test_int_dot_general_unit_scalars(ctx, s):
    i32 = DType.INT32
    s.dot_general(ctx.dev((4, 3), i32), ctx.dev((3, 5), i32), MM)
    launch = ctx.calls[-1]
    assert launch[0] == "launch" and launch[1] == "tf::dot_int<int>"
    assert launch[4][16:] == (1, 0, 1) and [type(x) for x in launch[4][16:18]] == [int, int]
    assert ctx.blas_asked == 0


def test_complex_dot_general_unit_scalars(ctx, s):
    c64 = DType.COMPLEX64
    s.dot_general(ctx.dev((4, 3), c64), ctx.dev((3, 5), c64), MM)
    run = ctx.calls[-1]
    assert run[2:4] == (1 + 0j, 0j) and [type(x) for x in run[2:4]] == [complex, complex]
    assert ctx.blas_asked > 0


def test_read_into_overwrites(ctx, s):
    s.dot_general_read_into(ctx.dev((4, 3)), ctx.dev((3, 5)), MM, ctx.dev((4, 5)))
    assert kinds(ctx.calls) == ["gemm"] and ctx.calls[-1][2:4] == (1.0, 0.0)


def test_accum_passes_scalars_and_conj_only_for_complex(ctx, s):
    acc = DotGeneralAccumulation(2, -1, lhs_conj=True, rhs_conj=True)
    s.dot_general_read_into_accum(ctx.dev((4, 3)), ctx.dev((3, 5)), MM, acc, ctx.dev((4, 5)))
    plan = ctx.calls[-1][1]
    assert ctx.calls[-1][2:4] == (2.0, -1.0) and OP_N in (plan.transa, plan.transb)
    c64 = DType.COMPLEX64
    s.dot_general_read_into_accum(ctx.dev((4, 3), c64), ctx.dev((3, 5), c64), MM, acc,
                                  ctx.dev((4, 5), c64))
    plan = ctx.calls[-1][1]
    assert (plan.transa, plan.transb) == (2, 2)


def test_k_zero_fills_or_scales(ctx, s, monkeypatch):
    from tenferro_cuda.ops import storage

    scaled = []
    monkeypatch.setattr(storage, "scale", lambda c, out, f, op: scaled.append(f))
    for beta in (0, 2.5, 1):
        s.dot_general_read_into_accum(ctx.dev((4, 0)), ctx.dev((0, 5)), MM,
                                      DotGeneralAccumulation(3.0, beta), ctx.dev((4, 5)))
    assert kinds(ctx.calls) == ["memset"] and ctx.calls[0][2:] == (0, 80)
    assert scaled == [2.5]


# --- cached slots ---------------------------------------------------------------------------------
def test_cached_slot_reuse_and_invalidation(ctx, s):
    a, b, o = ctx.dev((4, 3)), ctx.dev((3, 5)), ctx.dev((4, 5))
    acc = DotGeneralAccumulation(1.0, 1.0)
    run = s.dot_general_read_into_accum_cached
    run(3, a, b, MM, acc, o)
    assert kinds(ctx.calls) == ["bind", "gemm"]
    first = ctx.calls[-1]
    assert ctx.dot_slots[3].temps == [None, None, None]
    binds = kinds(ctx.calls).count("bind")
    run(3, ctx.dev((4, 3)), ctx.dev((3, 5)), DotGeneralConfig((1,), (0,)),
        DotGeneralAccumulation(0.5, 2), ctx.dev((4, 5)))
    again = ctx.calls[-1]
    assert again[0] == "call" and again[1] is first[1] and again[2:4] == (0.5, 2.0)
    assert [type(x) for x in again[2:4]] == [float, float]
    assert kinds(ctx.calls).count("bind") == binds  # warm slot: no re-planning
    run(3, ctx.dev((4, 2)), ctx.dev((2, 5)), MM, acc, o)  # shape change
    assert ctx.calls[-1][1] is not first[1] and ctx.calls[-1][1].k == 2
    run(3, a, b, MM, acc, ctx.dev((5, 4)).T)  # stride change
    assert not ctx.calls[-1][1].swap
    replanned = ctx.calls[-1][1]
    run(3, a, b, DotGeneralConfig((1,), (0,), precision="tf32"), acc, ctx.dev((5, 4)).T)
    assert ctx.calls[-1][1] is not replanned and ctx.calls[-1][4] == "tf32"
    run(4, a, b, MM, acc, o)
    assert set(ctx.dot_slots) == {3, 4}
    s.dot_general_cache_clear(3)
    assert set(ctx.dot_slots) == {4}
    s.dot_general_cache_clear()
    assert ctx.dot_slots == {}


def test_cached_staged_plan_reuses_temporaries(ctx, s):
    lhs, rhs = ctx.dev((3, 5, 4)), ctx.dev((3, 4, 6))  # lhs contracting axes do not merge
    cfg = DotGeneralConfig((0, 2), (0, 1))
    out = ctx.dev((5, 6))
    s.dot_general_read_into_accum_cached(0, lhs, rhs, cfg, DotGeneralAccumulation(), out)
    temps = ctx.dot_slots[0].temps
    tmp = temps[0]
    assert tmp is not None and kinds(ctx.calls).count("alloc") == 1
    n = len(ctx.calls)
    s.dot_general_read_into_accum_cached(0, lhs, rhs, cfg, DotGeneralAccumulation(), out)
    second = ctx.calls[n:]
    assert "alloc" not in kinds(second) and ctx.dot_slots[0].temps is temps
    assert temps[0] is tmp and sum(map(is_copy, second)) == 1
    gemms = [c for c in ctx.calls if c[0] == "gemm"]
    assert len(gemms) == 2 and gemms[0][1] is gemms[1][1]


def test_cached_conj_change_replans(ctx, s):
    c64 = DType.COMPLEX64
    a, b, o = ctx.dev((4, 3), c64), ctx.dev((3, 5), c64), ctx.dev((4, 5), c64)
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(), o)
    p0 = ctx.calls[-1][1]
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(lhs_conj=True), o)
    assert ctx.calls[-1][1] is not p0 and 2 in (ctx.calls[-1][1].transa, ctx.calls[-1][1].transb)


def test_cached_warm_slot_still_checks_call_values(ctx, s):
    big = ctx.dev((8, 8))
    a, b = big[:4, :3], ctx.dev((3, 5))
    out = ctx.dev((4, 8))[:, :5]
    acc = DotGeneralAccumulation(1.0, 0.0)
    s.dot_general_read_into_accum_cached(1, a, b, MM, acc, out)
    n = len(ctx.calls)
    with pytest.raises(ValidationError, match="overlaps"):  # same shapes/strides as out
        s.dot_general_read_into_accum_cached(1, a, b, MM, acc, big[4:, :5].view(
            (4, 5), (8, 1), 0))
    with pytest.raises(ValidationError, match="real"):
        s.dot_general_read_into_accum_cached(1, a, b, MM, DotGeneralAccumulation(1j), out)
    with pytest.raises(RuntimeStateError):
        s.dot_general_read_into_accum_cached(1, a, Tensor.from_numpy(np.zeros((3, 5), "f4")),
                                             MM, acc, out)
    assert len(ctx.calls) == n


def test_cached_none_does_not_store(ctx, s):
    s.dot_general_read_into_accum_cached(None, ctx.dev((4, 3)), ctx.dev((3, 5)), MM,
                                         DotGeneralAccumulation(), ctx.dev((4, 5)))
    assert kinds(ctx.calls) == ["gemm"]
    assert not ctx.dot_slots


def test_grouped_empty_does_nothing(ctx, s):
    s.grouped_gemm(GroupedGemmConfig(()))
    assert ctx.calls == []
