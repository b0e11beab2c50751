"""Hand-offs between streams that have nothing left to wait for (``_foreign.settled``).

An export to a consumer on another stream makes that stream wait for ours, unless one
``cuStreamQuery`` finds ours idle. The release of a legacy-stream consumer, and an import
whose producer wrote on the legacy stream, wait for the legacy stream unless it is idle.
Here: no ordering where the stream is idle, ordering where it is busy (with the data
checked behind a spin kernel), and the query made where no context, or another
library's context, is current (the stack is left as it was).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from context_util import pop, push, stack
from gpu_util import down, up

from tenferro_cuda import _driver, _driver_fast
from tenferro_cuda.raw import KernelArg, LaunchConfig

SPIN_SRC = r'''
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
'''
SPIN_CYCLES = 1_000_000_000  # ~0.5 s at 2 GHz
N = 1 << 20


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


@pytest.fixture
def orders(monkeypatch):
    """The (waiter, producer) handle pairs of the orders made (they still run)."""
    made: list[tuple[int, int]] = []
    real = _driver_fast.order

    def order(event, producer, waiter):
        made.append((int(waiter), int(producer)))
        real(event, producer, waiter)

    monkeypatch.setattr(_driver_fast, "order", order)
    return made


def _spin_then_copy(s, dst, src) -> None:
    """A ~0.5 s spin kernel, then dst <- src, on the session stream."""
    with s.raw("test.interop.idle") as raw:
        fn = raw.compile_nvrtc(SPIN_SRC).function("spin")
        raw.launch(fn, LaunchConfig(1, 1), [KernelArg.i64(SPIN_CYCLES)])
        raw.copy_bytes(dst, src, src.nbytes)


def test_export_and_release_on_idle_streams_order_nothing(s, torch, orders):
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    s.synchronize()
    torch.cuda.synchronize()
    x = torch.from_dlpack(t)  # stream=1, our stream idle
    np.testing.assert_array_equal(x.cpu().numpy(), want)
    torch.cuda.synchronize()
    del x  # the legacy stream idle at release
    assert orders == []


def test_a_busy_legacy_consumer_is_waited_for_at_release(s, torch, orders):
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    s.synchronize()
    x = torch.from_dlpack(t)
    torch.cuda._sleep(SPIN_CYCLES)  # the legacy stream is busy
    y = x.clone()  # reads t behind the spin
    del x
    assert orders == [(s.stream_handle, 1)]
    s.copy_read_into(up(s, np.zeros(N, np.float32)), t)  # must land after the read
    torch.cuda.synchronize()
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want)
    assert not down(s, t).any()


@pytest.mark.parametrize("where", ["this thread", "a thread with no context"])
def test_an_export_while_our_stream_is_busy_orders_the_consumer(s, torch, orders, where):
    want = np.arange(N, dtype=np.float32)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    s.synchronize()
    _spin_then_copy(s, dst, src)
    capsules: list = []

    def export() -> None:
        if where != "this thread":
            assert _driver.current_context_id() == 0
        capsules.append(dst.__dlpack__(stream=1, max_version=(1, 0)))

    if where == "this thread":
        export()
    else:
        th = threading.Thread(target=export)
        th.start()
        th.join()
    assert not _driver.stream_query(_driver.stream_handle(s.stream_handle)), \
        "our stream finished too early for this test to mean much"
    assert orders[:1] == [(1, s.stream_handle)]
    x = torch.from_dlpack(capsules.pop())
    np.testing.assert_array_equal(x.cpu().numpy(), want)  # the legacy stream waited


def _take(s, y, how: str):
    """Adopt ``y`` (written on the legacy stream) through DLPack or a CAI v3 dict."""
    if how == "dlpack":
        return s.from_dlpack(y)
    return s.from_cuda_array_interface({
        "shape": tuple(y.shape), "typestr": "<f4", "strides": None,
        "data": (y.data_ptr(), False), "version": 3, "stream": 1})


@pytest.mark.parametrize("how", ["dlpack", "cai"])
def test_an_import_from_the_idle_legacy_stream_orders_nothing(s, torch, orders, how):
    y = torch.arange(N, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    t = _take(s, y, how)
    assert orders == []
    np.testing.assert_array_equal(down(s, t), np.arange(N, dtype=np.float32))


@pytest.mark.parametrize("how", ["dlpack", "cai"])
def test_an_import_from_the_busy_legacy_stream_waits_for_it(s, torch, orders, how):
    y = torch.zeros(N, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_CYCLES)
    y.fill_(7.0)  # behind the spin, on the legacy stream
    t = _take(s, y, how)
    assert orders == [(s.stream_handle, 1)]
    assert np.all(down(s, t) == 7)


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_an_export_under_a_foreign_context_leaves_the_stack_and_orders_when_busy(
        s, torch, orders, contexts, busy):
    want = np.arange(N, dtype=np.float32)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    s.synchronize()
    if busy:
        _spin_then_copy(s, dst, src)
    else:
        s.copy_read_into(src, dst)
        s.synchronize()
    _, foreign, _ = contexts
    push(foreign)
    try:
        before = stack()
        capsule = dst.__dlpack__(stream=1, max_version=(1, 0))
        assert stack() == before
    finally:
        pop()
    assert orders == ([(1, s.stream_handle)] if busy else [])
    x = torch.from_dlpack(capsule)
    np.testing.assert_array_equal(x.cpu().numpy(), want)


def test_a_release_under_a_foreign_context_waits_for_our_legacy_stream(s, torch, orders,
                                                                        contexts):
    """The consumer lets go while another context is current: the legacy stream asked
    and waited for is our context's (the one PyTorch's work is on), and the stack is left
    as it was."""
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    s.synchronize()
    x = torch.from_dlpack(t)
    torch.cuda._sleep(SPIN_CYCLES)
    y = x.clone()  # reads t behind the spin, on our context's legacy stream
    _, foreign, _ = contexts
    push(foreign)
    try:
        before = stack()
        del x
        assert stack() == before
    finally:
        pop()
    assert orders == [(s.stream_handle, 1)]
    s.copy_read_into(up(s, np.zeros(N, np.float32)), t)  # must land after the read
    torch.cuda.synchronize()
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want)
    assert not down(s, t).any()
