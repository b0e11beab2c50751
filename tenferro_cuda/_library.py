"""Loading an optional native library once per process, for the binding modules that
import one lazily (``_cublas.py``, ``_nccl.py``).

``load_once(state, lock, load_now, failure)`` returns ``state["lib"]``, calling
``load_now() -> (module, version)`` on the first call only. A failure of type ``failure``
is remembered in ``state["error"]`` and raised again by every later call, so a missing
library is looked for once. What is remembered, and raised each time, is a copy holding
no traceback: a remembered exception that was raised would keep the frames it passed
through, and their locals (the caller's tensors), alive for good.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["load_once"]


def load_once(state: dict, lock: threading.Lock, load_now: Callable[[], tuple[Any, Any]],
              failure: type[Exception]) -> Any:
    """The loaded library module (see the module docstring)."""
    lib = state.get("lib")
    if lib is not None:
        return lib
    with lock:
        if "error" in state:
            raise _detached(state["error"])
        if "lib" not in state:
            try:
                state["lib"], state["version"] = load_now()
            except failure as exc:
                state["error"] = _detached(exc)
                raise
        return state["lib"]


def _detached(exc: BaseException) -> BaseException:
    """A copy of ``exc`` (and of its cause) that holds no frames."""
    try:
        out = copy.copy(exc)
    except Exception:  # noqa: BLE001 - an exception that cannot be rebuilt from its args
        out = type(exc).__new__(type(exc))
        out.args = exc.args
    out.__traceback__ = None
    cause = exc.__cause__
    if cause is not None and cause is not exc:
        out.__cause__ = _detached(cause)
    return out
