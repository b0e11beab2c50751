"""The communicator on the CPU: bookkeeping, validation, the dtype/op mapping, the NCCL
calls made (handles, streams, groups) and their results, against a fake NCCL
(tests/reference/fake_nccl.py) that carries collectives out on host memory.

Sessions are stand-ins over ``FakeContext``s of devices 0 and 1 (real host addresses);
the session entry checks (thread, scope, runtime) are the real ones.
"""

from __future__ import annotations

import copy
import ctypes
import gc
import pickle
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from reference.fake_context import FakeContext, HostMemory
from reference.fake_nccl import FakeNccl

import tenferro_cuda as tc
from tenferro_cuda import _nccl
from tenferro_cuda.collectives import Communicator, communicator, wire
from tenferro_cuda.exec import entry, guard
from tenferro_cuda.exec.authority import Scope
from tenferro_cuda.tensor import Tensor


class Ctx(FakeContext):
    def __init__(self, memory: HostMemory, ordinal: int) -> None:
        super().__init__(memory, None)
        self.ordinal, self.domain = ordinal, 100 + ordinal
        self.context = self.context_id = 50 + ordinal
        self.stream = 0x7000 + ordinal
        self.runtime = SimpleNamespace(identity=SimpleNamespace(serial=ordinal),
                                       check_alive=lambda op: None)

    def alloc(self, dtype, shape, op: str) -> Tensor:
        t = super().alloc(dtype, shape, op)
        t.base.buffer.ordinal, t.base.buffer.domain = self.ordinal, self.domain
        return t


class Session:
    """What the communicator reads of a session: its context, scope and runtime."""

    def __init__(self, ctx: Ctx) -> None:
        self._ctx, self._scope = ctx, Scope("session")
        self._rt = SimpleNamespace(ordinal=ctx.ordinal)


@pytest.fixture
def nccl(monkeypatch):
    lib = FakeNccl()
    monkeypatch.setattr(_nccl, "_state", {"lib": lib, "version": (2, 28, 9)})
    monkeypatch.setattr(entry, "_session_types", [Session])
    monkeypatch.setattr(guard, "foreign_call", lambda fn, *args: fn(*args))
    within = []

    class Within:
        def __init__(self, context, context_id):
            within.append(context_id)

        def __enter__(self):
            return None

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(guard, "within", Within)
    lib.within = within
    yield lib
    gc.collect()  # communicators a test left open are aborted into this fake, not the next


@pytest.fixture
def two(nccl):
    memory = HostMemory()
    sessions = [Session(Ctx(memory, 0)), Session(Ctx(memory, 1))]
    comm = Communicator.from_sessions(sessions)
    nccl.log.clear()
    yield comm, sessions, nccl
    if not comm.closed:
        comm.abort()


def put(session: Session, a) -> Tensor:
    a = np.ascontiguousarray(a)
    t = session._ctx.alloc(tc.as_dtype(a.dtype), a.shape, "test")
    ctypes.memmove(t.data_ptr(), a.ctypes.data, a.nbytes)
    return t


def get(t) -> np.ndarray:
    raw = (ctypes.c_char * t.nbytes).from_address(t.data_ptr())
    return np.frombuffer(bytes(raw), t.dtype.numpy).reshape(t.shape)


def names(lib: FakeNccl) -> list[str]:
    return [name for name, _ in lib.log]


# --- construction and bookkeeping ----------------------------------------------------------

def test_from_sessions_makes_one_rank_per_device(nccl):
    memory = HostMemory()
    sessions = [Session(Ctx(memory, 1)), Session(Ctx(memory, 0))]
    comm = Communicator.from_sessions(sessions)
    assert nccl.log == [("comm_init_all", (2, [1, 0]))]
    assert (comm.nranks, comm.ranks, comm.devices) == (2, (0, 1), (1, 0))
    assert comm.rank_of(sessions[1]) == 1 and not comm.closed
    assert "ranks=[0, 1] of 2 devices=[1, 0] open" in repr(comm)
    with pytest.raises(tc.ValidationError, match="not a session of this communicator"):
        comm.rank_of(Session(Ctx(memory, 2)))


@pytest.mark.parametrize("bad, match", [
    ([], "non-empty list"), ("s", "non-empty list"), ([object()], "sessions\\[0\\] must be"),
])
def test_from_sessions_refuses_bad_lists(nccl, bad, match):
    with pytest.raises(tc.ValidationError, match=match):
        Communicator.from_sessions(bad)
    assert nccl.log == []


def test_from_sessions_refuses_two_sessions_of_one_device(nccl):
    memory = HostMemory()
    with pytest.raises(tc.ValidationError, match="different device.*\\[0, 0\\]"):
        Communicator.from_sessions([Session(Ctx(memory, 0)), Session(Ctx(memory, 0))])
    assert nccl.log == []


def test_from_sessions_refuses_a_closed_session(nccl):
    s = Session(Ctx(HostMemory(), 0))
    s._scope.alive = False
    with pytest.raises(tc.RuntimeStateError, match="scope has ended"):
        Communicator.from_sessions([s])
    assert nccl.log == []


def test_from_unique_id_joins_on_the_sessions_device(nccl):
    s = Session(Ctx(HostMemory(), 1))
    uid = tc.nccl_unique_id()
    assert uid == bytes(range(128))
    comm = Communicator.from_unique_id(s, uid, 3, 4)
    assert nccl.log[-1] == ("comm_init_rank", (4, uid, 3))
    assert nccl.within == [s._ctx.context_id]  # the device NCCL takes is the session's
    assert (comm.nranks, comm.ranks, comm.devices) == (4, (3,), (1,))


@pytest.mark.parametrize("uid, rank, nranks, match", [
    (b"x" * 127, 0, 1, "128 bytes"), ("a" * 128, 0, 1, "128 bytes"),
    (bytes(128), 0, 0, "nranks must be"), (bytes(128), 2, 2, "rank must be"),
    (bytes(128), -1, 2, "rank must be"), (bytes(128), 0, True, "nranks must be"),
])
def test_from_unique_id_validates(nccl, uid, rank, nranks, match):
    with pytest.raises(tc.ValidationError, match=match):
        Communicator.from_unique_id(Session(Ctx(HostMemory(), 0)), uid, rank, nranks)
    assert nccl.log == []


def test_not_constructible_and_not_copyable(two):
    comm, _, _ = two
    with pytest.raises(TypeError, match="from_sessions"):
        Communicator()
    for fn in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be"):
            fn(comm)


def test_close_finalizes_the_ranks_together_then_destroys(two):
    comm, _, lib = two
    handles = list(comm._handles)
    comm.close()
    assert lib.log == [("group_start", ()), ("comm_finalize", (handles[0],)),
                       ("comm_finalize", (handles[1],)), ("group_end", ()),
                       ("comm_destroy", (handles[0],)), ("comm_destroy", (handles[1],))]
    comm.close()  # idempotent
    assert len(lib.log) == 6 and comm.closed
    with pytest.raises(tc.RuntimeStateError, match="communicator is closed"):
        comm.all_reduce([])


def test_with_block_closes_or_aborts(nccl):
    memory = HostMemory()
    with Communicator.from_sessions([Session(Ctx(memory, 0))]) as comm:
        pass
    assert comm.closed and names(nccl)[-2:] == ["comm_finalize", "comm_destroy"]
    nccl.log.clear()
    with pytest.raises(KeyError), Communicator.from_sessions([Session(Ctx(memory, 0))]):
        raise KeyError("a failing rank")
    assert names(nccl) == ["comm_init_all", "comm_abort"]


def test_an_unclosed_communicator_is_aborted_when_collected(nccl):
    comm = Communicator.from_sessions([Session(Ctx(HostMemory(), 0))])
    (handle,) = comm._handles
    del comm
    gc.collect()
    assert nccl.log[-1] == ("comm_abort", (handle,))


def test_other_threads_and_ended_sessions_are_refused(two):
    comm, sessions, lib = two
    x = [put(s, np.ones(2, np.float32)) for s in sessions]
    box = {}

    def other():
        try:
            comm.all_reduce(x)
        except tc.RuntimeStateError as exc:
            box["err"] = exc

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert "another thread" in str(box["err"])
    sessions[1]._scope.alive = False
    with pytest.raises(tc.RuntimeStateError, match="scope has ended"):
        comm.all_reduce(x)
    sessions[1]._scope.alive = True
    sessions[0]._ctx.capture = object()
    with pytest.raises(tc.RuntimeStateError, match="capturing a graph"):
        comm.all_reduce(x)
    assert lib.log == []


# --- validation: refused before anything is allocated or called -----------------------------

def _allocations(sessions) -> list[int]:
    return [s._ctx.home.allocations for s in sessions]


def test_one_tensor_per_rank_of_this_process(two):
    comm, (s0, s1), lib = two
    a = put(s0, np.ones(3))
    cases = [
        (a, tc.ValidationError, "2 rank\\(s\\) in this process.*got 1"),
        ([a], tc.ValidationError, "got 1"),
        ([a, put(s0, np.ones(3))], tc.ValidationError, "both on device 0"),
        ([a, np.ones(3)], tc.ValidationError, "must be a Tensor"),
        ([a, Tensor.from_numpy(np.ones(3))], tc.RuntimeStateError, "host tensor"),
        ([a, put(Session(Ctx(s0._ctx.memory, 2)), np.ones(3))], tc.RuntimeStateError,
         "devices 0, 1.*on device 2"),
        ("ab", tc.ValidationError, "a tensor or a list"),
    ]
    before = _allocations((s0, s1))
    for x, cls, match in cases:
        with pytest.raises(cls, match=match):
            comm.all_reduce(x)
    assert lib.log == [] and _allocations((s0, s1)) == before


@pytest.mark.parametrize("left, right, kind", [
    ((np.ones(3, np.float32)), (np.ones(3, np.float64)), "dtype_mismatch"),
    ((np.ones(3, np.float32)), (np.ones(4, np.float32)), "shape_mismatch"),
])
def test_ranks_must_agree(two, left, right, kind):
    comm, (s0, s1), lib = two
    x = [put(s0, left), put(s1, right)]
    for call in (comm.all_reduce, comm.all_gather, comm.broadcast):
        with pytest.raises(tc.ValidationError) as info:
            call(x)
        assert info.value.kind == kind
    assert lib.log == []


@pytest.mark.parametrize("dtype, red", [
    (np.bool_, "sum"), (np.complex64, "max"), (np.complex128, "prod"), (np.int32, "avg"),
    (np.uint8, "avg"),
])
def test_reductions_the_dtype_does_not_have(two, dtype, red):
    comm, (s0, s1), lib = two
    x = [put(s0, np.ones(2, dtype)), put(s1, np.ones(2, dtype))]
    with pytest.raises(tc.UnsupportedDTypeError):
        comm.all_reduce(x, op=red)
    with pytest.raises(tc.UnsupportedDTypeError):
        comm.reduce_scatter([put(s0, np.ones((2, 1), dtype)), put(s1, np.ones((2, 1), dtype))],
                            op=red)
    with pytest.raises(tc.ValidationError, match="op must be one of"):
        comm.all_reduce(x, op="mean")
    assert lib.log == []


def test_reduce_scatter_needs_one_row_per_rank(two):
    comm, (s0, s1), lib = two
    for shape in ((3, 2), ()):
        with pytest.raises(tc.ValidationError, match="one row per rank") as info:
            comm.reduce_scatter([put(s0, np.ones(shape)), put(s1, np.ones(shape))])
        assert info.value.kind == "shape_mismatch"
    assert lib.log == []


def test_outputs_are_checked(two):
    comm, (s0, s1), lib = two
    x = [put(s0, np.ones(4, np.float32)), put(s1, np.ones(4, np.float32))]
    wide = [put(s0, np.ones((2, 8), np.float32)), put(s1, np.ones((2, 8), np.float32))]
    cases = [
        (comm.all_reduce_into, [put(s0, np.ones(5, np.float32)), x[1]], "shape"),
        (comm.all_reduce_into, [put(s0, np.ones(4)), x[1]], "dtype float32"),
        (comm.all_reduce_into, [put(s0, np.ones(8, np.float32))[::2], x[1]], "contiguous"),
        (comm.all_reduce_into, [x[0]], "got 1"),
        (comm.all_gather_into, [w[:, ::2] for w in wide], "contiguous"),
    ]
    for call, out, match in cases:
        with pytest.raises(tc.ValidationError, match=match):
            call(x, out)
    overlap = [put(s0, np.ones((2, 4), np.float32)), put(s1, np.ones((2, 4), np.float32))]
    with pytest.raises(tc.ValidationError, match="overlaps x"):
        comm.all_gather_into([overlap[0][1], overlap[1][1]], overlap)
    assert lib.log == []


@pytest.mark.parametrize("root", [-1, 2, 1.0, "0", None])
def test_broadcast_root_must_be_a_rank(two, root):
    comm, (s0, s1), lib = two
    with pytest.raises(tc.ValidationError, match="root must be a rank in \\[0, 2\\)"):
        comm.broadcast([put(s0, np.ones(2)), put(s1, np.ones(2))], root=root)
    assert lib.log == []


def test_send_recv_pairs_are_checked(two):
    comm, (s0, s1), lib = two
    a, b = put(s0, np.ones(4, np.float32)), put(s1, np.zeros(4, np.float32))
    cases = [
        ({"sends": [a]}, "\\(tensor, peer\\) pair"),
        ({"sends": a}, "list of \\(tensor, peer\\) pairs"),
        ({"sends": [(a, 2)]}, "peer must be a rank"),
        ({"sends": [(a, 1)]}, "none\\)"),  # no matching recv
        ({"sends": [(a, 1)], "recvs": [(put(s1, np.zeros(4)), 0)]}, "float32\\[4\\]"),
        ({"sends": [(a, 1)], "recvs": [(put(s1, np.zeros(5, np.float32)), 0)]}, "\\[5\\]"),
        ({"sends": [(a, 1)], "recvs": [(b, 1)]}, "do not match"),
        ({"sends": [(a, 1), (b, 0)], "recvs": [(b, 0), (a, 1)]}, "overlaps"),
    ]
    for kwargs, match in cases:
        with pytest.raises(tc.ValidationError, match=match):
            comm.send_recv(**kwargs)
    with pytest.raises(tc.ValidationError, match="each send needs its recv"):
        comm.send(a, 1)  # rank 1 is in this process: a lone send would never complete
    assert lib.log == []


# --- the calls made and their results ----------------------------------------------------------

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8]


def _pair(sessions, dtype, shape=(3, 5)):
    rng = np.random.default_rng(7)
    arrays = [(rng.standard_normal(shape) * 4).astype(dtype) for _ in sessions]
    return arrays, [put(s, a) for s, a in zip(sessions, arrays)]


REDUCTIONS = [(d, red) for d in DTYPES for red in ("sum", "prod", "max", "min", "avg")
              if red != "avg" or np.issubdtype(d, np.floating)]  # integer avg: refused


@pytest.mark.parametrize("dtype, red", REDUCTIONS,
                         ids=[f"{np.dtype(d).name}-{r}" for d, r in REDUCTIONS])
def test_all_reduce_values(two, dtype, red):
    comm, sessions, lib = two
    arrays, x = _pair(sessions, dtype)
    y = comm.all_reduce(x, op=red)
    stack = np.stack(arrays)
    want = {"sum": np.add.reduce(stack, 0, dtype), "prod": np.multiply.reduce(stack, 0, dtype),
            "max": stack.max(0), "min": stack.min(0)}.get(red)
    if want is None:
        want = (np.add.reduce(stack, 0, dtype) / 2).astype(dtype)
    for s, t in zip(sessions, y):
        assert t.base.buffer.home is s._ctx.home and t.dtype is x[0].dtype
        np.testing.assert_array_equal(get(t), want)
    assert names(lib) == ["group_start", "all_reduce", "all_reduce", "group_end"]
    for (_, args), s, h in zip(lib.log[1:3], sessions, comm._handles):
        assert args[-2:] == (s._ctx.stream, h) and args[2] == 15  # stream, handle, count


def test_complex_and_bool_reductions(two):
    comm, sessions, _ = two
    z = [np.array([1 + 2j, 3 - 1j], np.complex64), np.array([2 - 2j, 1j], np.complex64)]
    y = comm.all_reduce([put(s, a) for s, a in zip(sessions, z)], op="sum")
    np.testing.assert_array_equal(get(y[0]), z[0] + z[1])
    y = comm.all_reduce([put(s, a) for s, a in zip(sessions, z)], op="avg")
    np.testing.assert_array_equal(get(y[1]), (z[0] + z[1]) / 2)
    flags = [np.array([True, False, False]), np.array([True, True, False])]
    anyv = comm.all_reduce([put(s, a) for s, a in zip(sessions, flags)], op="max")
    allv = comm.all_reduce([put(s, a) for s, a in zip(sessions, flags)], op="min")
    assert get(anyv[0]).tolist() == [True, True, False]
    assert get(allv[1]).tolist() == [True, False, False]


def test_wire_table():
    assert wire.reduction(tc.complex128, "sum", "t") == (_nccl.DTYPES["float64"], 2, 0)
    assert wire.reduction(tc.bool_, "min", "t") == (_nccl.DTYPES["uint8"], 1, 3)
    assert wire.reduction(tc.bfloat16, "avg", "t") == (_nccl.DTYPES["bfloat16"], 1, 4)
    assert wire.reduction(tc.int64, "prod", "t") == (_nccl.DTYPES["int64"], 1, 1)


@pytest.mark.parametrize("dtype", [*DTYPES, np.bool_, np.complex128], ids=str)
def test_all_gather_stacks_every_rank(two, dtype):
    comm, sessions, lib = two
    arrays, x = _pair(sessions, dtype, (2, 3))
    y = comm.all_gather(x[::-1])  # any order of the ranks
    for t in y:
        np.testing.assert_array_equal(get(t), np.stack(arrays))
    assert all(args[3] == wire.BYTES and args[2] == arrays[0].nbytes
               for name, args in lib.log if name == "all_gather")


def test_reduce_scatter_gives_each_rank_its_row(two):
    comm, sessions, _ = two
    arrays, x = _pair(sessions, np.float64, (2, 4))
    y = comm.reduce_scatter(x, op="sum")
    for r, t in enumerate(y):
        assert t.shape == (4,)
        np.testing.assert_allclose(get(t), arrays[0][r] + arrays[1][r])
    outs = [put(s, np.zeros(4)) for s in sessions]
    assert comm.reduce_scatter_into(x, outs, op="max") is outs
    np.testing.assert_array_equal(get(outs[1]), np.maximum(arrays[0][1], arrays[1][1]))


def test_broadcast_new_and_in_place(two):
    comm, sessions, _ = two
    arrays, x = _pair(sessions, np.int32, (4,))
    y = comm.broadcast(x, root=1)
    assert [get(t).tolist() for t in y] == [arrays[1].tolist()] * 2
    assert get(x[0]).tolist() == arrays[0].tolist()  # untouched
    assert comm.broadcast_into(x, root=0) is x
    assert get(x[1]).tolist() == arrays[0].tolist()


def test_in_place_all_reduce_and_gather_into(two):
    comm, sessions, _ = two
    arrays, x = _pair(sessions, np.float32, (6,))
    assert comm.all_reduce_into(x, x, op="sum") is x
    np.testing.assert_allclose(get(x[0]), arrays[0] + arrays[1])
    outs = [put(s, np.zeros((2, 6), np.float32)) for s in sessions]
    comm.all_gather_into(x, outs)
    np.testing.assert_allclose(get(outs[1]), np.stack([get(x[0]), get(x[1])]))


def test_send_recv_between_the_ranks_of_this_process(two):
    comm, (s0, s1), lib = two
    a, b = np.arange(6.0), np.arange(10, 16.0)
    x0, x1 = put(s0, a), put(s1, b)
    o0, o1 = put(s0, np.zeros(6)), put(s1, np.zeros(6))
    comm.send_recv(sends=[(x0, 1), (x1, 0)], recvs=[(o1, 0), (o0, 1)])
    assert get(o1).tolist() == a.tolist() and get(o0).tolist() == b.tolist()
    assert names(lib) == ["group_start", "send", "send", "recv", "recv", "group_end"]


def test_zero_size_tensors_make_no_call(two):
    comm, sessions, lib = two
    y = comm.all_gather([put(s, np.zeros((0, 3), np.float32)) for s in sessions])
    assert [t.shape for t in y] == [(2, 0, 3)] * 2 and lib.log == []


def test_a_single_rank_gives_the_identity(nccl):
    s = Session(Ctx(HostMemory(), 0))
    comm = Communicator.from_unique_id(s, bytes(128), 0, 1)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = put(s, a)
    assert np.array_equal(get(comm.all_reduce(x, op="prod")), a)
    assert np.array_equal(get(comm.all_gather(x)), a[None])
    assert np.array_equal(get(comm.reduce_scatter(put(s, a[None]))), a)
    assert np.array_equal(get(comm.broadcast(x)), a)
    out = put(s, np.zeros_like(a))
    comm.send_recv([(x, 0)], [(out, 0)])  # to itself
    assert np.array_equal(get(out), a)
    calls = [n for n in names(nccl) if n not in ("comm_init_rank",)]
    assert calls == ["all_reduce", "all_gather", "reduce_scatter", "broadcast",
                     "group_start", "send", "recv", "group_end"]


def test_send_and_recv_with_a_rank_of_another_process(nccl):
    s = Session(Ctx(HostMemory(), 0))
    comm = Communicator.from_unique_id(s, bytes(128), 0, 2)
    x, out = put(s, np.ones(3, np.float32)), put(s, np.zeros(3, np.float32))
    comm.send(x, 1)
    comm.recv(out, 1)
    (h,) = comm._handles
    assert nccl.log[-2:] == [("send", (x.data_ptr(), 12, wire.BYTES, 1, s._ctx.stream, h)),
                             ("recv", (out.data_ptr(), 12, wire.BYTES, 1, s._ctx.stream, h))]


# --- errors --------------------------------------------------------------------------------------

def test_nccl_errors_are_typed(two):
    comm, sessions, lib = two
    x = [put(s, np.ones(2, np.float32)) for s in sessions]
    lib.fail["all_reduce"], lib.last_error = 4, "invalid count"
    with pytest.raises(tc.ValidationError, match="ncclAllReduce failed: ncclInvalidArgument "
                       "\\(4\\): invalid count") as info:
        comm.all_reduce(x)
    assert isinstance(info.value.__cause__, tc.errors.NcclError)
    assert info.value.__cause__.code == 4
    assert names(lib)[-1] == "group_end"  # the group is ended after a failure too
    lib.fail["all_reduce"] = 1
    with pytest.raises(tc.BackendSourceError, match="ncclUnhandledCudaError"):
        comm.all_reduce(x)
    del lib.fail["all_reduce"]
    lib.fail["group_end"] = 6
    with pytest.raises(tc.BackendSourceError, match="ncclGroupEnd failed: ncclRemoteError"):
        comm.all_reduce(x)


def test_missing_nccl_is_an_unsupported_error(monkeypatch):
    monkeypatch.setattr(_nccl, "_state", {})
    monkeypatch.setattr(_nccl, "_MODULE", "tenferro_test_absent_nccl.bindings.nccl")
    for _ in range(2):  # remembered, reported the same way
        with pytest.raises(tc.UnsupportedError, match="nccl4py is not installed.*"
                           "tenferro-cuda\\[nccl\\]"):
            _nccl.load()
    assert not _nccl.available()


def test_missing_libnccl_and_old_bindings(monkeypatch):
    import sys
    import types

    module = types.ModuleType("tenferro_test_fake_nccl")
    fake = FakeNccl()
    for name in ("NCCLError", "DataType", "RedOp", "Comm", "comm_init_all"):
        setattr(module, name, getattr(fake, name))

    def no_library():
        raise RuntimeError('Failure finding "libnccl.so.2": No such file\n')

    module.get_version = no_library
    monkeypatch.setitem(sys.modules, "tenferro_test_fake_nccl", module)
    monkeypatch.setattr(_nccl, "_MODULE", "tenferro_test_fake_nccl")
    monkeypatch.setattr(_nccl, "_state", {})
    with pytest.raises(tc.UnsupportedError, match="libnccl.so.2 could not be loaded"):
        _nccl.load()
    monkeypatch.setattr(_nccl, "_state", {})
    monkeypatch.delattr(module, "Comm")
    with pytest.raises(tc.UnsupportedError, match="is not nccl4py>=0.6"):
        _nccl.load()


def test_close_errors_are_typed(two):
    comm, _, lib = two
    lib.fail["comm_destroy"] = 3
    with pytest.raises(tc.BackendSourceError, match="ncclCommDestroy failed"):
        comm.close()
    assert comm.closed


def test_unique_id_is_made_by_nccl(nccl):
    assert communicator.unique_id() == bytes(range(128))
    assert nccl.log == [("get_unique_id", ())]
