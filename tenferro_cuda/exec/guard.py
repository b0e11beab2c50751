"""The context guard: the only code that changes the calling thread's CUDA context.

Contract (DESIGN 9):
- ``ScopeGuard`` brackets a scope (a session, a raw or a kernel sub-session). On entry it
  takes a snapshot of the thread's whole context *stack* (every entry, in order: the
  driver has no call for that, so the stack is popped and pushed back) and pushes ours.
  On exit, whatever the body did (pushed and forgot, popped ours or more, replaced the top
  with ``cuCtxSetCurrent``), the stack is emptied and the snapshot pushed back: every
  entry is what it was at entry. An entry the body left that the driver refuses to pop
  (a context destroyed on the stack) is taken off with ``cuCtxSetCurrent(NULL)``. Exit
  never raises for its own failures: one is written to stderr and never replaces the
  scope's result or exception. An interrupt (KeyboardInterrupt) that arrives while the
  stack is taken off or pushed back, on entry or exit, is raised once the stack is whole.
- ``call_current`` runs a call with our context current; ``call_pushed`` is its
  unusual path: when user code made another context current (or none) inside a session,
  an op pushes ours, runs and pops, so the caller's context stays current. On the usual
  path ours is current and nothing is called but the check (``current_id``).
- ``within`` makes ours current around internal work (creating a stream, loading a
  module) and restores the caller's context afterwards; nothing when ours is current.
- ``foreign_call`` runs another library's code inside an op (a producer's
  ``__dlpack__``); if that code left another context on top, ours is put back on top.
  ``foreign_call_over`` is the same for a caller that knows ours is on top (an op body):
  one query, after the call. ``foreign_call_saved`` is for code nothing is known of (a
  producer class of no array library): the whole stack is saved before the call and put
  back exactly when the call left another context on top (it pushed and forgot, popped
  ours, or replaced it), at the price of the snapshot.
- A scope that never exits normally (an abandoned scope object, a generator left
  suspended and collected later, an exit called from another thread, interpreter
  shutdown) is never restored later: it is only abandoned (marked dead, no driver call).
  When a scope exits, the scopes entered after it on its thread that are still open are
  abandoned that way first, so a late exit of one of them touches nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .. import _driver, _driver_fast
from ..authority import Authority
from ..errors import BackendSourceError

__all__ = ["ScopeGuard", "call_pushed", "call_current", "within", "foreign_call",
           "foreign_call_over", "foreign_call_saved", "current_id", "stack"]

R = TypeVar("R")
# the calling thread's current context (0: none), through the faster binding where installed
current_id = _driver_fast.current_id


def stack() -> tuple[int, ...]:
    """The calling thread's context stack, bottom to top, as ints (left unchanged)."""
    handles = _driver.ctx_stack_take()
    _driver.ctx_stack_put(handles)
    return tuple(int(h) for h in handles)


def _report(op: str, exc: BaseException) -> None:
    print(f"tenferro_cuda: failed to restore CUDA context during {op}: {exc}",
          file=sys.stderr)


class ScopeGuard(Authority):
    """The saved context stack of one scope (see the module docstring).

    Scopes of one thread nest: the guards open on a thread form a list in the order they
    were entered. When a guard exits, the guards entered after it that are still open
    belong to scopes that were never exited (an abandoned ``raw()``, a generator left
    suspended): they are abandoned -- marked closed, their ``on_abandon`` run, no driver
    call -- before the stack is restored to this guard's snapshot. ``exit`` from another
    thread, or while the interpreter shuts down, only abandons.
    """

    __slots__ = ("saved", "op", "open", "thread", "peers", "on_abandon")

    def __init__(self, ours: Any, op: str,
                 on_abandon: Callable[[], None] | None = None) -> None:
        """Snapshot the stack and push ``ours``; BackendSourceError (and the stack as it
        was) when that fails. An entry of the caller's stack that the driver refuses to
        push back (a destroyed context) is reported on stderr and left out: every other
        entry keeps its place. ``on_abandon`` (no driver calls) runs if the guard is
        abandoned instead of exited."""
        self.op = op
        self.open = False
        self.on_abandon = on_abandon
        taken = _driver.ctx_stack_take()
        saved: list = []
        interrupt = None
        for ctx in taken:  # one by one: an entry the driver refuses is left out
            try:
                if _driver.ctx_stack_put((ctx,), strict=False) is None:
                    saved.append(ctx)
            except BaseException as exc:  # noqa: BLE001 - an interrupt; ``ctx`` is back
                saved.append(ctx)
                interrupt = interrupt or exc
        self.saved = saved
        if len(saved) != len(taken):  # a context the driver refuses (destroyed)
            _report(op, RuntimeError(f"{len(taken) - len(saved)} context(s) of the "
                                     "caller's stack could not be pushed back"))
        if interrupt is not None:  # the caller's stack is whole; nothing of ours on it
            raise interrupt
        try:
            _driver.ctx_push(ours)
        except BackendSourceError as exc:
            raise BackendSourceError(f"cannot make the primary context current: {exc}",
                                     op=op) from exc.__cause__
        self.thread = threading.get_ident()
        self.peers = _open_guards()
        self.peers.append(self)
        self.open = True

    def exit(self) -> None:
        """Put the saved stack back exactly; idempotent, never raises. Only abandons when
        called from another thread or at interpreter shutdown (see the class doc)."""
        if not self.open:
            return
        if self.thread != threading.get_ident() or sys.is_finalizing():
            self.abandon()
            return
        peers = self.peers
        try:
            at = peers.index(self)  # guards compare by identity
        except ValueError:
            at = len(peers)  # not listed: nothing entered after it is known
        for later in peers[at + 1:]:
            later.abandon()
        del peers[at:]
        self.open = False
        _restore(self.saved, self.op)

    def abandon(self) -> None:
        """Close the guard without touching any context (idempotent, any thread). Only
        its own thread takes it off the thread's list of open guards: another thread
        would race that thread's exits (a closed guard left in the list is skipped)."""
        if not self.open:
            return
        self.open = False
        if self.thread == threading.get_ident():
            try:
                self.peers.remove(self)
            except ValueError:
                pass
        if self.on_abandon is not None:
            try:
                self.on_abandon()
            except Exception as exc:  # noqa: BLE001 - runs from finalizers too
                print(f"tenferro_cuda: abandoning {self.op} failed: {exc!r}",
                      file=sys.stderr)


def _restore(saved: list, op: str) -> None:
    """Empty the stack and push ``saved`` back. A failure is reported on stderr, never
    raised; an interrupt that arrives meanwhile is raised once ``saved`` is back."""
    interrupt = None
    for _ in range(3):  # a take interrupted part-way puts back what it took: again
        try:
            _driver.ctx_stack_take()
            break
        except Exception as exc:  # noqa: BLE001 - an entry that cannot be popped
            _report(op, exc)
            _clear(op)
            break
        except BaseException as exc:  # noqa: BLE001 - held until the stack is whole
            interrupt = interrupt or exc
    else:
        _clear(op)
    try:
        failed = _driver.ctx_stack_put(saved, strict=False)
    except BaseException as exc:  # noqa: BLE001 - an interrupt, after every entry
        interrupt, failed = interrupt or exc, None
    if failed is not None:
        _report(op, failed)
    if interrupt is not None:
        raise interrupt


def _clear(op: str) -> None:
    """Empty the stack when an entry cannot be popped (a context destroyed while it sat
    on the stack): ``cuCtxSetCurrent(NULL)`` takes the top off whatever it is."""
    for _ in range(1 << 16):
        try:
            if not current_id():
                return
            try:
                _driver.ctx_pop()
            except Exception:  # noqa: BLE001 - refused: take it off another way
                _driver.ctx_set_current(_driver.NO_CONTEXT)
        except Exception as exc:  # noqa: BLE001 - reported; the restore goes on
            _report(op, exc)
            return


class _ThreadGuards:
    """The list of one thread's open guards, held by the thread's local data alone: when
    the thread ends (its local data is cleared), the scopes it never exited are
    abandoned, so that nothing they lent works on a later thread that gets the same
    identifier (``threading.get_ident`` values are reused)."""

    __slots__ = ("guards",)

    def __init__(self) -> None:
        self.guards: list[ScopeGuard] = []

    def __del__(self) -> None:
        for g in self.guards[::-1]:
            try:
                g.abandon()
            except Exception:  # noqa: BLE001 - a finalizer never raises
                pass


_local = threading.local()


def _open_guards() -> list[ScopeGuard]:
    """The open guards of the calling thread, in the order they were entered (closed
    ones, abandoned from another thread, are dropped here)."""
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = _ThreadGuards()
    guards = state.guards
    if any(not g.open for g in guards):
        guards[:] = [g for g in guards if g.open]
    return guards


def call_pushed(ours: Any, fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` with ``ours`` pushed, popped again afterwards (the op guard)."""
    _driver.ctx_push(ours)
    try:
        return fn(*args)
    finally:
        try:
            _driver.ctx_pop()
        except BaseException as exc:  # noqa: BLE001 - never hide the op's own outcome
            _report(getattr(fn, "__name__", "op"), exc)


def call_current(ctx: Any, fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` with the context of ``ctx`` (an ExecContext) current: called directly
    when it is current already (the usual path: one query), else with it pushed and popped
    again (``call_pushed``), so the caller's context stays as it was."""
    if current_id() == ctx.context_id:
        return fn(*args)
    return call_pushed(ctx.context, fn, *args)


@contextmanager
def within(ours: Any, ours_id: int) -> Iterator[None]:
    """Make ``ours`` current for the block (nothing to do when it is current already)."""
    if current_id() == ours_id:
        yield
        return
    _driver.ctx_push(ours)
    try:
        yield
    finally:
        _driver.ctx_pop()


def foreign_call(fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` (another library's code); the top of the stack is put back when the
    call replaced it (``cuCtxSetCurrent``, as the CUDA runtime's ``cudaSetDevice`` does)."""
    before = _driver.ctx_get_current()
    try:
        return fn(*args)
    finally:
        if current_id() != int(before):
            try:
                _driver.ctx_set_current(before)
            except BaseException as exc:  # noqa: BLE001 - never hide the call's outcome
                _report(getattr(fn, "__name__", "foreign call"), exc)


def foreign_call_over(ours: Any, ours_id: int, fn: Callable[..., R], *args: Any) -> R:
    """``foreign_call`` when ``ours`` (``ours_id``) is current before the call."""
    try:
        return fn(*args)
    finally:
        if current_id() != ours_id:
            try:
                _driver.ctx_set_current(ours)
            except BaseException as exc:  # noqa: BLE001 - never hide the call's outcome
                _report(getattr(fn, "__name__", "foreign call"), exc)


def foreign_call_saved(fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` (code nothing is known of) with the whole stack saved first and put
    back exactly if the call left another context current."""
    saved = _driver.ctx_stack_take()
    _driver.ctx_stack_put(saved)
    top = int(saved[-1]) if saved else 0
    try:
        return fn(*args)
    finally:
        if current_id() != top:
            _restore(saved, getattr(fn, "__name__", "foreign call"))
