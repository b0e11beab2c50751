"""The single-GPU collectives (a one-rank communicator from one session) over the CPU
fakes: every collective's identity result, argument validation, the dtypes
docs/multi-gpu.md promises (uint32 and uint64 reduce in their own type; NCCL has no 16-bit
integer type), and NCCL's environment left alone."""

from __future__ import annotations

import os

import numpy as np
import pytest
from reference.fake_context import HostMemory
from reference.fake_sessions import Ctx, Session, get, names, put

import tenferro_cuda as tc
from tenferro_cuda.collectives import Communicator


@pytest.fixture
def one(nccl):
    s = Session(Ctx(HostMemory(), 0))
    comm = Communicator.from_sessions([s])
    nccl.log.clear()
    yield comm, s, nccl
    if not comm.closed:
        comm.abort()


# --- identity results on one rank -----------------------------------------------------------

INT_DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("red", ["sum", "prod", "max", "min"])
def test_integer_dtypes_reduce_in_their_own_type(one, dtype, red):
    """docs/multi-gpu.md: "Integer and float dtypes reduce in their own type". NCCL has
    ncclUint32 and ncclUint64 (tenferro_cuda/_nccl.py DTYPES lists them), yet wire.py's
    table leaves them out: all_reduce of a uint32/uint64 tensor raises
    UnsupportedDTypeError."""
    comm, s, lib = one
    a = np.arange(1, 7, dtype=dtype).reshape(2, 3)
    y = comm.all_reduce(put(s, a), op=red)
    assert y.dtype is tc.as_dtype(np.dtype(dtype)) and np.array_equal(get(y), a)


def test_every_collective_is_the_identity_on_one_rank(one):
    comm, s, lib = one
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = put(s, a)
    for red in ("sum", "prod", "max", "min", "avg"):
        assert np.array_equal(get(comm.all_reduce(x, op=red)), a)
    out = put(s, np.zeros_like(a))
    assert comm.all_reduce_into(x, out) is out and np.array_equal(get(out), a)
    assert comm.all_reduce_into(x, x) is x and np.array_equal(get(x), a)  # in place
    g = comm.all_gather(x)
    assert g.shape == (1, 3, 4) and np.array_equal(get(g), a[None])
    gout = put(s, np.zeros((1, 3, 4), np.float32))
    assert comm.all_gather_into(x, gout) is gout and np.array_equal(get(gout), a[None])
    r = comm.reduce_scatter(put(s, a[None]))
    assert r.shape == (3, 4) and np.array_equal(get(r), a)
    rout = put(s, np.zeros_like(a))
    assert comm.reduce_scatter_into(put(s, a[None]), rout) is rout
    assert np.array_equal(get(rout), a)
    assert np.array_equal(get(comm.broadcast(x, root=0)), a)
    assert comm.broadcast_into(x, 0) is x and np.array_equal(get(x), a)
    recv = put(s, np.zeros_like(a))
    comm.send_recv([(x, 0)], [(recv, 0)])
    assert np.array_equal(get(recv), a)
    assert comm.nranks == 1 and comm.ranks == (0,) and comm.devices == (0,)
    assert comm.rank_of(s) == 0


def test_identity_of_views_and_lists_of_one(one):
    comm, s, lib = one
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = put(s, a)
    y = comm.all_reduce([x[2:]])
    assert isinstance(y, list) and len(y) == 1
    assert np.array_equal(get(y[0]), a[2:])
    g = comm.all_gather(x[1:3])
    assert np.array_equal(get(g), a[1:3][None])


# --- argument validation -------------------------------------------------------------------

@pytest.mark.parametrize("root", [1, -1, True, 0.0, None, "0"])
def test_broadcast_root_out_of_range_on_one_rank(one, root):
    comm, s, lib = one
    with pytest.raises(tc.ValidationError, match="root must be a rank"):
        comm.broadcast(put(s, np.ones(3, np.float32)), root=root)
    assert lib.log == []


@pytest.mark.parametrize("peer", [1, -1, True, None])
def test_send_recv_peer_out_of_range_on_one_rank(one, peer):
    comm, s, lib = one
    x, out = put(s, np.ones(3, np.float32)), put(s, np.zeros(3, np.float32))
    with pytest.raises(tc.ValidationError):
        comm.send_recv([(x, peer)], [(out, 0)])
    assert lib.log == []


def test_reduce_scatter_needs_a_leading_axis_of_one(one):
    comm, s, lib = one
    scalar = s._ctx.alloc(tc.float32, (), "test")
    for x in [scalar, put(s, np.ones((2, 3), np.float32)), put(s, np.ones((0, 3), np.float32))]:
        with pytest.raises(tc.ValidationError, match="one row per rank"):
            comm.reduce_scatter(x)
    assert lib.log == []


def test_int16_reduction_is_refused_though_the_docs_promise_it(one):
    """docs/multi-gpu.md promises every integer dtype reduces in its own type; NCCL has no
    16-bit integer type, so int16/uint16 are refused (a docs gap, not a code one)."""
    comm, s, lib = one
    with pytest.raises(tc.UnsupportedDTypeError, match="int16"):
        comm.all_reduce(put(s, np.ones(3, np.int16)))


def test_outputs_of_the_wrong_shape_or_dtype(one):
    comm, s, lib = one
    x = put(s, np.ones((2, 3), np.float32))
    for bad in (put(s, np.ones((3, 2), np.float32)), put(s, np.ones((2, 3), np.float64)),
                put(s, np.ones((6,), np.float32))):
        with pytest.raises(tc.ValidationError):
            comm.all_reduce_into(x, bad)
    with pytest.raises(tc.ValidationError):
        comm.all_gather_into(x, put(s, np.ones((2, 3), np.float32)))  # no leading 1
    with pytest.raises(tc.ValidationError):
        comm.all_gather_into(x, x)  # overlaps the input
    assert lib.log == []


def test_tensors_of_another_runtime_are_refused_naming_both(one):
    comm, s, lib = one
    other = Ctx(HostMemory(), 1)
    t = put(Session(other), np.ones(3, np.float32))
    with pytest.raises(tc.RuntimeStateError, match="device 1, not device 0"):
        comm.all_reduce(t)
    assert lib.log == []


# --- NCCL's environment -----------------------------------------------------------------------

def test_the_library_sets_no_nccl_variable(nccl, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    before = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    s = Session(Ctx(HostMemory(), 0))
    with Communicator.from_sessions([s]) as comm:
        comm.all_reduce(put(s, np.ones(2, np.float32)))
    with Communicator.from_unique_id(s, tc.nccl_unique_id(), 0, 1) as comm:
        comm.all_gather(put(s, np.ones(2, np.float32)))
    after = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    assert after == before
    assert "comm_finalize" in names(nccl)
