"""CUDA Array Interface export/parse, keep-alive owners and the deferred-release queue.

"Device" tensors are DeviceBuffers over numpy host memory (see test_dlpack_capsule.py), so
an exported interface dict can be read back by numpy's ``__array_interface__`` reader,
which follows the same fields (data, shape, strides in bytes, typestr).
"""

from __future__ import annotations

import gc
import threading
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda import (
    _dlpack_export,  # noqa: F401 - installs Tensor.__dlpack__
    _driver,
    _driver_fast,
    _foreign,
    cai,
    dlpack,
)
from tenferro_cuda.dtypes import ALL_DTYPES, DType, as_dtype
from tenferro_cuda.errors import (
    RuntimeStateError,
    UnsupportedDTypeError,
    UnsupportedError,
    ValidationError,
)
from tenferro_cuda.memory import _Arena
from tenferro_cuda.tensor import Tensor

FAKE_STREAM = 0x7A11


def fake_arena(domain: int) -> _Arena:
    """An arena of a pool that exists only as its identity (domain, device 0)."""
    pool = SimpleNamespace(domain=domain, ordinal=0, closed=False, limit=None)
    return _Arena(pool, _driver.stream_handle(FAKE_STREAM))  # type: ignore[arg-type]


def fake_device(arr: np.ndarray) -> Tensor:
    arr = np.ascontiguousarray(arr)
    buf = fake_arena(-9).adopt(arr.ctypes.data, arr.nbytes, arr)
    return Tensor._make(as_dtype(arr.dtype), tuple(arr.shape), buffer=buf)


class _ArrayInterface:
    def __init__(self, iface):
        self.__array_interface__ = {k: v for k, v in iface.items() if k != "stream"}


def read_back(iface: dict) -> np.ndarray:
    """numpy's reading of an interface dict whose pointer is host memory."""
    return np.array(_ArrayInterface(iface), copy=True)


VIEWS = [
    ("contiguous", lambda t: t, lambda a: a, True),
    ("transposed", lambda t: t.T, lambda a: a.T, False),
    ("step-slice", lambda t: t[::2, 1::2], lambda a: a[::2, 1::2], False),
    ("negative", lambda t: t[::-1, 1:], lambda a: a[::-1, 1:], False),
    ("row-offset", lambda t: t[2], lambda a: a[2], True),
    ("rank0", lambda t: t[1, 1], lambda a: a[1, 1], True),
    ("empty", lambda t: t[:0], lambda a: a[:0], True),
]
CAI_DTYPES = [d for d in ALL_DTYPES if d is not DType.BFLOAT16]


def sample(dtype: DType) -> np.ndarray:
    values = np.arange(12) - 4
    if dtype.is_bool:
        return (values % 3 == 0).reshape(3, 4)
    if dtype.is_complex:
        return (values + 2j * values).astype(dtype.numpy).reshape(3, 4)
    if not dtype.is_signed_integer and not dtype.is_inexact:
        values = values + 4
    return values.astype(dtype.numpy).reshape(3, 4)


@pytest.mark.parametrize("name,ours,theirs,compact", VIEWS, ids=[v[0] for v in VIEWS])
def test_export_interface_views(name, ours, theirs, compact):
    base = sample(DType.FLOAT64)
    view = ours(fake_device(base))
    iface = view.__cuda_array_interface__
    expected = theirs(base)
    assert iface["version"] == 3 and iface["stream"] == FAKE_STREAM
    assert iface["shape"] == expected.shape and iface["typestr"] == "<f8"
    assert iface["data"] == ((view.data_ptr() if expected.size else 0), False)
    assert (iface["strides"] is None) is compact
    if not compact:
        assert iface["strides"] == expected.strides
    np.testing.assert_array_equal(read_back(iface), expected)


@pytest.mark.parametrize("dtype", CAI_DTYPES, ids=[d.value for d in CAI_DTYPES])
def test_export_interface_dtypes(dtype):
    base = sample(dtype)
    iface = fake_device(base).T.__cuda_array_interface__
    got = read_back(iface)
    assert got.dtype == base.dtype
    np.testing.assert_array_equal(got, base.T)


def test_export_interface_refusals():
    bf16 = fake_device(np.zeros((2, 2), DType.BFLOAT16.numpy))
    with pytest.raises(UnsupportedDTypeError, match="DLPack"):
        bf16.__cuda_array_interface__  # noqa: B018
    host = Tensor.from_numpy(np.zeros(3))
    assert not hasattr(host, "__cuda_array_interface__")
    gone = fake_device(np.zeros(3))
    gone.buffer.release()
    with pytest.raises(RuntimeStateError, match="reclaimed"):
        gone.__cuda_array_interface__  # noqa: B018


@pytest.mark.parametrize("name,ours,theirs,compact", VIEWS, ids=[v[0] for v in VIEWS])
def test_parse_our_own_interface(name, ours, theirs, compact):
    view = ours(fake_device(sample(DType.COMPLEX64)))
    info = cai.parse_interface(view.__cuda_array_interface__)
    assert info.shape == view.shape and info.dtype is DType.COMPLEX64
    assert info.stream == FAKE_STREAM and info.readonly is False
    if view.size:
        assert info.data == view.data_ptr()
    assert info.strides == (None if compact else view.strides)


GOOD = dict(shape=(2, 3), typestr="<f4", data=(4096, False), version=3)
BAD = [
    ("no-version", {"version": None}, ValidationError, "'version'"),
    ("no-shape", {"shape": None}, ValidationError, "'shape'"),
    ("no-data", {"data": None}, ValidationError, "'data'"),
    ("bad-version", dict(version="3"), ValidationError, "version"),
    ("bad-shape", dict(shape=(2, "3")), ValidationError, "shape"),
    ("negative-shape", dict(shape=(2, -1)), ValidationError, "negative"),
    ("bad-data", dict(data=4096), ValidationError, "data"),
    ("negative-pointer", dict(data=(-8, False)), ValidationError, "data"),
    ("bad-typestr", dict(typestr="float32"), ValidationError, "typestr"),
    ("float128", dict(typestr="<f16"), UnsupportedDTypeError, "typestr"),
    ("big-endian-uint16", dict(typestr=">u2"), UnsupportedDTypeError, "big-endian"),
    ("big-endian", dict(typestr=">f4"), UnsupportedDTypeError, "big-endian"),
    ("mask", dict(mask=object()), UnsupportedError, "mask"),
    ("odd-strides", dict(strides=(12, 6)), ValidationError, "multiples of the item size"),
    ("strides-rank", dict(strides=(4,)), ValidationError, "strides"),
    ("bad-stream", dict(stream="s"), ValidationError, "stream"),
    ("negative-stream", dict(stream=-1), ValidationError, "stream"),
]


@pytest.mark.parametrize("change,error,text", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_parse_interface_rejects(change, error, text):
    iface = dict(GOOD)
    for key, value in change.items():
        if value is None:
            iface.pop(key)
        else:
            iface[key] = value
    with pytest.raises(error, match=text):
        cai.parse_interface(iface)


ACCEPTED = [
    ("v3-compact", {}, None, None),
    ("v3-byte-strides", dict(strides=(-4, 8)), (-1, 2), None),
    ("v3-stream", dict(stream=77), None, 77),
    ("v3-stream-none", dict(stream=None), None, None),
    ("v3-stream-zero", dict(stream=0), None, 1),
    ("v2-stream-ignored", dict(version=2, stream=77), None, None),
    ("v0", dict(version=0), None, None),
    ("readonly", dict(data=(4096, True)), None, None),
]


@pytest.mark.parametrize("change,strides,stream", [a[1:] for a in ACCEPTED],
                         ids=[a[0] for a in ACCEPTED])
def test_parse_interface_accepts(change, strides, stream):
    info = cai.parse_interface({**GOOD, **change})
    assert (info.data, info.shape, info.dtype) == (4096, (2, 3), DType.FLOAT32)
    assert info.strides == strides and info.stream == stream
    assert info.readonly is change.get("data", (0, False))[1]


def test_interface_of():
    iface = dict(GOOD)
    assert cai.interface_of(iface) is iface
    with pytest.raises(ValidationError, match="upload_host_tensor"):
        cai.interface_of(np.zeros(3))

    class Broken:
        __cuda_array_interface__ = [1, 2]

    with pytest.raises(ValidationError, match="must be a dict"):
        cai.interface_of(Broken())


# --- owners and the deferred release ------------------------------------------------------

class Producer:
    pass


def test_held_producer_released_at_once_without_stream():
    producer = Producer()
    alive = weakref.ref(producer)
    owner = cai.HeldProducer(producer)
    del producer
    gc.collect()
    assert alive() is not None
    del owner
    gc.collect()
    assert alive() is None


STREAMS = [(None, 1), (1, 1), (2, 2), (0xDEAD00, 0xDEAD00), (-1, None)]


@pytest.mark.parametrize("value,handle", STREAMS, ids=[repr(v) for v, _ in STREAMS])
def test_consumer_stream(value, handle):
    got = _foreign.consumer_stream(value, "t")
    assert (None if got is None else int(got)) == handle


@pytest.mark.parametrize("value,error", [(1.0, TypeError), ("1", TypeError),
                                         (True, TypeError), (-2, BufferError),
                                         (0, BufferError)],
                         ids=["float", "str", "bool", "minus-two", "zero"])
def test_consumer_stream_rejects(value, error):
    with pytest.raises(error, match="stream"):
        _foreign.consumer_stream(value, "t")


def test_release_waits_for_busy_stream(monkeypatch):
    idle = {"value": False}
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: idle["value"])
    released = []
    stream = _driver.stream_handle(FAKE_STREAM)
    _foreign.release_when_idle(stream, released.append, 1)
    assert released == [] and _foreign.parked_count() == 1
    _foreign.drain()
    assert released == [] and _foreign.parked_count() == 1
    idle["value"] = True
    _foreign.drain()
    assert released == [1] and _foreign.parked_count() == 0
    _foreign.release_when_idle(stream, released.append, 2)
    assert released == [1, 2] and _foreign.parked_count() == 0


def test_a_held_producer_goes_only_when_the_stream_is_idle(monkeypatch):
    """A CAI producer's release has no function of its own: the producer object is the
    release's argument, kept while the stream is busy (parked) and let go by the drain
    that finds it idle."""

    class Producer:
        pass

    idle = {"value": False}
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: idle["value"])
    producer = Producer()
    gone = weakref.ref(producer)
    held = cai.HeldProducer(producer, _driver.stream_handle(FAKE_STREAM))
    del producer
    held.__del__()  # (what dropping the adopted tensor's last reference runs)
    gc.collect()
    assert gone() is not None and _foreign.parked_count() == 1
    idle["value"] = True
    _foreign.drain()
    gc.collect()
    assert gone() is None and _foreign.parked_count() == 0
    held.__del__()  # a second call lets nothing go twice
    assert _foreign.parked_count() == 0


@pytest.mark.parametrize("code", [900, 901, 906, 908])
def test_a_query_refused_by_a_capture_keeps_the_release_waiting(monkeypatch, code):
    """Another library captures a graph in global mode: CUDA refuses the query (a
    CUDA_ERROR_STREAM_CAPTURE_* status). The stream may be busy, so the release waits
    for a later drain instead of running at once (the memory is never let go early)."""
    refused = {"value": True}

    def query(stream):
        if refused["value"]:
            raise _driver.error_for("cuStreamQuery", code)
        return True

    monkeypatch.setattr(_driver_fast, "stream_query", query)
    released = []
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append, 1)
    assert released == [] and _foreign.parked_count() == 1
    refused["value"] = False  # the capture ended
    _foreign.drain()
    assert released == [1] and _foreign.parked_count() == 0


def test_foreign_owner_waits_for_its_stream(monkeypatch):
    """A ForeignOwner's deleter runs only once our stream is idle, and exactly once."""
    idle = {"value": False}
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: idle["value"])
    calls = []

    @dlpack.DELETER
    def deleter(address):
        calls.append(address)

    owner = dlpack.ForeignOwner(1234, deleter, _driver.stream_handle(FAKE_STREAM))
    del owner
    gc.collect()
    assert calls == []
    idle["value"] = True
    _foreign.drain()
    assert calls == [1234]
    _foreign.drain()
    assert calls == [1234]


def test_release_failure_is_printed_not_raised(capfd):
    def fails(arg):
        raise RuntimeError(f"producer deleter exploded on {arg}")

    _foreign.release_when_idle(None, fails, "it")
    assert "producer deleter exploded on it" in capfd.readouterr().err


class _Home:
    """A stand-in runtime/pool: ``closed`` and ``context`` are what _foreign reads."""

    def __init__(self, closed):
        self.closed, self.context = closed, None

    def free(self, *args):  # DeviceBuffer.release on a pool
        pass


def test_closed_home_streams_are_never_touched(monkeypatch):
    def boom(stream):
        raise AssertionError("a destroyed stream was queried")

    monkeypatch.setattr(_driver_fast, "stream_query", boom)
    released = []
    _foreign.release_when_idle(_driver.stream_handle(FAKE_STREAM), released.append, 1,
                               _Home(closed=True))
    assert released == [1]


def test_export_from_closed_runtime_refused():
    arr = np.arange(4.0)
    t = fake_device(arr)
    t.buffer.owner = None  # pool memory now: its home is the (closed) pool
    t.buffer.origin.pool.closed = True
    assert t.buffer.pool is t.buffer.origin.pool
    with pytest.raises(RuntimeStateError, match="closed"):
        t.__dlpack__(stream=-1)
    with pytest.raises(RuntimeStateError, match="closed"):
        t.__cuda_array_interface__  # noqa: B018


def _within(seconds, fn):
    """Run ``fn`` on a daemon thread; fail (instead of hanging the run) when it does not
    finish in time -- a release path that deadlocks its own thread."""
    done = threading.Event()
    box = {}

    def body():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc
        done.set()

    threading.Thread(target=body, daemon=True).start()
    assert done.wait(seconds), "a foreign release deadlocked its own thread"
    if "error" in box:
        raise box["error"]


def test_a_release_that_releases_again_does_not_deadlock(monkeypatch):
    """A parked release whose code drops the last reference to another foreign array (a
    deleter, or a finalizer the garbage collector runs inside the drain) re-enters
    release_when_idle and drain on the same thread: each entry still runs exactly once."""
    monkeypatch.setattr(_foreign, "_parked", type(_foreign._parked)())
    busy = {"value": True}
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: not busy["value"])
    stream = _driver.stream_handle(FAKE_STREAM)
    ran = []

    def nested(tag):
        ran.append(tag)
        _foreign.release_when_idle(stream, ran.append, f"{tag}-inner")  # idle now: at once
        _foreign.drain()

    def body():
        for k in range(3):
            _foreign.release_when_idle(stream, nested, k)
        assert ran == [] and _foreign.parked_count() == 3
        busy["value"] = False
        _foreign.drain()

    _within(10, body)
    assert sorted(map(str, ran)) == ["0", "0-inner", "1", "1-inner", "2", "2-inner"]
    assert _foreign.parked_count() == 0


def test_a_finalizer_during_a_drain_does_not_deadlock(monkeypatch):
    """The stream query of a drain runs a finalizer (as the collector may, at any
    allocation) that parks a release and drains: nothing hangs, nothing runs twice."""
    monkeypatch.setattr(_foreign, "_parked", type(_foreign._parked)())
    busy = {"value": True, "nested": False}
    stream = _driver.stream_handle(FAKE_STREAM)
    ran = []

    def query(s):
        if not busy["value"] and not busy["nested"]:
            busy["nested"] = True  # the "finalizer": park one more release, then drain
            _foreign._parked.append((stream, ran.append, "late", None))  # as parking does
            _foreign.drain()
        return not busy["value"]

    monkeypatch.setattr(_driver_fast, "stream_query", query)

    def body():
        _foreign.release_when_idle(stream, ran.append, "first")
        _foreign.release_when_idle(stream, ran.append, "second")
        busy["value"] = False
        _foreign.drain()
        _foreign.drain()

    _within(10, body)
    assert sorted(ran) == ["first", "late", "second"] and _foreign.parked_count() == 0
