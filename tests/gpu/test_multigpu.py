"""Several devices in one process: sessions side by side (threads) and nested (one thread),
residency across devices, and explicit copies between devices (docs/multi-gpu.md).

The first tests need one GPU (a second runtime on device 0 stands in for another
device's); the rest skip with a reason where fewer than two devices exist.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from cuda.bindings import driver as d
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.exec import peer
from tenferro_cuda.runtime import CudaRuntime
from tenferro_cuda.tensor import Tensor


def _device_count() -> int:
    from tenferro_cuda import _driver

    try:
        return _driver.device_count()
    except tc.CudaDeviceError:
        return 0


two_gpus = pytest.mark.skipif(_device_count() < 2,
                              reason="needs two GPUs (docs/multi-gpu.md: several GPUs)")
ROUTES = ["auto", "host"]


def _stack() -> list[int]:
    taken = []
    while True:
        status, ctx = d.cuCtxGetCurrent()
        if int(status) or not int(ctx):
            break
        taken.append(d.cuCtxPopCurrent()[1])
    taken.reverse()
    for ctx in taken:
        d.cuCtxPushCurrent(ctx)
    return [int(c) for c in taken]


# --- one GPU -------------------------------------------------------------------------------

@pytest.mark.parametrize("route", ["auto", "peer", "host"])
def test_same_device_copy(s, rng, route):
    a = rng.standard_normal((33, 17)).astype(np.float32)
    x = up(s, a)
    for src, want in ((x, a), (x[:, ::3], a[:, ::3]), (x.T, a.T)):
        y = s.copy_to(s, src, route=route)
        assert y.shape == want.shape
        assert np.array_equal(down(s, y), want)


def test_copy_to_refuses_before_anything(s):
    x = up(s, np.ones(3))
    with pytest.raises(tc.ValidationError, match="route must be one of"):
        s.copy_to(s, x, route="nvlink")
    with pytest.raises(tc.ValidationError, match="destination must be a CudaExecSession"):
        s.copy_to(0, x)


def test_a_tensor_of_another_runtime_is_refused_naming_it(s):
    rt2 = CudaRuntime.create_separate(0)  # stands in for a second device's runtime
    try:
        buf = rt2.pool.alloc(12, rt2.exec_context().stream)
        other = Tensor._make(tc.float32, (3,), buffer=buf)
        mine = up(s, np.ones(3, np.float32))
        for method, args in ((s.add, (mine, other)), (s.download_to_host, (other,)),
                             (s.copy_to, (s, other))):
            with pytest.raises(tc.RuntimeStateError, match="another runtime.*copy_to"):
                method(*args)
        del other, buf
    finally:
        rt2.close()


def test_supports_peer_copy_per_pair(s):
    assert s.supports(tc.Capability.PEER_COPY, peer=s) is False  # not its own peer
    assert s.supports(tc.Capability.PEER_COPY, peer=0) is False
    with pytest.raises(tc.ValidationError, match="PEER_COPY only"):
        s.supports(tc.Capability.CUBLAS, peer=0)
    with pytest.raises(tc.CudaDeviceError, match="no CUDA device"):
        s.supports(tc.Capability.PEER_COPY, peer=_device_count())


# --- two GPUs --------------------------------------------------------------------------------

def _busy(s, n: int = 1 << 24, rounds: int = 40):
    """A tensor whose value is known only after ``rounds`` passes over ``n`` floats."""
    x = s.full((n,), 1.0, tc.float32)
    step = s.full((n,), 0.5, tc.float32)
    for _ in range(rounds):
        x = s.add(x, step)
    return x, 1.0 + 0.5 * rounds


@two_gpus
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pair", [(0, 1), (1, 0)])
def test_copy_between_devices_is_ordered_on_both_sides(route, pair):
    a, b = pair
    with tc.cuda_exec_session(a) as sa, tc.cuda_exec_session(b) as sb:
        x, value = _busy(sa)  # still being computed when the copy is enqueued
        y = sa.copy_to(sb, x, route=route)
        sa.copy_read_into(sa.zeros(x.shape, tc.float32), x)  # later work on the source
        got = down(sb, y)
        assert got.min() == value and got.max() == value
        assert down(sa, x).max() == 0.0
        with pytest.raises(tc.RuntimeStateError, match=f"on device {b}, not device {a}"):
            sa.download_to_host(y)
        with pytest.raises(tc.RuntimeStateError, match=f"on device {a}, not device {b}"):
            sb.add(y, x)


@two_gpus
def test_copies_of_every_dtype_and_layout_between_devices(rng):
    with tc.cuda_exec_session(0) as s0, tc.cuda_exec_session(1) as s1:
        for dtype in tc.ALL_DTYPES:
            a = (rng.standard_normal((7, 9)) * 5).astype(dtype.numpy)
            x = up(s0, a)
            for src, want in ((x, a), (x.T, a.T), (x[::2, 1:], a[::2, 1:]), (x[:0], a[:0])):
                for route in ("auto", "host"):
                    got = down(s1, s0.copy_to(s1, src, route=route))
                    assert got.dtype == want.dtype and np.array_equal(got, want), dtype


@two_gpus
def test_staged_copy_larger_than_the_slots(rng):
    n = 3 * peer.SLOT_BYTES // 8 + 5  # several chunks through the two host slots
    a = rng.standard_normal(n)
    with tc.cuda_exec_session(0) as s0, tc.cuda_exec_session(1) as s1:
        y = s0.copy_to(s1, up(s0, a), route="host")
        z = s1.copy_to(s0, y, route="host")
        assert np.array_equal(down(s0, z), a)


@two_gpus
def test_peer_route_follows_the_driver():
    with tc.cuda_exec_session(0) as s0, tc.cuda_exec_session(1) as s1:
        capable = s0.supports(tc.Capability.PEER_COPY, peer=s1)
        assert capable == s1.supports(tc.Capability.PEER_COPY, peer=0)
        x = s0.ones((1024,), tc.float32)
        if capable:
            assert down(s1, s0.copy_to(s1, x, route="peer")).sum() == 1024
            assert peer.route(s0.runtime(), s1.runtime()) == "peer"
        else:
            with pytest.raises(tc.UnsupportedError, match="no peer access"):
                s0.copy_to(s1, x, route="peer")


@two_gpus
def test_nested_sessions_restore_the_callers_contexts():
    before = _stack()
    with tc.cuda_exec_session(0) as s0:
        inside0 = _stack()
        with tc.cuda_exec_session(1) as s1:
            assert _stack() == [*inside0, s1.runtime().context_id]
            x = s0.ones((4,), tc.float32)  # an op of the outer session: ours pushed, popped
            assert _stack() == [*inside0, s1.runtime().context_id]
            y = s0.copy_to(s1, x)
            assert _stack() == [*inside0, s1.runtime().context_id]
            with pytest.raises(tc.SessionEntryError) as info, tc.cuda_exec_session(0):
                pass
            assert info.value.kind == "reentered"
        assert _stack() == inside0 == [*before, s0.runtime().context_id]
        assert down(s0, x).sum() == 4
    assert _stack() == before
    assert y.shape == (4,)


@two_gpus
def test_one_session_per_thread_per_device_side_by_side(rng):
    a = rng.standard_normal((256, 256))
    results, errors = {}, []

    def work(device: int) -> None:
        try:
            with tc.cuda_exec_session(device) as s:
                x = up(s, a)
                for _ in range(20):
                    x = s.mul(x, x)
                    x = s.sqrt(x)
                results[device] = down(s, x)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    np.testing.assert_allclose(results[0], np.abs(a), rtol=1e-12)
    np.testing.assert_allclose(results[1], np.abs(a), rtol=1e-12)
