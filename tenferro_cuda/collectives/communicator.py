"""``Communicator``: NCCL collectives over session tensors (docs/multi-gpu.md).

- Made from a list of sessions (one process drives several GPUs: ``ncclCommInitAll``, rank
  i on ``sessions[i]``'s device) or from a unique id (one process per GPU, as under
  torchrun or mpirun: ``ncclCommInitRank``). Every rank is one device.
- Bound to the thread that made it, like its sessions: a call from another thread, after
  ``close()``, or after one of its sessions ended raises ``RuntimeStateError``. Copying,
  deep-copying or pickling it raises ``TypeError``.
- A call enqueues on each rank's session stream and returns; tensors are the sessions'
  own (residency and alias rules as for every op); errors are tenferro errors.
- ``close()`` (or the end of its ``with`` block) finalizes and destroys the NCCL
  communicators; a ``with`` block left by an exception aborts them instead, so that a
  failing rank never waits for the others. One that is never closed is aborted when it
  is collected (never at interpreter exit).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from .. import _nccl
from ..authority import Authority
from ..errors import RuntimeStateError, ValidationError
from ..exec import entry, guard
from . import calls, ranks

__all__ = ["Communicator", "unique_id"]


def unique_id() -> bytes:
    """A new NCCL unique id (128 bytes) for ``Communicator.from_unique_id``: made by one
    process (rank 0, say) and handed to the others by any channel (a file, a socket,
    ``torch.distributed``'s store, ``mpi4py``'s ``bcast``)."""
    return _nccl.unique_id()


def _abort_all(handles: list) -> None:
    if sys.is_finalizing():
        return
    for handle in handles:
        _nccl.abort(handle)


def _abort_collected(handles: list) -> None:
    """The finalizer of a communicator never closed: abort it on whatever thread collects
    it, leaving that thread's current context as it was (NCCL sets the device)."""
    if sys.is_finalizing():
        return
    guard.foreign_call(_abort_all, handles)


class Communicator(Authority):
    """An NCCL communicator over sessions; see the module docstring."""

    __slots__ = ("_sessions", "_handles", "_ranks", "_nranks", "_devices", "_thread",
                 "_closed", "_finalizer", "__weakref__")
    _sessions: tuple
    _handles: list
    _ranks: tuple[int, ...]
    _nranks: int
    _devices: tuple[int, ...]
    _thread: int
    _closed: bool
    _finalizer: weakref.finalize

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("use Communicator.from_sessions(sessions) or "
                        "Communicator.from_unique_id(session, unique_id, rank, nranks)")

    @classmethod
    def _make(cls, sessions: Sequence[Any], handles: list, ranks_: Sequence[int],
              nranks: int) -> Communicator:
        self = object.__new__(cls)
        self._sessions, self._handles = tuple(sessions), list(handles)
        self._ranks, self._nranks = tuple(ranks_), nranks
        self._devices = tuple(s._rt.ordinal for s in sessions)
        self._thread = threading.get_ident()
        self._closed = False
        self._finalizer = weakref.finalize(self, _abort_collected, list(handles))
        self._finalizer.atexit = False
        return self

    @classmethod
    def from_sessions(cls, sessions: Sequence[Any]) -> Communicator:
        """One rank per session, all in this process (rank i on ``sessions[i]``'s device).

        Parameters
        ----------
        sessions : sequence of CudaExecSession
            Open sessions of this thread, each of a different device.

        Raises
        ------
        ValidationError
            Not a non-empty sequence of sessions, or two of one device.
        RuntimeStateError
            A session is closed or belongs to another thread.
        UnsupportedError
            NCCL (nccl4py and libnccl) is not installed.
        """
        op = "Communicator.from_sessions"
        if not isinstance(sessions, (list, tuple)) or not sessions:
            raise ValidationError("sessions must be a non-empty list of sessions", op=op)
        ctxs = [entry.context_of(s, op, f"sessions[{i}]") for i, s in enumerate(sessions)]
        ordinals = [ctx.ordinal for ctx in ctxs]
        if len(set(ordinals)) != len(ordinals):
            raise ValidationError(f"every session must be of a different device (got devices "
                                  f"{ordinals}): NCCL runs one rank per device", op=op)
        _nccl.load()
        handles = guard.foreign_call(_nccl.init_all, ordinals, op)
        return cls._make(sessions, handles, range(len(sessions)), len(sessions))

    @classmethod
    def from_unique_id(cls, session: Any, unique_id: bytes, rank: int,
                       nranks: int) -> Communicator:
        """Rank ``rank`` of ``nranks``, on ``session``'s device; every rank (process) calls
        this with the same ``unique_id`` and ``nranks``, and it returns once all joined.

        Parameters
        ----------
        session : CudaExecSession
            An open session of this thread.
        unique_id : bytes
            The 128 bytes of ``tenferro_cuda.nccl_unique_id()``, made once for all ranks.
        rank, nranks : int
            This process's rank and the number of ranks.

        Raises
        ------
        ValidationError
            A bad unique id, rank or count.
        RuntimeStateError
            The session is closed or belongs to another thread.
        UnsupportedError
            NCCL (nccl4py and libnccl) is not installed.
        """
        op = "Communicator.from_unique_id"
        ctx = entry.context_of(session, op, "session")
        if not isinstance(unique_id, (bytes, bytearray)) or \
                len(unique_id) != _nccl.UNIQUE_ID_BYTES:
            raise ValidationError(f"unique_id must be the {_nccl.UNIQUE_ID_BYTES} bytes of "
                                  "nccl_unique_id()", op=op)
        if type(nranks) is not int or nranks < 1:
            raise ValidationError(f"nranks must be an int >= 1 (got {nranks!r})", op=op)
        if type(rank) is not int or not 0 <= rank < nranks:
            raise ValidationError(f"rank must be an int in [0, {nranks}) (got {rank!r})",
                                  op=op)
        _nccl.load()
        with guard.within(ctx.context, ctx.context_id):  # NCCL takes the current device
            handle = guard.foreign_call(_nccl.init_rank, nranks, bytes(unique_id), rank, op)
        return cls._make([session], [handle], [rank], nranks)

    # --- facts -----------------------------------------------------------------------------
    @property
    def nranks(self) -> int:
        """The number of ranks (over every process)."""
        return self._nranks

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks of this process, in the order of its sessions."""
        return self._ranks

    @property
    def devices(self) -> tuple[int, ...]:
        """The device of each rank of this process, in the order of ``ranks``."""
        return self._devices

    @property
    def closed(self) -> bool:
        return self._closed

    def rank_of(self, session: object) -> int:
        """The rank of ``session`` (one of this communicator's sessions)."""
        self._check("rank_of")
        for rank, own in zip(self._ranks, self._sessions):
            if own is session:
                return rank
        raise ValidationError("not a session of this communicator", op="rank_of")

    def _check(self, op: str) -> None:
        if self._thread != threading.get_ident():
            raise RuntimeStateError("this communicator belongs to another thread; use it on "
                                    "the thread that made it", op=op)
        if self._closed:
            raise RuntimeStateError("the communicator is closed", op=op)

    def _contexts(self, op: str) -> list[Any]:
        """Every check of a call (thread, open, sessions usable); the sessions' contexts."""
        self._check(op)
        return ranks.contexts(self._sessions, op)

    # --- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Finalize and destroy the NCCL communicators (every rank does it; pending work
        completes first). Idempotent."""
        if self._closed:
            return
        self._check("close")
        self._closed = True
        self._finalizer.detach()
        guard.foreign_call(_close, self._handles, "close")

    def abort(self) -> None:
        """Abort the NCCL communicators now (pending collectives are cancelled): for a
        failure, where the other ranks may never come. Idempotent."""
        if self._closed:
            return
        self._check("abort")
        self._closed = True
        self._finalizer.detach()
        guard.foreign_call(_abort_all, self._handles)

    def __enter__(self) -> Communicator:
        self._check("Communicator")
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (f"<Communicator ranks={list(self._ranks)} of {self._nranks} "
                f"devices={list(self._devices)} {state}>")

    # --- collectives --------------------------------------------------------------------------
    def all_reduce(self, x: Any, op: str = "sum") -> Any:
        """Reduce ``x`` over every rank: each rank gets the result in a new tensor.

        Parameters
        ----------
        x : Tensor or TensorView, or a list of them
            One tensor per rank of this process (a list, in any order, when this process
            drives several ranks), each of its rank's session; the same shape and dtype.
        op : {"sum", "prod", "max", "min", "avg"}
            The reduction (bool: max/min; complex: sum/avg; avg: float and complex).

        Returns
        -------
        Tensor or list of Tensor
            Like ``x``: the result on each rank's session.
        """
        return calls.all_reduce(self, x, op, None, "all_reduce")

    def all_reduce_into(self, x: Any, out: Any, op: str = "sum") -> Any:
        """``all_reduce`` into caller-owned contiguous outputs (one per rank, on the rank
        of the matching ``x``); ``out`` may be exactly ``x`` (in place). Returns ``out``."""
        return calls.all_reduce(self, x, op, out, "all_reduce_into")

    def all_gather(self, x: Any) -> Any:
        """Each rank gets every rank's ``x``, stacked: shape ``(nranks, *x.shape)``, row
        r from rank r. ``x`` as for ``all_reduce``."""
        return calls.all_gather(self, x, None, "all_gather")

    def all_gather_into(self, x: Any, out: Any) -> Any:
        """``all_gather`` into caller-owned contiguous outputs of shape
        ``(nranks, *x.shape)`` that do not overlap ``x``. Returns ``out``."""
        return calls.all_gather(self, x, out, "all_gather_into")

    def reduce_scatter(self, x: Any, op: str = "sum") -> Any:
        """``x`` has one row per rank (shape ``(nranks, *rest)``); rank r gets row r
        reduced over every rank, shape ``rest``. Reductions as for ``all_reduce``."""
        return calls.reduce_scatter(self, x, op, None, "reduce_scatter")

    def reduce_scatter_into(self, x: Any, out: Any, op: str = "sum") -> Any:
        """``reduce_scatter`` into caller-owned contiguous outputs of shape ``rest`` that
        do not overlap ``x``. Returns ``out``."""
        return calls.reduce_scatter(self, x, op, out, "reduce_scatter_into")

    def broadcast(self, x: Any, root: int = 0) -> Any:
        """Every rank gets rank ``root``'s ``x`` in a new tensor; the other ranks' ``x``
        give only the shape and dtype."""
        return calls.broadcast(self, x, root, False, "broadcast")

    def broadcast_into(self, x: Any, root: int = 0) -> Any:
        """Overwrite every rank's ``x`` (contiguous) with rank ``root``'s. Returns ``x``."""
        return calls.broadcast(self, x, root, True, "broadcast_into")

    # --- point to point -------------------------------------------------------------------------
    def send_recv(self, sends: Sequence[tuple[Any, int]] = (),
                  recvs: Sequence[tuple[Any, int]] = ()) -> None:
        """Send each ``(tensor, peer)`` and receive into each ``(out, peer)`` in one NCCL
        group. NCCL pairs the k-th send from rank a to rank b with b's k-th receive from
        a; where both ranks are in this process they must match here (dtype and size).
        Outputs are contiguous and overlap nothing else of the call."""
        calls.send_recv(self, sends, recvs, "send_recv")

    def send(self, x: Any, peer: int) -> None:
        """Send ``x`` to rank ``peer`` (another process's rank: a rank of this process
        needs ``send_recv``, which pairs the send with its receive)."""
        calls.send_recv(self, [(x, peer)], [], "send")

    def recv(self, out: Any, peer: int) -> None:
        """Receive from rank ``peer`` into ``out`` (contiguous, of the sent dtype and
        size)."""
        calls.send_recv(self, [], [(out, peer)], "recv")


def _close(handles: list, op: str) -> None:
    """Finalize, then destroy, every handle. A failure does not stop the release: after a
    failed finalize every handle is aborted instead, after a failed destroy the others are
    still destroyed; the first error is raised at the end."""
    try:
        if len(handles) > 1:  # one thread finalizes its ranks together (else they wait)
            _nccl.group_start(op)
            try:
                for handle in handles:
                    _nccl.finalize(handle, op)
            finally:
                _nccl.group_end(op)
        else:
            for handle in handles:
                _nccl.finalize(handle, op)
    except BaseException:
        _abort_all(handles)  # never raises; releases what finalize left
        raise
    failed: BaseException | None = None
    for handle in handles:
        try:
            _nccl.destroy(handle, op)
        except BaseException as exc:  # noqa: BLE001 - the others are destroyed too
            failed = failed or exc
            _nccl.abort(handle)
    if failed is not None:
        raise failed
