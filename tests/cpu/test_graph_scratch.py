"""Library-held scratch memory in a capture: ``dot_general_read_into_accum_cached`` keeps
staging temporaries per cache slot, but during a capture the staging is graph-owned, never
a slot's -- the copy and GEMM nodes would otherwise hold memory that
``dot_general_cache_clear`` (or a re-plan of the slot) frees and hands to the next tensor
while every replay still writes there (docs/graphs.md: "a replay never reads memory that
was freed and handed out again")."""

from __future__ import annotations

import gc
from types import SimpleNamespace

from reference.fake_graph import FakeSession, tensor

from tenferro_cuda.dtypes import DType
from tenferro_cuda.graph import CaptureScope
from tenferro_cuda.ops import dot
from tenferro_cuda.ops.dot import run


def test_a_cached_slots_staging_temporary_used_in_a_capture_is_owned_or_kept(driver):
    session = FakeSession()
    ctx = session._ctx
    op = "dot_general_read_into_accum_cached"
    temps = [tensor(ctx), None, None]  # staged by an eager call of slot 0 before
    ctx.dot_slots = {0: SimpleNamespace(temps=temps)}
    with CaptureScope(session) as g:
        staged = run._temp(ctx, (4,), DType.FLOAT32, temps, 0, op)  # the capture's staging
    ptr, nbytes = staged.buffer.ptr, staged.buffer.nbytes
    owned = staged.buffer.owner is g._memory
    kept = any(b is staged.buffer for b in g._kept)
    assert owned or kept, (
        "the staging temporary the captured copy and GEMM write is neither graph memory nor "
        "kept alive by the graph")
    del staged
    dot.dot_general_cache_clear(ctx, 0)  # eager, after the capture: allowed
    temps.clear()
    gc.collect()
    assert ctx.home.alloc(nbytes).ptr != ptr, (
        "freed and handed to a new tensor while every replay still stages into it")
    g.close()
