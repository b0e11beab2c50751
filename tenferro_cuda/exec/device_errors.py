"""The codes of deferred device errors (DESIGN 2).

A kernel that detects bad data (integer division by zero, an index out of range where the
op says "error") writes a code into its execution context's error word instead of
stopping; ``synchronize()`` reads the word and raises ``ValidationError`` with the message
of that code. A code stands for "``reason`` in ``op``" and is stable for the process.
"""

from __future__ import annotations

import threading

__all__ = ["error_code", "error_message"]

_lock = threading.Lock()
_messages: list[str] = ["no error"]  # code 0: the word is clear


def error_code(op: str, reason: str) -> int:
    """A code for a deferred device error, stable for the process."""
    message = f"{reason} in {op}"
    with _lock:
        if message not in _messages:
            _messages.append(message)
        return _messages.index(message)


def error_message(code: int) -> str:
    """The message of ``code`` (a generic one for a code this process never made)."""
    with _lock:
        if 0 <= code < len(_messages):
            return _messages[code]
    return f"device error code {code}"
