"""Loading an optional native library once per process, for the binding modules that
import one lazily (``_cublas.py``, ``_nccl.py``).

``load_once(state, lock, load_now, failure)`` returns ``state["lib"]``, calling
``load_now() -> (module, version)`` on the first call only. A failure of type ``failure``
is remembered in ``state["error"]`` and raised again by every later call, so a missing
library is looked for once.
"""

from __future__ import annotations

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
            raise state["error"]
        if "lib" not in state:
            try:
                state["lib"], state["version"] = load_now()
            except failure as exc:
                state["error"] = exc
                raise
        return state["lib"]
