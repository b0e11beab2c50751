"""Session and sub-session scopes over a model of the driver's context stack (no GPU):
the runtime is a stand-in with a context and a per-thread execution context, so
``session.py``'s scope objects, the op entry checks and the lent objects run unchanged.

What is checked: every scope restores the thread's whole stack; a scope that is never
exited -- collected, left in a suspended generator (collected later, here or on another
thread), exited from another thread, or outlived by its session -- is only abandoned: it
touches no context, its lent objects die, and the thread may open a session again."""

from __future__ import annotations

import copy
import gc
import pickle
import threading

import pytest
from reference.fake_ctx_stack import Ctx, FakeRuntime, install, use_runtime

import tenferro_cuda as tc

P, F1, F2 = Ctx(0x1000), Ctx(0x2000), Ctx(0x3000)


@pytest.fixture
def model(monkeypatch):
    model = install(monkeypatch)
    use_runtime(monkeypatch, FakeRuntime(P))
    return model


def _pop_all(m):
    while m.stack:
        m.cuCtxPopCurrent()


BODIES = {
    "returns": lambda m: None,
    "pushes and forgets": lambda m: m.cuCtxPushCurrent(F2),
    "pops ours": lambda m: m.cuCtxPopCurrent(),
    "pops everything": _pop_all,
    "sets current": lambda m: m.cuCtxSetCurrent(F2),
}
STARTS = {"none": [], "foreign": [F1], "primary": [P], "two foreign": [F1, F2]}


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("scope", ["session", "raw", "kernels"])
@pytest.mark.parametrize("raises", [None, ValueError, KeyboardInterrupt])
def test_scopes_restore_the_whole_stack(model, start, body, scope, raises):
    model.stack[:] = STARTS[start]
    before = list(model.stack)
    try:
        with tc.cuda_exec_session(0) as s:
            inner = list(model.stack)
            assert inner == before + [P]
            if scope == "session":
                BODIES[body](model)
            else:
                with getattr(s, scope)("test"):
                    BODIES[body](model)
                assert model.stack == inner
            if raises is not None:
                raise raises()
    except (ValueError, KeyboardInterrupt):
        assert raises is not None
    assert model.stack == before


def _holding(kind):
    def gen():
        with tc.cuda_exec_session(0) as s:
            if kind == "session":
                yield s
            else:
                with getattr(s, kind)("test.gen") as sub:
                    yield sub
    return gen()


@pytest.mark.parametrize("kind", ["session", "raw", "kernels"])
def test_a_suspended_generator_collected_later_touches_no_context(model, kind):
    model.stack[:] = [F1]
    g = _holding(kind)
    lent = next(g)
    model.cuCtxPushCurrent(F2)  # the caller moves on
    before = list(model.stack)
    del g
    gc.collect()
    assert model.stack == before
    with pytest.raises(tc.RuntimeStateError):
        lent.stream()
    _pop_all(model)
    with tc.cuda_exec_session(0) as again:  # the thread is free to open a session again
        again.raw("after")


@pytest.mark.parametrize("kind", ["session", "raw"])
def test_a_generator_closed_on_another_thread_touches_no_context(model, kind):
    model.stack[:] = [F1]
    g = _holding(kind)
    lent = next(g)
    before = list(model.stack)
    seen = {}

    def other():
        model.stack[:] = [F2]
        g.close()
        seen["other"] = list(model.stack)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["other"] == [F2]
    assert model.stack == before
    with pytest.raises(tc.RuntimeStateError):
        lent.stream()


@pytest.mark.parametrize("kind", ["session", "raw"])
def test_an_exit_called_from_another_thread_only_abandons(model, kind):
    model.stack[:] = [F1]
    session_cm = cm = tc.cuda_exec_session(0)
    s = cm.__enter__()
    if kind == "raw":
        cm = s.raw("test")
        cm.__enter__()
    before = list(model.stack)
    seen = {}

    def other():
        cm.__exit__(None, None, None)
        seen["other"] = list(model.stack)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["other"] == []  # the other thread's stack is untouched too
    assert model.stack == before
    if kind == "raw":
        session_cm.__exit__(None, None, None)
        assert model.stack == [F1]


def test_a_sub_scope_never_exited_dies_with_its_session(model):
    model.stack[:] = [F1]
    before = list(model.stack)
    cm = tc.cuda_exec_session(0)
    s = cm.__enter__()
    sub = s.raw("test")
    raw = sub.__enter__()
    handle = raw.stream()
    cm.__exit__(None, None, None)
    assert model.stack == before
    for use in (raw.stream, lambda: handle.handle, lambda: int(handle)):
        with pytest.raises(tc.RuntimeStateError):
            use()
    sub.__exit__(None, None, None)  # late: touches nothing
    assert model.stack == before


def test_an_outer_sub_scope_exit_abandons_the_inner_one(model):
    with tc.cuda_exec_session(0) as s:
        session_stack = list(model.stack)
        outer = s.raw("outer")
        outer.__enter__()
        inner = s.kernels("inner")
        ks = inner.__enter__()
        model.cuCtxPushCurrent(F1)
        outer.__exit__(None, None, None)
        assert model.stack == session_stack
        with pytest.raises(tc.RuntimeStateError):
            ks.stream()
        inner.__exit__(None, None, None)
        assert model.stack == session_stack
    assert model.stack == []


def test_an_abandoned_sub_scope_collected_leaves_the_stack(model):
    with tc.cuda_exec_session(0) as s:
        sub = s.raw("test")
        raw = sub.__enter__()
        model.cuCtxPushCurrent(F1)
        before = list(model.stack)
        del sub
        gc.collect()
        assert model.stack == before
        with pytest.raises(tc.RuntimeStateError):
            raw.stream()
        model.cuCtxPopCurrent()
        model.cuCtxPopCurrent()  # the primary the abandoned entry pushed
    assert model.stack == []


def test_entering_one_session_scope_twice_is_reentry(model):
    cm = tc.cuda_exec_session(0)
    with cm:
        with pytest.raises(tc.SessionEntryError) as info:
            cm.__enter__()
        assert info.value.kind == "reentered"
        with pytest.raises(tc.SessionEntryError):
            tc.cuda_exec_session(0).__enter__()
    with pytest.raises(tc.ValidationError):
        cm.__enter__()  # a scope object is used once


def test_scope_objects_carry_authority(model):
    with tc.cuda_exec_session(0) as s:
        for obj in (tc.cuda_exec_session(0), s.raw("x"), s.kernels("x"), s.capture()):
            for how in (copy.copy, copy.deepcopy, pickle.dumps):
                with pytest.raises(TypeError):
                    how(obj)


@pytest.mark.parametrize("method", ["raw", "kernels", "capture"])
def test_sub_scopes_are_refused_from_another_thread_and_after_the_scope(model, method):
    with tc.cuda_exec_session(0) as s:
        errors = []

        def other():
            try:
                getattr(s, method)("x") if method != "capture" else s.capture()
            except tc.RuntimeStateError as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1
    with pytest.raises(tc.RuntimeStateError):
        getattr(s, method)("x") if method != "capture" else s.capture()


def test_kernel_session_checks_its_values(model):
    with tc.cuda_exec_session(0) as s, s.kernels("test") as ks:
        assert ks.grid_1d(1000, 256).grid == (4, 1, 1)
        for bad in (0, -1, 2.5, True):
            with pytest.raises(tc.ValidationError, match="block"):
                ks.grid_1d(10, bad)


def test_owners_of_device_resources_carry_authority():
    """What releases memory or a handle exactly once -- the owner of adopted DLPack or CUDA
    Array Interface memory, graph-owned memory, a cuBLAS handle, the pinned ring of the
    grouped GEMM -- cannot be duplicated either: a copy would release it twice."""
    from tenferro_cuda._cublas import Handle
    from tenferro_cuda.cai import HeldProducer
    from tenferro_cuda.dlpack import ForeignOwner
    from tenferro_cuda.exec.blas_groups import PinnedRing
    from tenferro_cuda.exec.capture import GraphMemory

    owners = [ForeignOwner(0, None), HeldProducer(None), GraphMemory(None, None),
              Handle.__new__(Handle), PinnedRing.__new__(PinnedRing)]
    for obj in owners:
        for how in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="cannot be"):
                how(obj)
