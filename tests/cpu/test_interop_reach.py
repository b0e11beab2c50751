"""Adopted memory is asked of the driver before anything is launched over it: the CUDA
array interface always, a DLPack capsule of no known array library (a bare capsule, a
producer class of no ``KNOWN_PRODUCERS`` module). A kernel reading past an allocation
would fault and take the context with it; such arrays raise a typed error instead, and
their capsule is left to its producer, which lets go of it once."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from reference.dlpack_fakes import Interop, Producer
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.errors import BackendSourceError, RuntimeStateError, ValidationError
from tenferro_cuda.ops import interop


@pytest.fixture
def env():
    launches: list = []
    ctx = FakeContext(HostMemory(), lambda *call: launches.append(call))
    return ctx, FakeSession(ctx), launches


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


def _one_allocation(ctx, array, ordinal=0):
    """The driver's answer for ``array``'s bytes only (anything else: unknown memory)."""
    start, end = array.ctypes.data, array.ctypes.data + array.nbytes
    asked = []

    def pointer_device(address):
        asked.append(address)
        if start <= address < end:
            return ordinal
        raise BackendSourceError("cuPointerGetAttribute failed: CUDA_ERROR_INVALID_VALUE")

    ctx.pointer_device = pointer_device
    return asked


# (shape, element strides, first element's index in an allocation of 8 elements)
CLAIMS = {
    "longer shape": ((9,), None, 0),
    "past the end by a stride": ((2, 4), (16, 1), 0),
    "negative stride before the start": ((3,), (-1,), 1),
    "starts past the end": ((2,), None, 8),
}
INSIDE = {
    "broadcast": ((4, 8), (0, 1), 0),
    "reversed": ((8,), (-1,), 7),
    "a strided window": ((2, 3), (4, 1), 1),
}


@pytest.mark.parametrize("shape,strides,start", CLAIMS.values(), ids=CLAIMS.keys())
def test_an_interface_claiming_more_than_its_allocation_is_refused(env, shape, strides,
                                                                   start):
    ctx, s, launches = env
    a = np.arange(8.0)
    asked = _one_allocation(ctx, a)
    iface = {"shape": shape, "typestr": "<f8", "data": (a.ctypes.data + 8 * start, False),
             "version": 3}
    if strides is not None:
        iface["strides"] = tuple(8 * st for st in strides)
    with pytest.raises(ValidationError, match="not CUDA device memory|claim more than"):
        s.from_cuda_array_interface(iface, -1)
    assert launches == [] and 1 <= len(asked) <= 2  # the start, then the far end


def test_an_interface_inside_its_allocation_asks_only_its_ends(env):
    ctx, s, launches = env
    a = np.arange(8.0)
    asked = _one_allocation(ctx, a)
    iface = {"shape": (2, 3), "typestr": "<f8", "data": (a.ctypes.data + 8, False),
             "strides": (32, 8), "version": 3}
    t = s.from_cuda_array_interface(iface, -1)
    assert t.shape == (2, 3) and asked == [a.ctypes.data + 8, a.ctypes.data + 8 + 55]


def _producer(a, shape, strides, start):
    """A producer over ``a`` whose capsule claims ``shape`` and ``strides`` from element
    ``start`` (the capsule's shape buffer holds as many dimensions as ``shape``)."""
    p = Producer(np.zeros(shape), strides=strides)
    p.keep = a
    p.managed.dl_tensor.data = a.ctypes.data + 8 * start
    return p


@pytest.mark.parametrize("bare", [True, False], ids=["bare capsule", "unknown producer"])
@pytest.mark.parametrize("shape,strides,start", CLAIMS.values(), ids=CLAIMS.keys())
def test_a_capsule_claiming_more_than_its_allocation_is_refused(fx, shape, strides, start,
                                                                bare):
    a = np.arange(8.0)
    asked = _one_allocation(fx, a)
    p = _producer(a, shape, strides, start)
    capsule = p.capsule()
    with pytest.raises(ValidationError, match="not CUDA device memory|claim more than"):
        interop.from_dlpack(fx, capsule if bare else p, -1)
    assert fx.launches == [] and 1 <= len(asked) <= 2 and p.calls == 0
    if bare:  # not consumed: still the producer's, whole (here: taken once it passes)
        fx.pointer_device = lambda address: 0
        t = interop.from_dlpack(fx, capsule, -1)
        assert t.shape == shape and p.calls == 0
        del t
        gc.collect()
        assert p.calls == 1
    t = interop.from_dlpack(fx, _producer(a, (8,), None, 0), -1)  # the session goes on
    assert t.shape == (8,)


@pytest.mark.parametrize("shape,strides,start", INSIDE.values(), ids=INSIDE.keys())
def test_a_capsule_inside_its_allocation_is_adopted(fx, shape, strides, start):
    a = np.arange(8.0)
    asked = _one_allocation(fx, a)
    p = _producer(a, shape, strides, start)
    t = interop.from_dlpack(fx, p.capsule(), -1)
    assert t.shape == shape and t.data_ptr() == a.ctypes.data + 8 * start
    assert asked[0] == a.ctypes.data + 8 * start and len(asked) <= 3
    del t
    gc.collect()
    assert p.calls == 1


def test_a_capsule_of_another_device_is_a_runtime_state_error(fx):
    """A capsule that names this device over memory the driver places on another."""
    a = np.arange(8.0)
    _one_allocation(fx, a, ordinal=1)
    p = _producer(a, (8,), None, 0)
    with pytest.raises(RuntimeStateError, match="device 1"):
        interop.from_dlpack(fx, p.capsule(), -1)
    assert fx.launches == []


def test_a_known_library_is_taken_at_its_word(fx):
    """A producer class of a known array library (here one that says it is CuPy's) is
    not asked about: its capsule is built by the library from its own allocation."""
    a = np.arange(8.0)
    asked = _one_allocation(fx, a)
    Known = type("ndarray", (Producer,), {"__module__": "cupy._core.core"})
    p = _producer(a, (8,), None, 0)
    p.__class__ = Known
    t = interop.from_dlpack(fx, p, -1)
    assert t.shape == (8,) and asked == []


def test_an_empty_capsule_asks_nothing(fx):
    asked = _one_allocation(fx, np.arange(1.0))
    p = Producer(np.zeros((0, 3)))
    p.managed.dl_tensor.data = 0x10  # no byte of it is ever read
    t = interop.from_dlpack(fx, p.capsule(), -1)
    assert t.shape == (0, 3) and asked == []
