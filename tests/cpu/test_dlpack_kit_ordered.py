"""Repeated exports of one tensor to a consumer on a default stream (``_dlpack_export``'s
kit, ``_ordered``), on the CPU.

Such a consumer (PyTorch or CuPy on their default stream pass ``stream=1``) is ordered
twice: at export its stream waits for ours, and when it lets go our stream waits for
its stream, in the deleter, before the tensor goes. A kit must give the capsule, the
orderings and the release of the full path, and step aside when something it does not
check changed. The context is ``reference.dlpack_fakes.Interop``.
"""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from reference.dlpack_fakes import CONTEXT_ID, OUR_STREAM
from reference.dlpack_fakes import consume as _consume
from reference.dlpack_kit_states import STATES, TENSORS, counting
from reference.dlpack_kit_states import fields as _fields
from reference.dlpack_kit_states import kitted as _kitted
from reference.fake_ctx_stack import Ctx

from tenferro_cuda import (
    _dlpack_export,
    _dlpack_lease,
    _dlpack_slots,
    _driver,
    _driver_fast,
    dlpack,
)
from tenferro_cuda._dlpack_export import live_exports

V10, V11 = (1, 0), (1, 1)
# (the stream= a consumer passes, the stream handle it names)
DEFAULTS = {"none": (None, 1), "legacy": (1, 1), "per-thread": (2, 2)}


@pytest.fixture
def fx(monkeypatch):
    return counting(monkeypatch)


CASES = [pytest.param(make, version, stream, handle, id=f"{name}-{vid}-{sid}")
         for name, make in TENSORS.items()
         for version, vid in ((V10, "v1.0"), (V11, "v1.1"), (None, "legacy"))
         for sid, (stream, handle) in DEFAULTS.items()
         if not (name == "empty" and version is None)]


@pytest.mark.parametrize("make,max_version,stream,handle", CASES)
def test_a_kit_orders_a_default_stream_consumer_both_ways(fx, make, max_version, stream,
                                                          handle):
    t = make(fx)
    want = _fields(t.__dlpack__(stream=stream, max_version=max_version))
    assert want.deleter == _dlpack_slots.CALLBACK
    _kitted(t, stream, max_version)
    fx.orders.clear()
    checks = fx.alive_checks
    capsule = t.__dlpack__(stream=stream, max_version=max_version)
    assert fx.alive_checks == checks, "the kit was not used"
    assert _fields(capsule) == want
    assert fx.orders == [(handle, OUR_STREAM)]  # the consumer waits for our stream
    info, owner = _consume(capsule)
    assert live_exports(t) == 1
    del capsule
    del owner  # the deleter: our stream waits for the consumer's
    assert fx.orders == [(handle, OUR_STREAM), (OUR_STREAM, handle)]
    assert live_exports(t) == 0


def test_the_release_drops_the_tensor_in_the_deleter(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    alive = weakref.ref(t)
    info, owner = _consume(t.__dlpack__(stream=1, max_version=V10))
    del t
    gc.collect()
    assert alive() is not None  # its record holds it while the consumer does
    del owner
    assert alive() is None and fx.orders[-1] == (OUR_STREAM, 1)


@pytest.mark.parametrize("where", ["own block", "shared slot"])
def test_an_unconsumed_capsule_orders_nothing_when_it_dies(fx, where):
    """Nothing waits for its deleter afterwards, and nothing keeps the tensor."""
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    held = None
    if where == "shared slot":  # a consumer holds the tensor's own block meanwhile
        info, held = _consume(t.__dlpack__(stream=-1, max_version=V10))
    fx.orders.clear()
    waiting = set(_dlpack_slots._waiting)
    capsule = t.__dlpack__(stream=1, max_version=V10)
    block = dlpack.parse_capsule(capsule).managed
    assert block in _dlpack_slots._waiting
    del capsule
    gc.collect()
    assert live_exports(t) == (0 if held is None else 1)
    assert fx.orders == [(1, OUR_STREAM)]
    assert set(_dlpack_slots._waiting) == waiting
    alive = weakref.ref(t)
    del t, held
    gc.collect()
    assert alive() is None


def test_an_ordered_export_reuses_the_tensors_own_block(fx):
    """Like an export to our stream, an ordered one reuses the tensor's own block once
    its consumer let go, with the header its stream needs; each release orders once."""
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    blocks = set()
    for stream in (1, 1, -1, 2, OUR_STREAM, 1):
        fx.orders.clear()
        info, owner = _consume(t.__dlpack__(stream=stream, max_version=V10))
        blocks.add(info.managed)
        ordered = stream in (1, 2)
        assert info.deleter == (_dlpack_slots.CALLBACK if ordered else _dlpack_slots.CLEAR)
        del owner
        assert fx.orders == ([(stream, OUR_STREAM), (OUR_STREAM, stream)] if ordered
                             else [])
        assert live_exports(t) == 0
    assert len(blocks) == 1 and t._kit.holder[0][0][2] in blocks


def test_kits_for_both_deleters_share_one_tensor(fx):
    """A kit made by one kind of consumer serves the other: the header of each export
    carries the deleter its stream needs."""
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    held = []
    for stream in (1, -1, OUR_STREAM, 1, -1):
        checks = fx.alive_checks
        capsule = t.__dlpack__(stream=stream, max_version=V10)
        assert fx.alive_checks == checks
        info, owner = _consume(capsule)
        clear = stream != 1
        assert info.deleter == (_dlpack_slots.CLEAR if clear else _dlpack_slots.CALLBACK)
        held.append(owner)
    del held, owner
    gc.collect()
    assert live_exports(t) == 0



@pytest.mark.parametrize("change,error,text,asks", STATES.values(), ids=STATES.keys())
def test_an_ordered_kit_steps_aside_when_its_tensor_or_runtime_changed(
        fx, monkeypatch, change, error, text, asks):
    monkeypatch.setattr(_driver, "lost_contexts", set(_driver.lost_contexts))
    monkeypatch.setattr(_dlpack_export, "_lost", _driver.lost_contexts)
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    change(fx, t)
    fx.orders.clear()
    checks = fx.alive_checks
    if error is None:
        t.__dlpack__(stream=1, max_version=V10)
    else:
        with pytest.raises(error, match=text):
            t.__dlpack__(stream=1, max_version=V10)
        assert fx.orders == [], "an export that raised ordered a stream"
    assert fx.alive_checks == checks + asks, "the kit answered"


def test_pending_work_is_enqueued_before_an_ordered_kit_export(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    ran: list = []
    fx.orders.clear()
    fx.pending.append(lambda: ran.append(len(fx.orders)))
    fx.flush = lambda: [fx.pending.pop(0)() for _ in list(fx.pending)]
    t.__dlpack__(stream=1, max_version=V10)
    assert ran == [0] and fx.orders == [(1, OUR_STREAM)]  # flushed, then ordered


@pytest.mark.parametrize("where", ["own block", "shared slot"])
def test_a_failed_capsule_after_the_ordering_leaves_nothing_held(fx, monkeypatch, where):
    """The tensor's own block needs a new capsule when someone still holds its last one;
    a consumer that still holds the block sends the export to a shared slot."""
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    kept = t.__dlpack__(stream=1, max_version=V10)  # the own block's capsule
    info, held = _consume(kept)  # (held: the next export takes a shared slot)
    if where == "own block":
        held = None  # (let go: the block is free, its capsule still referenced here)
    waiting = dict(_dlpack_slots._waiting)

    def fail(*args):
        raise MemoryError("no capsule")

    with monkeypatch.context() as failing:
        failing.setattr(_dlpack_slots, "_capsule_new", fail)
        failing.setattr(_dlpack_lease, "_capsule_new", fail)
        with pytest.raises(MemoryError):
            t.__dlpack__(stream=1, max_version=V10)
    assert _dlpack_slots._waiting == waiting
    del held, kept
    gc.collect()
    assert live_exports(t) == 0
    # the block is still usable: the next export takes it and orders both ways
    fx.orders.clear()
    info, owner = _consume(t.__dlpack__(stream=1, max_version=V10))
    del owner
    assert fx.orders == [(1, OUR_STREAM), (OUR_STREAM, 1)] and live_exports(t) == 0


def test_threads_release_their_own_exports(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    fx.orders.clear()
    wrong: list = []

    def work():
        for _ in range(200):
            info, owner = _consume(t.__dlpack__(stream=1, max_version=V10))
            if info.shape != (6,) or info.deleter != _dlpack_slots.CALLBACK:
                wrong.append(info)
            del owner

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert fx.orders.count((1, OUR_STREAM)) == 800 == fx.orders.count((OUR_STREAM, 1))
    gc.collect()
    assert live_exports(t) == 0


@pytest.mark.parametrize("kit", [False, True], ids=["full-path", "kit"])
def test_a_deleter_called_while_the_consumers_exception_is_pending_still_releases(
        fx, capfd, kit):
    """A C consumer that failed and then lets go calls the deleter with its exception
    set. The release still runs -- both orderings, the tensor dropped at once, the export
    ended -- and the exception, which a ctypes callback cannot hand back, is printed.

    ``sorted`` is the C caller here: when a key function raises, it drops the keys made
    so far with that exception set, and the first key is the last reference to a capsule
    whose destructor is our deleter, standing in for the consumer's array."""
    t = fx.tensor(np.arange(6.0))
    if kit:
        _kitted(t, 1, V10)
    fx.orders.clear()
    capsule = t.__dlpack__(stream=1, max_version=V10)
    info, owner = _consume(capsule)
    del capsule
    alive = weakref.ref(t)
    del t
    gc.collect()
    assert alive() is not None  # the export holds it

    def key(i):
        if i == 0:  # our deleter runs as this capsule goes, with the address it is at
            stand_in = dlpack._capsule_new(info.managed, None, _dlpack_slots.CALLBACK)
            _dlpack_slots._waiting[id(stand_in)] = _dlpack_slots._waiting.pop(info.managed)
            return stand_in
        raise KeyError("the consumer's own error")

    with pytest.raises(SystemError):  # sorted's error, taken by the deleter
        sorted([0, 1], key=key)
    assert fx.orders == [(1, OUR_STREAM), (OUR_STREAM, 1)]
    assert alive() is None
    assert "KeyError" in capfd.readouterr().err
    del owner  # the consumer's own release finds nothing left to do
    assert fx.orders == [(1, OUR_STREAM), (OUR_STREAM, 1)]
    gc.collect()
    assert live_exports() == 0


FOREIGN = Ctx(0x7777)
OURS = Ctx(CONTEXT_ID)
STACKS = {"nothing current": [], "foreign only": [FOREIGN],
          "foreign over ours": [OURS, FOREIGN], "ours over foreign": [FOREIGN, OURS]}


@pytest.mark.parametrize("stack", STACKS.values(), ids=STACKS.keys())
@pytest.mark.parametrize("where", ["same thread", "release on another thread"])
def test_both_orderings_run_in_our_context_and_leave_the_stack_as_it_was(
        fx, monkeypatch, stack, where):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    fx.orders.clear()
    current: list = []

    def order(event, producer, waiter):
        current.append(fx.model.stack[-1] if fx.model.stack else None)
        fx._order(event, producer, waiter)

    monkeypatch.setattr(_driver_fast, "order", order)
    fx.model.stack[:] = stack
    checks = fx.alive_checks
    info, owner = _consume(t.__dlpack__(stream=1, max_version=V10))
    assert fx.alive_checks == checks, "the kit was not used"
    assert fx.model.stack == stack
    if where == "same thread":
        del owner
    else:
        seen: list = []
        held = [owner]

        def release():
            fx.model.stack[:] = list(stack)  # that thread's own stack
            held.clear()  # the deleter runs here
            seen.append(list(fx.model.stack))

        del owner
        thread = threading.Thread(target=release)
        thread.start()
        thread.join()
        assert seen == [stack]
    assert fx.model.stack == stack
    assert fx.orders == [(1, OUR_STREAM), (OUR_STREAM, 1)]
    assert current == [OURS, OURS]


def test_releases_and_looks_on_other_threads_race_the_owners_exports(fx):
    """The owner exports (ordered and not) while other threads let go of what it handed
    over and another only looks: each ordered export is released once, ordered once each
    way, and nothing stays held; the tensor goes with its last reference."""
    import queue
    import sys

    t = fx.tensor(np.arange(6.0))
    _kitted(t, 1, V10)
    fx.orders.clear()
    handed: queue.Queue = queue.Queue()
    stop = threading.Event()
    wrong: list = []

    def release():
        while True:
            item = handed.get()
            if item is None:
                return
            stream, (info, owner) = item
            want = _dlpack_slots.CALLBACK if stream == 1 else _dlpack_slots.CLEAR
            if info.deleter != want or info.shape != (6,):
                wrong.append(info)
            del owner

    def look():
        while not stop.is_set():
            _dlpack_slots.look()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=release) for _ in range(3)]
        looker = threading.Thread(target=look)
        for thread in (*workers, looker):
            thread.start()
        for i in range(600):
            stream = 1 if i % 3 else -1
            handed.put((stream, _consume(t.__dlpack__(stream=stream, max_version=V10))))
        for _ in workers:
            handed.put(None)
        for thread in workers:
            thread.join()
        stop.set()
        looker.join()
    finally:
        sys.setswitchinterval(switch)
    assert wrong == []
    assert fx.orders.count((1, OUR_STREAM)) == 400 == fx.orders.count((OUR_STREAM, 1))
    gc.collect()
    assert live_exports(t) == 0
    assert not any(record[1] is t for record, _ in _dlpack_slots._waiting.values())
    alive = weakref.ref(t)
    del t
    gc.collect()
    assert alive() is None
