"""A tensor's own block, reused in place (``_dlpack_lease``), on the CPU.

The block may be reused only once its consumer let go, and the capsule only once nobody
holds it; whatever a consumer did to the capsule (renamed it, set its context or
destructor) is undone; the tensor stays alive while the block is held; looks, counts,
full collections and other threads see the resident record as they see any other. The
context is ``reference.dlpack_fakes.Interop``.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, Interop, read
from reference.dlpack_fakes import consume as _consume

from tenferro_cuda import _dlpack_export, _dlpack_lease, _dlpack_slots, dlpack
from tenferro_cuda._dlpack_export import exports_over, live_exports

V10 = (1, 0)
_set_context = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetContext", ctypes.pythonapi))
_get_context = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(
    ("PyCapsule_GetContext", ctypes.pythonapi))


@pytest.fixture
def fx(monkeypatch):
    _dlpack_slots.look()
    return Interop(monkeypatch)


def _leased(t, max_version=V10):
    """Export until the kit holds a block of the tensor's own, the capsules dropped
    unconsumed and looked at (so the block is free); returns the block's address."""
    for _ in range(3):
        t.__dlpack__(stream=-1, max_version=max_version)
    _dlpack_slots.look()
    holder = t._kit.holder
    assert len(holder) == 1 and id(holder[0]) not in _dlpack_slots.resident
    return holder[0][0][2]


def test_the_block_is_reused_only_after_its_consumer_let_go(fx):
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    first, held = _consume(t.__dlpack__(stream=-1, max_version=V10))
    assert first.managed == own
    second, held2 = _consume(t.__dlpack__(stream=-1, max_version=V10))
    assert second.managed != own  # (a shared slot while the first is held)
    assert read(first.data, t.dtype, 6).tolist() == list(range(6))
    assert live_exports(t) == 2 and exports_over(t.buffer) == 2
    del held
    assert _fields_of(t.__dlpack__(stream=-1, max_version=V10)).managed == own
    del held2
    gc.collect()
    assert live_exports(t) == 0


def _fields_of(capsule):
    return dlpack.parse_capsule(capsule)


def test_a_capsule_nobody_holds_is_reused_and_what_the_consumer_did_is_undone(fx):
    t = fx.tensor(np.arange(6.0))
    _leased(t)
    capsule = t.__dlpack__(stream=-1, max_version=V10)
    info, owner = _consume(capsule)  # renamed used_dltensor_versioned
    assert _set_context(capsule, 0x1234) == 0
    del owner  # the deleter ran
    address = id(capsule)
    del capsule
    again = t.__dlpack__(stream=-1, max_version=V10)
    if _dlpack_lease.FIELDS is not None:
        assert id(again) == address  # the same object, its words written back
    assert dlpack._capsule_get_name(again) == b"dltensor_versioned"
    assert _get_context(again) is None
    assert _fields_of(again).managed == info.managed
    del again
    gc.collect()
    assert live_exports(t) == 0


def test_a_capsule_the_consumer_still_holds_is_left_alone(fx):
    t = fx.tensor(np.arange(6.0))
    _leased(t)
    kept = t.__dlpack__(stream=-1, max_version=V10)
    info, owner = _consume(kept)
    del owner  # the memory is let go; the capsule object is still held
    fresh = t.__dlpack__(stream=-1, max_version=V10)
    assert fresh is not kept and _fields_of(fresh).managed == info.managed
    assert dlpack._capsule_get_name(kept) == b"used_dltensor_versioned"
    del fresh, kept
    gc.collect()
    assert live_exports(t) == 0


def test_without_the_capsule_probe_each_reuse_makes_a_capsule(fx, monkeypatch):
    monkeypatch.setattr(_dlpack_lease, "FIELDS", None)
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    seen = set()
    for _ in range(3):
        capsule = t.__dlpack__(stream=-1, max_version=V10)
        seen.add(id(capsule))
        info, owner = _consume(capsule)
        assert info.managed == own
        del owner
    assert t._kit.holder[0][5] is None
    gc.collect()
    assert live_exports(t) == 0


def test_versions_take_turns_in_one_block(fx):
    t = fx.tensor(np.arange(6.0).reshape(2, 3))
    own = _leased(t)
    for version in (None, V10, None):
        t.__dlpack__(stream=-1, max_version=version)  # (the full path points the kit)
        _dlpack_slots.look()
        info = _fields_of(t.__dlpack__(stream=-1, max_version=version))
        assert info.versioned == (version is not None) and info.shape == (2, 3)
        assert info.managed == own and info.strides == (3, 1)
        _dlpack_slots.look()
    gc.collect()
    assert live_exports(t) == 0


def test_the_tensor_lives_while_its_block_is_held_and_goes_after(fx):
    t = fx.tensor(np.arange(6.0))
    _leased(t)
    info, owner = _consume(t.__dlpack__(stream=-1, max_version=V10))
    gone = weakref.ref(t)
    del t
    gc.collect()
    assert gone() is not None  # the consumer holds the block
    assert read(info.data, dlpack.from_dl_dtype(2, 64, 1), 6).tolist() == list(range(6))
    del owner
    _dlpack_slots.look()
    gc.collect()
    assert gone() is None


def test_a_full_collection_and_an_unconsumed_death_end_the_resident_record(fx):
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    record = t._kit.holder[0]
    gc.collect()
    assert live_exports(t) == 0 and id(record) not in _dlpack_slots.resident
    capsule = t.__dlpack__(stream=-1, max_version=V10)  # registered again
    assert id(record) in _dlpack_slots.resident and live_exports(t) == 1
    del capsule  # never consumed: its word stays; a look sees the capsule died
    gc.collect()
    assert id(record) not in _dlpack_slots.resident
    assert _fields_of(t.__dlpack__(stream=-1, max_version=V10)).managed == own


def test_many_kits_start_a_look_of_their_own(fx):
    tensors = [fx.tensor(np.arange(4.0) + k) for k in range(3 * _dlpack_slots.LOOK_AFTER)]
    for t in tensors:
        _leased(t)
    for t in tensors:  # each record registered again, none made
        t.__dlpack__(stream=-1, max_version=V10)
    # nothing but kit exports happened: their resident records were still looked at
    assert len(_dlpack_slots.resident) <= _dlpack_slots.look_after()


def test_threads_and_looks_never_share_a_held_block(fx):
    """Exports of one tensor on several threads, consumers releasing on other threads,
    and a thread that only looks: no block is held by two consumers at once, and
    everything ends."""
    t = fx.tensor(np.arange(8.0))
    _leased(t)
    refs = sys.getrefcount(t)
    held: dict = {}
    lock = threading.Lock()
    errors: list = []
    stop = threading.Event()

    def work():
        try:
            for _ in range(400):
                info, owner = _consume(t.__dlpack__(stream=OUR_STREAM, max_version=V10))
                with lock:
                    if info.managed in held:
                        errors.append(f"block {info.managed:#x} handed out twice")
                    held[info.managed] = owner
                    if len(held) > 6:
                        held.pop(next(iter(held)))  # released here, on this thread
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def looker():
        while not stop.is_set():
            _dlpack_slots.look()

    threads = [threading.Thread(target=work) for _ in range(4)]
    watcher = threading.Thread(target=looker)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    watcher.join()
    assert errors == []
    held.clear()
    gc.collect()
    assert live_exports(t) == 0 and id(t._kit.holder[0]) not in _dlpack_slots.resident
    assert sys.getrefcount(t) == refs
    assert len(t._kit.holder) >= 1


def test_the_export_checks_still_run_before_the_block_is_touched(fx):
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    info, owner = _consume(t.__dlpack__(stream=-1, max_version=V10))
    del owner
    t.buffer.release()
    with pytest.raises(Exception, match="reclaimed"):
        t.__dlpack__(stream=-1, max_version=V10)
    assert info.managed == own and _dlpack_export._lost is not None


def test_a_failed_capsule_leaves_the_block_free(fx, monkeypatch):
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    kept = t.__dlpack__(stream=-1, max_version=V10)  # (so the next reuse needs a capsule)
    info, owner = _consume(kept)
    del owner

    def no_capsule(*args):
        raise MemoryError

    with monkeypatch.context() as failing:
        failing.setattr(_dlpack_lease, "_capsule_new", no_capsule)
        with pytest.raises(MemoryError):
            t.__dlpack__(stream=-1, max_version=V10)
    assert _fields_of(t.__dlpack__(stream=-1, max_version=V10)).managed == own
    del kept


class _AsHost:
    """Hands numpy (a C consumer) our capsule with its device set to kDLCPU, and notes
    the block of each capsule."""

    def __init__(self, tensor):
        self.tensor, self.blocks = tensor, []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = self.tensor.__dlpack__(stream=-1, max_version=V10)
        info = dlpack.parse_capsule(capsule)
        managed = dlpack.DLManagedTensorVersioned.from_address(info.managed)
        managed.dl_tensor.device.device_type = dlpack.DLDeviceType.kDLCPU
        self.blocks.append(info.managed)
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_numpy_as_the_consumer_of_a_tensor_exported_again_and_again(fx):
    """numpy renames the capsule and calls ``sigemptyset`` on the block when its array
    goes: the block and the capsule come back, and arrays held at once never share one."""
    t = fx.tensor(np.arange(12.0).reshape(3, 4))
    v = t.T
    want = np.arange(12.0).reshape(3, 4).T
    host = _AsHost(v)
    held = [np.from_dlpack(host) for _ in range(3)]  # (the third takes the kit's block)
    own = v._kit.holder[0][0][2]
    assert len(set(host.blocks)) == 3 and host.blocks[2] == own
    for got in held:
        np.testing.assert_array_equal(got, want)
    del got
    held.clear()  # numpy lets go: sigemptyset on each block
    for _ in range(5):
        got = np.from_dlpack(host)
        np.testing.assert_array_equal(got, want)
        assert host.blocks[-1] == own  # reused in place
        del got
    gc.collect()
    assert live_exports(v) == 0 and id(v._kit.holder[0]) not in _dlpack_slots.resident


def test_a_record_whose_token_is_taken_is_left_alone(fx):
    """The token is what keeps a look and an export on two threads off one record: with
    it taken (as by the other side, mid-change), a look leaves the record as it is and an
    export takes a shared slot; given back, both go on."""
    t = fx.tensor(np.arange(6.0))
    own = _leased(t)
    info, owner = _consume(t.__dlpack__(stream=-1, max_version=V10))
    record = t._kit.holder[0]
    del owner  # released: a look would end the record
    record[4].pop()  # taken
    _dlpack_slots.look()
    assert id(record) in _dlpack_slots.resident and record[1] is t
    other = _fields_of(t.__dlpack__(stream=-1, max_version=V10))
    assert other.managed != own
    record[4].append(True)  # given back
    _dlpack_slots.look()
    assert id(record) not in _dlpack_slots.resident and record[1] is None
    assert _fields_of(t.__dlpack__(stream=-1, max_version=V10)).managed == own
