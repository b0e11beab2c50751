"""DLPack capsules on the CPU: export, parsing, ownership and the deleter, both directions.

A "device" tensor here is a DeviceBuffer (no pool) over numpy host memory, so that the
export path runs without a GPU (``stream=-1`` asks for no stream ordering). Real C
consumers and producers are exercised through numpy: numpy's capsules are parsed by us,
and ours are read by ``np.from_dlpack`` after their device field is flipped to kDLCPU
(numpy refuses CUDA memory; every other field is checked by numpy's own reader).
"""

from __future__ import annotations

import ctypes
import gc
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda import _dlpack_slots, _driver, dlpack
from tenferro_cuda._dlpack_export import export_capsule, live_exports
from tenferro_cuda.dtypes import ALL_DTYPES, DType, as_dtype
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.memory import _Arena
from tenferro_cuda.ops import interop
from tenferro_cuda.tensor import Tensor, TensorView

FAKE_STREAM = 0x5150


def fake_arena(domain: int) -> _Arena:
    """An arena of a pool that exists only as its identity (domain, device 0)."""
    pool = SimpleNamespace(domain=domain, ordinal=0, closed=False, limit=None)
    return _Arena(pool, _driver.stream_handle(FAKE_STREAM))  # type: ignore[arg-type]


def fake_device(arr: np.ndarray) -> Tensor:
    """A device-looking tensor whose buffer is ``arr``'s host memory."""
    arr = np.ascontiguousarray(arr)
    buf = fake_arena(-7).adopt(arr.ctypes.data, arr.nbytes, arr)
    return Tensor._make(as_dtype(arr.dtype), tuple(arr.shape), buffer=buf)


def _flip_to_cpu(capsule) -> None:
    info = dlpack.parse_capsule(capsule)
    struct = dlpack.DLManagedTensorVersioned if info.versioned else dlpack.DLManagedTensor
    struct.from_address(info.managed).dl_tensor.device.device_type = dlpack.DLDeviceType.kDLCPU


class AsHost:
    """Hands numpy one of our capsules with its device set to kDLCPU."""

    def __init__(self, tensor, max_version):
        self.tensor, self.max_version = tensor, max_version

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        capsule = export_capsule(self.tensor, stream=-1, max_version=self.max_version)
        _flip_to_cpu(capsule)
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def sample(dtype: DType, shape=(3, 4)) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype.is_bool:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dtype.is_complex:
        return (np.arange(n) - 1j * np.arange(n)).astype(dtype.numpy).reshape(shape)
    return (np.arange(n) - (n // 2 if dtype.is_signed_integer else 0)).astype(
        dtype.numpy).reshape(shape)


# view maker on our side, the same view in numpy
VIEWS = [
    ("contiguous", lambda t: t, lambda a: a),
    ("transposed", lambda t: t.T, lambda a: a.T),
    ("step-slice", lambda t: t[::2, 1::2], lambda a: a[::2, 1::2]),
    ("negative", lambda t: t[::-1, ::-2], lambda a: a[::-1, ::-2]),
    ("row", lambda t: t[1], lambda a: a[1]),
    ("scalar", lambda t: t[2, 3], lambda a: a[2, 3]),
    ("empty", lambda t: t[1:1], lambda a: a[1:1]),
]
VERSIONS = [None, (0, 8), (1, 0), (1, 9), (2, 0)]
NUMPY_DTYPES = [d for d in ALL_DTYPES if d is not DType.BFLOAT16]


@pytest.mark.parametrize("max_version", VERSIONS, ids=[str(v) for v in VERSIONS])
@pytest.mark.parametrize("name,ours,theirs", VIEWS, ids=[v[0] for v in VIEWS])
def test_export_read_by_numpy(name, ours, theirs, max_version):
    base = sample(DType.FLOAT32)
    before = live_exports()
    got = np.from_dlpack(AsHost(ours(fake_device(base)), max_version))
    np.testing.assert_array_equal(got, theirs(base))
    assert live_exports() == before + 1  # numpy holds it
    del got
    gc.collect()
    assert live_exports() == before  # numpy called our deleter


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=[d.value for d in NUMPY_DTYPES])
def test_export_dtypes_read_by_numpy(dtype):
    base = sample(dtype)
    got = np.from_dlpack(AsHost(fake_device(base).T, (1, 0)))
    assert got.dtype == base.dtype
    np.testing.assert_array_equal(got, base.T)


@pytest.mark.parametrize("max_version,versioned,minor", [
    (None, False, None), ((0, 8), False, None), ((1, 0), True, 0), ((1, 9), True, 1),
    ((2, 3), True, 1)], ids=["none", "0.8", "1.0", "1.9", "2.3"])
def test_capsule_kind_and_fields(max_version, versioned, minor):
    base = sample(DType.COMPLEX64, (4, 5))
    t = fake_device(base)
    view = t[1:, ::-2]
    capsule = export_capsule(view, stream=-1, max_version=max_version)
    info = dlpack.parse_capsule(capsule)
    assert info.versioned is versioned
    assert info.data == view.data_ptr() == t.data_ptr() + (1 * 5 + 4) * 8
    assert (info.shape, info.strides, info.dtype) == ((3, 3), (5, -2), DType.COMPLEX64)
    assert info.device == (2, 0) and info.readonly is False
    if versioned:
        managed = dlpack.DLManagedTensorVersioned.from_address(info.managed)
        assert (managed.version.major, managed.version.minor, managed.flags) == (1, minor, 0)
        assert managed.dl_tensor.byte_offset == 0



def test_the_export_methods_take_keywords_only():
    """The protocol's arguments are keyword-only (``__dlpack__(*, stream, max_version,
    dl_device, copy)``): a positional stream is a TypeError, before any export."""
    t = fake_device(sample(DType.INT32))
    before = live_exports()
    with pytest.raises(TypeError):
        t.__dlpack__(-1)
    with pytest.raises(TypeError):
        t.__dlpack__(-1, (1, 0))
    assert live_exports() == before
    assert t.__dlpack_device__() == (2, 0)

def test_unconsumed_capsule_runs_deleter_once():
    t = fake_device(sample(DType.INT32))
    before, refs = live_exports(), sys.getrefcount(t)
    capsule = export_capsule(t, stream=-1, max_version=(1, 0))
    assert live_exports() == before + 1 and sys.getrefcount(t) == refs + 1
    del capsule
    gc.collect()
    assert live_exports() == before and sys.getrefcount(t) == refs


@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
def test_consumed_capsule_deleter_exactly_once(versioned):
    t = fake_device(sample(DType.FLOAT64))
    before, refs = live_exports(), sys.getrefcount(t)
    capsule = export_capsule(t, stream=-1, max_version=(1, 0) if versioned else None)
    info = dlpack.parse_capsule(capsule)
    owner = dlpack.consume(capsule, info.managed, info.versioned)
    with pytest.raises(ValidationError, match="consumed already"):
        dlpack.parse_capsule(capsule)
    del capsule  # renamed "used_...": its destructor must not call the deleter
    gc.collect()
    assert live_exports() == before + 1
    del owner
    gc.collect()
    assert live_exports() == before and sys.getrefcount(t) == refs


def test_deleter_called_twice_acts_once():
    t = fake_device(sample(DType.UINT8))
    before = live_exports()
    capsule = export_capsule(t, stream=-1, max_version=(1, 0))
    info = dlpack.parse_capsule(capsule)
    field = dlpack.DLManagedTensorVersioned.from_address(info.managed).deleter
    assert field  # our callback, read while the struct is alive; the field object reads
    # the struct's memory when called, so keep the address itself (the struct is freed)
    deleter = type(field)(ctypes.cast(field, ctypes.c_void_p).value)
    dlpack.consume(capsule, info.managed, True)  # the owner is dropped: deleter runs now
    assert live_exports() == before
    deleter(info.managed)  # a buggy consumer calling it again: harmless
    assert live_exports() == before


EXPORT_ERRORS = [
    ("copy", dict(copy=True), BufferError, "copy=True"),
    ("dl-device-cpu", dict(dl_device=(1, 0)), BufferError, "dl_device"),
    ("dl-device-other-gpu", dict(dl_device=(2, 1)), BufferError, "CUDA device 0"),
    ("dl-device-junk", dict(dl_device="cuda"), BufferError, "device_type"),
    ("max-version-junk", dict(max_version=1), BufferError, "max_version"),
    ("max-version-short", dict(max_version=(1,)), BufferError, "max_version"),
    ("stream-float", dict(stream=1.5), TypeError, "stream"),
    ("stream-bool", dict(stream=True), TypeError, "stream"),
    ("stream-negative", dict(stream=-3), BufferError, "stream"),
]


@pytest.mark.parametrize("kwargs,error,text", [e[1:] for e in EXPORT_ERRORS],
                         ids=[e[0] for e in EXPORT_ERRORS])
def test_export_rejects(kwargs, error, text):
    t = fake_device(sample(DType.FLOAT32))
    before = live_exports()
    with pytest.raises(error, match=text):
        t.__dlpack__(**kwargs)
    assert live_exports() == before


def test_export_accepts_matching_dl_device_and_copy_false():
    t = fake_device(sample(DType.FLOAT32))
    capsule = t.__dlpack__(stream=-1, dl_device=(2, 0), copy=False, max_version=(1, 0))
    assert dlpack.parse_capsule(capsule).shape == (3, 4)
    assert t.__dlpack_device__() == (dlpack.DLDeviceType.kDLCUDA, 0)


def test_export_reclaimed_and_host():
    t = fake_device(sample(DType.FLOAT32))
    t.buffer.release()
    with pytest.raises(RuntimeStateError, match="reclaimed"):
        t.__dlpack__(stream=-1)
    host = Tensor.from_numpy(np.arange(3.0))
    assert host.__dlpack_device__() == (dlpack.DLDeviceType.kDLCPU, 0)
    with pytest.raises(BufferError, match="host tensor"):
        host.__dlpack__()


@pytest.mark.parametrize("path", ["callback", "clear"])
def test_failed_consumer_still_releases(capfd, monkeypatch, path):
    """A consumer that fails after taking our capsule (numpy, via the legacy signature,
    rejecting CUDA memory) drops it unconsumed: the export still ends, and the consumer's
    own error reaches the caller (our capsules have no destructor to run while it is
    pending), whichever deleter the capsule has."""
    if path == "callback":
        monkeypatch.setattr(_dlpack_slots, "CLEAR", None)
    t = fake_device(sample(DType.FLOAT32))

    class Legacy:
        def __dlpack__(self, stream=None):
            return export_capsule(t, stream=-1)

        def __dlpack_device__(self):
            return (1, 0)

    before = live_exports()
    with pytest.raises(RuntimeError, match="Unsupported device"):
        np.from_dlpack(Legacy())
    gc.collect()
    assert live_exports() == before
    assert capfd.readouterr().err == ""


# --- import: numpy as a real producer ---------------------------------------------------

NP_VIEWS = [
    ("contiguous", lambda a: a), ("transposed", lambda a: a.T),
    ("step-slice", lambda a: a[::2, 1::3]), ("negative", lambda a: a[::-1, 2:]),
    ("rank0", lambda a: a[1, 2, ...]), ("empty", lambda a: a[:, :0]),
]


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
@pytest.mark.parametrize("name,make", NP_VIEWS, ids=[v[0] for v in NP_VIEWS])
def test_parse_numpy_capsule(name, make, max_version):
    base = np.arange(30, dtype=np.int64).reshape(5, 6)
    arr = make(base)
    capsule = arr.__dlpack__(max_version=max_version) if max_version else arr.__dlpack__()
    info = dlpack.parse_capsule(capsule)
    assert info.versioned is (max_version is not None)
    assert info.device == (1, 0) and info.dtype is DType.INT64
    assert info.shape == arr.shape
    if arr.size:
        assert info.data == arr.__array_interface__["data"][0]
    if info.strides is not None and arr.size > 1:
        assert tuple(s * 8 for s, n in zip(info.strides, arr.shape) if n > 1) == tuple(
            s for s, n in zip(arr.strides, arr.shape) if n > 1)
    with pytest.raises(ValidationError, match="host memory"):
        dlpack.check_device(info.device, 0)


def test_numpy_deleter_called_on_owner_release():
    arr = np.arange(10.0)
    refs = sys.getrefcount(arr)
    capsule = arr.__dlpack__(max_version=(1, 0))
    info = dlpack.parse_capsule(capsule)
    owner = dlpack.consume(capsule, info.managed, info.versioned)
    del capsule
    gc.collect()
    assert sys.getrefcount(arr) == refs + 1  # numpy's manager context holds the array
    del owner
    gc.collect()
    assert sys.getrefcount(arr) == refs


_NEW = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


def _new_capsule(address: int, name: bytes):
    """A capsule without destructor (``name`` must outlive it: literals do)."""
    return _NEW(address, name, None)


def test_parse_rejects_non_capsules():
    with pytest.raises(ValidationError, match="not a capsule"):
        dlpack.parse_capsule(np.arange(3))
    with pytest.raises(ValidationError, match="not a DLPack capsule"):
        dlpack.parse_capsule(_new_capsule(1, b"something_else"))


# --- an instrumented foreign producer ----------------------------------------------------

class CountingProducer:
    """Builds DLManagedTensorVersioned capsules (no capsule destructor) whose deleter
    counts its calls."""

    def __init__(self, major=1, code=2, bits=32, lanes=1):
        self.calls = 0
        self.data = np.arange(12, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 2)(3, 4)
        self.managed = dlpack.DLManagedTensorVersioned()
        m = self.managed
        m.version = dlpack.DLPackVersion(major, 0)
        m.dl_tensor.data = self.data.ctypes.data
        m.dl_tensor.device = dlpack.DLDevice(2, 0)
        m.dl_tensor.ndim = 2
        m.dl_tensor.dtype = dlpack.DLDataType(code, bits, lanes)
        m.dl_tensor.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        m.dl_tensor.byte_offset = 8

        @dlpack.DELETER
        def deleter(address):
            assert address == ctypes.addressof(self.managed)
            self.calls += 1

        self.deleter = deleter
        m.deleter = deleter

    def capsule(self):
        return _new_capsule(ctypes.addressof(self.managed), b"dltensor_versioned")


def test_foreign_deleter_exactly_once():
    producer = CountingProducer()
    capsule = producer.capsule()
    info = dlpack.parse_capsule(capsule)
    assert info.strides is None and info.shape == (3, 4)
    assert info.data == producer.data.ctypes.data + 8  # byte_offset applied
    owner = dlpack.consume(capsule, info.managed, info.versioned)
    assert producer.calls == 0
    del owner
    gc.collect()
    assert producer.calls == 1
    del capsule
    gc.collect()
    assert producer.calls == 1


def test_unknown_major_version_is_released_and_rejected():
    producer = CountingProducer(major=2)
    with pytest.raises(ValidationError, match="version 2.0"):
        dlpack.parse_capsule(producer.capsule())
    gc.collect()
    assert producer.calls == 1


@pytest.mark.parametrize("code,bits,lanes", [(2, 32, 2), (8, 8, 1)], ids=["vector", "fp8"])
def test_bad_dtype_leaves_capsule_with_producer(code, bits, lanes):
    producer = CountingProducer(code=code, bits=bits, lanes=lanes)
    capsule = producer.capsule()
    with pytest.raises(UnsupportedDTypeError, match="lanes must be 1"):
        dlpack.parse_capsule(capsule)
    assert producer.calls == 0  # not consumed: the capsule still belongs to its producer
    assert dlpack._capsule_get_name(capsule) == b"dltensor_versioned"  # and still unused


# --- adoption (the interop family's _adopt on a stand-in context) --------------------------------

class _StandIn:
    """The one thing adoption asks of the execution context."""

    def __init__(self):
        self.home = fake_arena(41)

    def adopt(self, ptr, nbytes, owner):
        return self.home.adopt(ptr, nbytes, owner)


@pytest.mark.parametrize("name,make", NP_VIEWS + [("broadcast", lambda a: np.broadcast_to(
    a[:1], (4, 6)))], ids=[v[0] for v in NP_VIEWS] + ["broadcast"])
def test_adopt_numpy_view_round_trip(name, make):
    """numpy capsule -> parse -> _adopt (Tensor or TensorView) -> our export -> numpy."""
    arr = make(np.arange(30, dtype=np.float32).reshape(5, 6) * 1.5)
    capsule = arr.__dlpack__(max_version=(1, 0))
    info = dlpack.parse_capsule(capsule)
    owner = dlpack.consume(capsule, info.managed, info.versioned)
    adopted = interop._adopt(_StandIn(), info.data, info.dtype, info.shape, info.strides,
                             owner)
    buf = adopted.base.buffer
    assert buf.pool is None and buf.owner is owner and buf.domain == 41
    assert adopted.shape == arr.shape
    compact = arr.flags.c_contiguous or arr.size == 0
    assert isinstance(adopted, Tensor if compact else TensorView)
    if arr.size:
        assert adopted.data_ptr() == info.data
        lo, hi = adopted.span()
        assert 0 <= lo and hi <= adopted.base.size
    np.testing.assert_array_equal(np.from_dlpack(AsHost(adopted, (1, 0))), arr)
