"""Exports whose release is seen without a Python callback (``_dlpack_slots``), on the CPU.

Which exports take this path, what ends a record (the deleter's cleared word, a capsule
dropped unconsumed), what does not (a capsule someone still holds, a consumed capsule
whose deleter is still to come), slot reuse, blocks of their own, the look schedule, the
memory pressure hook, the check of the C library's clearing function, and use from
several threads. The consumer is ``dlpack.consume`` (our importer, a real caller of the
deleter through its C address) or numpy (a C consumer).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, Interop
from reference.dlpack_fakes import consume as _consume

from tenferro_cuda import _dlpack_export, _dlpack_slots, dlpack, memory
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.errors import OutOfMemoryError

pytestmark = pytest.mark.skipif(_dlpack_slots.CLEAR is None,
                                reason="the C library has no usable sigemptyset")
PTR = 0xABC0


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


def _in_slots(t) -> bool:
    return any(record[1] is t for record in list(_dlpack_slots._records))


def _in_callbacks(t) -> bool:
    return any(record[1] is t for record, _ in list(_dlpack_slots._waiting.values()))


# (stream argument, max_version, empty tensor, path)
PATHS = [
    ("no-sync", -1, (1, 0), False, "slots"),
    ("no-sync-legacy", -1, None, False, "slots"),
    ("own-stream", OUR_STREAM, (1, 0), False, "slots"),
    ("their-stream", PTR, (1, 0), False, "slots"),
    ("empty-versioned", -1, (1, 0), True, "slots"),
    ("empty-legacy", -1, None, True, "callback"),  # null data: nothing to see cleared
    ("legacy-default", 1, (1, 0), False, "callback"),  # the release orders our stream
    ("per-thread-default", 2, (1, 0), False, "callback"),
    ("none", None, None, False, "callback"),
]


@pytest.mark.parametrize("stream,version,empty,path", [p[1:] for p in PATHS],
                         ids=[p[0] for p in PATHS])
def test_which_exports_take_the_clearing_deleter(fx, stream, version, empty, path):
    t = fx.tensor(np.zeros((0, 3) if empty else (2, 3), np.float32))
    kwargs = {} if stream is None else {"stream": stream}
    capsule = t.__dlpack__(max_version=version, **kwargs)
    deleter = dlpack.parse_capsule(capsule)
    assert _in_slots(t) and _in_callbacks(t) is (path == "callback")
    info, owner = _consume(capsule)
    field = (dlpack.DLManagedTensorVersioned if info.versioned
             else dlpack.DLManagedTensor).from_address(info.managed).deleter
    address = ctypes.cast(field, ctypes.c_void_p).value
    assert (address == _dlpack_slots.CLEAR) is (path == "slots")
    assert live_exports(t) == 1
    del owner, deleter
    gc.collect()
    assert live_exports(t) == 0


def test_the_clearing_function_clears_one_word_only():
    clear = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_dlpack_slots.CLEAR)
    block = (ctypes.c_ubyte * 512)(*([0x5A] * 512))
    clear(ctypes.addressof(block) + 128)  # (ctypes lets go of the GIL for the call)
    assert bytes(block[128:136]) == bytes(8)
    assert set(block[:128]) == {0x5A} and set(block[256:]) == {0x5A}


def test_a_clearing_function_that_writes_too_far_is_refused(monkeypatch):
    """The import-time check: a ``sigemptyset`` that writes past 128 bytes, or leaves the
    word as it was, makes every export take the callback path."""
    def too_far(address):
        ctypes.memset(address, 0, 200)
        return 0

    def nothing(address):
        return 0

    for fn in (too_far, nothing):
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(fn)
        monkeypatch.setattr(ctypes, "CDLL", lambda name, proto=proto: SimpleNamespace(
            sigemptyset=proto))
        assert _dlpack_slots._find_clear() is None
    monkeypatch.setattr(ctypes, "CDLL", lambda name: SimpleNamespace())
    assert _dlpack_slots._find_clear() is None

    def no_library(name):  # CDLL(None) where the process has no C library to name
        raise TypeError("expected str, bytes or os.PathLike object, not NoneType")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert _dlpack_slots._find_clear() is None


def test_a_capsule_someone_holds_is_not_ended(fx):
    t = fx.tensor(np.arange(6.0))
    refs = sys.getrefcount(t)
    kept = [t.__dlpack__(stream=-1, max_version=(1, 0))]
    _dlpack_slots.look()
    assert live_exports(t) == 1 and sys.getrefcount(t) == refs + 1
    kept.clear()  # dropped unconsumed: nobody else holds it and it keeps its name
    assert live_exports(t) == 0 and sys.getrefcount(t) == refs


def test_a_consumed_capsule_waits_for_its_deleter(fx):
    t = fx.tensor(np.arange(6.0))
    capsule = t.__dlpack__(stream=-1, max_version=(1, 0))
    info, owner = _consume(capsule)
    del capsule  # renamed "used_...": only our record holds it now
    assert live_exports(t) == 1  # the deleter is still to come
    record = next(r for r in _dlpack_slots._records if r[1] is t)
    assert record[2] is None  # the look let go of the dead capsule
    del owner
    assert live_exports(t) == 0


def test_a_deleter_called_without_renaming_ends_the_export(fx):
    """A consumer that calls the deleter but keeps the capsule (a buggy one): the cleared
    word ends the record though the capsule is still alive."""
    t = fx.tensor(np.arange(6.0))
    capsule = t.__dlpack__(stream=-1, max_version=(1, 0))
    info = dlpack.parse_capsule(capsule)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_dlpack_slots.CLEAR)(info.managed)
    assert live_exports(t) == 0
    del capsule
    assert live_exports(t) == 0


def test_a_slot_is_reused_only_after_its_export_ended(fx, monkeypatch):
    # (about the shared slots: the kit, which gives a tensor exported again and again a
    # block of its own, is off here; test_dlpack_kit.py tests it)
    monkeypatch.setattr(_dlpack_export, "_remember", lambda *args: None)
    t = fx.tensor(np.arange(6.0))
    held = t.__dlpack__(stream=-1, max_version=(1, 0))
    second = dlpack.parse_capsule(held)
    owners = [_consume(t.__dlpack__(stream=-1, max_version=(1, 0))) for _ in range(40)]
    released = [info.managed for info, _ in owners]
    assert len(set(released) | {second.managed}) == 41  # nothing held shares a slot
    owners.clear()
    _dlpack_slots.look()
    free = [slot[2] for slot in _dlpack_slots._free]
    assert set(released) <= set(free) and second.managed not in free
    # first in, first out: the slots just given back come last
    assert free[-len(released):] == released
    kept = [t.__dlpack__(stream=-1, max_version=(1, 0)) for _ in range(len(free))]
    addresses = [dlpack.parse_capsule(c).managed for c in kept]
    assert addresses == free  # handed out in the order they were given back
    del held, kept
    assert live_exports(t) == 0


def test_a_second_deleter_call_clears_a_free_slot_not_a_live_export(fx):
    """A consumer that calls the deleter twice (a bug): between the two calls, other
    exports were made; the stale call lands on a slot that is free, not on theirs."""
    t = fx.tensor(np.arange(6.0))
    info, owner = _consume(t.__dlpack__(stream=-1, max_version=(1, 0)))
    del owner  # the first call
    _dlpack_slots.look()  # the slot is free again
    live = [t.__dlpack__(stream=-1, max_version=(1, 0)) for _ in range(20)]
    assert info.managed not in {dlpack.parse_capsule(c).managed for c in live}
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_dlpack_slots.CLEAR)(info.managed)  # again
    assert live_exports(t) == 20
    del live
    assert live_exports(t) == 0


def test_many_dimensions_get_a_block_of_their_own(fx):
    shape = (1, 2) * 7  # 14 dimensions: more than a 256-byte slot holds
    t = fx.tensor(np.arange(2 ** 7, dtype=np.int16).reshape(shape))
    capsule = t.__dlpack__(stream=-1, max_version=(1, 1))
    info = dlpack.parse_capsule(capsule)
    assert info.shape == shape and info.strides == t.strides
    record = next(r for r in _dlpack_slots._records if r[1] is t)
    assert record[0][5] is False and len(record[0][0]) >= _dlpack_slots.layout(14, True)[0].size
    del capsule
    assert live_exports(t) == 0
    assert info.managed not in {slot[2] for slot in _dlpack_slots._free}  # not shared


def test_ended_exports_go_without_a_query(fx):
    """Exports whose consumer let go end at a later export's look: however many cycles
    run, the records stay bounded and the tensors are let go."""
    _dlpack_slots.look()
    t = fx.tensor(np.arange(4.0))
    refs = sys.getrefcount(t)
    for _ in range(500):
        info, owner = _consume(t.__dlpack__(stream=-1, max_version=(1, 0)))
        del owner
    assert len(_dlpack_slots._records) <= _dlpack_slots.LOOK_AFTER
    assert sys.getrefcount(t) <= refs + _dlpack_slots.LOOK_AFTER
    assert live_exports(t) == 0 and sys.getrefcount(t) == refs


def test_the_look_schedule_grows_with_what_is_held(fx):
    _dlpack_slots.look()
    t = fx.tensor(np.arange(4.0))
    held = [t.__dlpack__(stream=-1, max_version=(1, 0)) for _ in range(100)]
    assert _dlpack_slots._look_at[0] >= len(_dlpack_slots._records) > 0
    assert _dlpack_slots._look_at[0] <= 2 * 100
    del held
    assert live_exports(t) == 0 and _dlpack_slots._look_at[0] == _dlpack_slots.LOOK_AFTER


def test_the_exports_are_a_memory_pressure_hook():
    assert _dlpack_slots.look in memory._pressure_hooks


def test_an_allocation_over_the_limit_runs_the_hooks_first(monkeypatch):
    pool = SimpleNamespace(domain=-5, ordinal=0, closed=False, limit=1 << 20,
                           live_bytes=1 << 20, stats=lambda: {},
                           driver_alloc=lambda n, a, op: 0x1000)
    arena = memory._Arena(pool, None)  # type: ignore[arg-type]
    ran = []

    def hook():
        ran.append(1)
        pool.live_bytes = 0  # an ended export gave its memory back

    monkeypatch.setattr(memory, "_pressure_hooks", [hook])
    assert arena.alloc(4096).ptr == 0x1000 and ran == [1]
    pool.live_bytes = 1 << 20
    monkeypatch.setattr(memory, "_pressure_hooks", [lambda: ran.append(2)])
    with pytest.raises(OutOfMemoryError, match="pool limit"):
        arena.alloc(4096)
    assert ran == [1, 2]


def test_a_driver_out_of_memory_runs_the_hooks_first(monkeypatch):
    from tenferro_cuda import _driver_memory

    calls = []

    def alloc(nbytes, handle, stream, op):
        calls.append(nbytes)
        raise OutOfMemoryError("no room", op=op, requested_bytes=nbytes)

    monkeypatch.setattr(_driver_memory, "mem_alloc_async", alloc)
    ran = []
    monkeypatch.setattr(memory, "_pressure_hooks", [lambda: ran.append(len(calls))])
    pool = object.__new__(memory.MemoryPool)
    pool.handle, pool.closed, pool._arenas = None, True, {}
    pool.limit = None
    arena = SimpleNamespace(cached_bytes=0, stream=None)
    with pytest.raises(OutOfMemoryError):
        pool.driver_alloc(4096, arena, "test")
    assert ran == [1] and len(calls) == 2  # after the first failure, then once more


def test_memory_a_hook_frees_is_allocated_on_the_retry(monkeypatch):
    """A hook that frees memory the arena does not cache (a large tensor goes straight
    back to the driver's pool): the allocation tries once more and gets it."""
    from tenferro_cuda import _driver_memory

    free = [0]

    def alloc(nbytes, handle, stream, op):
        if free[0] < nbytes:
            raise OutOfMemoryError("no room", op=op, requested_bytes=nbytes)
        free[0] -= nbytes
        return 0x9000

    monkeypatch.setattr(_driver_memory, "mem_alloc_async", alloc)
    monkeypatch.setattr(memory, "_pressure_hooks", [lambda: free.__setitem__(0, 1 << 30)])
    pool = object.__new__(memory.MemoryPool)
    pool.handle, pool.closed, pool._arenas, pool.limit = None, False, {}, None
    arena = SimpleNamespace(cached_bytes=0, stream=None)
    assert pool.driver_alloc(256 << 20, arena, "test") == 0x9000


def test_exports_and_releases_from_several_threads(fx):
    """Threads export, consume and release at once, and release on other threads: every
    record ends exactly once and no slot is handed out twice."""
    _dlpack_slots.look()
    t = fx.tensor(np.arange(8.0))
    refs = sys.getrefcount(t)
    handed: list = []
    errors: list = []

    def work():
        try:
            for _ in range(300):
                capsule = t.__dlpack__(stream=-1, max_version=(1, 0))
                info, owner = _consume(capsule)
                handed.append(owner)  # released by whichever thread pops it
                if len(handed) > 8:
                    handed.pop(0)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    handed.clear()
    assert live_exports(t) == 0 and sys.getrefcount(t) == refs
    addresses = [slot[2] for slot in _dlpack_slots._free]
    assert len(addresses) == len(set(addresses))
    assert len(addresses) == len(_dlpack_slots._chunks) * _dlpack_slots.CHUNK


class _AsHost:
    """Hands numpy our capsule with its device set to kDLCPU (numpy refuses CUDA)."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = self.tensor.__dlpack__(stream=-1, max_version=(1, 0))
        info = dlpack.parse_capsule(capsule)
        managed = dlpack.DLManagedTensorVersioned.from_address(info.managed)
        managed.dl_tensor.device.device_type = dlpack.DLDeviceType.kDLCPU
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_numpy_releases_through_the_clearing_deleter(fx):
    """numpy as the C consumer: its array's release calls ``sigemptyset`` on our block."""
    t = fx.tensor(np.arange(12.0).reshape(3, 4))
    got = np.from_dlpack(_AsHost(t.T))
    assert live_exports() >= 1 and any(r[1].base is t for r in _dlpack_slots._records)
    np.testing.assert_array_equal(got, np.arange(12.0).reshape(3, 4).T)
    del got
    gc.collect()
    _dlpack_slots.look()
    assert not any(r[1].base is t for r in _dlpack_slots._records)


def test_the_callback_lets_the_tensor_go_at_once(fx):
    """A default-stream consumer's release runs Python: the ordering, then the tensor is
    dropped right there, before any look."""
    import weakref

    t = fx.tensor(np.arange(6.0))
    alive = weakref.ref(t)
    capsule = t.__dlpack__(stream=1, max_version=(1, 0))
    info, owner = _consume(capsule)
    del capsule, t
    assert alive() is not None  # the record holds it while the consumer does
    orders = len(fx.orders)
    del owner  # the deleter: our stream waits for stream 1, the tensor goes
    assert fx.orders[orders:] == [(OUR_STREAM, 1)] and alive() is None


def test_a_full_collection_looks(fx):
    """After a sigemptyset release nothing runs; the next gc.collect() ends the record."""
    import weakref

    t = fx.tensor(np.arange(6.0))
    alive = weakref.ref(t)
    info, owner = _consume(t.__dlpack__(stream=-1, max_version=(1, 0)))
    del t, owner
    assert alive() is not None  # cleared, not yet seen
    gc.collect()
    assert alive() is None


EXIT_SCRIPT = r"""
import sys
sys.path[:0] = {paths!r}
import numpy as np
import pytest
from reference.dlpack_fakes import Interop
from tenferro_cuda import dlpack
from tenferro_cuda.ops import interop  # noqa: F401 - installs the export

fx = Interop(pytest.MonkeyPatch())
t = fx.tensor(np.arange(6.0))
held = [t.__dlpack__(stream=-1, max_version=(1, 0)),  # never consumed
        t.__dlpack__(stream=1, max_version=(1, 0))]
caps = [t.__dlpack__(stream=s, max_version=(1, 0)) for s in (-1, 1)]
owners = [dlpack.consume(c, dlpack.parse_capsule(c)) for c in caps]  # released at exit
print("ok")
"""


def test_exit_with_exports_held_and_released_late(tmp_path):
    """Capsules still held, and consumers that let go while the interpreter goes (their
    deleters run during finalization, one of them a callback): a clean exit."""
    import os
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    paths = [here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))]
    script = tmp_path / "exit_with_exports.py"
    script.write_text(EXIT_SCRIPT.format(paths=paths))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and proc.stderr == ""


def test_without_the_clearing_function_every_export_takes_the_callback(fx, monkeypatch):
    """Where the import-time check refused ``sigemptyset``: every stream= value gets the
    callback, which ends the export when the consumer lets go (the tensor at once); a
    capsule dropped unconsumed still ends at the next look."""
    import weakref

    monkeypatch.setattr(_dlpack_slots, "CLEAR", None)
    for stream in (-1, OUR_STREAM, PTR, 1):
        t = fx.tensor(np.arange(6.0))
        alive = weakref.ref(t)
        info, owner = _consume(t.__dlpack__(stream=stream, max_version=(1, 0)))
        assert _in_callbacks(t)
        del t
        assert alive() is not None
        del owner
        assert alive() is None  # the callback let it go
    t = fx.tensor(np.arange(6.0))
    capsule = t.__dlpack__(stream=-1)
    assert _in_callbacks(t) and live_exports(t) == 1
    del capsule
    assert live_exports(t) == 0 and not _in_callbacks(t)


def test_an_interrupted_look_loses_no_record(fx, monkeypatch):
    """An exception inside a look (Ctrl-C, say) leaves every record it had taken in
    place: no tensor a consumer still holds is let go."""
    t = fx.tensor(np.arange(6.0))
    held = [t.__dlpack__(stream=-1, max_version=(1, 0)) for _ in range(3)]
    calls = [0]
    real = _dlpack_slots._ended

    def interrupted(record):
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(record)

    monkeypatch.setattr(_dlpack_slots, "_ended", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _dlpack_slots.look()
    monkeypatch.setattr(_dlpack_slots, "_ended", real)
    assert live_exports(t) == 3
    del held
    assert live_exports(t) == 0


def test_a_failed_export_gives_its_slot_back(fx, monkeypatch):
    t = fx.tensor(np.arange(6.0))
    _dlpack_slots.look()
    free = len(_dlpack_slots._free)

    def no_capsule(*args):
        raise MemoryError

    monkeypatch.setattr(_dlpack_slots, "_capsule_new", no_capsule)
    with pytest.raises(MemoryError):
        t.__dlpack__(stream=-1, max_version=(1, 0))
    assert len(_dlpack_slots._free) == free and live_exports(t) == 0
