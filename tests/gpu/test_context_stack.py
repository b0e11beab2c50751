"""The context-stack contract under adversarial bodies (issue 13, items 1-3).

After any scope -- a session, a raw or kernel sub-session, in both their forms -- the
thread's whole context stack (every entry, in order) is what it was at entry, whatever
the body did. Ops inside a session leave the caller's context as they found it. An
abandoned scope never touches a context later. The stack is read with the driver's own
calls (pop everything, push it back), independently of the library's guard.
"""

from __future__ import annotations

import gc
import random
import threading

import numpy as np
import pytest
from context_util import clear, pop, push, set_current, stack

import tenferro_cuda as tc

pytestmark = pytest.mark.usefixtures("empty_stack")


STARTS = ["empty", "foreign", "primary", "two_foreign"]


def start(name, contexts):
    p, fa, fb = contexts
    for ctx in {"empty": [], "foreign": [fa], "primary": [p], "two_foreign": [fa, fb]}[name]:
        push(ctx)


class Interrupt(Exception):
    pass


def body(kind, contexts):
    """What a hostile body does to the stack before it returns (or raises)."""
    p, fa, fb = contexts
    if kind == "returns":
        return
    if kind == "raises":
        raise Interrupt("body failed")
    if kind == "keyboard_interrupt":
        raise KeyboardInterrupt
    if kind == "push_and_forget":
        push(fa)
    elif kind == "pops_ours":
        pop()
    elif kind == "pops_ours_and_more":
        pop()
        if stack():
            pop()
    elif kind == "set_current":
        set_current(fb)
    elif kind == "pushes_two_and_sets":
        push(fb)
        push(fa)
        set_current(p)


BODIES = ["returns", "raises", "keyboard_interrupt", "push_and_forget", "pops_ours",
          "pops_ours_and_more", "set_current", "pushes_two_and_sets"]


def _run_scope(scope, kind, contexts):
    try:
        if scope == "session":
            with tc.cuda_exec_session(0):
                body(kind, contexts)
        elif scope == "with_session":
            tc.with_cuda_exec_session(lambda s: body(kind, contexts))
        else:
            with tc.cuda_exec_session(0) as s:
                inner = stack()
                try:
                    if scope == "raw":
                        with s.raw("test.raw"):
                            body(kind, contexts)
                    elif scope == "with_raw":
                        s.with_raw("test.raw", lambda raw: body(kind, contexts))
                    elif scope == "kernels":
                        with s.kernels("test.kernels"):
                            body(kind, contexts)
                    else:
                        s.with_kernels("test.kernels", lambda ks: body(kind, contexts))
                finally:
                    assert stack() == inner  # the sub-scope restored the session's stack
    except (Interrupt, KeyboardInterrupt):
        pass


@pytest.mark.parametrize("kind", BODIES)
@pytest.mark.parametrize("begin", STARTS)
@pytest.mark.parametrize("scope", ["session", "with_session", "raw", "with_raw", "kernels",
                                   "with_kernels"])
def test_scope_restores_the_whole_stack(contexts, scope, begin, kind):
    start(begin, contexts)
    before = stack()
    _run_scope(scope, kind, contexts)
    assert stack() == before


@pytest.mark.parametrize("begin", STARTS)
def test_session_entry_pushes_primary_on_the_callers_stack(contexts, begin):
    p = contexts[0]
    start(begin, contexts)
    before = stack()
    with tc.cuda_exec_session(0):
        assert stack() == before + [int(p)]
    assert stack() == before


OPS = ["add", "reduce_sum", "to_contiguous_read", "upload_host_tensor", "download_to_host",
       "dot_general", "synchronize", "exp", "transpose", "gather", "cast"]


def _op(s, name, x, y):
    if name == "add":
        return s.add(x, y)
    if name == "exp":
        return s.exp(x)
    if name == "reduce_sum":
        return s.reduce_sum(x, (0,))
    if name == "to_contiguous_read":
        return s.to_contiguous_read(x.T)
    if name == "transpose":
        return s.transpose(x, (1, 0))
    if name == "upload_host_tensor":
        return s.upload_host_tensor(np.ones((4, 4), np.float32))
    if name == "download_to_host":
        return s.download_to_host(x)
    if name == "dot_general":
        return s.dot_general(x, y, tc.DotGeneralConfig((1,), (0,)))
    if name == "cast":
        return s.cast(x, tc.float64)
    if name == "gather":
        idx = s.upload_host_tensor(np.array([[1], [3]], np.int32))
        cfg = tc.GatherConfig(offset_dims=(1,), collapsed_slice_dims=(0,),
                              start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 4))
        return s.gather(x, idx, cfg)
    s.synchronize()
    return None


@pytest.mark.parametrize("user", ["foreign", "none", "two_foreign"])
@pytest.mark.parametrize("name", OPS)
def test_op_leaves_the_callers_context(contexts, name, user):
    """User code inside a session makes its own context current (or pops ours); an op
    leaves the stack exactly so, and still runs on the session."""
    p, fa, fb = contexts
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
        y = s.upload_host_tensor(np.ones((4, 4), np.float32))
        want = s.download_to_host(_op(s, name, x, y)).numpy() \
            if name not in ("download_to_host", "synchronize") else None
        if user == "foreign":
            push(fa)
        elif user == "none":
            pop()
        else:
            push(fa)
            push(fb)
        before = stack()
        got = _op(s, name, x, y)
        assert stack() == before
        if user == "none":
            push(p)
        else:
            pop()
            if user == "two_foreign":
                pop()
        if want is not None:
            np.testing.assert_array_equal(s.download_to_host(got).numpy(), want)


def test_usual_path_keeps_ours_current(contexts):
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.ones(8, np.float32))
        before = stack()
        for _ in range(3):
            s.add(x, x)
        assert stack() == before


def test_usual_path_takes_no_context_guard(contexts, monkeypatch):
    """With our context current, an op is its one-line check and the call: the guard that
    pushes ours (``enter`` -> ``guard.call_current``) is never reached, for an allocating,
    an ``_into`` and a scalar op and a reduction. (The check compares the handle the
    driver returns with ours; a comparison that never matched would still be correct, but
    every op would pay the guard.)"""
    from tenferro_cuda.exec import entry

    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.ones(8, np.float32))
        out = s.upload_host_tensor(np.zeros(8, np.float32))
        s.add(x, x)
        guarded = []
        real = entry.guard.call_current
        monkeypatch.setattr(entry.guard, "call_current",
                            lambda *a: guarded.append(a[1]) or real(*a))
        before = stack()
        for _ in range(3):
            s.add(x, x)
            s.add_into(x, x, out)
            s.mul(x, 2.0)
            s.reduce_sum(x, (0,))
        assert guarded == [] and stack() == before
        p, fa, fb = contexts
        push(fa)  # someone else's context on top: now the guard runs, and restores it
        s.add(x, x)
        assert len(guarded) == 1 and stack() == [*before, int(fa)]
        pop()


def test_abandoned_raw_scope_is_never_restored_later(contexts):
    p, fa, fb = contexts
    with tc.cuda_exec_session(0) as s:
        scope = s.raw("test.abandoned")
        raw = scope.__enter__()  # never exited
        push(fa)
        before = stack()
        del scope
        gc.collect()
        assert stack() == before  # collection touched no context
        with pytest.raises(tc.RuntimeStateError):
            raw.stream()  # it only marked itself dead
        pop()
        pop()  # the primary the abandoned entry pushed


def test_abandoned_scope_collected_on_another_thread(contexts):
    p, fa, fb = contexts
    with tc.cuda_exec_session(0) as s:
        box = [s.kernels("test.abandoned")]
        box[0].__enter__()
        seen = {}

        def other():
            push(fb)
            seen["before"] = stack()
            box.clear()
            gc.collect()
            seen["after"] = stack()
            clear()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen["before"] == seen["after"] == [int(fb)]
        pop()


def test_abandoned_session_scope_frees_the_thread(contexts):
    scope = tc.cuda_exec_session(0)
    s = scope.__enter__()
    before = stack()
    del scope
    gc.collect()
    assert stack() == before
    with pytest.raises(tc.RuntimeStateError):
        s.synchronize()
    clear()
    with tc.cuda_exec_session(0) as again:  # the thread may open a session again
        again.synchronize()


def test_random_walk_of_1000_steps(contexts):
    """Enter/exit scopes, push/pop/set foreign contexts and run ops at random; after every
    step the whole stack equals the model's."""
    p, fa, fb = contexts
    rng = random.Random(1234)
    model: list[int] = []
    open_scopes: list[tuple[object, list[int], str]] = []  # (scope object, saved, kind)
    session = None
    x = None
    for step in range(1000):
        choice = rng.choice(["push", "pop", "set", "enter", "exit", "op", "op"])
        if choice == "push":
            ctx = rng.choice([fa, fb, p])
            push(ctx)
            model.append(int(ctx))
        elif choice == "pop" and model:
            pop()
            model.pop()
        elif choice == "set":
            ctx = rng.choice([fa, fb])
            set_current(ctx)
            if model:
                model[-1] = int(ctx)
            else:
                model.append(int(ctx))
        elif choice == "enter" and len(open_scopes) < 6:
            saved = list(model)
            if session is None:
                cm = tc.cuda_exec_session(0)
                session = cm.__enter__()
                x = session.upload_host_tensor(np.ones(16, np.float32))
                kind = "session"
            else:
                cm = rng.choice([session.raw, session.kernels])("walk")
                cm.__enter__()
                kind = "sub"
            model.append(int(p))
            open_scopes.append((cm, saved, kind))
        elif choice == "exit" and open_scopes:
            cm, saved, kind = open_scopes.pop()
            cm.__exit__(None, None, None)
            model = saved
            if kind == "session":
                session = x = None
        elif choice == "op" and session is not None:
            y = session.add(x, x)
            assert float(session.download_to_host(y).numpy()[0]) == 2.0
        assert stack() == model, f"step {step} ({choice}): {stack()} != {model}"
    while open_scopes:
        cm, saved, _ = open_scopes.pop()
        cm.__exit__(None, None, None)
        assert stack() == saved


class _Meddler:
    """A producer of no array library around a PyTorch tensor: after handing out the
    capsule or the interface, it changes the thread's contexts and leaves them so."""

    def __init__(self, inner, change) -> None:
        self.inner, self.change = inner, change

    def __dlpack__(self, **kwargs):
        capsule = self.inner.__dlpack__(**kwargs)
        self.change()
        return capsule

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    @property
    def __cuda_array_interface__(self):
        iface = self.inner.__cuda_array_interface__
        self.change()
        return iface


@pytest.mark.parametrize("how", ["from_dlpack", "from_cuda_array_interface"])
@pytest.mark.parametrize("change", ["pushes", "pops_ours", "sets"])
def test_a_meddling_producer_leaves_the_callers_stack(contexts, how, change):
    torch = pytest.importorskip("torch")
    p, fa, fb = contexts
    inner = torch.arange(8, dtype=torch.float32, device="cuda:0")
    torch.cuda.synchronize()
    clear()  # torch's runtime made the primary current: start from an empty stack
    push(fa)
    with tc.cuda_exec_session(0) as s:
        before = stack()
        act = {"pushes": lambda: push(fb), "pops_ours": pop,
               "sets": lambda: set_current(fb)}[change]
        t = getattr(s, how)(_Meddler(inner, act))
        assert stack() == before
        np.testing.assert_array_equal(s.download_to_host(t).numpy(), np.arange(8.0))
    assert stack() == [int(fa)]
    pop()
