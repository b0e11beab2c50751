"""The communicator on the CPU, part one: construction, bookkeeping, lifetime, the
checks every call makes before anything is allocated or called, and NCCL's errors,
against a fake NCCL (tests/reference/fake_nccl.py and fake_sessions.py). Part two
(test_collectives_calls.py) checks the calls made and their results.
"""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading
import types

import numpy as np
import pytest
from reference.fake_context import HostMemory
from reference.fake_nccl import FakeNccl
from reference.fake_sessions import Ctx, Session, names, put

import tenferro_cuda as tc
from tenferro_cuda import _nccl
from tenferro_cuda.collectives import Communicator, communicator
from tenferro_cuda.tensor import Tensor

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
        ([a, 3.0], tc.ValidationError, "must be a Tensor"),
        ([a, np.ones(3)], tc.RuntimeStateError, "host array"),
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
