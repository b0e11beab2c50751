"""The dot family's session methods on the CPU, over a fake session (tests/gpu/
dot_fakes.py): fake device tensors (buffers with addresses but no memory), the real
validation, planning and slot logic, and recorders in place of allocation, cuBLAS and
launches.

Checks: every error path raises before anything is allocated, planned into a slot, or
launched; the recorded calls of the success paths; cached slots are reused on equal keys
and re-planned otherwise. Argument assembly is in test_dot_args.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from dot_fakes import BMM, MM, Fake

from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.ops.dot_plan import OP_N
from tenferro_cuda.tensor import Tensor


@pytest.fixture
def s():
    return Fake()


# --- error paths: nothing allocated, planned or launched ---------------------------------------
def _errors(s: Fake):
    f64 = DType.FLOAT64
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    host = Tensor.from_numpy(np.zeros((4, 3), np.float32))
    freed = s.dev((3, 5))
    freed.buffer.freed = True
    big = s.dev((8, 8))
    acc = DotGeneralAccumulation(2.0, 1.0)
    g = s.dot_general
    into = s.dot_general_read_into
    accum = s.dot_general_read_into_accum
    cached = s.dot_general_read_into_accum_cached
    return [
        ("lhs_host", lambda: g(host, b, MM), RuntimeStateError),
        ("rhs_reclaimed", lambda: g(a, freed, MM), RuntimeStateError),
        ("lhs_not_tensor", lambda: g(np.zeros((4, 3)), b, MM), ValidationError),
        ("dtype_mismatch", lambda: g(a, s.dev((3, 5), f64), MM), ValidationError),
        ("bool", lambda: g(s.dev((4, 3), DType.BOOL), s.dev((3, 5), DType.BOOL), MM),
         UnsupportedDTypeError),
        ("extent_mismatch", lambda: g(a, s.dev((4, 5)), MM), ValidationError),
        ("config_type", lambda: g(a, b, ((1,), (0,))), ValidationError),
        ("config_unhashable", lambda: g(a, b, [(1,), (0,)]), ValidationError),
        ("tf32_float64", lambda: g(s.dev((4, 3), f64), s.dev((3, 5), f64),
                                   DotGeneralConfig((1,), (0,), precision="tf32")),
         ValidationError),
        ("into_out_shape", lambda: into(a, b, MM, s.dev((5, 4))), ValidationError),
        ("into_out_dtype", lambda: into(a, b, MM, s.dev((4, 5), f64)), ValidationError),
        ("into_out_host", lambda: into(a, b, MM, Tensor.from_numpy(np.zeros((4, 5), "f4"))),
         RuntimeStateError),
        ("into_out_overlaps_lhs", lambda: into(big[:4, :3], b, MM, big[:4, 3:8]),
         ValidationError),
        ("into_out_self_overlap", lambda: into(a, b, MM, big.view((4, 5), (1, 1))),
         ValidationError),
        ("accum_complex_alpha", lambda: accum(a, b, MM, DotGeneralAccumulation(1j), o),
         ValidationError),
        ("accum_not_accumulation", lambda: accum(a, b, MM, (1.0, 0.0), o), ValidationError),
        ("accum_int_overflow", lambda: accum(s.dev((4, 3), DType.INT8), s.dev((3, 5), DType.INT8),
                                             MM, DotGeneralAccumulation(1000),
                                             s.dev((4, 5), DType.INT8)), ValidationError),
        ("cached_slot_negative", lambda: cached(-1, a, b, MM, acc, o), ValidationError),
        ("cached_slot_bool", lambda: cached(True, a, b, MM, acc, o), ValidationError),
        ("cached_slot_str", lambda: cached("0", a, b, MM, acc, o), ValidationError),
        ("cached_bad_out", lambda: cached(0, a, b, MM, acc, s.dev((4, 4))), ValidationError),
        ("cached_none_bad_out", lambda: cached(None, a, b, MM, acc, s.dev((4, 4))),
         ValidationError),
        ("grouped_not_config", lambda: s.grouped_gemm([GemmJob(a, b, o)]), ValidationError),
    ]


ERROR_IDS = [c[0] for c in _errors(Fake())]


@pytest.mark.parametrize("name", ERROR_IDS)
def test_error_paths_do_nothing(s, name):
    case = {c[0]: c for c in _errors(s)}[name]
    with pytest.raises(case[2]) as info:
        case[1]()
    assert info.value.op.startswith(("dot_general", "grouped_gemm"))
    assert s.calls == []
    assert not s._state.prepared.get(("dot", "slots"))


def _grouped_errors(s: Fake):
    f32 = DType.FLOAT32
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    big = s.dev((8, 10))
    job = GemmJob(a, b, o)
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    return [
        ("dtype_mismatch", [job, GemmJob(s.dev((4, 3), DType.FLOAT64), s.dev((3, 5), DType.FLOAT64),
                                         s.dev((4, 5), DType.FLOAT64))], "jobs\\[1\\]"),
        ("job_shape", [job, GemmJob(a, s.dev((4, 5)), o)], "jobs\\[1\\]"),
        ("outputs_overlap", [GemmJob(a, b, big[:4, :5]), GemmJob(a, b, big[2:6, 3:8])],
         "jobs\\[1\\].out overlaps jobs\\[0\\].out"),
        ("out_overlaps_other_input", [GemmJob(big[:4, :3], b, o), GemmJob(a, b, big[:4, 2:7])],
         "overlaps"),
        ("precision_disagrees", [job, GemmJob(a, b, s.dev((4, 5), f32), tf32)], "precision"),
        ("host_out", [GemmJob(a, b, Tensor.from_numpy(np.zeros((4, 5), "f4")))], "jobs\\[0\\]"),
        ("bool", [GemmJob(s.dev((4, 3), DType.BOOL), s.dev((3, 5), DType.BOOL),
                          s.dev((4, 5), DType.BOOL))], "jobs\\[0\\]"),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _grouped_errors(Fake())])
def test_grouped_error_paths_do_nothing(s, name):
    case = {c[0]: c for c in _grouped_errors(s)}[name]
    with pytest.raises((ValidationError, UnsupportedDTypeError, RuntimeStateError),
                       match=case[2]) as info:
        s.grouped_gemm(GroupedGemmConfig(case[1]))
    assert info.value.op == "grouped_gemm"
    assert s.calls == []


# --- success paths (recorded) ---------------------------------------------------------------------
def test_dot_general_allocates_once_after_checks(s):
    out = s.dot_general(s.dev((2, 4, 3)), s.dev((2, 3, 5)), BMM)
    assert out.shape == (2, 4, 5) and out.dtype is DType.FLOAT32
    kinds = [c[0] for c in s.calls]
    assert kinds == ["handle", "alloc", "run"]
    assert s.calls[2][2:5] == (1.0, 0.0, "default")


def test_repeated_dot_general_binds_once_and_still_checks(s):
    a, b = s.dev((2, 4, 3)), s.dev((2, 3, 5))
    for _ in range(4):
        s.dot_general(a, b, BMM)
    kinds = [c[0] for c in s.calls]
    assert kinds == ["handle", "alloc", "run"] * 2 + ["alloc", "call"] * 2
    assert s.calls[-1][2:4] == (1.0, 0.0)
    n = len(s.calls)
    freed = s.dev((2, 3, 5))
    freed.buffer.freed = True
    host = Tensor.from_numpy(np.zeros((2, 4, 3), np.float32))
    with pytest.raises(RuntimeStateError):
        s.dot_general(a, freed, BMM)
    with pytest.raises(RuntimeStateError):
        s.dot_general(host, b, BMM)
    with pytest.raises(ValidationError, match="dtype mismatch"):
        s.dot_general(a, s.dev((2, 3, 5), DType.FLOAT64), BMM)
    with pytest.raises(ValidationError, match="tf32"):
        s.dot_general(s.dev((2, 4, 3), DType.FLOAT64), s.dev((2, 3, 5), DType.FLOAT64),
                      DotGeneralConfig((2,), (1,), (0,), (0,), precision="tf32"))
    assert len(s.calls) == n
    s.dot_general(a, b, DotGeneralConfig((2,), (1,), (0,), (0,)))  # an equal config object
    assert [c[0] for c in s.calls[n:]] == ["alloc", "call"]


@pytest.mark.parametrize("dtype,unit", [(DType.INT32, (1, 0)), (DType.COMPLEX64, (1 + 0j, 0j))],
                         ids=["int32", "complex64"])
def test_dot_general_unit_scalars(s, dtype, unit):
    s.dot_general(s.dev((4, 3), dtype), s.dev((3, 5), dtype), MM)
    run = s.calls[-1]
    assert run[2:4] == unit and [type(x) for x in run[2:4]] == [type(x) for x in unit]
    assert ("handle",) not in s.calls if dtype.is_integer else ("handle",) in s.calls


def test_read_into_overwrites(s):
    s.dot_general_read_into(s.dev((4, 3)), s.dev((3, 5)), MM, s.dev((4, 5)))
    assert [c[0] for c in s.calls] == ["handle", "run"] and s.calls[-1][2:4] == (1.0, 0.0)


def test_accum_passes_scalars_and_conj_only_for_complex(s):
    acc = DotGeneralAccumulation(2, -1, lhs_conj=True, rhs_conj=True)
    s.dot_general_read_into_accum(s.dev((4, 3)), s.dev((3, 5)), MM, acc, s.dev((4, 5)))
    plan = s.calls[-1][1]
    assert s.calls[-1][2:4] == (2.0, -1.0) and OP_N in (plan.transa, plan.transb)
    c64 = DType.COMPLEX64
    s.dot_general_read_into_accum(s.dev((4, 3), c64), s.dev((3, 5), c64), MM, acc,
                                  s.dev((4, 5), c64))
    plan = s.calls[-1][1]
    assert (plan.transa, plan.transb) == (2, 2)


# --- cached slots ---------------------------------------------------------------------------------
def test_cached_slot_reuse_and_invalidation(s):
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    acc = DotGeneralAccumulation(1.0, 1.0)
    run = s.dot_general_read_into_accum_cached
    run(3, a, b, MM, acc, o)
    first = s.calls[-1]
    assert first[0] == "run" and first[5] == [None, None, None]
    n_handle = s.calls.count(("handle",))
    run(3, s.dev((4, 3)), s.dev((3, 5)), DotGeneralConfig((1,), (0,)),
        DotGeneralAccumulation(0.5, 2), s.dev((4, 5)))
    again = s.calls[-1]
    assert again[0] == "call" and again[1] is first[1] and again[2:4] == (0.5, 2.0)
    assert [type(x) for x in again[2:4]] == [float, float]
    assert s.calls.count(("handle",)) == n_handle  # warm slot: no re-planning
    run(3, s.dev((4, 2)), s.dev((2, 5)), MM, acc, o)  # shape change
    assert s.calls[-1][1] is not first[1] and s.calls[-1][1].k == 2
    run(3, a, b, MM, acc, s.dev((5, 4)).T)  # stride change
    assert not s.calls[-1][1].swap
    replanned = s.calls[-1][1]
    run(3, a, b, DotGeneralConfig((1,), (0,), precision="tf32"), acc, s.dev((5, 4)).T)
    assert s.calls[-1][1] is not replanned and s.calls[-1][4] == "tf32"
    run(4, a, b, MM, acc, o)
    assert set(s._state.prepared[("dot", "slots")]) == {3, 4}
    s.dot_general_cache_clear(3)
    assert set(s._state.prepared[("dot", "slots")]) == {4}
    s.dot_general_cache_clear()
    assert s._state.prepared[("dot", "slots")] == {}


def test_cached_staged_plan_reuses_temporaries(s):
    lhs, rhs = s.dev((3, 5, 4)), s.dev((3, 4, 6))  # lhs contracting axes do not merge
    cfg = DotGeneralConfig((0, 2), (0, 1))
    out = s.dev((5, 6))
    for _ in range(2):
        s.dot_general_read_into_accum_cached(0, lhs, rhs, cfg, DotGeneralAccumulation(), out)
    first, second = [c for c in s.calls if c[0] in ("run", "call")]
    assert first[0] == second[0] == "run" and second[5] is first[5] and first[1] is second[1]


def test_cached_conj_change_replans(s):
    c64 = DType.COMPLEX64
    a, b, o = s.dev((4, 3), c64), s.dev((3, 5), c64), s.dev((4, 5), c64)
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(), o)
    p0 = s.calls[-1][1]
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(lhs_conj=True), o)
    assert s.calls[-1][1] is not p0 and 2 in (s.calls[-1][1].transa, s.calls[-1][1].transb)


def test_cached_warm_slot_still_checks_call_values(s):
    big = s.dev((8, 8))
    a, b = big[:4, :3], s.dev((3, 5))
    out = s.dev((4, 8))[:, :5]
    acc = DotGeneralAccumulation(1.0, 0.0)
    s.dot_general_read_into_accum_cached(1, a, b, MM, acc, out)
    n = len(s.calls)
    with pytest.raises(ValidationError, match="overlaps"):  # same shapes/strides as out
        s.dot_general_read_into_accum_cached(1, a, b, MM, acc, big[4:, :5].view(
            (4, 5), (8, 1), 0))
    with pytest.raises(ValidationError, match="real"):
        s.dot_general_read_into_accum_cached(1, a, b, MM, DotGeneralAccumulation(1j), out)
    with pytest.raises(RuntimeStateError):
        s.dot_general_read_into_accum_cached(1, a, Tensor.from_numpy(np.zeros((3, 5), "f4")),
                                             MM, acc, out)
    assert len(s.calls) == n


def test_cached_none_does_not_store(s):
    s.dot_general_read_into_accum_cached(None, s.dev((4, 3)), s.dev((3, 5)), MM,
                                         DotGeneralAccumulation(), s.dev((4, 5)))
    assert s.calls[-1][0] == "run" and s.calls[-1][5] is None
    assert not s._state.prepared.get(("dot", "slots"))


def test_grouped_empty_does_nothing(s):
    s.grouped_gemm(GroupedGemmConfig(()))
    assert s.calls == []
