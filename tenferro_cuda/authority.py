"""Authority objects: what may run work on a GPU cannot be duplicated.

The session, its raw and kernel sub-sessions, everything they lend (stream handles,
modules, functions, device pointers), execution contexts, runtimes, device buffers and
every object that releases something exactly once (the memory pool and its per-stream
arenas, a scope's saved context stack, a capture in progress, a graph's executable
graphs, the owners of adopted DLPack and CUDA Array Interface memory, graph-owned memory,
cuBLAS handles, pinned host rings) derive from ``Authority``
(``tests/cpu/test_authority_classes.py`` walks them all). Copying, deep-copying and
pickling each of them raises ``TypeError``: a copy would be a second owner of a context,
a stream or memory that only one object may release.

A ``Scope`` is the liveness of one ``with`` block and the thread it belongs to. The
session and everything it lends share their scope's flag; a sub-session has its own. A
scope that ends, normally or not, only sets ``alive = False``: nothing touches any CUDA
state when a scope object is collected.
"""

from __future__ import annotations

import threading

from .errors import RuntimeStateError

__all__ = ["Authority", "Scope"]


class Authority:
    """Refuses ``copy.copy``, ``copy.deepcopy`` and ``pickle`` with ``TypeError``."""

    __slots__ = ()

    def _refuse(self, what: str):
        raise TypeError(f"{type(self).__name__} cannot be {what}: it carries the authority "
                        "to run work on a GPU, which has exactly one owner")

    def __copy__(self):
        self._refuse("copied")

    def __deepcopy__(self, memo):
        self._refuse("deep-copied")

    def __reduce_ex__(self, protocol):
        self._refuse("pickled")

    def __reduce__(self):
        self._refuse("pickled")

    def __getstate__(self):
        self._refuse("pickled")


class Scope(Authority):
    """The liveness flag and owning thread of one scope (a session or a sub-session). A
    sub-session's scope has its session's as ``parent``: it is dead when either is."""

    __slots__ = ("alive", "thread", "what", "parent")

    def __init__(self, what: str, parent: Scope | None = None) -> None:
        self.alive = True
        self.thread = threading.get_ident()
        self.what = what
        self.parent = parent

    def end(self) -> None:
        """Mark the scope dead (touches nothing else; any thread)."""
        self.alive = False

    @property
    def live(self) -> bool:
        """Whether this scope and its parent are both open."""
        return self.alive and (self.parent is None or self.parent.alive)

    def check(self, op: str) -> None:
        """Raise ``RuntimeStateError`` naming ``op`` unless this scope (and its parent) is
        open on the calling thread."""
        if self.thread != threading.get_ident():
            raise RuntimeStateError(f"this {self.what} belongs to another thread; objects "
                                    "lent by a session are used only on its thread", op=op)
        if not self.live:
            raise RuntimeStateError(f"the {self.what}'s scope has ended", op=op)
