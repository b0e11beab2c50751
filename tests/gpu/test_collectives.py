"""NCCL collectives over sessions (``tenferro_cuda.Communicator``) against numpy.

Needs NCCL (``pip install 'tenferro-cuda[nccl]'``; tests skip with that reason without
it). One GPU: a single-rank communicator runs every collective and gives the identity.
Two or more: every collective for several dtypes and sizes over all devices of this
process, point-to-point in a ring, and two processes joined by a unique id.
``NCCL_NVLS_ENABLE=0`` is set by tests/gpu/conftest.py before any communicator exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _nccl


def _device_count() -> int:
    from tenferro_cuda import _driver

    try:
        return _driver.device_count()
    except tc.CudaDeviceError:
        return 0


@pytest.fixture(autouse=True)
def need_nccl():
    if not _nccl.available():
        pytest.skip("NCCL is not installed (pip install 'tenferro-cuda[nccl]')")


two_gpus = pytest.mark.skipif(_device_count() < 2, reason="needs two GPUs")
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
SIZES = [1, 1000, (1 << 20) + 3]
TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-12}


def _data(rng, dtype: str, n: int, rank: int) -> np.ndarray:
    host = tc.as_dtype(dtype).numpy
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 5, n).astype(host) + np.asarray(rank, host)
    return (rng.standard_normal(n) + rank).astype(host)


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    if dtype in TOL:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=TOL[dtype], atol=TOL[dtype])
    else:
        np.testing.assert_array_equal(got, want)


# --- one rank ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make", ["sessions", "unique_id"])
def test_a_single_rank_runs_every_collective_as_the_identity(s, rng, make):
    if make == "sessions":
        comm = tc.Communicator.from_sessions([s])
    else:
        comm = tc.Communicator.from_unique_id(s, tc.nccl_unique_id(), 0, 1)
    with comm:
        assert (comm.nranks, comm.ranks, comm.devices) == (1, (0,), (0,))
        a = rng.standard_normal((5, 7)).astype(np.float32)
        x = up(s, a)
        for red in ("sum", "prod", "max", "min", "avg"):
            assert np.array_equal(down(s, comm.all_reduce(x, op=red)), a)
        assert np.array_equal(down(s, comm.all_gather(x)), a[None])
        assert np.array_equal(down(s, comm.all_gather(x.T)), a.T[None])  # a strided view
        assert np.array_equal(down(s, comm.reduce_scatter(up(s, a[None]))), a)
        assert np.array_equal(down(s, comm.broadcast(x)), a)
        out = s.zeros(a.shape, tc.float32)
        comm.send_recv([(x, 0)], [(out, 0)])
        assert np.array_equal(down(s, out), a)
        assert comm.all_reduce_into(x, x) is x and np.array_equal(down(s, x), a)
        z = np.array([1 + 2j, -3j], np.complex128)
        assert np.array_equal(down(s, comm.all_reduce(up(s, z))), z)
        flags = np.array([True, False])
        assert np.array_equal(down(s, comm.all_reduce(up(s, flags), op="max")), flags)
    assert comm.closed


def test_refusals_on_one_gpu(s):
    with tc.Communicator.from_sessions([s]) as comm:
        with pytest.raises(tc.RuntimeStateError, match="host tensor"):
            comm.all_reduce(tc.Tensor.from_numpy(np.ones(3)))
        with pytest.raises(tc.UnsupportedDTypeError):
            comm.all_reduce(up(s, np.ones(3, np.int32)), op="avg")
        x = up(s, np.ones(4, np.float32))
        with pytest.raises(tc.ValidationError, match="overlaps"):
            comm.all_gather_into(x, x.view((1, 4), (4, 1)))
    with pytest.raises(tc.RuntimeStateError, match="closed"):
        comm.all_reduce(x)


# --- several GPUs ---------------------------------------------------------------------------

@pytest.fixture
def world():
    """(sessions of every device, their communicator), closed afterwards."""
    n = min(_device_count(), 8)
    scopes = [tc.cuda_exec_session(k) for k in range(n)]
    sessions = [scope.__enter__() for scope in scopes]
    comm = tc.Communicator.from_sessions(sessions)
    try:
        yield sessions, comm
    finally:
        comm.close()
        for scope in reversed(scopes):
            scope.__exit__(None, None, None)


@two_gpus
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_all_reduce_against_numpy(world, rng, dtype, n):
    sessions, comm = world
    arrays = [_data(rng, dtype, n, r) for r in range(len(sessions))]
    x = [up(s, a) for s, a in zip(sessions, arrays)]
    stack = np.stack(arrays).astype(np.float64)
    reds = ["sum", "max", "min"] + (["avg"] if dtype in TOL else [])
    for red in reds:
        want = {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0),
                "avg": stack.mean(0)}[red]  # small integers: no wrap-around in any dtype
        for s, y in zip(sessions, comm.all_reduce(x, op=red)):
            _close(down(s, y), want, dtype)


@two_gpus
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [*DTYPES, "bool", "complex64", "complex128"])
def test_all_gather_and_broadcast_against_numpy(world, rng, dtype, n):
    sessions, comm = world
    host = tc.as_dtype(dtype).numpy
    arrays = [(rng.standard_normal(n) * 3 + r).astype(host) for r in range(len(sessions))]
    x = [up(s, a) for s, a in zip(sessions, arrays)]
    for s, y in zip(sessions, comm.all_gather(x)):
        assert np.array_equal(down(s, y), np.stack(arrays))
    root = len(sessions) - 1
    for s, y in zip(sessions, comm.broadcast(x, root=root)):
        assert np.array_equal(down(s, y), arrays[root])
    comm.broadcast_into(x, root=0)
    for s, t in zip(sessions, x):
        assert np.array_equal(down(s, t), arrays[0])


@two_gpus
@pytest.mark.parametrize("n", [1, 999, 1 << 18])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int32", "complex64"])
def test_reduce_scatter_against_numpy(world, rng, dtype, n):
    sessions, comm = world
    k = len(sessions)
    host = tc.as_dtype(dtype).numpy
    arrays = [(rng.integers(-4, 5, (k, n))).astype(host) for _ in range(k)]
    x = [up(s, a) for s, a in zip(sessions, arrays)]
    want = np.add.reduce(np.stack(arrays).astype(np.complex128), 0)
    for r, (s, y) in enumerate(zip(sessions, comm.reduce_scatter(x, op="sum"))):
        np.testing.assert_allclose(down(s, y).astype(np.complex128), want[r], rtol=1e-2)


@two_gpus
def test_send_recv_in_a_ring(world, rng):
    sessions, comm = world
    k = len(sessions)
    arrays = [rng.standard_normal(4097).astype(np.float32) for _ in range(k)]
    x = [up(s, a) for s, a in zip(sessions, arrays)]
    outs = [s.zeros((4097,), tc.float32) for s in sessions]
    comm.send_recv(sends=[(x[r], (r + 1) % k) for r in range(k)],
                   recvs=[(outs[r], (r - 1) % k) for r in range(k)])
    for r in range(k):
        assert np.array_equal(down(sessions[r], outs[r]), arrays[(r - 1) % k])


@two_gpus
def test_a_tensor_of_a_device_outside_the_communicator(world):
    sessions, _ = world
    with tc.Communicator.from_sessions(sessions[:1]) as comm0:
        with pytest.raises(tc.RuntimeStateError, match="on device 1, not device 0"):
            comm0.all_reduce(sessions[1].ones((3,), tc.float32))


CHILD = """
import os, sys
import numpy as np
import tenferro_cuda as tc
rank, uid = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
with tc.cuda_exec_session(rank) as s:
    with tc.Communicator.from_unique_id(s, uid, rank, 2) as comm:
        x = s.upload_host_tensor(np.full(1000, rank + 1.0, np.float32))
        total = s.download_to_host(comm.all_reduce(x)).numpy()
        gathered = s.download_to_host(comm.all_gather(x)).numpy()
        out = s.zeros((1000,), tc.float32)
        comm.send_recv([(x, 1 - rank)], [(out, 1 - rank)])
        got = s.download_to_host(out).numpy()
assert (total == 3.0).all(), total
assert (gathered[0] == 1.0).all() and (gathered[1] == 2.0).all()
assert (got == 2.0 - rank).all(), got
print("rank", rank, "OK")
"""


@two_gpus
def test_two_processes_joined_by_a_unique_id():
    uid = tc.nccl_unique_id().hex()
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD), str(r), uid],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env) for r in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0 and f"rank {r} OK" in out, out
