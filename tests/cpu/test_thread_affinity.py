"""Thread affinity of sessions and lent objects, and the per-thread list of open scope
guards, over the driver's context-stack model (no GPU).

1. ``threading.get_ident()`` values are reused once a thread ends. A session (or a raw
   session) that a finished thread never exited must not work on a later thread with
   the same identifier: when a thread ends, the scopes it never exited are abandoned.
2. A scope abandoned from another thread (its ``__exit__`` called there, a generator
   collected there) never races its own thread's exits on that thread's list of open
   guards: the scopes entered after an exiting one are still abandoned."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from reference.fake_ctx_stack import Ctx, FakeRuntime, install, use_runtime

import tenferro_cuda as tc
from tenferro_cuda.exec import guard

P = Ctx(0x1000)


@pytest.fixture
def model(monkeypatch):
    model = install(monkeypatch)
    use_runtime(monkeypatch, FakeRuntime(P))
    return model


def _run(fn):
    out = {}

    def body():
        out["ident"] = threading.get_ident()
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out


# --- 1. thread identity reuse --------------------------------------------------------------

def _leak_from_a_finished_thread():
    def opener():
        scope = tc.cuda_exec_session(0)
        s = scope.__enter__()  # never exited: the thread ends with the session open
        raw_scope = s.raw("ext")
        raw = raw_scope.__enter__()
        return scope, s, raw_scope, raw

    first = _run(opener)
    assert "error" not in first, first
    return first["ident"], first["value"]


@pytest.mark.parametrize("use", ["runtime", "device_info", "stream", "raw.device",
                                 "raw.stream"])
def test_a_session_of_a_finished_thread_is_refused_on_a_new_thread(model, use):
    # The identifier of a joined thread usually goes to the next thread started; another
    # thread of the process (a pool's worker) may take it first, so try a few times.
    for _ in range(20):
        dead_ident, (_scope, s, _raw_scope, raw) = _leak_from_a_finished_thread()
        calls = {"runtime": s.runtime, "device_info": s.device_info,
                 "stream": lambda s=s: s.stream, "raw.device": raw.device,
                 "raw.stream": raw.stream}
        second = _run(calls[use])
        if second["ident"] == dead_ident:
            break
    else:
        pytest.skip("this platform did not recycle the thread identifier in 20 tries")
    # The second thread is another thread: the session and what it lent must refuse it.
    assert isinstance(second.get("error"), tc.RuntimeStateError), (
        f"{use} of a session opened by a finished thread worked on a new thread (same "
        f"threading.get_ident()): returned {second.get('value')!r}")


def test_a_thread_that_ends_inside_its_scopes_leaves_them_dead(model):
    """Whether or not the next thread gets the same identifier: when a thread ends, the
    session and raw scopes it never exited are abandoned (no driver call: the thread's
    context stack went with it), so nothing they lent works anywhere again."""
    calls_before = len(model.calls)
    _, (_scope, s, _raw_scope, raw) = _leak_from_a_finished_thread()
    assert not s._scope.alive and not raw._scope.live
    assert not s._ctx.session_open  # the runtime's context is free for a new session
    pushes = [c for c in model.calls[calls_before:] if c in ("push", "pop", "set")]
    # the session's entry (push ours), the raw scope's (snapshot: pop and push back, push
    # ours), and nothing when the thread ended
    assert pushes == ["push", "pop", "push", "push"]
    for use in (s.runtime, s.device_info, raw.device, raw.stream):
        assert isinstance(_run(use).get("error"), tc.RuntimeStateError)


def test_a_new_thread_reusing_an_identifier_gets_its_own_session(model):
    """What holds: the new thread's own session is a fresh one (threading.local)."""
    dead_ident, (_scope, s, _rs, _raw) = _leak_from_a_finished_thread()

    def fresh():
        with tc.cuda_exec_session(0) as mine:
            return mine._ctx is not s._ctx

    out = _run(fresh)
    assert out.get("value") is True, out


# --- 2. the guard list mutated from two threads ---------------------------------------------

class _Interleaved(list):
    """The thread's guard list, where ``index`` (the first step of ``ScopeGuard.exit``)
    lets another thread run ``during`` right after it computed its answer -- the
    interleaving the GIL allows between ``peers.index`` and ``del peers[at:]``."""

    during = None

    def index(self, *args):
        at = super().index(*args)
        during, self.during = self.during, None
        if during is not None:
            t = threading.Thread(target=during)
            t.start()
            t.join()
        return at


def test_guard_exit_racing_an_abandon_from_another_thread_abandons_later_scopes(model,
                                                                              monkeypatch):
    peers = _Interleaved()
    monkeypatch.setattr(guard._local, "state", SimpleNamespace(guards=peers), raising=False)
    abandoned = []
    outer = guard.ScopeGuard(P, "outer", lambda: abandoned.append("outer"))
    middle = guard.ScopeGuard(P, "middle", lambda: abandoned.append("middle"))
    inner = guard.ScopeGuard(P, "inner", lambda: abandoned.append("inner"))  # never exited
    assert list(peers) == [outer, middle, inner]
    peers.during = outer.abandon  # e.g. outer's __exit__ called from another thread
    middle.exit()
    # Contract (exec/guard.py): when a scope exits, the scopes entered after it that are
    # still open are abandoned first.
    assert "inner" in abandoned and not inner.open, (
        "the scope entered after the exiting one was never abandoned: its guard was "
        "dropped from the list by `del peers[at:]` with a stale index")
    assert middle not in peers, "the exited guard stayed in the thread's guard list"


def test_raw_scope_left_open_stays_usable_after_a_racing_exit(model, monkeypatch):
    """The same race through the public scopes: an outer raw scope exited from another
    thread while the thread exits a kernels scope; the raw scope entered inside the
    kernels scope (never exited, e.g. a suspended generator) must die with it."""
    peers = _Interleaved()
    monkeypatch.setattr(guard._local, "state", SimpleNamespace(guards=peers), raising=False)
    with tc.cuda_exec_session(0) as s:
        outer = s.raw("outer")
        outer.__enter__()
        ks_scope = s.kernels("middle")
        ks_scope.__enter__()
        inner = s.raw("inner")
        inner_raw = inner.__enter__()  # never exited
        peers.during = lambda: outer.__exit__(None, None, None)  # from another thread
        ks_scope.__exit__(None, None, None)
        with pytest.raises(tc.RuntimeStateError):
            inner_raw.stream()  # its scope was left: everything it lent is dead
