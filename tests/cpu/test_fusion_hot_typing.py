"""The fusion hot path serves only calls the plan was typed for: an unused input's rank
(a rank-0 operand promotes) and residency count as for any input ("every instruction is
checked, including those no output depends on", docs/fusion.md)."""

from __future__ import annotations

import numpy as np
import pytest
from test_fusion_emu import fusion_session, get, put

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.ops import fusion as fusion_ops

P, Ins = ElementwiseFusionPlan, FusionInstruction

# v0: complex64 (live), v1: float32 (feeds only a dead instruction)
# v2 = add(v1, v0)  -- dead; valid only while v1 is rank 0 (the scalar promotion rule)
# v3 = neg(v0)      -- the output
PLAN = P(2, [Ins("add", (1, 0)), Ins("neg", (0,))], (3,))


@pytest.fixture
def emu(monkeypatch):
    return fusion_session(monkeypatch)


def _c64(s):
    return put(s, (np.arange(8) + 1j * np.arange(8)).astype(np.complex64))


def test_general_path_rejects_a_dead_real_tensor_next_to_complex(emu):
    s, fdev, dev, ctx = emu
    # fresh plan object: no hot closure yet -> general path raises (the contract)
    with pytest.raises(ValidationError) as info:
        s.execute_elementwise_fusion([_c64(s), put(s, np.ones(8, np.float32))], PLAN)
    assert info.value.kind == "dtype_mismatch"


def test_hot_path_skips_dead_instruction_typing(emu):
    s, fdev, dev, ctx = emu
    x = _c64(s)
    # 1st call: v1 rank 0 -> dead add is valid (promotion); contiguous launch arms hot path
    got, = s.execute_elementwise_fusion([x, put(s, np.array(2, np.float32))], PLAN)
    assert np.array_equal(get(s, got), -get(s, x))
    launches = len(fdev.launches)
    # 2nd call: v1 is a (8,) float32 tensor: the dead add(v1, v0) is now a dtype mismatch,
    # which the general path raises (previous test). The hot path must raise it too, before
    # allocating or launching anything.
    with pytest.raises(ValidationError) as info:
        s.execute_elementwise_fusion([x, put(s, np.ones(8, np.float32))], PLAN)
    assert info.value.kind == "dtype_mismatch"
    assert len(fdev.launches) == launches


def test_same_call_is_rejected_when_the_hot_closure_is_bypassed(emu, monkeypatch):
    """Same sequence with the hot path out of the way: the general path raises, so the
    difference above is the hot path alone."""
    s, fdev, dev, ctx = emu
    x = _c64(s)
    s.execute_elementwise_fusion([x, put(s, np.array(2, np.float32))], PLAN)
    with pytest.raises(ValidationError):
        fusion_ops.general(ctx, [x, put(s, np.ones(8, np.float32))], PLAN)
