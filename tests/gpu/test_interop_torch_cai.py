"""The CUDA Array Interface of a plain PyTorch tensor, read from the tensor
(``ops/interop/producers.read_interface``): for every tensor the reader takes, exactly what
PyTorch's ``__cuda_array_interface__`` property describes; every other tensor -- a subclass,
one that requires grad, a replaced property, an active ``__torch_function__`` mode -- goes
through the property, its answer and its errors as before. Dicts and capsules (bare, or
from a producer class of no known library) that claim more than their allocation are
refused before anything is launched."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import dlpack
from tenferro_cuda.cai import parse_interface
from tenferro_cuda.ops.interop import producers


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


def _tensors(torch):
    """(id, tensor): the layouts and dtypes a PyTorch user hands over."""
    base = torch.arange(24, device="cuda:0", dtype=torch.float32).reshape(2, 3, 4)
    out = [
        ("compact", base),
        ("transposed", base.transpose(0, 2)),
        ("sliced", base[:, 1:, ::2]),
        ("offset", base.reshape(-1)[5:17]),
        ("expanded", torch.ones(3, 1, device="cuda:0").expand(3, 5)),
        ("empty", torch.empty(0, 3, device="cuda:0")),
        ("empty-strided", base[:, :0]),
        ("scalar", torch.tensor(2.5, device="cuda:0")),
        ("unit-dims", base[:1, :, :1]),
        ("channels-last", torch.ones(2, 3, 4, 5, device="cuda:0").to(
            memory_format=torch.channels_last)),
        ("conj", torch.ones(3, dtype=torch.complex64, device="cuda:0").conj()),
    ]
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                 "float32", "float64", "complex64", "complex128", "uint16", "uint32",
                 "uint64"):
        dtype = getattr(torch, name, None)
        if dtype is not None:
            out.append((name, torch.zeros(2, 3, device="cuda:0", dtype=dtype)))
    return out


def _property(t):
    """What the property says: the parsed interface, or the type of its error."""
    try:
        return parse_interface(t.__cuda_array_interface__)
    except Exception as exc:  # noqa: BLE001 - its error is the answer
        return type(exc)


def test_the_reader_gives_exactly_what_the_property_describes(torch):
    taken = 0
    for name, t in _tensors(torch):
        read, said = producers.read_interface(t), _property(t)
        if read is not None:
            taken += 1
            assert read == said, name
        else:  # left to the property: only a dtype it or we lack, which it cannot hand over
            assert isinstance(said, type), name
    assert taken >= 15


def test_tensors_outside_the_plain_case_go_through_the_property(torch, monkeypatch):
    x = torch.ones(4, device="cuda:0")
    for t in (torch.nn.Parameter(x.clone()), x.clone().requires_grad_(),
              torch.ones(4).cuda().to_sparse(), torch.ones(4)):
        assert producers.read_interface(t) is None
    with torch.device("cuda:0"):  # a __torch_function__ mode: it may answer for the tensor
        assert producers.read_interface(x) is None
    assert producers.read_interface(x) is not None
    lie = {"typestr": "<i4", "shape": (2,), "data": (x.data_ptr(), True), "version": 2}
    monkeypatch.setattr(torch.Tensor, "__cuda_array_interface__", property(lambda t: lie))
    assert producers.read_interface(x) is None


def test_a_plain_tensor_is_adopted_as_the_property_describes(s, torch):
    base = torch.arange(24, device="cuda:0", dtype=torch.float32).reshape(2, 3, 4)
    torch.cuda.synchronize()  # PyTorch's interface (v2) has no stream: the data is ready
    for t in (base, base.transpose(0, 2), base[:, 1:, ::2], torch.empty(0, 3, device="cuda:0")):
        ours = s.from_cuda_array_interface(t)
        assert ours.shape == tuple(t.shape)
        np.testing.assert_array_equal(down(s, ours), t.cpu().numpy())
    t = torch.zeros(8, device="cuda:0")
    torch.cuda.synchronize()
    ours = s.from_cuda_array_interface(t)
    s.add_into(up(s, np.ones(8, np.float32)), 2.0, ours)
    s.synchronize()
    assert t.cpu().tolist() == [3.0] * 8  # the same memory, writable
    probe = weakref.ref(t)
    del t
    gc.collect()
    assert probe() is not None  # the adopted tensor keeps PyTorch's alive
    del ours
    s.synchronize()
    gc.collect()
    assert probe() is None


def test_a_replaced_property_and_torch_refusals_are_heard(s, torch, monkeypatch):
    x = torch.ones(4, device="cuda:0")
    with pytest.raises(RuntimeError, match="requires grad"):
        s.from_cuda_array_interface(x.clone().requires_grad_())
    y = torch.zeros(2, device="cuda:0", dtype=torch.int32)
    lie = {"typestr": "<i4", "shape": (2,), "data": (y.data_ptr(), True), "version": 2}
    monkeypatch.setattr(torch.Tensor, "__cuda_array_interface__", property(lambda t: lie))
    t = s.from_cuda_array_interface(x)  # the replacement describes y, read-only
    assert t.shape == (2,) and t.data_ptr() == y.data_ptr() and t.dtype.itemsize == 4
    with pytest.raises(tc.ValidationError):
        s.add_into(up(s, np.ones(2, np.int32)), 1, t)


@pytest.mark.parametrize("claim", ["shape", "strides", "negative stride"])
def test_an_interface_claiming_more_than_its_allocation_is_refused(s, torch, claim):
    """A dict whose shape or strides reach 1 TiB past (or before) its pointer: refused
    before anything is launched, and the session goes on working."""
    x = torch.arange(256, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    far = 1 << 38  # elements: 1 TiB of float32
    iface = {"typestr": "<f4", "data": (x.data_ptr(), False), "version": 2,
             "shape": (far,)}
    if claim == "strides":
        iface.update(shape=(2, 4), strides=(4 * far, 4))
    elif claim == "negative stride":  # (to at most half the pointer: above NULL)
        iface.update(shape=(2,), strides=(-4 * min(far, x.data_ptr() // 8),))
    with pytest.raises(tc.ValidationError, match="claim more than its allocation"):
        s.from_cuda_array_interface(iface)
    inside = dict(iface, shape=(256,))
    inside.pop("strides", None)
    t = s.from_cuda_array_interface(inside)
    out = s.add(t, 1.0)
    np.testing.assert_array_equal(down(s, out), np.arange(256, dtype=np.float32) + 1)


class _Wrapped:
    """A producer class of no known array library, handing over a capsule as it is."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.parametrize("bare", [True, False], ids=["bare capsule", "unknown producer"])
@pytest.mark.parametrize("claim", ["shape", "host pointer"])
def test_a_capsule_claiming_more_than_its_allocation_is_refused(s, torch, claim, bare):
    """A PyTorch capsule edited to claim 1 TiB more, or to point at host memory: refused
    before anything is launched, not consumed (once mended it is adopted whole), and the
    session goes on working."""
    x = torch.arange(256, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    capsule = x.__dlpack__(max_version=(1, 0))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    managed = dlpack.DLManagedTensorVersioned.from_address(
        get(capsule, b"dltensor_versioned"))
    host = np.zeros(256, np.float32)
    if claim == "shape":
        managed.dl_tensor.shape[0] = 1 << 38
    else:
        managed.dl_tensor.data = host.ctypes.data
    with pytest.raises(tc.ValidationError, match="claim more than|not CUDA device memory"):
        s.from_dlpack(capsule if bare else _Wrapped(capsule), stream=-1)
    managed.dl_tensor.shape[0] = 256
    managed.dl_tensor.data = x.data_ptr()
    t = s.from_dlpack(capsule, stream=-1)
    out = s.add(t, 1.0)
    np.testing.assert_array_equal(down(s, out), np.arange(256, dtype=np.float32) + 1)
