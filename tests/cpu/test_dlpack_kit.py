"""Repeated exports of one tensor (``_dlpack_export``'s kit), on the CPU.

A kit must give the capsule the full path gives, field for field, and must step aside
whenever something it does not check could have changed: the runtime closed, a capture,
a lost context, pending work, a reclaimed tensor, another stream, another ``max_version``
(a list that changed included), ``dl_device`` or ``copy``. The context is
``reference.dlpack_fakes.Interop``.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, StreamObject, read
from reference.dlpack_fakes import consume as _consume
from reference.dlpack_kit_states import STATES, counting
from reference.dlpack_kit_states import TENSORS as SHARED_TENSORS
from reference.dlpack_kit_states import fields as _fields
from reference.dlpack_kit_states import kitted as _kitted

from tenferro_cuda import _dlpack_export, _driver, dlpack
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.dtypes import DType
from tenferro_cuda.ops import interop
from tenferro_cuda.tensor import Tensor

PTR = 0xABC0
V10, V11 = (1, 0), (1, 1)


@pytest.fixture
def fx(monkeypatch):
    return counting(monkeypatch)


TENSORS = {
    **SHARED_TENSORS,
    "bool": lambda fx: fx.tensor(np.array([True, False, True])),
}


# (a legacy capsule of no elements has a null data address: its deleter is the callback,
# and no kit is made for it)
CASES = [pytest.param(make, version, stream, id=f"{name}-{vid}-{sid}")
         for name, make in TENSORS.items()
         for version, vid in ((V10, "v1.0"), (V11, "v1.1"), (None, "legacy"))
         for stream, sid in ((-1, "no-sync"), (OUR_STREAM, "own-stream"))
         if not (name == "empty" and version is None)]


@pytest.mark.parametrize("make,max_version,stream", CASES)
def test_a_kit_gives_the_capsule_of_the_full_path(fx, make, max_version, stream):
    t = make(fx)
    want = _fields(t.__dlpack__(stream=stream, max_version=max_version))
    _kitted(t, stream, max_version)
    checks = fx.alive_checks
    capsule = t.__dlpack__(stream=stream, max_version=max_version)
    assert fx.alive_checks == checks, "the kit was not used"
    assert _fields(capsule) == want
    assert t.__dlpack_device__() == (dlpack.DLDeviceType.kDLCUDA, 0)
    assert fx.orders == []
    info, owner = _consume(capsule)
    if t.size:
        back = read(info.data, t.dtype, 1)
        assert back[0] == read(t.data_ptr(), t.dtype, 1)[0]
    assert live_exports(t) == 1
    del owner, capsule
    gc.collect()
    assert live_exports(t) == 0


def test_the_first_export_only_marks_a_tensor_and_a_fresh_one_has_no_kit(fx):
    t = fx.tensor(np.arange(4.0))
    assert t._kit is None and t[1:]._kit is None
    t.__dlpack__(stream=-1, max_version=V10)
    assert t._kit is _dlpack_export._ONCE
    assert t.__dlpack_device__() == (dlpack.DLDeviceType.kDLCUDA, 0)
    t.__dlpack__(stream=-1, max_version=V10)
    assert type(t._kit) is _dlpack_export._Kit


def test_a_tensor_made_without_the_field_still_exports(fx):
    made = fx.tensor(np.arange(4.0))
    t = object.__new__(Tensor)
    t.dtype, t.shape, t.strides, t.offset = made.dtype, made.shape, made.strides, 0
    t.buffer, t.host = made.buffer, None
    assert t.__dlpack_device__() == (dlpack.DLDeviceType.kDLCUDA, 0)
    assert _fields(t.__dlpack__(stream=-1, max_version=V10)).shape == (4,)


def test_a_legacy_export_of_no_elements_makes_no_kit(fx):
    t = fx.tensor(np.zeros((0, 3), np.float32))
    for _ in range(3):
        assert _fields(t.__dlpack__(stream=-1)).data == 0
    assert t._kit is None



@pytest.mark.parametrize("change,error,text,asks", STATES.values(), ids=STATES.keys())
def test_a_kit_steps_aside_when_its_tensor_or_runtime_changed(fx, monkeypatch, change, error,
                                                             text, asks):
    monkeypatch.setattr(_driver, "lost_contexts", set(_driver.lost_contexts))
    monkeypatch.setattr(_dlpack_export, "_lost", _driver.lost_contexts)
    t = fx.tensor(np.arange(6.0))
    _kitted(t, OUR_STREAM, V10)
    change(fx, t)
    checks = fx.alive_checks
    if error is None:
        t.__dlpack__(stream=OUR_STREAM, max_version=V10)
    else:
        with pytest.raises(error, match=text):
            t.__dlpack__(stream=OUR_STREAM, max_version=V10)
    assert fx.alive_checks == checks + asks, "the kit answered"


def test_pending_work_is_enqueued_before_a_kit_export(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    ran: list = []
    fx.pending.append(lambda: ran.append("flushed"))
    fx.flush = lambda: [fx.pending.pop(0)() for _ in list(fx.pending)]
    t.__dlpack__(stream=-1, max_version=V10)
    assert ran == ["flushed"] and fx.pending == []


@pytest.mark.parametrize("stream,waiter", [(PTR, PTR), (None, 1), (2, 2),
                                           (StreamObject(PTR), PTR)],
                         ids=["pointer", "none", "per-thread", "protocol"])
def test_another_consumer_stream_is_still_ordered(fx, stream, waiter):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, OUR_STREAM, V10)
    capsule = t.__dlpack__(stream=stream, max_version=V10)
    assert fx.orders == [(waiter, OUR_STREAM)]
    info, owner = _consume(capsule)
    del owner, capsule
    gc.collect()
    assert live_exports(t) == 0


def test_an_equal_max_version_of_another_object_takes_the_kit(fx):
    """CuPy makes a new ``(1, 0)`` for each call: an equal tuple of two ints is enough."""
    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    checks = fx.alive_checks
    for _ in range(3):
        other = tuple([1, 0])
        assert other is not V10
        assert _fields(t.__dlpack__(stream=-1, max_version=other)).versioned
    assert fx.alive_checks == checks and t._kit.asked is V10
    assert not _fields(t.__dlpack__(stream=-1, max_version=None)).versioned
    assert t._kit.asked is None and fx.alive_checks == checks + 1


class _Odd:
    """An element whose comparison raises."""

    def __eq__(self, other):
        raise RuntimeError("compared")

    __hash__ = object.__hash__


# (max_version, what the full path answers: the error, or True for a versioned capsule)
ODD_VERSIONS = {
    "float": ((1.0, 0), BufferError),
    "bool": ((True, 0), True),
    "numpy ints": ((np.int64(1), np.int64(0)), True),
    "one element": ((1,), BufferError),
    "three elements": ((1, 0, 0), BufferError),
    "raising element": ((_Odd(), 0), BufferError),
    "tuple subclass": (type("T", (tuple,), {})((1, 0)), True),
}


@pytest.mark.parametrize("asked,answer", ODD_VERSIONS.values(), ids=ODD_VERSIONS.keys())
def test_an_odd_max_version_after_a_kit_is_answered_as_the_full_path_answers(fx, asked,
                                                                           answer):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    if answer is True:
        assert _fields(t.__dlpack__(stream=-1, max_version=asked)).versioned
    else:
        with pytest.raises(answer, match="max_version"):
            t.__dlpack__(stream=-1, max_version=asked)
    assert t._kit.asked is V10 or t._kit.asked is asked


def test_a_list_max_version_is_read_each_time(fx):
    t = fx.tensor(np.arange(6.0))
    asked = [1, 0]
    for _ in range(3):
        assert _fields(t.__dlpack__(stream=-1, max_version=asked)).versioned
    assert t._kit is None  # (a list is never remembered)
    asked[0] = 0  # the same list now asks for a legacy capsule
    assert not _fields(t.__dlpack__(stream=-1, max_version=asked)).versioned


def test_dl_device_and_copy_after_a_kit(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    with pytest.raises(BufferError, match="CUDA device 0"):
        t.__dlpack__(stream=-1, max_version=V10, dl_device=(2, 1))
    copied = _fields(t.__dlpack__(stream=-1, max_version=V10, copy=True))
    assert copied.flags == dlpack.FLAG_IS_COPIED and copied.data != t.data_ptr()
    same = _fields(t.__dlpack__(stream=-1, max_version=V10, copy=False, dl_device=(2, 0)))
    assert same.flags == 0 and same.data == t.data_ptr()


def test_a_read_only_tensor_keeps_its_flag_and_its_refusal(fx):
    base = np.arange(6.0)
    fx.keep.append(base)
    owner = dlpack.ForeignOwner(0, None, readonly=True)
    t = interop._adopt(fx, base.ctypes.data, DType.FLOAT64, (6,), None, owner)
    _kitted(t, -1, V10)
    info = _fields(t.__dlpack__(stream=-1, max_version=V10))
    assert info.readonly and info.flags == dlpack.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(stream=-1)


def test_an_unconsumed_kit_capsule_ends_when_it_dies(fx):
    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    capsule = t.__dlpack__(stream=-1, max_version=V10)
    assert live_exports(t) == 1
    del capsule
    gc.collect()
    assert live_exports(t) == 0


def test_threads_each_get_the_capsule_they_asked_for(fx):
    t = fx.tensor(np.arange(6.0))
    asks = [V10, None, V11, tuple([1, 0])]
    wrong: list = []

    def work(asked):
        for _ in range(300):
            info = _fields(t.__dlpack__(stream=-1, max_version=asked))
            if info.versioned != (asked is not None):
                wrong.append(asked)

    threads = [threading.Thread(target=work, args=(a,)) for a in asks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    gc.collect()
    assert live_exports(t) == 0


def test_a_copy_of_a_tensor_has_no_kit_and_counts_its_own_exports(fx):
    import copy

    t = fx.tensor(np.arange(6.0))
    _kitted(t, -1, V10)
    c = copy.copy(t)
    assert c._kit is None and c.buffer is t.buffer and c.shape == t.shape
    held = []
    for _ in range(3):
        info, owner = _consume(c.__dlpack__(stream=-1, max_version=V10))
        held.append(owner)
    assert type(c._kit) is _dlpack_export._Kit and c._kit is not t._kit
    assert live_exports(c) == 3 and live_exports(t) == 0
    v = t[1:]
    assert copy.copy(v)._kit is None and copy.copy(v).offset == 1
    del held, owner
    gc.collect()
    assert live_exports(c) == 0
