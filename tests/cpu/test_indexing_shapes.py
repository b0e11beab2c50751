"""Shape inference and the shape/dtype-dependent validation of gather and scatter: every
rule's error class and kind, the spec examples' shapes, and random valid configurations
(hypothesis) checked against the reference's result shape."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tenferro_cuda import DType, UnsupportedDTypeError, ValidationError
from tenferro_cuda.configs.indexing import GatherConfig, ScatterConfig
from tenferro_cuda.shapes.gather import gather_dims
from tenferro_cuda.shapes.scatter import scatter_dims

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402

F32, I32, I64 = DType.FLOAT32, DType.INT32, DType.INT64
EMB = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
           index_vector_dim=1, slice_sizes=(1, 4))
BAT = dict(offset_dims=(2,), collapsed_slice_dims=(1,), operand_batching_dims=(0,),
           start_indices_batching_dims=(0,), start_index_map=(1,), index_vector_dim=2,
           slice_sizes=(1, 1, 3))

# (id, operand shape, index shape, index dtype, cfg, exception, kind)
GATHER_BAD = [
    ("operand-rank-C1", (5, 4, 1), (3, 1), I64, EMB, ValidationError, "rank_mismatch"),
    ("index-float", (5, 4), (3, 1), F32, EMB, UnsupportedDTypeError, None),
    ("index-int8", (5, 4), (3, 1), DType.INT8, EMB, UnsupportedDTypeError, None),
    ("index-uint8", (5, 4), (3, 1), DType.UINT8, EMB, UnsupportedDTypeError, None),
    ("index-bool", (5, 4), (3, 1), DType.BOOL, EMB, UnsupportedDTypeError, None),
    ("ivd-beyond-rank-C2", (5, 4), (3,), I64, {**EMB, "index_vector_dim": 2},
     ValidationError, "axis_out_of_bounds"),
    ("vector-size-C3", (5, 4), (3, 2), I64, EMB, ValidationError, "shape_mismatch"),
    ("implicit-vector-size-C3", (5, 4), (3,), I64,
     {**EMB, "collapsed_slice_dims": (0, 1), "offset_dims": (), "start_index_map": (0, 1),
      "slice_sizes": (1, 1)}, ValidationError, "shape_mismatch"),
    ("index-batching-range-C14", (2, 5, 3), (2, 4, 1), I64,
     {**BAT, "start_indices_batching_dims": (3,), "index_vector_dim": 2}, ValidationError,
     "axis_out_of_bounds"),
    ("batching-extent-C17", (2, 5, 3), (3, 4, 1), I64, BAT, ValidationError,
     "shape_mismatch"),
    ("slice-too-big-C21", (5, 3), (3, 1), I64, EMB, ValidationError, "axis_out_of_bounds"),
    ("offset-dims-range-C5", (5, 4), (3, 1), I64, {**EMB, "offset_dims": (2,)},
     ValidationError, "axis_out_of_bounds"),
    ("operand-rank-9", (1,) * 9, (1,), I64,
     dict(offset_dims=tuple(range(1, 9)), collapsed_slice_dims=(0,), start_index_map=(0,),
          index_vector_dim=1, slice_sizes=(1,) * 9), ValidationError, "rank_mismatch"),
    ("empty-window-nonempty-result", (0, 4), (3, 1), I64, {**EMB, "slice_sizes": (0, 4)},
     ValidationError, "invalid_argument"),
]


@pytest.mark.parametrize("case_id,shape,ishape,idt,cfg,exc,kind", GATHER_BAD,
                         ids=[c[0] for c in GATHER_BAD])
def test_gather_rejects(case_id, shape, ishape, idt, cfg, exc, kind):
    with pytest.raises(exc) as info:
        gather_dims(shape, F32, ishape, idt, GatherConfig(**cfg))
    assert info.value.op == "gather"
    if kind:
        assert info.value.kind == kind
    rule = case_id.rsplit("-", 1)[-1]
    if rule[0] == "C" and rule[1:].isdigit():
        assert rule in str(info.value)


def test_gather_rejects_result_rank_9():
    cfg = GatherConfig(offset_dims=(4, 5, 6, 7, 8), collapsed_slice_dims=(),
                       start_index_map=(0,), index_vector_dim=4, slice_sizes=(1,) * 5)
    with pytest.raises(ValidationError) as info:
        gather_dims((2,) * 5, F32, (2, 2, 2, 2, 1), I64, cfg)
    assert info.value.kind == "rank_mismatch"


def test_gather_rejects_non_config():
    with pytest.raises(ValidationError, match="GatherConfig"):
        gather_dims((5, 4), F32, (3, 1), I64, dict(EMB))


GATHER_OK = [
    ("embedding", (5, 4), (3, 1), EMB, (3, 4)),
    ("embedding-implicit-ivd", (5, 4), (3,), EMB, (3, 4)),
    ("scalar-table", (7,), (2, 3), dict(offset_dims=(), collapsed_slice_dims=(0,),
                                        start_index_map=(0,), index_vector_dim=2,
                                        slice_sizes=(1,)), (2, 3)),
    ("batching", (2, 5, 3), (2, 4, 1), BAT, (2, 4, 3)),
    ("rank0-operand", (), (3, 0), dict(offset_dims=(), collapsed_slice_dims=(),
                                       start_index_map=(), index_vector_dim=1,
                                       slice_sizes=()), (3,)),
    ("empty-window-empty-result", (0, 4), (0, 1), {**EMB, "slice_sizes": (0, 4)}, (0, 4)),
    ("offset-first", (5, 4), (3, 1), {**EMB, "offset_dims": (0,)}, (4, 3)),
]


@pytest.mark.parametrize("shape,ishape,cfg,result", [c[1:] for c in GATHER_OK],
                         ids=[c[0] for c in GATHER_OK])
def test_gather_shape(shape, ishape, cfg, result):
    dims = gather_dims(shape, F32, ishape, I32, GatherConfig(**cfg))
    assert dims.result_shape == result
    assert dims.result_shape == ref.gather_shape(shape, ishape, cases.ns(cfg,
                                                                         cases.GATHER_DEFAULTS))


@pytest.mark.parametrize("case", cases.SPEC_GATHER, ids=lambda c: c["id"])
def test_gather_spec_shapes(case):
    dims = gather_dims(case["operand"].shape, DType.INT32, case["indices"].shape, I64,
                       GatherConfig(**case["cfg"]))
    assert dims.result_shape == case["expected"].shape


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases.gather_cases())
def test_gather_random_configs_validate(case):
    shape, indices, cfg = case
    dims = gather_dims(shape, F32, indices.shape, I64, GatherConfig(**cfg))
    assert dims.result_shape == ref.gather_shape(shape, indices.shape,
                                                 cases.ns(cfg, cases.GATHER_DEFAULTS))
    assert len(dims.batch_dims) + len(dims.window_dims) == len(dims.result_shape)


# --- scatter --------------------------------------------------------------------------------
SC = dict(update_window_dims=(1,), inserted_window_dims=(0,),
          scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
SCB = dict(update_window_dims=(2,), inserted_window_dims=(1,), input_batching_dims=(0,),
           scatter_indices_batching_dims=(0,), scatter_dims_to_operand_dims=(1,),
           index_vector_dim=2)

# (id, operand, indices, updates, dtype, index dtype, cfg, exception, kind)
SCATTER_BAD = [
    ("operand-rank-C2", (5, 4, 1), (3, 1), (3, 4), F32, I64, SC, ValidationError,
     "rank_mismatch"),
    ("index-float", (5, 4), (3, 1), (3, 4), F32, F32, SC, UnsupportedDTypeError, None),
    ("index-int8", (5, 4), (3, 1), (3, 4), F32, DType.INT8, SC, UnsupportedDTypeError, None),
    ("bool-add", (5, 4), (3, 1), (3, 4), DType.BOOL, I64, SC, UnsupportedDTypeError, None),
    ("bool-max", (5, 4), (3, 1), (3, 4), DType.BOOL, I64, {**SC, "combiner": "max"},
     UnsupportedDTypeError, None),
    ("bool-min", (5, 4), (3, 1), (3, 4), DType.BOOL, I64, {**SC, "combiner": "min"},
     UnsupportedDTypeError, None),
    ("complex64-max", (5, 4), (3, 1), (3, 4), DType.COMPLEX64, I64,
     {**SC, "combiner": "max"}, UnsupportedDTypeError, None),
    ("complex128-min", (5, 4), (3, 1), (3, 4), DType.COMPLEX128, I64,
     {**SC, "combiner": "min"}, UnsupportedDTypeError, None),
    ("ivd-beyond-rank-C22", (5, 4), (3,), (3, 4), F32, I64, {**SC, "index_vector_dim": 2},
     ValidationError, "axis_out_of_bounds"),
    ("vector-size-C19", (5, 4), (3, 2), (3, 4), F32, I64, SC, ValidationError,
     "shape_mismatch"),
    ("index-batching-range-C15", (2, 5, 3), (2, 4, 1), (2, 4, 3), F32, I64,
     {**SCB, "scatter_indices_batching_dims": (3,)}, ValidationError, "axis_out_of_bounds"),
    ("batching-extent-C18", (2, 5, 3), (3, 4, 1), (3, 4, 3), F32, I64, SCB,
     ValidationError, "shape_mismatch"),
    ("updates-rank-C4", (5, 4), (3, 1), (3, 4, 1), F32, I64, SC, ValidationError,
     "rank_mismatch"),
    ("window-dims-range-C8", (5, 4), (3, 1), (3, 4), F32, I64,
     {**SC, "update_window_dims": (2,)}, ValidationError, "axis_out_of_bounds"),
    ("scatter-extent-C4", (5, 4), (3, 1), (2, 4), F32, I64, SC, ValidationError,
     "shape_mismatch"),
    ("window-too-big-C4", (5, 4), (3, 1), (3, 5), F32, I64, SC, ValidationError,
     "shape_mismatch"),
    ("updates-rank-9", (1,) * 8, (1,) * 8, (1,) * 9, F32, I64,
     dict(update_window_dims=tuple(range(1, 9)), inserted_window_dims=(),
          scatter_dims_to_operand_dims=(0,), index_vector_dim=8), ValidationError,
     "rank_mismatch"),
]


@pytest.mark.parametrize("case_id,shape,ishape,ushape,dt,idt,cfg,exc,kind", SCATTER_BAD,
                         ids=[c[0] for c in SCATTER_BAD])
def test_scatter_rejects(case_id, shape, ishape, ushape, dt, idt, cfg, exc, kind):
    with pytest.raises(exc) as info:
        scatter_dims(shape, dt, ishape, idt, ushape, dt, ScatterConfig(**cfg))
    assert info.value.op == "scatter"
    if kind:
        assert info.value.kind == kind
    rule = case_id.rsplit("-", 1)[-1]
    if rule[0] == "C" and rule[1:].isdigit():
        assert rule in str(info.value)


def test_scatter_rejects_update_dtype_mismatch():
    with pytest.raises(ValidationError) as info:
        scatter_dims((5, 4), F32, (3, 1), I64, (3, 4), DType.FLOAT64, ScatterConfig(**SC))
    assert info.value.kind == "dtype_mismatch"


def test_scatter_rejects_non_config():
    with pytest.raises(ValidationError, match="ScatterConfig"):
        scatter_dims((5, 4), F32, (3, 1), I64, (3, 4), F32, dict(SC))


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
@pytest.mark.parametrize("combiner", ["add", "replace", "max", "min"])
def test_scatter_combiner_dtype_table(dtype, combiner):
    cfg = ScatterConfig(**SC, combiner=combiner)
    ok = combiner == "replace" or (dtype.is_numeric and not (
        dtype.is_complex and combiner in ("max", "min")))
    if ok:
        dims = scatter_dims((5, 4), dtype, (3, 1), I32, (3, 4), dtype, cfg)
        assert dims.window_sizes == (1, 4)
    else:
        with pytest.raises(UnsupportedDTypeError):
            scatter_dims((5, 4), dtype, (3, 1), I32, (3, 4), dtype, cfg)


@pytest.mark.parametrize("case", cases.SPEC_SCATTER, ids=lambda c: c["id"])
def test_scatter_spec_shapes(case):
    dims = scatter_dims(case["operand"].shape, DType.INT32, case["indices"].shape, I64,
                        case["updates"].shape, DType.INT32, ScatterConfig(**case["cfg"]))
    assert len(dims.update_scatter_dims) + len(case["cfg"]["update_window_dims"]) == \
        case["updates"].ndim


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(cases.scatter_cases())
def test_scatter_random_configs_validate(case):
    shape, indices, ushape, cfg = case
    dims = scatter_dims(shape, F32, indices.shape, I64, ushape, F32, ScatterConfig(**cfg))
    for od, size in enumerate(dims.window_sizes):
        assert size <= shape[od] or (size == 1 and od not in dims.window_dims)
