"""``g.close()`` called inside its own capture body is refused: closing would give the
blocks of the tensors made so far back to the arena while the capture goes on recording
kernels that write them, and the graph would end replayable over memory it no longer
owns."""

from __future__ import annotations

from reference.fake_graph import FakeSession

from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError
from tenferro_cuda.graph import CaptureScope
from tenferro_cuda.tensor import Tensor


def test_close_inside_the_capture_does_not_leave_a_replayable_graph_over_freed_memory(
        driver):
    session = FakeSession()
    ctx = session._ctx
    refused = False
    with _maybe() as outcome:
        with CaptureScope(session) as g:
            y = Tensor._make(DType.FLOAT32, (4,), buffer=ctx.home.alloc(16))  # graph-owned
            ctx.capture.admit("add", (y, y))  # a kernel writing y is recorded
            try:
                g.close()
            except RuntimeStateError:
                refused = True
            ptr = y.buffer.ptr
            if ctx.capture is not None:
                ctx.capture.admit("mul", (y, y))  # the body goes on recording
    if refused or outcome.raised:
        return  # refusing close() during the capture (or abandoning it) is fine
    replayable = not g.closed
    recycled = ctx.home.alloc(16).ptr == ptr
    assert not (replayable and recycled), (
        "g is replayable after the capture, yet the block its recorded kernels write was "
        "given back to the arena and handed to a new tensor")


class _maybe:
    """Swallows (and notes) a RuntimeStateError of the capture scope's exit."""

    raised = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.raised = exc_type is not None and issubclass(exc_type, RuntimeStateError)
        return self.raised
