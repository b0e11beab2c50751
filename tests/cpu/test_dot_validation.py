"""Dot family validation on the CPU: config dataclasses, shape inference against the
numpy reference, alpha/beta per dtype, caller outputs (shape, dtype, self-overlap; the
overlap of an output with an input is judged by device memory in the ops:
test_dot_aliasing.py)."""

from __future__ import annotations

import numpy as np
import pytest
from dot_reference import dot_ref

from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.shapes import dot as sd
from tenferro_cuda.tensor import Tensor

C = DotGeneralConfig
F32 = DType.FLOAT32

# --- DotGeneralConfig ------------------------------------------------------------------------
CONFIG_ERRORS = [
    ("not_sequence", lambda: C(1, (0,)), "invalid_argument"),
    ("string_axes", lambda: C("0", (0,)), "invalid_argument"),
    ("float_axis", lambda: C((1.0,), (0,)), "invalid_argument"),
    ("bool_axis", lambda: C((True,), (0,)), "invalid_argument"),
    ("negative_axis", lambda: C((-1,), (0,)), "axis_out_of_bounds"),
    ("duplicate_contracting", lambda: C((1, 1), (0, 2)), "duplicate_axis"),
    ("duplicate_batch", lambda: C((2,), (1,), (0, 0), (0, 1)), "duplicate_axis"),
    ("unpaired_contracting", lambda: C((1, 2), (0,)), "rank_mismatch"),
    ("unpaired_batch", lambda: C((2,), (1,), (0,), ()), "rank_mismatch"),
    ("lhs_role_conflict", lambda: C((0,), (1,), (0,), (0,)), "duplicate_axis"),
    ("rhs_role_conflict", lambda: C((1,), (0,), (0,), (0,)), "duplicate_axis"),
    ("bad_precision", lambda: C((1,), (0,), precision="fast"), "invalid_argument"),
]


@pytest.mark.parametrize("make,kind", [c[1:] for c in CONFIG_ERRORS],
                         ids=[c[0] for c in CONFIG_ERRORS])
def test_config_rejects(make, kind):
    with pytest.raises(ValidationError) as info:
        make()
    assert info.value.kind == kind
    assert info.value.op == "DotGeneralConfig"


def test_config_normalises_to_int_tuples():
    cfg = C([np.int64(2)], np.array([1]), [0], (0,))
    assert cfg.lhs_contracting_dims == (2,) and cfg.rhs_contracting_dims == (1,)
    assert type(cfg.lhs_contracting_dims[0]) is int
    assert type(cfg.rhs_contracting_dims[0]) is int
    assert cfg == C((2,), (1,), (0,), (0,)) and hash(cfg) == hash(C((2,), (1,), (0,), (0,)))


@pytest.mark.parametrize("rank", [2, 3, 5])
def test_config_matmul(rank):
    cfg = C.matmul(rank)
    assert cfg.lhs_contracting_dims == (rank - 1,) and cfg.rhs_contracting_dims == (rank - 2,)
    assert cfg.lhs_batch_dims == tuple(range(rank - 2))


@pytest.mark.parametrize("rank", [1, 0, True, 2.0], ids=["1", "0", "bool", "float"])
def test_config_matmul_rejects(rank):
    with pytest.raises(ValidationError):
        C.matmul(rank)


# --- DotGeneralAccumulation / GemmJob / GroupedGemmConfig ---------------------------------------
ACC_ERRORS = [
    ("alpha_str", dict(alpha="1")),
    ("alpha_none", dict(alpha=None)),
    ("alpha_bool", dict(alpha=True)),
    ("beta_numpy_bool", dict(beta=np.bool_(False))),
    ("beta_array", dict(beta=np.array([1.0]))),
    ("conj_int", dict(lhs_conj=1)),
    ("conj_str", dict(rhs_conj="yes")),
]


@pytest.mark.parametrize("kwargs", [c[1] for c in ACC_ERRORS], ids=[c[0] for c in ACC_ERRORS])
def test_accumulation_rejects(kwargs):
    with pytest.raises(ValidationError):
        DotGeneralAccumulation(**kwargs)


def test_accumulation_numpy_scalars_become_python():
    acc = DotGeneralAccumulation(np.float32(2.5), np.int64(3), np.bool_(True))
    assert type(acc.alpha) is float and type(acc.beta) is int and acc.lhs_conj is True


GROUPED_ERRORS = [
    ("jobs_not_sequence", lambda: GroupedGemmConfig(jobs=3)),
    ("single_job_not_wrapped",
     lambda: GroupedGemmConfig(jobs=GemmJob(None, None, None))),
    ("job_wrong_type", lambda: GroupedGemmConfig(jobs=(1,))),
    ("bad_precision", lambda: GroupedGemmConfig(jobs=(), precision="fp8")),
    ("job_bad_config", lambda: GemmJob(None, None, None, config=(1, 0))),
    ("job_bad_accumulation", lambda: GemmJob(None, None, None, accumulation=(1, 0))),
]


@pytest.mark.parametrize("make", [c[1] for c in GROUPED_ERRORS],
                         ids=[c[0] for c in GROUPED_ERRORS])
def test_grouped_config_rejects(make):
    with pytest.raises(ValidationError):
        make()


def test_grouped_config_keeps_jobs_as_tuple():
    job = GemmJob("l", "r", "o")
    cfg = GroupedGemmConfig([job, job])
    assert cfg.jobs == (job, job) and cfg.precision is None
    assert job.config == C((1,), (0,)) and job.accumulation == DotGeneralAccumulation()


# --- infer ---------------------------------------------------------------------------------------
SHAPES = [
    ("matmul", (4, 3), (3, 5), C((1,), (0,))),
    ("bmm", (2, 4, 3), (2, 3, 5), C((2,), (1,), (0,), (0,))),
    ("batch_last", (4, 3, 2), (3, 5, 2), C((1,), (0,), (2,), (2,))),
    ("batch_order", (2, 3, 4, 5), (3, 2, 5, 6), C((3,), (2,), (1, 0), (0, 1))),
    ("two_contract", (4, 3, 2), (2, 3, 5), C((1, 2), (1, 0))),
    ("outer", (3,), (4, 2), C((), ())),
    ("rank0", (5,), (5,), C((0,), (0,))),
    ("k_zero", (4, 0), (0, 5), C((1,), (0,))),
    ("empty_free", (0, 3), (3, 5), C((1,), (0,))),
]


@pytest.mark.parametrize("ls,rs,cfg", [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_infer_matches_reference(ls, rs, cfg):
    want = dot_ref(np.ones(ls), np.ones(rs), cfg).shape
    assert sd.infer(ls, rs, F32, F32, cfg, "dot_general") == tuple(want)


INFER_ERRORS = [
    ("dtype_mismatch", (2, 3), (3, 2), C((1,), (0,)), F32, DType.FLOAT64, ValidationError,
     "dtype_mismatch"),
    ("bool", (2, 3), (3, 2), C((1,), (0,)), DType.BOOL, DType.BOOL, UnsupportedDTypeError,
     None),
    ("lhs_axis_range", (2, 3), (3, 2), C((2,), (0,)), F32, F32, ValidationError,
     "axis_out_of_bounds"),
    ("rhs_axis_range", (2, 3), (3, 2), C((1,), (2,)), F32, F32, ValidationError,
     "axis_out_of_bounds"),
    ("batch_axis_range", (2, 3), (2, 3, 2), C((1,), (1,), (2,), (0,)), F32, F32,
     ValidationError, "axis_out_of_bounds"),
    ("contract_extent", (2, 3), (4, 2), C((1,), (0,)), F32, F32, ValidationError,
     "shape_mismatch"),
    ("batch_extent", (2, 3, 4), (5, 4, 2), C((2,), (1,), (0,), (0,)), F32, F32,
     ValidationError, "shape_mismatch"),
    ("lhs_rank", (1,) * 9, (1,), C((0,), (0,)), F32, F32, ValidationError, "rank_mismatch"),
    ("result_rank", (1,) * 5, (1,) * 5, C((), ()), F32, F32, ValidationError,
     "rank_mismatch"),
    ("tf32_float64", (2, 3), (3, 2), C((1,), (0,), precision="tf32"), DType.FLOAT64,
     DType.FLOAT64, ValidationError, "invalid_argument"),
    ("tf32_int", (2, 3), (3, 2), C((1,), (0,), precision="tf32"), DType.INT32, DType.INT32,
     ValidationError, "invalid_argument"),
    ("config_type", (2, 3), (3, 2), ((1,), (0,)), F32, F32, ValidationError,
     "invalid_argument"),
]


@pytest.mark.parametrize("ls,rs,cfg,ld,rd,exc,kind", [c[1:] for c in INFER_ERRORS],
                         ids=[c[0] for c in INFER_ERRORS])
def test_infer_rejects(ls, rs, cfg, ld, rd, exc, kind):
    with pytest.raises(exc) as info:
        sd.infer(ls, rs, ld, rd, cfg, "dot_general")
    assert info.value.op == "dot_general"
    if kind is not None:
        assert info.value.kind == kind


@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.COMPLEX64], ids=lambda d: d.value)
def test_infer_accepts_tf32(dtype):
    assert sd.infer((2, 3), (3, 4), dtype, dtype, C((1,), (0,), precision="tf32"), "x") == (2, 4)


def test_infer_precision_override():
    with pytest.raises(ValidationError):
        sd.infer((2, 3), (3, 4), DType.FLOAT64, DType.FLOAT64, C((1,), (0,)), "x",
                 precision="tf32")


# --- scalars -------------------------------------------------------------------------------------
A = DotGeneralAccumulation
SCALAR_OK = [
    ("float_from_int", F32, A(2, -1), (2.0, -1.0)),
    ("float_from_numpy", DType.BFLOAT16, A(np.float32(0.5), np.float64(2)), (0.5, 2.0)),
    ("complex_from_real", DType.COMPLEX64, A(2.0, 1), (2 + 0j, 1 + 0j)),
    ("complex_from_complex", DType.COMPLEX128, A(1 - 2j, np.complex64(3j)), (1 - 2j, 3j)),
    ("int8_bounds", DType.INT8, A(-128, 127), (-128, 127)),
    ("uint8_bounds", DType.UINT8, A(0, 255), (0, 255)),
    ("int64_bounds", DType.INT64, A(-(1 << 63), (1 << 63) - 1), (-(1 << 63), (1 << 63) - 1)),
    ("int32_numpy", DType.INT32, A(np.int32(-7), np.uint8(3)), (-7, 3)),
]


@pytest.mark.parametrize("dtype,acc,want", [c[1:] for c in SCALAR_OK],
                         ids=[c[0] for c in SCALAR_OK])
def test_scalars_accept(dtype, acc, want):
    got = sd.scalars(acc, dtype, "op")
    assert got == want and [type(g) for g in got] == [type(w) for w in want]


SCALAR_ERRORS = [
    ("complex_for_float32", F32, A(1 + 1j), "invalid_argument"),
    ("zero_imag_complex_for_float64", DType.FLOAT64, A(beta=complex(1, 0)), "invalid_argument"),
    ("numpy_complex_for_half", DType.FLOAT16, A(np.complex64(1)), "invalid_argument"),
    ("float_for_int", DType.INT32, A(1.0), "invalid_argument"),
    ("complex_for_int", DType.INT64, A(beta=1j), "invalid_argument"),
    ("int8_overflow", DType.INT8, A(128), "overflow"),
    ("uint8_negative", DType.UINT8, A(beta=-1), "overflow"),
    ("int64_overflow", DType.INT64, A(1 << 63), "overflow"),
]


@pytest.mark.parametrize("dtype,acc,kind", [c[1:] for c in SCALAR_ERRORS],
                         ids=[c[0] for c in SCALAR_ERRORS])
def test_scalars_reject(dtype, acc, kind):
    with pytest.raises(ValidationError) as info:
        sd.scalars(acc, dtype, "dot_general_read_into_accum")
    assert info.value.kind == kind and info.value.op == "dot_general_read_into_accum"


def test_scalars_reject_non_accumulation():
    with pytest.raises(ValidationError):
        sd.scalars((1, 0), F32, "op")


# --- outputs --------------------------------------------------------------------------------------
SELF_OVERLAP = [
    ("compact", (3, 4), (4, 1), False),
    ("transposed", (3, 4), (1, 3), False),
    ("padded", (3, 4), (10, 2), False),
    ("negative", (3, 4), (-4, -1), False),
    ("extent_one_zero_stride", (1, 4), (0, 1), False),
    ("broadcast", (3, 4), (0, 1), True),
    ("rows_overlap", (3, 4), (2, 1), True),
    ("scalar", (), (), False),
]


@pytest.mark.parametrize("shape,strides,want", [c[1:] for c in SELF_OVERLAP],
                         ids=[c[0] for c in SELF_OVERLAP])
def test_self_overlapping(shape, strides, want):
    assert sd.self_overlapping(shape, strides) is want


def _host(shape, dtype=np.float32):
    return Tensor.from_numpy(np.zeros(shape, dtype))


def test_check_out_rejects():
    big = _host((4, 8))
    with pytest.raises(ValidationError) as info:
        sd.check_out(_host((3, 5)), (3, 4), F32, "op")
    assert info.value.kind == "shape_mismatch"
    with pytest.raises(ValidationError) as info:
        sd.check_out(_host((3, 4), np.float64), (3, 4), F32, "op")
    assert info.value.kind == "dtype_mismatch"
    with pytest.raises(ValidationError, match="more than once"):
        sd.check_out(big.view((3, 4), (0, 1)), (3, 4), F32, "op")
    sd.check_out(big[:3, :4], (3, 4), F32, "op")
    sd.check_out(big.view((3, 4), (1, 3)), (3, 4), F32, "op")


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d.is_numeric], ids=lambda d: d.value)
def test_check_out_accepts_empty(dtype):
    sd.check_out(Tensor.from_numpy(np.zeros((0, 3), dtype.numpy)), (0, 3), dtype, "op")
