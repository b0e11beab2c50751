"""The communicator on the CPU, part two: the NCCL calls made for each collective (handles,
streams, counts, datatypes, groups) and their results, which the fake NCCL carries out on
host memory (tests/reference/fake_nccl.py), against numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference.fake_context import HostMemory
from reference.fake_sessions import Ctx, Session, get, names, put

import tenferro_cuda as tc
from tenferro_cuda import _nccl
from tenferro_cuda.collectives import Communicator, wire

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
