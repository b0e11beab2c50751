"""``copy_to`` between two devices on the CPU: the route chosen per pair of devices (same
device, peer access, staging through pinned host memory), the stream ordering on both
sides, and every refusal before anything is allocated or enqueued.

Two ``FakeContext``s over real host memory stand for sessions of devices 0 and 1; their
streams are queues of a ``FakeDevice`` (tests/reference/fake_streams.py), which executes
them in adversarial orders: a missing event wait shows up as wrong data. The GPU tier
(tests/gpu/test_multigpu.py) runs the same copies on devices.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
from types import SimpleNamespace

import numpy as np
import pytest
from reference.fake_context import FakeContext, HostMemory
from reference.fake_streams import FakeDevice, Stream

import tenferro_cuda as tc
from tenferro_cuda import capabilities
from tenferro_cuda.exec import guard, peer
from tenferro_cuda.exec.context import ExecContext
from tenferro_cuda.exec.residency import not_resident
from tenferro_cuda.ops import transfer
from tenferro_cuda.runtime import Capability
from tenferro_cuda.tensor import Tensor

_serials = itertools.count(1000)
POLICIES = ["src", "dst", 1, 2, 3]


class Ctx(FakeContext):
    """A FakeContext of one device whose copies are enqueued on a fake stream."""

    link = ExecContext.link

    def __init__(self, device: FakeDevice, memory: HostMemory, ordinal: int,
                 name: str) -> None:
        super().__init__(memory, None)
        self.device = device
        self.ordinal = ordinal
        self.context = self.context_id = 10 + len(name) + ordinal * 100
        self.stream = Stream(name, self.context_id)
        serial = next(_serials)
        self.runtime = SimpleNamespace(
            ordinal=ordinal, device=f"dev{ordinal}", identity=SimpleNamespace(serial=serial),
            pool=SimpleNamespace(handle=f"pool{serial}"), check_alive=lambda op: None)
        self.domain = serial
        self.links: dict = {}

    def alloc(self, dtype, shape, op: str) -> Tensor:
        t = super().alloc(dtype, shape, op)
        t.base.buffer.ordinal, t.base.buffer.domain = self.ordinal, self.domain
        return t

    def copy(self, dst: int, src: int, nbytes: int, op: str) -> None:
        self.device.memcpy_dtod_async(dst, src, nbytes, self.stream, op)


@pytest.fixture
def world(monkeypatch):
    """(device, src context on device 0, dst context on device 1); src is current."""
    device = FakeDevice()
    memory = HostMemory()
    src, dst = Ctx(device, memory, 0, "src"), Ctx(device, memory, 1, "dst")
    monkeypatch.setattr(peer, "_driver", device)
    monkeypatch.setattr(peer, "_driver_memory", device)
    monkeypatch.setattr(peer, "_routes", {})
    monkeypatch.setattr(guard, "within", device.within)
    monkeypatch.setattr(transfer, "context_of", lambda obj, op: obj)
    device.current.append(src.context_id)
    return device, src, dst


def _put(ctx: Ctx, a: np.ndarray) -> Tensor:
    t = ctx.alloc(tc.as_dtype(a.dtype), a.shape, "test")
    ctypes.memmove(t.data_ptr(), a.ctypes.data, a.nbytes)
    return t


def _get(t: Tensor) -> np.ndarray:
    raw = (ctypes.c_char * t.nbytes).from_address(t.data_ptr())
    return np.frombuffer(bytes(raw), t.dtype.numpy).reshape(t.shape)


def _busy_producer(src: Ctx, t: Tensor, a: np.ndarray) -> np.ndarray:
    """Enqueue on src the write of ``a`` into ``t`` (its data is not there until src runs);
    the caller keeps the returned array alive."""
    staged = np.ascontiguousarray(a)
    src.device.current.append(src.context_id)
    src.device.memcpy_htod_async(t.data_ptr(), staged.ctypes.data, a.nbytes, src.stream)
    src.device.current.pop()
    return staged


def _clobber(src: Ctx, t: Tensor) -> np.ndarray:
    """Enqueue on src, after the copy, an overwrite of ``t`` with zeros."""
    zeros = np.zeros(t.nbytes, np.uint8)
    src.device.memcpy_htod_async(t.data_ptr(), zeros.ctypes.data, t.nbytes, src.stream)
    return zeros


@pytest.mark.parametrize("policy", POLICIES)
def test_peer_route_is_ordered_on_both_sides(world, policy):
    device, src, dst = world
    a = np.arange(6 * 7, dtype=np.float32).reshape(6, 7)
    x = _put(src, np.zeros_like(a))
    keep = _busy_producer(src, x, a)
    y = transfer.copy_to(src, dst, x)
    later = _clobber(src, x)  # src's later work must wait for the copy
    assert device.grants == [(src.runtime.pool.handle, 1)]
    assert device.pinned == {}  # no staging on the peer route
    device.run([src.stream, dst.stream], policy)
    assert y.base.buffer.home is dst.home and y.shape == a.shape
    assert np.array_equal(_get(y), a)
    assert keep is not None and later is not None


@pytest.mark.parametrize("policy", POLICIES)
def test_host_route_stages_through_pinned_slots_in_order(world, monkeypatch, policy):
    device, src, dst = world
    device.peer_access = False
    monkeypatch.setattr(peer, "SLOT_BYTES", 64)  # many chunks: the two slots are reused
    a = np.random.default_rng(1).standard_normal(131)  # 1048 bytes: 17 chunks
    x = _put(src, np.zeros_like(a))
    keep = _busy_producer(src, x, a)
    y = transfer.copy_to(src, dst, x)
    later = _clobber(src, x)
    z = transfer.copy_to(src, dst, x)  # a second copy reuses the slots
    device.run([src.stream, dst.stream], policy)
    assert np.array_equal(_get(y), a)
    assert np.array_equal(_get(z), np.zeros_like(a))  # after the clobber, in src order
    assert device.grants == [] and device.pinned_flags == [True]  # one portable block
    assert keep is not None and later is not None


def test_the_route_is_decided_once_per_pair(world):
    device, src, dst = world
    x = _put(src, np.ones(4, np.float32))
    for _ in range(3):
        transfer.copy_to(src, dst, x)
    assert device.grants == [(src.runtime.pool.handle, 1)]
    assert peer.route(src.runtime, dst.runtime) == "peer"
    assert peer.route(dst.runtime, src.runtime) == "peer"  # the other way: its own grant
    assert device.grants[-1] == (dst.runtime.pool.handle, 0)


def test_a_failed_grant_falls_back_to_staging(world, caplog):
    device, src, dst = world
    device.grant_fails = True
    a = np.arange(5, dtype=np.int64)
    x = _put(src, a)
    with caplog.at_level(logging.WARNING, logger="tenferro_cuda"):
        y = transfer.copy_to(src, dst, x)
    assert "staged through host memory" in caplog.text
    assert peer.route(src.runtime, dst.runtime) == "host"
    device.run([src.stream, dst.stream])
    assert np.array_equal(_get(y), a) and device.pinned_flags == [True]


def test_same_device_other_runtime_copies_device_to_device(world):
    device, src, _ = world
    other = Ctx(device, src.memory, 0, "dst")  # a second runtime on device 0
    a = np.arange(12, dtype=np.uint8)
    y = transfer.copy_to(src, other, _put(src, a))
    assert device.grants == [] and device.pinned == {}
    device.run([src.stream, other.stream], "dst")
    assert y.base.buffer.home is other.home and np.array_equal(_get(y), a)


def test_forced_host_route_within_one_session(world):
    device, src, _ = world
    a = np.arange(10, dtype=np.int32)
    y = transfer.copy_to(src, src, _put(src, a), route="host")
    assert device.pinned_flags == [True]
    device.run([src.stream])
    assert y.base.buffer.home is src.home and np.array_equal(_get(y), a)


def test_same_session_auto_is_one_device_copy(world):
    device, src, _ = world
    a = np.arange(9.0).reshape(3, 3)
    y = transfer.copy_to(src, src, _put(src, a)[1:])
    assert device.pinned == {} and device.events == []
    device.run([src.stream])
    assert np.array_equal(_get(y), a[1:])


def test_foreign_source_is_compacted_into_pool_memory_before_a_peer_copy(world):
    device, src, dst = world
    a = np.arange(8, dtype=np.float64)
    owned = _put(src, a)
    buf = src.adopt(owned.data_ptr(), owned.nbytes, owner=object())  # adopted memory
    foreign = Tensor._make(tc.float64, (8,), buffer=buf)
    y = transfer.copy_to(src, dst, foreign)
    copies = [c for c in src.stream.queue if c[0] == "copy"]
    assert len(copies) == 1 and copies[0][2] == owned.data_ptr()  # into pool memory first
    device.run([src.stream, dst.stream], "dst")
    assert np.array_equal(_get(y), a)


def test_refusals_happen_before_anything(world):
    device, src, dst = world
    x = _put(src, np.ones(3, np.float32))
    allocated = dst.home.allocations
    with pytest.raises(tc.ValidationError, match="route must be one of"):
        transfer.copy_to(src, dst, x, route="nvlink")
    device.peer_access = False
    with pytest.raises(tc.UnsupportedError, match="no peer access from device 1 to device 0"):
        transfer.copy_to(src, dst, x, route="peer")
    y = dst.alloc(tc.float32, (3,), "test")
    with pytest.raises(tc.RuntimeStateError, match="on device 1, not device 0.*copy_to"):
        transfer.copy_to(src, dst, y)
    assert dst.home.allocations == allocated + 1  # only the test's own y
    assert not src.stream.queue and not dst.stream.queue and device.pinned == {}


def test_zero_size_copies_allocate_and_enqueue_nothing(world):
    device, src, dst = world
    y = transfer.copy_to(src, dst, _put(src, np.zeros((0, 4), np.float32)))
    assert y.shape == (0, 4) and y.base.buffer.home is dst.home
    assert not src.stream.queue and not dst.stream.queue


def test_link_close_waits_for_the_slots_then_frees(world):
    device, src, dst = world
    device.peer_access = False
    transfer.copy_to(src, dst, _put(src, np.ones(4)))
    (link,) = src.links.values()
    host = link.host
    link.close()
    assert len(device.synchronized) == 1 and device.freed == [host]
    assert all(e.destroyed for e in device.events)
    device.sync_fails = True  # a lost context: close still never raises
    transfer.copy_to(src, dst, _put(src, np.ones(4)))
    (link,) = src.links.values()
    link.close()
    assert len(device.freed) == 2


def test_links_into_closed_contexts_are_dropped(world):
    device, src, dst = world
    transfer.copy_to(src, dst, _put(src, np.ones(2)))
    dst.closed = True
    other = Ctx(device, src.memory, 1, "dst")
    transfer.copy_to(src, other, _put(src, np.ones(2)))
    assert list(src.links) == [other]


def test_residency_error_names_both_devices():
    ctx = FakeContext(HostMemory(), None)
    t = ctx.alloc(tc.float32, (2,), "test")
    t.base.buffer.ordinal = 3
    other = FakeContext(HostMemory(), None)
    err = not_resident(other, t, "add", "lhs")
    assert isinstance(err, tc.RuntimeStateError)
    assert "on device 3, not device 0" in str(err) and "copy_to" in str(err)


def test_peer_copy_is_answered_per_pair(monkeypatch):
    from tenferro_cuda import capabilities

    access = {(0, 1): True, (1, 0): True, (0, 2): True, (2, 0): False}
    fake = SimpleNamespace(device_count=lambda: 3, device=lambda n: n,
                           can_access_peer=lambda a, b: access.get((a, b), False))
    monkeypatch.setattr(capabilities, "_driver", fake)
    rt = SimpleNamespace(ordinal=0, device=0)
    assert capabilities.peer_copy_with(rt, 1) is True
    assert capabilities.peer_copy_with(rt, 2) is False  # one way only: not a peer pair
    assert capabilities.peer_copy_with(rt, 0) is False  # a device is not its own peer
    with pytest.raises(tc.CudaDeviceError, match="no CUDA device 3"):
        capabilities.peer_copy_with(rt, 3)
    for bad in (-1, 1.0, "1", None):
        with pytest.raises(tc.ValidationError, match="peer must be a session or a device"):
            capabilities.peer_copy_with(rt, bad)


# --- supports(PEER_COPY) agrees with the per-pair query (both ways) ----------------------

def _one_way(monkeypatch, access):
    fake = SimpleNamespace(device_count=lambda: 2, device=lambda n: n,
                           can_access_peer=lambda a, b: access.get((a, b), False))
    monkeypatch.setattr(capabilities, "_driver", fake)
    return SimpleNamespace(ordinal=0, device=0, info=None)


def test_peer_copy_without_peer_agrees_with_the_per_pair_answer(monkeypatch):
    """docs/multi-gpu.md: `supports(PEER_COPY)` says whether *some other device is a peer
    of this one*; `supports(PEER_COPY, peer=other)` answers for that pair, both
    directions. Device 0 may read device 1 but not the other way round: device 1 is no
    peer of device 0 per the pair query, so no other device is, and the pair-less query
    says False too."""
    rt = _one_way(monkeypatch, {(0, 1): True, (1, 0): False})
    pairs = [capabilities.peer_copy_with(rt, k) for k in (1,)]
    assert pairs == [False]
    assert capabilities.supports(rt, Capability.PEER_COPY) is any(pairs)


def test_peer_copy_without_peer_other_direction(monkeypatch):
    rt = _one_way(monkeypatch, {(0, 1): False, (1, 0): True})
    assert capabilities.peer_copy_with(rt, 1) is False
    assert capabilities.supports(rt, Capability.PEER_COPY) is False


# --- copy_to argument validation ----------------------------------------------------------

@pytest.mark.parametrize("route", [np.array(["auto", "host"]), np.array([]),
                                   ["auto"], 0, None, b"auto"])
def test_a_bad_route_is_a_validation_error(world, route):
    """copy_to: ``route`` unknown -> ValidationError (before anything is done)."""
    device, src, dst = world
    x = _put(src, np.ones(3, np.float32))
    with pytest.raises(tc.ValidationError, match="route must be one of"):
        transfer.copy_to(src, dst, x, route=route)
    assert not src.stream.queue and not dst.stream.queue


# --- copies of views with an offset, on every route ---------------------------------------

@pytest.mark.parametrize("peer_access", [True, False])
@pytest.mark.parametrize("policy", ["src", "dst", 5])
def test_contiguous_view_with_offset_is_copied_from_its_first_element(world, peer_access,
                                                                       policy):
    device, src, dst = world
    device.peer_access = peer_access
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = _put(src, a)
    y = transfer.copy_to(src, dst, x[2:])
    device.run([src.stream, dst.stream], policy)
    assert y.shape == (2, 6) and np.array_equal(_get(y), a[2:])


# --- resources of the host route when the pinned slots cannot be had ----------------------

def test_a_failed_pinned_allocation_leaks_no_events(world, monkeypatch):
    """Link._slots creates the 2 x SLOTS events before cuMemHostAlloc; when that fails the
    events are kept in no list that close() destroys (the next attempt makes new ones),
    so they leak for the process's life."""
    device, src, dst = world
    device.peer_access = False
    real = device.host_alloc_pinned
    calls = [0]

    def flaky(nbytes, portable=False):
        calls[0] += 1
        if calls[0] == 1:
            raise tc.OutOfMemoryError("cuMemHostAlloc failed", requested_bytes=nbytes)
        return real(nbytes, portable)

    monkeypatch.setattr(device, "host_alloc_pinned", flaky)
    x = _put(src, np.arange(4, dtype=np.float64))
    with pytest.raises(tc.OutOfMemoryError):
        transfer.copy_to(src, dst, x)
    y = transfer.copy_to(src, dst, x)
    device.run([src.stream, dst.stream])
    assert np.array_equal(_get(y), np.arange(4.0))
    for link in list(src.links.values()):
        link.close()
    leaked = [e for e in device.events if not e.destroyed]
    assert leaked == [], f"{len(leaked)} events never destroyed"
