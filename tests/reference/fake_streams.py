"""A stream-ordered device on the host, to test the ordering of work between streams.

``FakeDevice`` stands in for the driver calls of ``exec/peer.py`` (events, waits,
asynchronous copies, pinned host memory, pool access, peer queries; it serves as both
``_driver`` and ``_driver_memory``). Calls only *enqueue* commands on ``Stream`` queues;
``run(policy)`` then executes them the way a GPU may: any stream whose head command is
ready may go next, and the policy picks which (``"src"``: the stream named src first,
``"dst"``: dst first, or a ``random.Random`` seed). A wait is ready once the event's
record that was the latest when the wait was enqueued has executed (CUDA's rule), so a
missing wait shows up as wrong data under some policy, and a wait that can never be
satisfied as a deadlock (``AssertionError``).

``within(context, context_id)`` replaces ``exec.guard.within``: it keeps a stack of the
current context id, and every enqueue checks that the stream's context is current (the
driver wants the stream's context current for copies and records).

Memory is real host memory (``tests/reference/fake_context.HostMemory`` addresses), so a
copy is a ``ctypes.memmove`` when it executes.
"""

from __future__ import annotations

import contextlib
import ctypes
import random
from collections import deque

__all__ = ["Stream", "Event", "FakeDevice"]


class Stream:
    def __init__(self, name: str, context_id: int) -> None:
        self.name, self.context_id = name, context_id
        self.queue: deque = deque()
        self.done: list = []

    def __int__(self) -> int:
        return 0x5000 + self.context_id

    def __repr__(self) -> str:
        return f"<Stream {self.name}>"


class Event:
    def __init__(self, context_id: int) -> None:
        self.context_id = context_id
        self.enqueued = 0  # records enqueued so far
        self.executed = 0  # records executed so far
        self.destroyed = False


class FakeDevice:
    """The driver calls of ``exec/peer.py`` over ``Stream`` queues (see the module doc)."""

    def __init__(self, peer_access: bool = True, grant_fails: bool = False) -> None:
        self.peer_access, self.grant_fails = peer_access, grant_fails
        self.current: list[int] = []
        self.events: list[Event] = []
        self.grants: list[tuple] = []
        self.pinned: dict[int, object] = {}
        self.pinned_flags: list[bool] = []
        self.freed: list[int] = []
        self.synchronized: list[Event] = []
        self.sync_fails = False

    # --- context guard --------------------------------------------------------------------
    @contextlib.contextmanager
    def within(self, context, context_id):
        self.current.append(context_id)
        try:
            yield
        finally:
            self.current.pop()

    def _enqueue(self, stream: Stream, cmd: tuple) -> None:
        assert self.current and self.current[-1] == stream.context_id, \
            f"{cmd[0]} on {stream} while context {self.current[-1:]} is current"
        stream.queue.append(cmd)

    # --- the driver -----------------------------------------------------------------------
    def can_access_peer(self, dev, peer) -> bool:
        return self.peer_access

    def mem_pool_grant_access(self, pool, ordinal) -> None:
        self.grants.append((pool, ordinal))
        if self.grant_fails:
            from tenferro_cuda.errors import BackendSourceError

            raise BackendSourceError("cuMemPoolSetAccess failed: CUDA_ERROR_NOT_SUPPORTED")

    def event_create(self) -> Event:
        event = Event(self.current[-1] if self.current else -1)
        self.events.append(event)
        return event

    def event_record(self, event: Event, stream: Stream) -> None:
        assert event.context_id == stream.context_id, "event and stream of two contexts"
        event.enqueued += 1
        self._enqueue(stream, ("record", event, event.enqueued))

    def stream_wait_event(self, stream: Stream, event: Event) -> None:
        stream.queue.append(("wait", event, event.enqueued))

    def _copy(self, dst: int, src: int, n: int, stream: Stream, op: str = "") -> None:
        self._enqueue(stream, ("copy", dst, src, n))

    memcpy_dtod_async = memcpy_dtoh_async = memcpy_htod_async = _copy

    def host_alloc_pinned(self, nbytes: int, portable: bool = False) -> int:
        buf = ctypes.create_string_buffer(nbytes)
        ptr = ctypes.addressof(buf)
        self.pinned[ptr] = buf
        self.pinned_flags.append(portable)
        return ptr

    def host_free(self, ptr: int) -> int:
        self.freed.append(ptr)
        return 0

    def event_synchronize(self, event: Event) -> None:
        if self.sync_fails:
            raise RuntimeError("context destroyed")
        self.synchronized.append(event)

    def event_destroy(self, event: Event) -> None:
        event.destroyed = True

    # --- execution --------------------------------------------------------------------------
    @staticmethod
    def _ready(cmd: tuple) -> bool:
        return cmd[0] != "wait" or cmd[1].executed >= cmd[2]

    def run(self, streams: list[Stream], policy: object = "src") -> None:
        """Execute every enqueued command, picking among ready streams by ``policy``."""
        rng = random.Random(policy) if isinstance(policy, int) else None
        while any(s.queue for s in streams):
            ready = [s for s in streams if s.queue and self._ready(s.queue[0])]
            assert ready, "deadlock: every stream waits for an event never recorded"
            if rng is not None:
                stream = rng.choice(ready)
            else:
                order = sorted(ready, key=lambda s: s.name != policy)
                stream = order[0]
            # a named stream that goes runs as far as it can (the most adversarial order
            # for that stream); a random pick runs one command
            self._execute(stream, stream.queue.popleft())
            while rng is None and stream.queue and self._ready(stream.queue[0]):
                self._execute(stream, stream.queue.popleft())

    @staticmethod
    def _execute(stream: Stream, cmd: tuple) -> None:
        if cmd[0] == "copy":
            _, dst, src, n = cmd
            ctypes.memmove(dst, src, n)
        elif cmd[0] == "record":
            cmd[1].executed = max(cmd[1].executed, cmd[2])
        stream.done.append(cmd)
