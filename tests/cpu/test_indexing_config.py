"""GatherConfig / ScatterConfig / SliceConfig / PadConfig: normalisation and every rule
that needs no shapes (StableHLO constraint numbers in the ids)."""

from __future__ import annotations

import dataclasses

import pytest

from tenferro_cuda import ValidationError
from tenferro_cuda.configs.indexing import (
    GatherConfig,
    PadConfig,
    ScatterCombiner,
    ScatterConfig,
    SliceConfig,
)

G = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
         index_vector_dim=1, slice_sizes=(1, 4))
S = dict(update_window_dims=(1,), inserted_window_dims=(0,),
         scatter_dims_to_operand_dims=(0,), index_vector_dim=1)

GATHER_BAD = [
    ("offset-not-ints", dict(offset_dims="ab"), "invalid_argument"),
    ("offset-bool", dict(offset_dims=(True,)), "invalid_argument"),
    ("offset-float", dict(offset_dims=(1.0,)), "invalid_argument"),
    ("ivd-not-int", dict(index_vector_dim=1.5), "invalid_argument"),
    ("ivd-negative-C2", dict(index_vector_dim=-1), "axis_out_of_bounds"),
    ("offset-negative", dict(offset_dims=(-1,)), "axis_out_of_bounds"),
    ("slice-negative", dict(slice_sizes=(1, -4)), "invalid_argument"),
    ("offset-duplicate-C4", dict(offset_dims=(1, 1), slice_sizes=(1, 4, 4)), "duplicate_axis"),
    ("offset-unsorted-C4", dict(offset_dims=(2, 1), slice_sizes=(1, 4, 4)),
     "invalid_argument"),
    ("collapsed-batching-overlap-C6", dict(collapsed_slice_dims=(0,), offset_dims=(),
                                           operand_batching_dims=(0,),
                                           start_indices_batching_dims=(0,),
                                           slice_sizes=(1, 1)), "duplicate_axis"),
    ("collapsed-unsorted-C7", dict(offset_dims=(), collapsed_slice_dims=(1, 0),
                                   start_index_map=(0, 1), slice_sizes=(1, 1)),
     "invalid_argument"),
    ("collapsed-out-of-range-C8", dict(offset_dims=(1,), collapsed_slice_dims=(2,),
                                       slice_sizes=(1, 1)), "axis_out_of_bounds"),
    ("collapsed-slice-2-C9", dict(slice_sizes=(2, 4)), "invalid_argument"),
    ("batching-unsorted-C10", dict(offset_dims=(), collapsed_slice_dims=(),
                                   operand_batching_dims=(1, 0),
                                   start_indices_batching_dims=(0, 2), start_index_map=(),
                                   slice_sizes=(1, 1)), "invalid_argument"),
    ("batching-out-of-range-C11", dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                                       operand_batching_dims=(3,),
                                       start_indices_batching_dims=(0,),
                                       slice_sizes=(1, 4, 1)), "axis_out_of_bounds"),
    ("batching-slice-2-C12", dict(offset_dims=(1,), collapsed_slice_dims=(),
                                  operand_batching_dims=(0,),
                                  start_indices_batching_dims=(0,), start_index_map=(1,),
                                  slice_sizes=(2, 4)), "invalid_argument"),
    ("index-batching-duplicate-C13", dict(offset_dims=(), collapsed_slice_dims=(),
                                          operand_batching_dims=(0, 1),
                                          start_indices_batching_dims=(0, 0),
                                          start_index_map=(), slice_sizes=(1, 1)),
     "duplicate_axis"),
    ("ivd-in-index-batching-C15", dict(offset_dims=(1,), collapsed_slice_dims=(),
                                       operand_batching_dims=(0,),
                                       start_indices_batching_dims=(1,),
                                       start_index_map=(1,), slice_sizes=(1, 4)),
     "invalid_argument"),
    ("batching-lengths-C16", dict(offset_dims=(1,), collapsed_slice_dims=(),
                                  operand_batching_dims=(0,), start_index_map=(1,),
                                  slice_sizes=(1, 4)), "rank_mismatch"),
    ("map-batching-overlap-C18", dict(offset_dims=(1,), collapsed_slice_dims=(),
                                      operand_batching_dims=(0,),
                                      start_indices_batching_dims=(0,),
                                      start_index_map=(0,), slice_sizes=(1, 4)),
     "duplicate_axis"),
    ("map-duplicate-C18", dict(start_index_map=(0, 0)), "duplicate_axis"),
    ("map-out-of-range-C19", dict(start_index_map=(2,)), "axis_out_of_bounds"),
    ("slice-sizes-length-C1", dict(slice_sizes=(1, 4, 4)), "rank_mismatch"),
]

SCATTER_BAD = [
    ("window-not-ints", dict(update_window_dims=("a",)), "invalid_argument"),
    ("ivd-negative-C22", dict(index_vector_dim=-2), "axis_out_of_bounds"),
    ("inserted-negative", dict(inserted_window_dims=(-1,)), "axis_out_of_bounds"),
    ("combiner-unknown", dict(combiner="mul"), "invalid_argument"),
    ("window-duplicate-C7", dict(update_window_dims=(1, 1), inserted_window_dims=()),
     "duplicate_axis"),
    ("window-unsorted-C7", dict(update_window_dims=(2, 1), inserted_window_dims=()),
     "invalid_argument"),
    ("inserted-batching-overlap-C9", dict(update_window_dims=(1,), inserted_window_dims=(0,),
                                          input_batching_dims=(0,),
                                          scatter_indices_batching_dims=(0,)),
     "duplicate_axis"),
    ("inserted-unsorted-C10", dict(update_window_dims=(), inserted_window_dims=(1, 0),
                                   scatter_dims_to_operand_dims=(0, 1)), "invalid_argument"),
    ("inserted-out-of-range-C11", dict(inserted_window_dims=(2,)), "axis_out_of_bounds"),
    ("batching-unsorted-C12", dict(update_window_dims=(), inserted_window_dims=(),
                                   input_batching_dims=(1, 0),
                                   scatter_indices_batching_dims=(0, 2),
                                   scatter_dims_to_operand_dims=()), "invalid_argument"),
    ("batching-out-of-range-C13", dict(inserted_window_dims=(0,), input_batching_dims=(5,),
                                       scatter_indices_batching_dims=(0,)),
     "axis_out_of_bounds"),
    ("index-batching-duplicate-C14", dict(update_window_dims=(), inserted_window_dims=(),
                                          input_batching_dims=(0, 1),
                                          scatter_indices_batching_dims=(2, 2),
                                          scatter_dims_to_operand_dims=()), "duplicate_axis"),
    ("ivd-in-index-batching-C16", dict(inserted_window_dims=(), input_batching_dims=(0,),
                                       scatter_indices_batching_dims=(1,),
                                       scatter_dims_to_operand_dims=(1,)),
     "invalid_argument"),
    ("batching-lengths-C17", dict(inserted_window_dims=(), input_batching_dims=(0,),
                                  scatter_dims_to_operand_dims=(1,)), "rank_mismatch"),
    ("map-duplicate-C20", dict(update_window_dims=(), inserted_window_dims=(0, 1),
                               scatter_dims_to_operand_dims=(1, 1)), "duplicate_axis"),
    ("map-batching-overlap-C20", dict(inserted_window_dims=(), input_batching_dims=(0,),
                                      scatter_indices_batching_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,)), "duplicate_axis"),
    ("map-out-of-range-C21", dict(scatter_dims_to_operand_dims=(2,)), "axis_out_of_bounds"),
]


def _check_rule(case_id: str, err: ValidationError) -> None:
    """Ids ending in -C<n> name the StableHLO constraint the message must cite."""
    rule = case_id.rsplit("-", 1)[-1]
    if rule[0] == "C" and rule[1:].isdigit():
        assert rule in str(err), (rule, str(err))


@pytest.mark.parametrize("case_id,change,kind", GATHER_BAD, ids=[c[0] for c in GATHER_BAD])
def test_gather_config_rejects(case_id, change, kind):
    with pytest.raises(ValidationError) as info:
        GatherConfig(**{**G, **change})
    assert info.value.kind == kind
    assert info.value.op == "GatherConfig"
    _check_rule(case_id, info.value)


@pytest.mark.parametrize("case_id,change,kind", SCATTER_BAD, ids=[c[0] for c in SCATTER_BAD])
def test_scatter_config_rejects(case_id, change, kind):
    with pytest.raises(ValidationError) as info:
        ScatterConfig(**{**S, **change})
    assert info.value.kind == kind
    assert info.value.op == "ScatterConfig"
    _check_rule(case_id, info.value)


def test_gather_config_normalises_and_is_frozen():
    cfg = GatherConfig(offset_dims=[1], collapsed_slice_dims=range(1), start_index_map=[0],
                       index_vector_dim=1, slice_sizes=[1, 4], indices_are_sorted=1)
    assert cfg.offset_dims == (1,) and cfg.collapsed_slice_dims == (0,)
    assert cfg.slice_sizes == (1, 4) and cfg.indices_are_sorted is True
    assert cfg.operand_rank == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.index_vector_dim = 0


def test_gather_config_accepts_spec_batching_example():
    cfg = GatherConfig(offset_dims=(3, 4), collapsed_slice_dims=(1,),
                       operand_batching_dims=(0,), start_indices_batching_dims=(1,),
                       start_index_map=(2, 1), index_vector_dim=3, slice_sizes=(1, 1, 2, 2))
    assert cfg.operand_rank == 4


@pytest.mark.parametrize("name", ["add", "replace", "max", "min"])
def test_scatter_combiner_names(name):
    cfg = ScatterConfig(**S, combiner=name)
    assert cfg.combiner is ScatterCombiner(name)
    assert ScatterConfig(**S).combiner is ScatterCombiner.ADD
    assert cfg.operand_rank == 2


SLICE_BAD = [
    ("lengths", dict(starts=(0,), limits=(1, 2)), "rank_mismatch"),
    ("stride-lengths", dict(starts=(0,), limits=(1,), strides=(1, 1)), "rank_mismatch"),
    ("negative-start", dict(starts=(-1,), limits=(1,)), "axis_out_of_bounds"),
    ("limit-below-start", dict(starts=(3,), limits=(2,)), "axis_out_of_bounds"),
    ("zero-stride", dict(starts=(0,), limits=(2,), strides=(0,)), "invalid_argument"),
    ("not-ints", dict(starts=(0.5,), limits=(2,)), "invalid_argument"),
]
PAD_BAD = [
    ("lengths", dict(low=(0,), high=(0, 0)), "rank_mismatch"),
    ("interior-lengths", dict(low=(0,), high=(0,), interior=(0, 0)), "rank_mismatch"),
    ("negative-interior", dict(low=(0,), high=(0,), interior=(-1,)), "invalid_argument"),
    ("not-ints", dict(low=("x",), high=(0,)), "invalid_argument"),
]


@pytest.mark.parametrize("kwargs,kind", [c[1:] for c in SLICE_BAD],
                         ids=[c[0] for c in SLICE_BAD])
def test_slice_config_rejects(kwargs, kind):
    with pytest.raises(ValidationError) as info:
        SliceConfig(**kwargs)
    assert info.value.kind == kind


@pytest.mark.parametrize("kwargs,kind", [c[1:] for c in PAD_BAD], ids=[c[0] for c in PAD_BAD])
def test_pad_config_rejects(kwargs, kind):
    with pytest.raises(ValidationError) as info:
        PadConfig(**kwargs)
    assert info.value.kind == kind


def test_slice_and_pad_defaults():
    assert SliceConfig([1, 0], [3, 2]).strides == (1, 1)
    assert SliceConfig((), ()).starts == ()
    p = PadConfig([-1, 2], [0, -3])
    assert p.interior == (0, 0) and p.low == (-1, 2) and p.high == (0, -3)
