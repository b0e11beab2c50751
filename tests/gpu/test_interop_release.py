"""How an exported tensor is let go (``_dlpack_slots``), on the GPU with PyTorch.

- A consumer on a default stream: its release orders our stream after its own, so our
  later writes to the tensor never overtake its reads, and the tensor goes at once.
- A consumer on a stream of its own (or ``stream=-1``): the deleter is ``sigemptyset``
  and runs no Python; the tensor stays until the next look (an export, a full
  collection, ``memory_stats``, or an allocation that runs out of room), never less
  than the consumer holds it.
- Exports and releases from several threads at once.
"""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from gpu_util import down, up

from tenferro_cuda import _dlpack_slots
from tenferro_cuda._dlpack_export import live_exports

SPIN_CYCLES = 1_000_000_000  # ~0.5 s at 2 GHz
N = 1 << 20


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


def _is_cleared_path(t) -> bool:
    held = [r for r in _dlpack_slots._records if r[1] is t]
    waiting = {id(r) for r, _ in _dlpack_slots._waiting.values()}
    return bool(held) and all(id(r) not in waiting for r in held)


def test_our_write_after_a_default_stream_release_waits_for_the_consumer(s, torch):
    """PyTorch reads the tensor on the legacy default stream behind a 0.5 s spin, then
    drops it; our write right after must land after that read."""
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    s.synchronize()
    x = torch.from_dlpack(t)  # stream=1: the callback deleter
    torch.cuda._sleep(SPIN_CYCLES)  # the default stream is busy
    y = x.clone()  # reads t behind the spin
    del x  # the deleter: our stream waits for the default stream's work so far
    s.copy_read_into(up(s, np.zeros(N, np.float32)), t)  # our write to t
    torch.cuda.synchronize()
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want)
    assert not down(s, t).any()


def test_a_default_stream_release_lets_the_tensor_go_at_once(s, torch):
    t = up(s, np.arange(N, dtype=np.float32))
    alive = weakref.ref(t)
    x = torch.from_dlpack(t)
    del t
    assert alive() is not None
    del x
    assert alive() is None  # no look needed: the callback dropped it


def test_a_side_stream_consumer_keeps_the_tensor_until_it_lets_go(s, torch):
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.from_dlpack(t)  # stream=side: sigemptyset is the deleter
    assert _is_cleared_path(t)
    alive = weakref.ref(t)
    del t
    gc.collect()
    assert alive() is not None  # PyTorch holds it
    junk = up(s, np.full(N, -1, np.float32))  # our pool must not hand its memory out
    with torch.cuda.stream(side):
        got = x.cpu().numpy()
    np.testing.assert_array_equal(got, want)
    del x
    gc.collect()  # a full collection looks
    assert alive() is None
    del junk


def test_memory_stats_count_a_released_export_as_freed(s, torch):
    s.synchronize()
    before = s.memory_stats()["live_bytes"]
    t = up(s, np.zeros(N, np.float32))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.from_dlpack(t)
    assert s.memory_stats()["live_bytes"] >= before + 4 * N
    del x, t
    side.synchronize()
    assert s.memory_stats()["live_bytes"] == before


def test_an_allocation_over_the_limit_takes_back_a_released_export(s, torch):
    """The only reference to a 64 MiB tensor is the record of an export PyTorch let go;
    an allocation that would pass the limit looks first and fits."""
    s.synchronize()
    gc.collect()
    base = s.memory_stats()["live_bytes"]
    s.set_memory_limit(base + (96 << 20))
    try:
        t = s.upload_host_tensor(np.zeros(16 << 20, np.float32))
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x = torch.from_dlpack(t)
        del x, t  # the record still holds the tensor: nothing has looked
        side.synchronize()
        assert any(r[1] is not None and r[1].nbytes == 64 << 20
                   for r in _dlpack_slots._records)
        u = s.upload_host_tensor(np.ones(16 << 20, np.float32))  # would pass the limit
        assert down(s, u)[:4].tolist() == [1.0] * 4
        del u
    finally:
        s.set_memory_limit(None)


def test_exports_from_several_threads(s, torch):
    """Threads export with stream=-1 and with PyTorch's default stream, PyTorch takes and
    drops the tensors on those threads: every export ends, nothing is shared wrongly."""
    t = up(s, np.arange(4096, dtype=np.float32))
    want = np.arange(4096, dtype=np.float32)
    s.synchronize()
    errors: list = []

    def work(k: int) -> None:
        try:
            for i in range(500):
                if (i + k) % 2:
                    x = torch.from_dlpack(t.__dlpack__(stream=-1, max_version=(1, 0)))
                else:
                    x = torch.from_dlpack(t.__dlpack__(stream=-1))
                if i % 100 == 0:
                    np.testing.assert_array_equal(x.cpu().numpy(), want)
                del x
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    torch.cuda.synchronize()
    assert live_exports(t) == 0
    addresses = [slot[2] for slot in _dlpack_slots._free]
    assert len(addresses) == len(set(addresses))


def test_a_kit_orders_a_default_stream_consumer_both_ways(s, torch, monkeypatch):
    """Once a tensor was exported twice to PyTorch's default stream, later exports take
    the kit (no ``export_context``): still, PyTorch's read waits for our busy write, and
    our write after PyTorch lets go waits for PyTorch's busy read."""
    from test_interop_sync import _spin_then_copy

    from tenferro_cuda import _driver_fast, _foreign

    want = np.arange(N, dtype=np.float32)
    t = up(s, np.zeros(N, np.float32))
    for _ in range(2):
        torch.from_dlpack(t)
    s.synchronize()
    assert type(t._kit).__name__ == "_Kit"
    full: list = []
    real = _foreign.export_context
    monkeypatch.setattr(_foreign, "export_context",
                        lambda *args: full.append(args) or real(*args))
    _spin_then_copy(s, t, up(s, want))  # our stream: a long spin, then t <- want
    x = torch.from_dlpack(t)
    assert not _driver_fast.stream_query(s.stream), "our spin ended before PyTorch's read"
    read = x.clone()  # on the default stream: after our copy
    torch.cuda._sleep(SPIN_CYCLES)
    late = x.clone()  # behind PyTorch's spin
    del x  # the deleter: our stream waits for the default stream's work so far
    s.copy_read_into(up(s, np.zeros(N, np.float32)), t)  # our write to t
    torch.cuda.synchronize()
    s.synchronize()
    assert full == [], "an export took the full path"
    np.testing.assert_array_equal(read.cpu().numpy(), want)
    np.testing.assert_array_equal(late.cpu().numpy(), want)
    assert not down(s, t).any()
    assert live_exports(t) == 0
