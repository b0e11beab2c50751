"""DLPack and CUDA Array Interface against hostile producers and consumers, on the CPU
fakes: values that fit no handle or address, junk ``max_version``, malformed capsules,
two adoptions of one buffer, read-only memory, a consumer that calls our deleter without
taking the capsule."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
from reference.dlpack_fakes import Interop, Producer, StreamObject
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda import cai, dlpack
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import UnsupportedDTypeError, UnsupportedError, ValidationError
from tenferro_cuda.ops import interop
from tenferro_cuda.tensor import Tensor, TensorView

HUGE = 2 ** 64  # an int >= 0 that is no stream handle / pointer (CUstream is 64-bit)


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


# --- stream values that do not fit a handle ------------------------------------------------

@pytest.mark.parametrize("stream", [HUGE, StreamObject(HUGE)], ids=["int", "protocol"])
def test_import_stream_too_large_is_a_validation_error_before_the_producer_is_asked(fx,
                                                                                  stream):
    """docs/interop.md: bad ``stream=`` values on import raise ValidationError "before
    the producer is asked"; a value of 2**64 or more is no handle."""
    p = Producer(np.arange(4.0))
    with pytest.raises(ValidationError):
        interop.from_dlpack(fx, p, stream)
    assert p.asked == [] and p.calls == 0


@pytest.mark.parametrize("stream", [HUGE, StreamObject(HUGE)], ids=["int", "protocol"])
def test_export_stream_too_large_is_a_typed_buffer_error(fx, stream):
    """Export: a stream value that is no valid handle raises BufferError (or TypeError for
    the protocol), never a raw OverflowError from the CUstream constructor."""
    t = fx.tensor(np.arange(4.0))
    with pytest.raises((BufferError, TypeError)):
        t.__dlpack__(stream=stream, max_version=(1, 0))
    assert live_exports(t) == 0 and fx.orders == []


def test_cai_stream_entry_too_large_is_a_validation_error(fx):
    """CAI: the dict (stream included) is validated before anything happens; a stream
    entry of 2**64 or more is no handle."""
    a = np.arange(4.0)
    iface = {"shape": (4,), "typestr": "<f8", "data": (a.ctypes.data, False),
             "version": 3, "stream": HUGE}
    with pytest.raises(ValidationError):
        cai.parse_interface(iface)


def test_cai_pointer_too_large_is_a_validation_error():
    """A negative pointer is refused by ``parse_interface``; a pointer >= 2**64 is no more
    an address than -8 is."""
    with pytest.raises(ValidationError, match="data"):
        cai.parse_interface({"shape": (2,), "typestr": "<f4", "data": (HUGE, False),
                             "version": 3})


def test_import_stream_too_large_through_cai_is_a_validation_error(fx):
    a = np.arange(4.0)
    iface = {"shape": (4,), "typestr": "<f8", "data": (a.ctypes.data, False), "version": 3}
    with pytest.raises(ValidationError):
        interop.from_cuda_array_interface(fx, iface, HUGE)
    assert fx.orders == []


# --- max_version / dl_device junk ------------------------------------------------------------

@pytest.mark.parametrize("max_version", [([1], 0), (1, [0]), ({}, 1), "10", b"10", ("1", "0"),
                                         (1.0, 0), (1, 0.5), (1,), (1, 0, 0), 5],
                         ids=["list-major", "list-minor", "dict-major", "str", "bytes",
                              "str-elements", "float-major", "float-minor", "one-element",
                              "three-elements", "int"])
def test_export_unhashable_max_version_is_a_buffer_error(fx, max_version):
    """Anything but two integers in ``max_version`` (an unhashable element, a string, a
    float, another length) gets one BufferError ("max_version must be (major, minor)"),
    not a TypeError, and nothing is exported."""
    t = fx.tensor(np.arange(4.0))
    with pytest.raises(BufferError, match="max_version"):
        t.__dlpack__(stream=-1, max_version=max_version)
    assert live_exports(t) == 0


# --- malformed foreign capsules ------------------------------------------------------------

def test_null_data_with_elements_is_refused_before_the_capsule_is_taken(fx):
    """A capsule whose data (+ byte_offset) is NULL but whose shape has elements cannot be
    device memory: refused before the capsule is taken (adopted, the first kernel would
    fault, a sticky context error on a GPU)."""
    p = Producer(np.arange(4.0))
    p.managed.dl_tensor.data = 0
    capsule = p.capsule()
    with pytest.raises(ValidationError):
        interop.from_dlpack(fx, capsule, -1)
    gc.collect()
    assert p.calls == 0
    assert dlpack._capsule_get_pointer(capsule, b"dltensor_versioned")  # still untaken


def test_byte_span_beyond_the_address_space_is_refused(fx):
    """Extents whose byte span exceeds 64 bits describe no memory: refused with
    ValidationError before anything is adopted."""
    p = Producer(np.arange(2.0).reshape(1, 2))
    p.shape[0] = 2 ** 40
    p.shape[1] = 2 ** 40
    with pytest.raises(ValidationError):
        interop.from_dlpack(fx, p.capsule(), -1)
    gc.collect()
    assert p.calls == 0


# --- gaps that hold (regression cover) ------------------------------------------------------

def test_versioned_capsule_with_a_newer_minor_is_accepted(fx):
    p = Producer(np.arange(4.0))
    p.managed.version = dlpack.DLPackVersion(1, 7)
    t = interop.from_dlpack(fx, p.capsule(), -1)
    assert t.shape == (4,) and t.data_ptr() == p.array.ctypes.data


@pytest.mark.parametrize("ndim", [-1, 65], ids=["negative", "above-64"])
def test_bad_ndim_refused_before_the_capsule_is_taken(fx, ndim):
    p = Producer(np.arange(4.0))
    p.managed.dl_tensor.ndim = ndim
    capsule = p.capsule()
    with pytest.raises(ValidationError, match="ndim"):
        interop.from_dlpack(fx, capsule, -1)
    assert p.calls == 0 and ctypes.pythonapi  # capsule not renamed
    p.managed.dl_tensor.ndim = 1
    assert interop.from_dlpack(fx, capsule, -1).shape == (4,)  # still takeable


def test_zero_strides_import_gives_a_broadcast_view(fx):
    p = Producer(np.arange(12.0).reshape(4, 3), strides=(0, 1))
    t = interop.from_dlpack(fx, p.capsule(), -1)
    assert isinstance(t, TensorView) and t.strides == (0, 1) and t.base.size == 3
    assert t.shape == (4, 3) and t.data_ptr() == p.array.ctypes.data


def test_legacy_capsule_consumed_twice_raises(fx):
    p = Producer(np.arange(4.0), versioned=False)
    capsule = p.capsule()
    interop.from_dlpack(fx, capsule, -1)
    with pytest.raises(ValidationError, match="consumed already"):
        interop.from_dlpack(fx, capsule, -1)


@pytest.mark.parametrize("dtype", list(cai._TYPESTR), ids=lambda d: d.value)
def test_every_cai_dtype_round_trips_through_our_own_export(fx, dtype):
    values = np.arange(6).astype(dtype.numpy)
    t = fx.tensor(values)
    back = interop.from_cuda_array_interface(fx, dict(t.__cuda_array_interface__))
    assert back.dtype is dtype and back.data_ptr() == t.data_ptr()


@pytest.mark.parametrize("change,error", [
    (dict(mask=None, strides=(8,), shape=[4]), None),
    (dict(mask=np.zeros(4, bool)), UnsupportedError),
    (dict(typestr=">c8"), UnsupportedDTypeError),
    (dict(typestr="<f8", strides=(4,)), ValidationError),
    (dict(shape=(0,), data=(0, False)), None),
    (dict(shape=(2, 0), strides=(3, 8)), ValidationError),
], ids=["list-shape", "mask-array", "big-endian-complex", "half-item-stride", "empty-null",
        "empty-odd-stride"])
def test_cai_edge_dicts(fx, change, error):
    a = np.arange(4.0)
    iface = {"shape": (4,), "typestr": "<f8", "data": (a.ctypes.data, False), "version": 3,
             **change}
    if error is None:
        interop.from_cuda_array_interface(fx, iface)
    else:
        with pytest.raises(error):
            interop.from_cuda_array_interface(fx, iface)
        assert fx.orders == []


# --- the alias rule over two adoptions ----------------------------------------------------

@pytest.fixture
def env():
    launches: list = []
    memory = HostMemory()
    ctx = FakeContext(memory, lambda *call: launches.append(call))
    return ctx, FakeSession(ctx), launches


def test_two_adoptions_of_one_buffer_alias(env):
    """docs: two adoptions of one array are two tensors over the same memory (the alias
    rule compares addresses)."""
    ctx, s, launches = env
    p = Producer(np.arange(6.0).reshape(2, 3))
    a = s.from_dlpack(p.capsule(), -1)
    b = s.from_dlpack(p.capsule(), -1)
    assert a.data_ptr() == b.data_ptr() and a.base.buffer is not b.base.buffer
    with pytest.raises(ValidationError, match="overlap"):
        s.copy_read_into(a, b)
    iface = {"shape": (3,), "typestr": "<f8", "data": (p.array.ctypes.data + 8, False),
             "version": 3}
    c = s.from_cuda_array_interface(iface, -1)  # overlaps a[0, 1:] and a[1, 0]
    with pytest.raises(ValidationError, match="overlap"):
        s.copy_read_into(a[0], c)
    assert launches == []


def test_read_only_import_views_and_reshapes_are_refused_as_outputs(env):
    ctx, s, launches = env
    p = Producer(np.arange(6.0).reshape(2, 3), flags=dlpack.FLAG_READ_ONLY)
    ro = s.from_dlpack(p.capsule(), -1)
    src = ctx.alloc(DType.FLOAT64, (3, 2), "t")
    for out in (ro.T, s.reshape(ro, (3, 2)), ro.permute((1, 0))):
        with pytest.raises(ValidationError, match="read-only"):
            s.copy_read_into(src, out)
    with pytest.raises(ValidationError, match="read-only"):
        s.add_into(ro, ro, ro)  # in place over read-only memory
    assert launches == []
    # ours re-adopted: the read-only flag survives a round trip through our own export
    again = s.from_dlpack(ro, -1)
    with pytest.raises(ValidationError, match="read-only"):
        s.copy_read_into(src.T, again)


def test_read_only_export_round_trip_stays_read_only(fx):
    owner = dlpack.ForeignOwner(0, None, readonly=True)
    base = np.arange(6.0)
    fx.keep.append(base)
    ro = interop._adopt(fx, base.ctypes.data, DType.FLOAT64, (6,), None, owner)
    for mv in ((1, 0), (1, 1), (2, 0), (9, 9)):
        info = dlpack.parse_capsule(ro.__dlpack__(stream=-1, max_version=mv))
        assert info.readonly
    for mv in (None, (0, 8), (0, 99)):
        with pytest.raises(BufferError, match="read-only"):
            ro.__dlpack__(stream=-1, max_version=mv)
    assert isinstance(ro, Tensor)


# --- one capsule's destructor must never release another capsule's export ------------------

def test_a_dead_capsule_never_releases_a_later_export_at_a_reused_address(fx):
    """A consumer that calls our deleter but leaves the capsule named
    "dltensor_versioned" (a sloppy consumer) frees the block; the next export of the same
    rank may get the same address from malloc. When the first capsule dies, its destructor
    must not release the second export (whose capsule is alive and unconsumed)."""
    # malloc usually hands the freed block to the next export of its size; an allocation
    # in between may take it first, so try a few times.
    for _ in range(20):
        t1, t2 = fx.tensor(np.arange(4.0)), fx.tensor(np.arange(4.0) + 10)
        c1 = t1.__dlpack__(stream=-1, max_version=(1, 0))
        info1 = dlpack.parse_capsule(c1)
        field = dlpack.DLManagedTensorVersioned.from_address(info1.managed).deleter
        deleter = dlpack.DELETER(ctypes.cast(field, ctypes.c_void_p).value)
        deleter(info1.managed)  # the consumer is done with c1's tensor (capsule kept)
        c2 = t2.__dlpack__(stream=-1, max_version=(1, 0))
        if dlpack.parse_capsule(c2).managed == info1.managed:
            break
    else:
        pytest.skip("the allocator did not reuse the address in 20 tries")
    assert live_exports(t2) == 1
    del c1
    gc.collect()
    assert live_exports(t2) == 1, "c1's destructor released c2's export"


@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.float64, np.complex128])
def test_negative_strides_given_as_unsigned_quotients_are_read_as_negative(fx, dtype):
    """CuPy divides a negative byte stride by the item size as an unsigned number: a
    reversed (6, 4) view of items wider than a byte comes with strides
    ((2**64 - 4 * item) // item, (2**64 - item) // item). In 64-bit address arithmetic
    they are the strides (-4, -1); they are read as such, not refused."""
    base = np.arange(24).astype(dtype).reshape(6, 4)
    item = base.itemsize
    p = Producer(base, strides=((2 ** 64 - 4 * item) // item, (2 ** 64 - item) // item))
    p.managed.dl_tensor.data = base.ctypes.data + 23 * item  # element (0, 0) of [::-1, ::-1]
    t = interop.from_dlpack(fx, p.capsule(), -1)
    assert t.shape == (6, 4) and t.strides == (-4, -1)
    assert t.data_ptr() == base.ctypes.data + 23 * item
    assert t.base.size == 24


def test_strides_beyond_the_address_space_stay_refused(fx):
    """Only the byte values of CuPy's encoding are read as negative: a stride whose byte
    span leaves the address space any other way is still refused before anything is
    adopted."""
    base = np.arange(4.0)
    p = Producer(base.reshape(2, 2), strides=(2 ** 62 + 1, 1))
    with pytest.raises(ValidationError, match="address space"):
        interop.from_dlpack(fx, p.capsule(), -1)
    gc.collect()
    assert p.calls == 0
