"""Saving and restoring the calling thread's CUDA context around a scope.

``enter(ctx)`` returns the context that was current (maybe none) after pushing ``ctx``;
``restore(saved, ours, op)`` pops and then puts ``saved`` back even when the code inside
left the stack unbalanced (pushed without popping, popped ours, or overwrote the top with
``cuCtxSetCurrent``). Restoration is best effort: a failure is written to stderr and never
raised, so it cannot replace the scope's own result or exception.
"""

from __future__ import annotations

import sys

from . import _driver
from .errors import BackendSourceError


def enter(ctx, op: str):
    """Push ``ctx``; return the previously current context. Raises BackendSourceError."""
    saved = _driver.ctx_get_current()
    try:
        _driver.ctx_push(ctx)
    except BackendSourceError as exc:
        raise BackendSourceError(f"cannot make the primary context current: {exc}",
                                 op=op) from exc.__cause__
    return saved


def restore(saved, ours, op: str) -> None:
    """Undo ``enter``; never raises."""
    try:
        saved_id = int(saved)
        try:
            _driver.ctx_pop()
        except BackendSourceError:
            pass  # the callback popped our context already
        current = int(_driver.ctx_get_current())
        if current != saved_id and current == int(ours):
            _driver.ctx_pop()  # the callback pushed a context and left it; we popped that
            current = int(_driver.ctx_get_current())
        if current != saved_id:
            _driver.ctx_set_current(saved)
    except Exception as exc:  # noqa: BLE001 - best effort by contract
        print(f"tenferro_cuda: failed to restore CUDA context during {op}: {exc}",
              file=sys.stderr)


def ensure_current(ctx, ctx_id: int) -> None:
    """Make ``ctx`` current if user code switched contexts since the session began."""
    if int(_driver.ctx_get_current()) != ctx_id:
        _driver.ctx_set_current(ctx)
