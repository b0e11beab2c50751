"""A foreign release that waits for a runtime's busy stream runs when that runtime closes
(its streams are synchronized and destroyed: idle by definition), not only at the next
interop call, ``synchronize()`` or interpreter exit. Releases that wait for another,
still open runtime keep waiting."""

from __future__ import annotations

import contextlib
from collections import deque
from types import SimpleNamespace

import pytest

from tenferro_cuda import _driver, _driver_fast, _foreign
from tenferro_cuda import runtime as runtime_module
from tenferro_cuda.runtime import CudaRuntime

FAKE_STREAM = 0x7A11


def _runtime(ordinal: int) -> SimpleNamespace:
    """What ``CudaRuntime.close`` touches of a runtime, without a GPU."""
    pool = SimpleNamespace(closed=False)
    pool.close = lambda: setattr(pool, "closed", True)
    return SimpleNamespace(
        closed=False, ordinal=ordinal, device=ordinal, context=0x5000 + ordinal,
        _contexts=[], _modules=[], pool=pool, current=contextlib.nullcontext,
        synchronize_all=lambda: None)


@pytest.fixture
def fresh(monkeypatch):
    """An empty parking lot, and no hook installed yet (as in a new process)."""
    monkeypatch.setattr(_foreign, "_parked", deque())
    monkeypatch.setattr(_foreign, "_atexit_registered", False)
    monkeypatch.setattr(_foreign, "atexit", SimpleNamespace(register=lambda fn: None))
    monkeypatch.setattr(runtime_module, "_close_hooks", [])
    monkeypatch.setattr(_driver, "primary_ctx_release", lambda device: None)
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: False)  # all busy


def test_a_parked_release_goes_when_its_runtime_closes(fresh):
    closing, staying = _runtime(0), _runtime(1)
    released: list = []
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append,
                               "closing", closing)
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM + 1), released.append,
                               "staying", staying)
    assert released == [] and _foreign.parked_count() == 2
    CudaRuntime.close(closing)  # type: ignore[arg-type]
    assert closing.closed and closing.pool.closed
    assert released == ["closing"] and _foreign.parked_count() == 1
    CudaRuntime.close(closing)  # type: ignore[arg-type]  # (a second close: nothing)
    assert released == ["closing"] and _foreign.parked_count() == 1
    CudaRuntime.close(staying)  # type: ignore[arg-type]
    assert released == ["closing", "staying"] and _foreign.parked_count() == 0


def test_a_handle_of_a_closed_runtime_reused_by_a_live_stream_is_still_waited_for(fresh):
    """A destroyed stream's handle may come back as a stream made since. The closed
    runtime's release goes; the one waiting for the live stream of that handle waits on
    (the drain's one question per stream is per stream and home)."""
    closed, live = _runtime(0), _runtime(1)
    released: list = []
    stream = _driver.stream_handle(FAKE_STREAM)
    _foreign.release_when_idle(stream, released.append, "closed", closed)
    _foreign.release_when_idle(stream, released.append, "live", live)
    CudaRuntime.close(closed)  # type: ignore[arg-type]
    assert released == ["closed"] and _foreign.parked_count() == 1
    for home in (live, None):  # (a release with no home: asked, not assumed)
        _foreign.release_when_idle(stream, released.append, "late", home)
        _foreign.drain()
    assert released == ["closed"] and _foreign.parked_count() == 3


def test_the_hook_is_installed_once_by_the_first_parked_release(fresh):
    stream = _driver.stream_handle(FAKE_STREAM)
    assert runtime_module._close_hooks == []
    _foreign.release_when_idle(stream, None, object(), _runtime(0))
    _foreign.release_when_idle(stream, None, object(), _runtime(0))
    assert runtime_module._close_hooks == [_foreign.drain]


def test_a_release_at_once_installs_no_hook(fresh, monkeypatch):
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: True)  # idle
    released: list = []
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append, 1,
                               _runtime(0))
    assert released == [1] and runtime_module._close_hooks == []


class _Ctx:
    def __init__(self, capturing: bool = False) -> None:
        self.eager, self.closed = not capturing, False
        self.capture = SimpleNamespace(abandon=self._abandon) if capturing else None

    def _abandon(self, reason: str) -> None:  # as CaptureState.finish: eager again
        self.capture, self.eager = None, not self.closed

    def close(self) -> None:
        self.closed, self.eager = True, False


@pytest.mark.parametrize("fails", [None, "current", "synchronize"])
def test_a_closing_runtime_turns_the_usual_paths_off_first_even_when_the_close_fails(
        fresh, fails):
    """The DLPack export's kit (and the facade's usual path) trust ``ctx.eager``: no
    context of a closing runtime may keep it, whatever part of the close fails."""
    rt = _runtime(0)
    seen: list = []

    def sync():
        seen.append([ctx.eager for ctx in rt._contexts])  # after the abandons
        if fails == "synchronize":
            raise RuntimeError("synchronize failed")

    def current():
        if fails == "current":
            raise RuntimeError("no context")
        return contextlib.nullcontext()

    rt._contexts = [_Ctx(), _Ctx(capturing=True)]
    rt.synchronize_all, rt.current = sync, current
    if fails:
        with pytest.raises(RuntimeError):
            CudaRuntime.close(rt)  # type: ignore[arg-type]
    else:
        CudaRuntime.close(rt)  # type: ignore[arg-type]
    assert [ctx.eager for ctx in rt._contexts] == [False, False]
    assert seen == ([] if fails == "current" else [[False, False]])


def test_the_hooks_are_installed_again_when_the_first_try_failed(fresh, monkeypatch,
                                                                 capsys):
    """The close hook is imported lazily: an import that fails (here: the module hidden)
    leaves the release parked and the hooks to the next parked release, not marked as
    installed while nothing was."""
    registered: list = []
    monkeypatch.setattr(_foreign, "atexit", SimpleNamespace(register=registered.append))
    runtime = _runtime(0)
    released: list = []
    with monkeypatch.context() as hidden:
        hidden.setitem(__import__("sys").modules, "tenferro_cuda.runtime", None)
        _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append,
                                   "first", runtime)
    assert "deferring a foreign release failed" in capsys.readouterr().err
    assert _foreign.parked_count() == 1 and registered == [] \
        and runtime_module._close_hooks == []
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append,
                               "second", runtime)
    assert registered == [_foreign._release_all_at_exit]
    assert runtime_module._close_hooks == [_foreign.drain]
    CudaRuntime.close(runtime)  # type: ignore[arg-type]
    assert sorted(released) == ["first", "second"] and _foreign.parked_count() == 0
