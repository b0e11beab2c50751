"""The alias rule of the dot family (issue 13 item 5), on the CPU over the recording
context of tests/gpu/dot_fakes.py: an ``out`` that shares device memory with ``lhs`` or
``rhs`` is a ValidationError raised before anything is enqueued, on every path -- first
calls, ``cache_slot=None``, a warm cache slot, and grouped jobs -- whatever tensor objects
describe that memory: a second Tensor over the same buffer (what ``reshape`` returns), a
shifted view of it, two adoptions of one foreign allocation (``from_dlpack`` twice).
Overlap is judged by device byte ranges, so views of one buffer that share no byte are
still accepted.
"""

from __future__ import annotations

import pytest
from dot_fakes import MM, Rec, kinds, session

from tenferro_cuda.configs.dot import DotGeneralAccumulation, GemmJob, GroupedGemmConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.tensor import Tensor, TensorView

F32 = DType.FLOAT32
ACC = DotGeneralAccumulation(1.0, 1.0)


@pytest.fixture
def ctx():
    return Rec()


@pytest.fixture
def s(ctx):
    return session(ctx)


def _over(buf, shape, dtype=F32) -> Tensor:
    """Another Tensor object over ``buf`` (what a buffer-sharing reshape gives)."""
    return Tensor._make(dtype, tuple(shape), buffer=buf)


def _aliases(ctx: Rec):
    """(name, lhs, rhs, out): out shares bytes with an input through other objects."""
    base = ctx.dev((64,))
    buf = base.buffer
    rhs = ctx.dev((3, 5))
    foreign = ctx.dev((64,)).buffer  # memory of "another library", adopted twice
    first = ctx.adopt(foreign.ptr, foreign.nbytes, owner=object())
    second = ctx.adopt(foreign.ptr, foreign.nbytes, owner=object())
    lhs = _over(buf, (4, 3))
    return [
        ("reshape_alias_of_lhs", lhs, rhs, _over(buf, (4, 5))),
        ("shifted_view_of_lhs", lhs, rhs, TensorView(_over(buf, (64,)), (4, 5), (5, 1), 7)),
        ("reshape_alias_of_rhs", ctx.dev((4, 3)), _over(buf, (3, 5)),
         TensorView(_over(buf, (8, 8)), (4, 5), (8, 1), 9)),
        ("reversed_rhs_crossing_out", ctx.dev((4, 3)), _over(buf, (3, 5))[::-1, ::-1],
         TensorView(_over(buf, (64,)), (4, 5), (5, 1), 14)),
        ("two_adoptions", _over(first, (4, 3)), rhs, _over(second, (4, 5))),
        ("adoption_and_view", TensorView(_over(first, (64,)), (4, 3), (1, 4), 30), rhs,
         TensorView(_over(second, (64,)), (4, 5), (5, 1), 40)),
    ]


ALIAS_IDS = [c[0] for c in _aliases(Rec())]
FORMS = ["read_into", "accum", "cached_none", "cached_first"]


def _call(s, form, lhs, rhs, out):
    if form == "read_into":
        s.dot_general_read_into(lhs, rhs, MM, out)
    elif form == "accum":
        s.dot_general_read_into_accum(lhs, rhs, MM, ACC, out)
    elif form == "cached_none":
        s.dot_general_read_into_accum_cached(None, lhs, rhs, MM, ACC, out)
    else:
        s.dot_general_read_into_accum_cached(0, lhs, rhs, MM, ACC, out)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ALIAS_IDS)
def test_first_call_refuses_out_sharing_memory(ctx, s, name, form):
    _, lhs, rhs, out = {c[0]: c for c in _aliases(ctx)}[name]
    with pytest.raises(ValidationError, match="out overlaps (lhs|rhs) in device memory") as info:
        _call(s, form, lhs, rhs, out)
    assert info.value.op.startswith("dot_general")
    assert ctx.calls == [] and not ctx.dot_slots


@pytest.mark.parametrize("name", ALIAS_IDS)
def test_warm_slot_refuses_out_sharing_memory(ctx, s, name):
    """The slot is warmed with a disjoint output of the same shape and strides (the key
    the warm path compares); the aliasing call then raises before anything is enqueued,
    and the slot stays usable."""
    _, lhs, rhs, out = {c[0]: c for c in _aliases(ctx)}[name]
    safe = TensorView(ctx.dev((64,)), out.shape, out.strides, out.offset)
    run = s.dot_general_read_into_accum_cached
    run(0, lhs, rhs, MM, ACC, safe)
    slot = ctx.dot_slots[0]
    run(0, lhs, rhs, MM, ACC, safe)
    assert ctx.dot_slots[0] is slot and kinds(ctx.calls).count("alloc") <= 1  # warm
    n = len(ctx.calls)
    with pytest.raises(ValidationError, match="out overlaps (lhs|rhs) in device memory"):
        run(0, lhs, rhs, MM, ACC, out)
    with pytest.raises(ValidationError, match="overlaps"):  # another accumulation object
        run(0, lhs, rhs, MM, DotGeneralAccumulation(2.0, 0.0), out)
    assert len(ctx.calls) == n
    run(0, lhs, rhs, MM, ACC, safe)
    assert ctx.dot_slots[0] is slot and len(ctx.calls) > n


def test_views_of_one_buffer_sharing_no_byte_are_accepted(ctx, s):
    """Only shared bytes count: other objects over disjoint parts of one buffer run,
    first call and warm slot alike."""
    buf = ctx.dev((64,)).buffer
    lhs = _over(buf, (4, 3))                                   # bytes [0, 48)
    rhs = TensorView(_over(buf, (64,)), (3, 5), (5, 1), 12)    # bytes [48, 108)
    out = TensorView(_over(buf, (64,)), (4, 5), (5, 1), 27)    # bytes [108, 188)
    s.dot_general_read_into(lhs, rhs, MM, out)
    for _ in range(3):
        s.dot_general_read_into_accum_cached(2, lhs, rhs, MM, ACC, out)
    assert kinds(ctx.calls) == ["gemm", "bind", "gemm", "call", "call"]
    edge = TensorView(_over(buf, (64,)), (4, 5), (5, 1), 26)   # one element into rhs
    with pytest.raises(ValidationError, match="out overlaps rhs"):
        s.dot_general_read_into_accum_cached(2, lhs, rhs, MM, ACC, edge)


def test_empty_operands_overlap_nothing(ctx, s):
    """k = 0: lhs and rhs address no byte, so an out over the same buffer is valid."""
    buf = ctx.dev((64,)).buffer
    lhs, rhs = _over(buf, (4, 0)), _over(buf, (0, 5))
    out = _over(buf, (4, 5))
    for _ in range(2):
        s.dot_general_read_into_accum_cached(0, lhs, rhs, MM, DotGeneralAccumulation(1, 0), out)
    assert kinds(ctx.calls) == ["memset", "memset"]


def _grouped_aliases(ctx: Rec):
    buf = ctx.dev((64,)).buffer
    foreign = ctx.dev((64,)).buffer
    first = ctx.adopt(foreign.ptr, foreign.nbytes, owner=object())
    second = ctx.adopt(foreign.ptr, foreign.nbytes, owner=object())
    a, b = ctx.dev((4, 3)), ctx.dev((3, 5))
    return [
        ("outputs_on_two_objects", [GemmJob(a, b, _over(buf, (4, 5))),
                                    GemmJob(a, b, TensorView(_over(buf, (64,)), (4, 5),
                                                             (5, 1), 10))],
         r"jobs\[1\]\.out overlaps jobs\[0\]\.out"),
        ("out_over_other_jobs_lhs", [GemmJob(_over(buf, (4, 3)), b, ctx.dev((4, 5))),
                                     GemmJob(a, b, TensorView(_over(buf, (64,)), (4, 5),
                                                              (5, 1), 11))],
         r"jobs\[1\]\.out overlaps jobs\[0\]\.lhs"),
        ("out_over_own_rhs", [GemmJob(a, _over(buf, (3, 5)), _over(buf, (4, 5)))],
         r"jobs\[0\]\.(out overlaps jobs\[0\]\.rhs|rhs overlaps jobs\[0\]\.out)"),
        ("two_adoptions", [GemmJob(a, b, _over(first, (4, 5))),
                           GemmJob(a, b, _over(second, (4, 5)))],
         r"jobs\[1\]\.out overlaps jobs\[0\]\.out|jobs\[0\]\.out overlaps jobs\[1\]\.out"),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _grouped_aliases(Rec())])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.INT32], ids=["float32", "int32"])
def test_grouped_refuses_aliasing_outputs_on_other_objects(ctx, s, name, dtype):
    _, jobs, message = {c[0]: c for c in _grouped_aliases(ctx)}[name]
    if dtype is not F32:  # the same memory with another dtype's tensors
        jobs = [GemmJob(*(_over(t.base.buffer, (64,), dtype).view(t.shape, t.strides, t.offset)
                          for t in (j.lhs, j.rhs, j.out))) for j in jobs]
    with pytest.raises(ValidationError, match=message) as info:
        s.grouped_gemm(GroupedGemmConfig(jobs))
    assert info.value.op == "grouped_gemm" and ctx.calls == []


def test_grouped_disjoint_parts_of_one_buffer_run(ctx, s):
    buf = ctx.dev((64,)).buffer
    a, b = ctx.dev((4, 3)), ctx.dev((3, 5))
    jobs = [GemmJob(a, b, _over(buf, (4, 5))),
            GemmJob(a, b, TensorView(_over(buf, (64,)), (4, 5), (5, 1), 20)),
            GemmJob(TensorView(_over(buf, (64,)), (4, 3), (3, 1), 40), b,
                    TensorView(_over(buf, (64,)), (4, 5), (1, 4), 0))]
    with pytest.raises(ValidationError):  # the third out is [0, 20): job 0's
        s.grouped_gemm(GroupedGemmConfig(jobs))
    jobs[2] = GemmJob(TensorView(_over(buf, (64,)), (4, 3), (3, 1), 40), b, ctx.dev((4, 5)))
    s.grouped_gemm(GroupedGemmConfig(jobs))
    assert kinds(ctx.calls) == ["alloc", "upload", "grouped"]
