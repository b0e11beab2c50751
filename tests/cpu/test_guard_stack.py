"""The context guard (``exec/guard.py``) over a model of the driver's context stack
(``reference/fake_ctx_stack.py``): after every scope the thread's whole stack is what it
was at entry, whatever the body did; an op's push leaves the caller's context as found;
foreign code that changed the current context is undone. The same promises are tested
on a GPU in ``tests/gpu/test_context_stack.py``."""

from __future__ import annotations

import random
import threading

import pytest
from reference.fake_ctx_stack import NULL, Ctx, install

from tenferro_cuda.errors import BackendSourceError
from tenferro_cuda.exec import guard

P, F1, F2, F3 = Ctx(0x1000), Ctx(0x2000), Ctx(0x3000), Ctx(0x4000)  # P: ours (primary)

STARTS = {"none": [], "foreign": [F1], "primary": [P], "two foreign": [F1, F2],
          "primary under foreign": [P, F1], "foreign under primary": [F1, P]}


@pytest.fixture
def model(monkeypatch):
    return install(monkeypatch)


def _pop_all(model):
    while model.stack:
        model.cuCtxPopCurrent()


BODIES = {
    "returns": lambda m: None,
    "raises": lambda m: (_ for _ in ()).throw(ValueError("body")),
    "KeyboardInterrupt": lambda m: (_ for _ in ()).throw(KeyboardInterrupt()),
    "pushes and forgets": lambda m: m.cuCtxPushCurrent(F3),
    "pushes twice": lambda m: (m.cuCtxPushCurrent(F3), m.cuCtxPushCurrent(F2)),
    "pops ours": lambda m: m.cuCtxPopCurrent(),
    "pops ours and more": lambda m: (m.cuCtxPopCurrent(), m.cuCtxPopCurrent()),
    "pops everything": _pop_all,
    "sets current": lambda m: m.cuCtxSetCurrent(F3),
    "sets NULL": lambda m: m.cuCtxSetCurrent(NULL),
    "pops, pushes, sets": lambda m: (m.cuCtxPopCurrent(), m.cuCtxPushCurrent(F2),
                                     m.cuCtxSetCurrent(F3)),
}


def _scope(model, body):
    g = guard.ScopeGuard(P, "test")
    try:
        assert model.stack[-1] == P
        body(model)
    finally:
        g.exit()


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("body", BODIES)
def test_scope_restores_the_whole_stack(model, start, body):
    model.stack[:] = STARTS[start]
    before = list(model.stack)
    try:
        _scope(model, BODIES[body])
    except (ValueError, KeyboardInterrupt):
        assert body in ("raises", "KeyboardInterrupt")
    assert model.stack == before


def test_scope_exit_is_idempotent(model):
    model.stack[:] = [F1]
    g = guard.ScopeGuard(P, "test")
    g.exit()
    model.cuCtxPushCurrent(F2)  # the caller's own push after the scope is theirs
    g.exit()
    assert model.stack == [F1, F2]


def test_failed_push_of_ours_raises_with_the_stack_as_it_was(model):
    model.stack[:] = [F1, F2]
    model.refuse.add(int(P))
    with pytest.raises(BackendSourceError, match="primary context"):
        guard.ScopeGuard(P, "test")
    assert model.stack == [F1, F2]


def test_a_stack_entry_that_cannot_be_pushed_back_is_the_only_one_lost(model, capsys):
    model.stack[:] = [F1, F2, F3]
    g = guard.ScopeGuard(P, "test")
    model.refuse.add(int(F2))  # say F2 was destroyed inside the scope
    g.exit()
    assert model.stack == [F1, F3]
    assert "failed to restore CUDA context during test" in capsys.readouterr().err


@pytest.mark.parametrize("start", ["none", "foreign", "two foreign", "foreign under primary"])
@pytest.mark.parametrize("raises", [False, True])
def test_an_op_pushes_ours_and_leaves_the_callers_context(model, start, raises):
    model.stack[:] = STARTS[start]
    before = list(model.stack)
    seen = []

    def op():
        seen.append(model.stack[-1])
        if raises:
            raise ValueError("op")
        return "done"

    if raises:
        with pytest.raises(ValueError):
            guard.call_pushed(P, op)
    else:
        assert guard.call_pushed(P, op) == "done"
    assert seen == [P]
    assert model.stack == before


def test_within_calls_nothing_when_ours_is_current(model):
    model.stack[:] = [F1, P]
    model.calls.clear()
    with guard.within(P, int(P)):
        pass
    assert model.calls == ["get"]
    model.stack[:] = [P, F1]
    with guard.within(P, int(P)):
        assert model.stack == [P, F1, P]
    assert model.stack == [P, F1]


@pytest.mark.parametrize("change", ["sets current", "sets NULL", "pushes and forgets"])
def test_foreign_code_inside_an_op_gets_our_context_back_on_top(model, change):
    model.stack[:] = [F1, P]
    guard.foreign_call(BODIES[change], model)
    assert model.stack[-1] == P
    model.stack[:] = [F1, P]
    guard.foreign_call_over(P, int(P), BODIES[change], model)
    assert model.stack[-1] == P


@pytest.mark.parametrize("start", ["primary", "foreign under primary", "none", "foreign"])
@pytest.mark.parametrize("body", BODIES)
def test_code_nothing_is_known_of_leaves_the_whole_stack_as_it_was(model, start, body):
    model.stack[:] = STARTS[start]
    before = list(model.stack)
    try:
        guard.foreign_call_saved(BODIES[body], model)
    except (ValueError, KeyboardInterrupt):
        pass
    assert model.stack == before


def test_stack_reads_and_leaves_the_stack(model):
    model.stack[:] = [F1, P, F2]
    assert guard.stack() == (int(F1), int(P), int(F2))
    assert model.stack == [F1, P, F2]


def test_random_walk_of_1000_steps(model):
    rng = random.Random(20261205)
    open_scopes: list[tuple[guard.ScopeGuard, list[Ctx]]] = []
    mutations = [b for b in BODIES.values() if b not in (BODIES["raises"],
                                                          BODIES["KeyboardInterrupt"])]
    for _ in range(1000):
        step = rng.random()
        if step < 0.3:
            before = list(model.stack)
            open_scopes.append((guard.ScopeGuard(P, "walk"), before))
        elif step < 0.6 and open_scopes:
            g, before = open_scopes.pop()
            g.exit()
            assert model.stack == before
        elif step < 0.8:
            rng.choice(mutations)(model)
        else:
            before = list(model.stack)
            if not before or before[-1] != P:
                guard.call_pushed(P, rng.choice(mutations), model)
                # an op body that changed the stack under our push is the op's own bug;
                # the push/pop pair itself is balanced
            else:
                assert model.stack == before
    while open_scopes:
        g, before = open_scopes.pop()
        g.exit()
        assert model.stack == before


def test_each_thread_has_its_own_stack(model):
    model.stack[:] = [F1]
    seen = []

    def other():
        g = guard.ScopeGuard(P, "thread")
        seen.append(list(model.stack))
        g.exit()
        seen.append(list(model.stack))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [[P], []]
    assert model.stack == [F1]


def test_an_entry_refused_at_scope_entry_is_the_only_one_lost(model, capsys):
    model.stack[:] = [F1, F2, F3]
    model.refuse.add(int(F2))  # a context destroyed while it sat on the stack
    g = guard.ScopeGuard(P, "test")
    assert model.stack == [F1, F3, P]
    g.exit()
    assert model.stack == [F1, F3]
    assert "could not be pushed back" in capsys.readouterr().err


def test_a_failed_pop_while_taking_the_snapshot_leaves_the_stack_whole(model):
    model.stack[:] = [F1, F2, F3]
    model.refuse_pop.add(int(F2))
    with pytest.raises(BackendSourceError, match="cuCtxPopCurrent"):
        guard.ScopeGuard(P, "test")
    assert model.stack == [F1, F2, F3]
