"""A stand-in for nccl4py's ``nccl.bindings.nccl`` on machines without NCCL.

``FakeNccl()`` has the names ``tenferro_cuda._nccl`` uses (``NCCLError`` with ``status``,
the ``DataType``/``RedOp`` enums, ``Comm``, ``get_version``, ``get_unique_id``,
``comm_init_all``, ``comm_init_rank``, the collectives, ``send``/``recv``, groups,
``comm_finalize``/``comm_destroy``/``comm_abort``, ``get_last_error``). Every call is
appended to ``log`` as ``(name, args)``. Collectives and point-to-point calls are also
*carried out* on host memory (the tensors of ``reference.fake_context`` have real host
addresses) once every rank of the communicator has made its call: at once outside a
group, at the outermost ``group_end`` inside one, as NCCL launches them. A rank of
another process (a communicator from ``comm_init_rank`` with ``nranks > 1``) is only
recorded. ``fail[name] = status`` makes that call raise ``NCCLError(status)``.
"""

from __future__ import annotations

import ctypes
import enum

import numpy as np

from tenferro_cuda.dtypes import DType

__all__ = ["FakeNccl", "NCCLError"]

DataType = enum.IntEnum("DataType", dict(
    Int8=0, Uint8=1, Int32=2, Uint32=3, Int64=4, Uint64=5, Float16=6, Float32=7, Float64=8,
    Bfloat16=9))
RedOp = enum.IntEnum("RedOp", dict(Sum=0, Prod=1, Max=2, Min=3, Avg=4))
_NUMPY = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
          6: np.float16, 7: np.float32, 8: np.float64}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


class NCCLError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"NCCL status {status}")
        self.status = status


class Comm:
    def __init__(self, world: list, rank: int, nranks: int, device: int | None) -> None:
        self.world, self.rank, self.nranks, self.device = world, rank, nranks, device

    def __repr__(self) -> str:
        return f"<Comm rank={self.rank}/{self.nranks} device={self.device}>"


def _dtype(code: int) -> np.dtype:
    if code == 9:
        return np.dtype(DType.BFLOAT16.numpy)
    return np.dtype(_NUMPY[code])


def _read(ptr: int, count: int, dt: np.dtype) -> np.ndarray:
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(ptr)
    return np.frombuffer(bytes(raw), dt).copy()


def _write(ptr: int, values: np.ndarray) -> None:
    data = np.ascontiguousarray(values)
    ctypes.memmove(ptr, data.ctypes.data, data.nbytes)


def _reduce(stack: np.ndarray, red: int) -> np.ndarray:
    if red == 0:
        return np.add.reduce(stack, axis=0, dtype=stack.dtype)
    if red == 1:
        return np.multiply.reduce(stack, axis=0, dtype=stack.dtype)
    if red == 2:
        return stack.max(axis=0)
    if red == 3:
        return stack.min(axis=0)
    return (np.add.reduce(stack, axis=0, dtype=stack.dtype) / len(stack)).astype(stack.dtype)


class FakeNccl:
    """See the module docstring."""

    NCCLError = NCCLError
    DataType = DataType
    RedOp = RedOp
    Comm = Comm

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.depth = 0
        self.pending: list[tuple] = []
        self.fail: dict[str, int] = {}
        self.last_error = ""

    def _enter(self, name: str, args: tuple) -> None:
        self.log.append((name, args))
        if name in self.fail:
            raise NCCLError(self.fail[name])

    # --- setup and teardown -------------------------------------------------------------------
    def get_version(self) -> int:
        return 22809

    def get_unique_id(self) -> bytes:
        self._enter("get_unique_id", ())
        return bytes(range(128))

    def comm_init_all(self, ndev: int, devlist: list) -> list:
        self._enter("comm_init_all", (ndev, list(devlist)))
        world: list = []
        world.extend(Comm(world, r, ndev, d) for r, d in enumerate(devlist))
        return list(world)

    def comm_init_rank(self, nranks: int, uid: object, rank: int) -> Comm:
        assert isinstance(uid, bytearray) and len(uid) == 128  # a writable buffer
        self._enter("comm_init_rank", (nranks, bytes(uid), rank))
        world: list = []
        world.append(Comm(world, rank, nranks, None))
        return world[0]

    def comm_finalize(self, comm) -> None:
        self._enter("comm_finalize", (comm,))

    def comm_destroy(self, comm) -> None:
        self._enter("comm_destroy", (comm,))

    def comm_abort(self, comm) -> None:
        self._enter("comm_abort", (comm,))

    def get_last_error(self, comm) -> str:
        return self.last_error

    # --- groups and operations ---------------------------------------------------------------
    def group_start(self) -> None:
        self._enter("group_start", ())
        self.depth += 1

    def group_end(self) -> None:
        self.depth -= 1
        self._enter("group_end", ())
        if self.depth == 0:
            self._run()

    def _op(self, name: str, comm: Comm, *args) -> None:
        self._enter(name, (*args, comm))
        self.pending.append((name, comm, args))
        if self.depth == 0:
            self._run()

    def all_reduce(self, send, recv, count, dtype, op, comm, stream) -> None:
        self._op("all_reduce", comm, send, recv, count, dtype, op, stream)

    def all_gather(self, send, recv, count, dtype, comm, stream) -> None:
        self._op("all_gather", comm, send, recv, count, dtype, stream)

    def reduce_scatter(self, send, recv, count, dtype, op, comm, stream) -> None:
        self._op("reduce_scatter", comm, send, recv, count, dtype, op, stream)

    def broadcast(self, send, recv, count, dtype, root, comm, stream) -> None:
        self._op("broadcast", comm, send, recv, count, dtype, root, stream)

    def send(self, buf, count, dtype, peer, comm, stream) -> None:
        self._op("send", comm, buf, count, dtype, peer, stream)

    def recv(self, buf, count, dtype, peer, comm, stream) -> None:
        self._op("recv", comm, buf, count, dtype, peer, stream)

    # --- execution ---------------------------------------------------------------------------
    def _run(self) -> None:
        pending, self.pending = self.pending, []
        while pending:
            name, comm, _ = pending[0]
            if len(comm.world) < comm.nranks:  # other ranks live in other processes
                pending.pop(0)
                continue
            if name in COLLECTIVES:
                members = []
                for member in comm.world:
                    k = next(i for i, p in enumerate(pending)
                             if p[0] == name and p[1] is member)
                    members.append(pending.pop(k))
                getattr(self, "_" + name)([m[2] for m in members])
            else:
                self._p2p(pending)

    @staticmethod
    def _all_reduce(calls: list) -> None:
        send, _, count, dtype, red, _ = calls[0]
        dt = _dtype(dtype)
        result = _reduce(np.stack([_read(c[0], count, dt) for c in calls]), red)
        for c in calls:
            _write(c[1], result)

    @staticmethod
    def _all_gather(calls: list) -> None:
        count, dt = calls[0][2], _dtype(calls[0][3])
        result = np.concatenate([_read(c[0], count, dt) for c in calls])
        for c in calls:
            _write(c[1], result)

    @staticmethod
    def _reduce_scatter(calls: list) -> None:
        count, dt, red = calls[0][2], _dtype(calls[0][3]), calls[0][4]
        n = len(calls)
        result = _reduce(np.stack([_read(c[0], count * n, dt) for c in calls]), red)
        for r, c in enumerate(calls):
            _write(c[1], result[r * count:(r + 1) * count])

    @staticmethod
    def _broadcast(calls: list) -> None:
        count, dt, root = calls[0][2], _dtype(calls[0][3]), calls[0][4]
        data = _read(calls[root][0], count, dt)
        for c in calls:
            _write(c[1], data)

    @staticmethod
    def _p2p(pending: list) -> None:
        name, comm, args = pending.pop(0)
        if name == "recv":  # find the send it pairs with first
            peer = comm.world[args[3]]
            k = next(i for i, p in enumerate(pending)
                     if p[0] == "send" and p[1] is peer and p[2][3] == comm.rank)
            send, recv = pending.pop(k), (name, comm, args)
        else:
            peer = comm.world[args[3]]
            k = next(i for i, p in enumerate(pending)
                     if p[0] == "recv" and p[1] is peer and p[2][3] == comm.rank)
            send, recv = (name, comm, args), pending.pop(k)
        assert send[2][1] == recv[2][1], "send and recv counts differ"
        _write(recv[2][0], _read(send[2][0], send[2][1], _dtype(send[2][2])))
