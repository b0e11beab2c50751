"""Argument validation: config records and order-sensitive int lists.
Configs validate at construction (docs/indexing.md, configs/dot.py, docs/fusion.md):
a field of the wrong type is a ValidationError naming the config, never a silent
coercion (a str or an array taken for a bool) nor a raw ValueError; and a sequence of
sizes whose order matters is never taken from an unordered set or a one-shot iterator."""

from __future__ import annotations

import numpy as np
import pytest
from dot_fakes import Rec
from reference.fake_context import FakeSession

from tenferro_cuda.configs.dot import DotGeneralConfig, GroupedGemmConfig
from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.configs.fusion import FusionInstruction
from tenferro_cuda.configs.indexing import GatherConfig, PadConfig, ScatterConfig, SliceConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import TenferroError, ValidationError

G_ARGS = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
              index_vector_dim=1, slice_sizes=(1, 4))
S_ARGS = dict(update_window_dims=(1,), inserted_window_dims=(0,),
              scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
NOT_BOOLS = {"str_False": "False", "str_no": "no", "None": None, "int_2": 2,
             "array2": np.array([True, False]), "list": [True]}


def _config_rejects(make, owner):
    with pytest.raises(ValidationError) as info:
        make()
    assert info.value.op == owner


# --- bool flags of the indexing configs -------------------------------------------------------
@pytest.mark.parametrize("value", list(NOT_BOOLS.values()), ids=list(NOT_BOOLS))
@pytest.mark.parametrize("field", ["indices_are_sorted", "unique_indices"])
def test_scatter_config_flags_must_be_bools(field, value):
    """ScatterConfig stores bool(value): unique_indices="False" becomes True (which changes
    what `replace` computes) and an array raises a raw ValueError."""
    _config_rejects(lambda: ScatterConfig(**S_ARGS, **{field: value}), "ScatterConfig")


@pytest.mark.parametrize("value", list(NOT_BOOLS.values()), ids=list(NOT_BOOLS))
def test_gather_config_indices_are_sorted_must_be_a_bool(value):
    _config_rejects(lambda: GatherConfig(**G_ARGS, indices_are_sorted=value), "GatherConfig")


# --- precision of the dot configs, compare direction of fusion -----------------------------
def test_dot_general_config_precision_array_is_a_validation_error():
    """`self.precision not in PRECISIONS` compares an array elementwise: raw ValueError."""
    _config_rejects(lambda: DotGeneralConfig((1,), (0,), precision=np.array(["default",
                                                                               "tf32"])),
                    "DotGeneralConfig")


def test_grouped_gemm_config_precision_array_is_a_validation_error():
    _config_rejects(lambda: GroupedGemmConfig((), precision=np.array(["default", "tf32"])),
                    "GroupedGemmConfig")


def test_fusion_instruction_direction_array_with_read_op_is_a_validation_error():
    """`direction != op.direction` with an array direction: raw ValueError."""
    _config_rejects(lambda: FusionInstruction(ElementwiseReadOp.compare(CompareDir.LT), (0, 1),
                                              direction=np.array(["LT", "GT"])),
                    "ElementwiseFusionPlan")


# --- order-sensitive int lists from sets / one-shot iterators ---------------------------------
@pytest.mark.parametrize("make,owner", [
    (lambda: GatherConfig(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                          index_vector_dim=1, slice_sizes={4, 1}), "GatherConfig"),
    (lambda: SliceConfig({0, 2}, (3, 4)), "SliceConfig"),
    (lambda: PadConfig({1, 0}, (0, 0)), "PadConfig"),
], ids=["gather_slice_sizes", "slice_starts", "pad_low"])
def test_config_int_lists_whose_order_matters_reject_sets(make, owner):
    """_ints() turns any non-Sequence iterable into a tuple: a set's iteration order
    (not the order the caller wrote) becomes the per-axis values."""
    _config_rejects(make, owner)


def _session():
    ctx = Rec()
    return ctx, FakeSession(ctx)


@pytest.mark.parametrize("sizes", [
    pytest.param(lambda: (b for b in (True, True)), id="generator_of_bools"),
    pytest.param(lambda: {4, 1}, id="set"),
])
def test_dynamic_slice_sizes_reject_bools_from_iterators_and_sets(sizes):
    """check_sizes() converts the iterable, then iterates it again for the bool check: a
    generator is exhausted by then, so (True, True) passes as (1, 1); a set's order is
    taken as the per-axis sizes."""
    ctx, s = _session()
    x, starts = ctx.dev((3, 4)), ctx.dev((2,), DType.INT32)
    before = len(ctx.calls)
    with pytest.raises(TenferroError) as info:
        s.dynamic_slice(x, starts, sizes())
    assert info.value.op == "dynamic_slice"
    assert ctx.calls[before:] == []
