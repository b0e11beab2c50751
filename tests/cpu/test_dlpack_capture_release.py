"""A DLPack export released (its deleter run, on any thread) while the tensor's stream
is capturing a graph: the release's ordering (our stream waits for a default-stream
consumer) must not be recorded into the capture (an event recorded outside it would break
the capture); it is handed to the capture, which runs it as it ends, before its deferred
frees make the memory reusable. Also ``CaptureState.defer`` itself."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda import _dlpack_export, _driver, _foreign
from tenferro_cuda.memory import _Arena
from tenferro_cuda.tensor import Tensor

STREAM = 0x5150


def _tensor_and_ctx(capturing: bool):
    pool = SimpleNamespace(domain=-7, ordinal=0, closed=False, limit=None)
    arena = _Arena(pool, _driver.stream_handle(STREAM))  # type: ignore[arg-type]
    arr = np.zeros(4, np.float32)
    buf = arena.adopt(arr.ctypes.data, arr.nbytes, arr)
    t = Tensor._make(__import__("tenferro_cuda").DType.FLOAT32, (4,), buffer=buf)
    deferred: list = []
    capture = SimpleNamespace(defer=deferred.append, deferred=deferred)
    ctx = SimpleNamespace(closed=False, thread=threading.get_ident(), home=arena,
                          capture=capture if capturing else None)
    return t, ctx


@pytest.mark.parametrize("where", ["same thread", "another thread"])
def test_a_deleter_during_a_capture_enqueues_no_wait_on_the_capturing_stream(monkeypatch,
                                                                             where):
    calls = []
    monkeypatch.setattr(_foreign, "order", lambda ctx, waiter, producer:
                        calls.append((int(waiter), int(producer))))
    t, ctx = _tensor_and_ctx(capturing=True)
    args = (_foreign.LEGACY_STREAM, ctx, t)  # what the deleter's release is given
    if where == "same thread":
        _dlpack_export._release(*args)
    else:
        th = threading.Thread(target=_dlpack_export._release, args=args)
        th.start()
        th.join()
    assert calls == [], (
        "the DLPack deleter made the capturing stream wait for an event recorded outside "
        "the capture")
    # the ordering is handed to the capture, to run as it ends (before its frees)
    (work,) = ctx.capture.deferred
    ctx.capture = None
    work()
    assert calls == [(STREAM, int(_foreign.LEGACY_STREAM))]


def test_a_deleter_outside_a_capture_orders_the_stream(monkeypatch):
    """What holds: eagerly, our stream waits for the consumer's default stream."""
    calls = []
    monkeypatch.setattr(_foreign, "order", lambda ctx, waiter, producer:
                        calls.append((int(waiter), int(producer))))
    t, ctx = _tensor_and_ctx(capturing=False)
    _dlpack_export._release(_foreign.LEGACY_STREAM, ctx, t)
    assert calls == [(STREAM, 1)]


def test_capture_defer_runs_work_as_the_capture_ends_or_at_once_after(monkeypatch):
    """``CaptureState.defer``: work handed over during the capture runs when ``finish``
    ends it (before the arena's deferred frees); handed over after the end, at once."""
    from tenferro_cuda.exec import capture as cap

    order: list[str] = []
    arena = SimpleNamespace(end_graph=lambda: order.append("frees"))
    ctx = SimpleNamespace(stream=1, capture=None, eager=False, closed=False, home=arena,
                          errors=SimpleNamespace(count=0), _blas=None)
    state = cap.CaptureState(ctx, SimpleNamespace())
    ctx.capture = state
    monkeypatch.setattr(cap._driver_graph, "end_capture", lambda stream: (0, 0xA))
    state.defer(lambda: order.append("ordering"))
    assert order == []
    assert state.finish() == (0, 0xA)
    assert order == ["ordering", "frees"] and ctx.capture is None and ctx.eager
    state.defer(lambda: order.append("late"))
    assert order[-1] == "late" and state.after == []
