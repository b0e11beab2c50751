"""Context-stack promises against hostile bodies, over the fake driver context stack:
graph captures (``s.capture()``) whose bodies push, pop or set contexts, driver calls that
raise ``KeyboardInterrupt`` in the middle of a scope's entry or exit, an entry the body
left that the driver refuses to pop, and raw scopes inside captures."""

from __future__ import annotations

import pytest
from reference.fake_ctx_stack import NULL, Ctx

import tenferro_cuda as tc
from tenferro_cuda.exec import guard

P, F1, F2, F3 = Ctx(0x1000), Ctx(0x2000), Ctx(0x3000), Ctx(0x4000)


@pytest.fixture
def model(capture_model):
    return capture_model


def _pop_all(m):
    while m.stack:
        m.cuCtxPopCurrent()


BODIES = {
    "pushes and forgets": lambda m: m.cuCtxPushCurrent(F3),
    "pops ours": lambda m: m.cuCtxPopCurrent(),
    "pops everything": _pop_all,
    "sets current": lambda m: m.cuCtxSetCurrent(F3),
    "sets NULL": lambda m: m.cuCtxSetCurrent(NULL),
}
STARTS = {"none": [], "foreign": [F1], "primary": [P], "two foreign": [F1, F2]}
CAPTURE_STARTS = {"two foreign": [F1, F2]}  # every start fails alike; one keeps it readable


# --- 1. graph captures ---------------------------------------------------------------------

@pytest.mark.parametrize("start", CAPTURE_STARTS)
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("raises", [False, True])
def test_capture_scope_restores_the_whole_stack(model, start, body, raises):
    """The brief's contract: a graph capture leaves the calling thread's context stack as
    it found it, whatever its body did (as raw and kernel bodies do). ``CaptureScope``
    (graph.py) has no ScopeGuard: only its own work runs under ``runtime.current()``."""
    model.stack[:] = CAPTURE_STARTS[start]
    with tc.cuda_exec_session(0) as s:
        inside_session = list(model.stack)
        try:
            with s.capture():
                BODIES[body](model)
                if raises:
                    raise ValueError("body")
        except ValueError:
            assert raises
        assert model.stack == inside_session, (
            f"capture left {model.stack}, entered with {inside_session}")


@pytest.mark.parametrize("body", BODIES)
def test_raw_scope_inside_a_capture_restores_the_stack(model, body):
    """Control: the same bodies inside a raw scope inside a capture are restored (so the
    gap above is the capture scope's own)."""
    model.stack[:] = [F1]
    with tc.cuda_exec_session(0) as s:
        inside_session = list(model.stack)
        with s.capture():
            inside_capture = list(model.stack)
            assert inside_capture == inside_session + [P]  # the capture's guard pushed ours
            with s.raw("test"):
                BODIES[body](model)
            assert model.stack == inside_capture
        assert model.stack == inside_session
    assert model.stack == [F1]


# --- 2. KeyboardInterrupt raised by the driver mid-restore ---------------------------------

class _InterruptOnce:
    """Make the model's n-th call of ``api`` (from now; default cuCtxPushCurrent) do its
    work, then raise KeyboardInterrupt: a Ctrl-C whose handler runs as the driver call
    returns, inside a loop that takes the stack off or puts it back."""

    def __init__(self, model, nth: int, api: str = "cuCtxPushCurrent") -> None:
        self.model, self.left, self.api = model, nth, api
        self.real = getattr(model, api)
        setattr(model, api, self)

    def __call__(self, *args):
        self.left -= 1
        result = self.real(*args)
        if self.left == 0:
            setattr(self.model, self.api, self.real)
            raise KeyboardInterrupt
        return result


def test_an_interrupt_mid_restore_is_raised_once_the_stack_is_whole(model, capsys):
    """guard.py: exit never raises for its own failures; a KeyboardInterrupt that arrives
    while it pushes the snapshot back (a Ctrl-C whose handler runs as a driver call
    returns) is raised once every entry is back, not in the middle of the loop."""
    model.stack[:] = [F1, F2, F3]
    g = guard.ScopeGuard(P, "test")
    _InterruptOnce(model, 2)  # the restore pushes F1, F2 (interrupted), F3
    with pytest.raises(KeyboardInterrupt):
        g.exit()
    assert model.stack == [F1, F2, F3] and not g.open
    g.exit()  # idempotent: nothing more happens
    assert model.stack == [F1, F2, F3] and capsys.readouterr().err == ""


def test_an_interrupted_restore_of_a_raw_scope_leaves_the_whole_stack(model):
    """The same through ``with_raw``: the callback returned, the restore is interrupted:
    the caller gets the KeyboardInterrupt with its stack whole, and the session goes on."""
    model.stack[:] = [F1, F2]
    with tc.cuda_exec_session(0) as s:
        model.cuCtxPushCurrent(F3)  # user code inside the session: stack [F1, F2, P, F3]
        before = list(model.stack)

        def body(raw):
            _InterruptOnce(model, 1)  # the first push of the restore is interrupted
            return "result"

        with pytest.raises(KeyboardInterrupt):
            s.with_raw("test", body)
        assert model.stack == before
        assert s.with_raw("test", lambda raw: "again") == "again"
        assert model.stack == before
        model.cuCtxPopCurrent()
    assert model.stack == [F1, F2]


def test_an_interrupt_while_the_stack_is_taken_off_at_exit(model):
    """An interrupt in the middle of the exit's take (the pops): the take puts back what
    it popped, the exit takes again, restores the snapshot, then raises."""
    model.stack[:] = [F1, F2]
    g = guard.ScopeGuard(P, "test")
    model.cuCtxPushCurrent(F3)
    _InterruptOnce(model, 2, "cuCtxPopCurrent")  # the second pop, right after it popped
    with pytest.raises(KeyboardInterrupt):
        g.exit()
    assert model.stack == [F1, F2]


def test_scope_entry_interrupted_while_pushing_the_snapshot_back(model):
    """Entry takes the whole stack off and pushes it back one by one; an interrupt in
    that loop propagates with the caller's entries above it lost for good."""
    model.stack[:] = [F1, F2, F3]
    _InterruptOnce(model, 2)  # snapshot put-back: F1, F2 (then interrupted), F3
    with pytest.raises(KeyboardInterrupt):
        guard.ScopeGuard(P, "test")
    assert model.stack == [F1, F2, F3]


# --- 3. a pop the driver refuses during the exit's restore ---------------------------------

def test_scope_exit_when_an_entry_the_body_left_cannot_be_popped(model, capsys):
    """The body left F3 on the stack and F3 cannot be popped any more (say the body
    destroyed it while it sat under another entry). Exit's ``ctx_stack_take`` fails on
    it, puts back what it took, and exit then pushes the whole snapshot *on top of* the
    body's leftovers: the thread ends with [F1, P, F3, F1] instead of [F1]. The fake's
    cuCtxSetCurrent(NULL) still removes the top, so a restore that falls back to it (or
    that at least does not push the snapshot on top of an unknown stack) is possible."""
    model.stack[:] = [F1]
    g = guard.ScopeGuard(P, "test")
    model.cuCtxPushCurrent(F3)
    model.refuse_pop.add(int(F3))
    g.exit()
    model.refuse_pop.clear()
    assert model.stack == [F1]


def test_an_interrupt_right_after_a_pop_of_the_entry_snapshot_loses_nothing(model):
    """Entry takes the caller's stack off; an interrupt right after one pop (before the
    popped entry is noted) must not lose that entry: the stack is put back whole and the
    interrupt raised, nothing of ours pushed."""
    model.stack[:] = [F1, F2, F3]
    _InterruptOnce(model, 2, "cuCtxPopCurrent")  # the second pop, right after it popped
    with pytest.raises(KeyboardInterrupt):
        guard.ScopeGuard(P, "test")
    assert model.stack == [F1, F2, F3]


def test_a_capture_left_in_a_suspended_generator_restores_nothing_when_collected(model):
    """A capture scope held open by a generator that is closed or collected later (here:
    after the caller pushed a context of its own) is only abandoned: the capture is
    discarded, and the thread's stack is left as the caller has it then."""
    import gc

    def body(s):
        with s.capture():
            yield

    with tc.cuda_exec_session(0) as s:
        before = list(model.stack)
        gen = body(s)
        next(gen)  # inside the capture, suspended
        model.cuCtxPushCurrent(F3)  # the caller's own context, on top
        now = list(model.stack)
        del gen
        gc.collect()
        assert model.stack == now  # not popped back to the capture's snapshot
        assert s._ctx.capture is None  # the capture was discarded
        model.cuCtxPopCurrent()
        model.cuCtxPopCurrent()  # the capture guard's push, abandoned with it
        assert model.stack == before


def test_a_capture_that_cannot_begin_leaves_the_arena_and_the_stack(model, driver,
                                                                   monkeypatch):
    """The arena and the context say "capturing" before the stream does; when the stream
    refuses to begin, both are put back, the graph memory closed and the stack restored."""
    from tenferro_cuda import _driver_graph
    from tenferro_cuda.errors import BackendSourceError

    ran = []

    def refuse(stream, op):  # (another thread deferred work to the capture meanwhile)
        s._ctx.capture.defer(lambda: ran.append("ordering"))
        raise BackendSourceError("cuStreamBeginCapture_v2 failed", op=op)

    monkeypatch.setattr(_driver_graph, "begin_capture", refuse)
    with tc.cuda_exec_session(0) as s:
        before = list(model.stack)
        lists = s._ctx.home.lists
        with pytest.raises(BackendSourceError):
            with s.capture():
                pass
        ctx = s._ctx
        assert ctx.capture is None and ctx.eager and ctx.home.graph is None
        assert ctx.home.lists is lists and model.stack == before
        assert ran == ["ordering"]  # run, not lost, when the capture did not begin
        assert driver.end  # the stream's capture is ended in any case (an interrupt may
        # come after the begin succeeded)
