"""Argument validation: ``dot_general_cache_clear(cache_slot)``.
Its slot is "int or None" (the same slots as ``dot_general_read_into_accum_cached``,
which rejects anything but an int >= 0 or None with ValidationError); a bad slot must be
a ValidationError naming the method, and must not drop another slot."""

from __future__ import annotations

import numpy as np
import pytest
from dot_fakes import MM, Rec
from reference.fake_context import FakeSession

from tenferro_cuda.configs.dot import DotGeneralAccumulation
from tenferro_cuda.errors import ValidationError


def _warm_slot_1():
    ctx = Rec()
    s = FakeSession(ctx)
    s.dot_general_read_into_accum_cached(1, ctx.dev((3, 4)), ctx.dev((4, 5)), MM,
                                         DotGeneralAccumulation(), ctx.dev((3, 5)))
    assert 1 in ctx.dot_slots
    return ctx, s


@pytest.mark.parametrize("slot", [True, 1.0, np.float64(1.0), "1", -1, [], {}, (1,)],
                         ids=["True", "float", "np_float", "str", "negative", "list",
                              "dict", "tuple"])
def test_cache_clear_rejects_a_slot_that_is_not_an_int(slot):
    """dot_general_cache_clear passes the slot straight to dict.pop: True and 1.0 drop
    slot 1, a str or -1 is ignored, a list or dict raises a raw TypeError (unhashable)."""
    ctx, s = _warm_slot_1()
    with pytest.raises(ValidationError) as info:
        s.dot_general_cache_clear(slot)
    assert info.value.op == "dot_general_cache_clear"
    assert 1 in ctx.dot_slots, "a rejected call dropped slot 1"
