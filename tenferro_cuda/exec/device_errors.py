"""The codes of deferred device errors (DESIGN 2).

A kernel that detects bad data (integer division by zero, an index out of range where the
op says "error") writes a code into its execution context's error word instead of
stopping; ``synchronize()`` reads the word and raises ``ValidationError`` with the message
of that code. A code stands for "``reason`` in ``op``" and is stable for the process.
"""

from __future__ import annotations

import threading

__all__ = ["error_code", "error_message", "ErrorWatch"]

_lock = threading.Lock()
_messages: list[str] = ["no error"]  # code 0: the word is clear


def error_code(op: str, reason: str) -> int:
    """A code for a deferred device error, stable for the process."""
    message = f"{reason} in {op}"
    with _lock:
        if message not in _messages:
            _messages.append(message)
        return _messages.index(message)


class ErrorWatch:
    """Whether the error word can hold a code ``synchronize`` has not read: ``count`` is
    the number of launches enqueued that may write the word (the launches whose parameters
    carry it, counted by ``kernels.launch.WatchedLaunch``, and the replays of a graph that
    captured one), ``read`` the count when the word was last read. When they are equal no
    kernel since then could have written the word, and ``synchronize`` waits for the
    stream without copying the word to the host."""

    __slots__ = ("count", "read")

    def __init__(self) -> None:
        self.count = self.read = 0

    @property
    def pending(self) -> bool:
        return self.count != self.read


def error_message(code: int) -> str:
    """The message of ``code`` (a generic one for a code this process never made)."""
    with _lock:
        if 0 <= code < len(_messages):
            return _messages[code]
    return f"device error code {code}"
