"""``from_cuda_array_interface`` of a PyTorch tensor: a plain CUDA tensor is read from the
tensor (``ops/interop/producers.read_interface``) instead of through its
``__cuda_array_interface__`` property; every other tensor, and any PyTorch the reader
cannot follow, is asked through the property. A stand-in ``torch`` module plays PyTorch:
its tensor's property builds the dict from the same fields, as PyTorch's does."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
from reference.dlpack_fakes import Interop

from tenferro_cuda.cai import parse_interface
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.memo import BoundedCache
from tenferro_cuda.ops import interop
from tenferro_cuda.ops.interop import producers


class DType:
    """The stand-in ``torch.dtype``."""

    def __init__(self, name: str, numpy: str) -> None:
        self.name, self.numpy = name, np.dtype(numpy)


FLOAT32, INT16, BOOL, BFLOAT16 = (DType("float32", "f4"), DType("int16", "i2"),
                                  DType("bool", "?"), DType("bfloat16", "u2"))
STRIDED, SPARSE = object(), object()
TYPESTR = {FLOAT32: "<f4", INT16: "<i2", BOOL: "|b1"}  # PyTorch's has no bfloat16


class Tensor:
    """The stand-in ``torch.Tensor``: a numpy array of host memory (our fake device)."""

    asked = 0  # calls of the property

    def __init__(self, array, dtype=FLOAT32, *, requires_grad=False, is_cuda=True,
                 layout=STRIDED) -> None:
        self.array, self.dtype, self.requires_grad = array, dtype, requires_grad
        self.is_cuda, self.layout = is_cuda, layout
        self.shape = _Size(array.shape)

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def numel(self) -> int:
        return self.array.size

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def is_contiguous(self) -> bool:
        return self.array.flags.c_contiguous

    @property
    def __cuda_array_interface__(self):  # PyTorch's property, step by step
        Tensor.asked += 1
        if not self.is_cuda:
            raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor")
        if self.layout is SPARSE:
            raise AttributeError("Can't get __cuda_array_interface__ on sparse type")
        if self.requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that "
                               "requires grad")
        typestr = _dtype_to_typestr(self.dtype)
        item = self.array.itemsize
        strides = None if self.is_contiguous() else tuple(s * item for s in self.stride())
        return dict(typestr=typestr, shape=tuple(self.shape), strides=strides,
                    data=(self.data_ptr() if self.numel() > 0 else 0, False), version=2)


class _Size(tuple):
    """``torch.Size``: a tuple subclass."""


def _dtype_to_typestr(dtype):
    return TYPESTR[dtype]


Tensor.__module__ = "torch"


class Parameter(Tensor):
    """A subclass (``torch.nn.Parameter``)."""


Parameter.__module__ = "torch"


@pytest.fixture
def torch(monkeypatch):
    module = ModuleType("torch")
    module.Tensor, module.dtype, module.strided = Tensor, DType, STRIDED  # type: ignore[attr-defined]
    module.float32, module.int16, module.bool, module.bfloat16 = (  # type: ignore[attr-defined]
        FLOAT32, INT16, BOOL, BFLOAT16)
    module.version = SimpleNamespace(hip=None)  # type: ignore[attr-defined]
    module.handlers = False  # type: ignore[attr-defined] - a __torch_function__ mode is on
    module._C = SimpleNamespace(  # type: ignore[attr-defined]
        _has_torch_function_unary=lambda t: module.handlers)  # type: ignore[attr-defined]
    private = ModuleType("torch._tensor")
    private._dtype_to_typestr = _dtype_to_typestr  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", module)
    monkeypatch.setitem(sys.modules, "torch._tensor", private)
    monkeypatch.setattr(producers, "_readers", BoundedCache(512))
    monkeypatch.setattr(Tensor, "asked", 0)
    return module


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
LAYOUTS = {
    "compact": BASE, "transposed": BASE.transpose(2, 0, 1), "sliced": BASE[:, 1:, ::2],
    "empty": np.zeros((0, 3), np.float32), "scalar": np.array(2.5, np.float32),
    "unit-dims": BASE[:1, :, :1],
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_plain_tensor_reads_as_its_property_describes_it(torch, name):
    t = Tensor(LAYOUTS[name])
    assert producers.read_interface(t) == parse_interface(t.__cuda_array_interface__)


@pytest.mark.parametrize("dtype,array", [(INT16, np.zeros(3, np.int16)),
                                         (BOOL, np.zeros(3, np.bool_))])
def test_every_dtype_both_sides_have_is_read(torch, dtype, array):
    t = Tensor(array, dtype)
    assert producers.read_interface(t) == parse_interface(t.__cuda_array_interface__)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_plain_tensor_is_adopted_without_its_property(torch, fx, name):
    t = Tensor(LAYOUTS[name])
    ours = interop.from_cuda_array_interface(fx, t)
    assert Tensor.asked == 0
    assert ours.shape == t.array.shape and fx.orders == []
    if t.array.size:
        assert ours.data_ptr() == t.array.ctypes.data
    assert ours.base.buffer.owner._obj is t  # kept alive, as through the property


@pytest.mark.parametrize("make,error", [
    (lambda: Tensor(BASE, requires_grad=True), RuntimeError),
    (lambda: Tensor(BASE, layout=SPARSE), ValidationError),  # its AttributeError, as ours
    (lambda: Tensor(BASE, is_cuda=False), ValidationError),
    (lambda: Tensor(np.zeros(3, np.uint16), BFLOAT16), KeyError),
    (lambda: Parameter(BASE), None),  # described by the property, and adopted
], ids=["requires-grad", "sparse", "host", "bfloat16", "subclass"])
def test_other_tensors_go_through_the_property(torch, fx, make, error):
    t = make()
    assert producers.read_interface(t) is None
    if error is None:
        assert interop.from_cuda_array_interface(fx, t).shape == BASE.shape
    else:
        with pytest.raises(error):
            interop.from_cuda_array_interface(fx, t)
    assert Tensor.asked == 1


def test_an_active_handler_or_a_replaced_property_is_heard(torch, fx, monkeypatch):
    t = Tensor(BASE)
    torch.handlers = True
    assert producers.read_interface(t) is None
    torch.handlers = False
    assert producers.read_interface(t) is not None
    other = np.zeros(2, np.int16)
    lie = {"typestr": "<i2", "shape": (2,), "data": (other.ctypes.data, True), "version": 2}
    monkeypatch.setattr(Tensor, "__cuda_array_interface__", property(lambda self: lie))
    assert producers.read_interface(t) is None
    ours = interop.from_cuda_array_interface(fx, t)
    assert ours.shape == (2,) and ours.data_ptr() == other.ctypes.data


@pytest.mark.parametrize("change", ["no-typestr", "hip", "not-torch", "no-handler-probe"])
def test_a_pytorch_the_reader_cannot_follow_is_asked(torch, fx, monkeypatch, change):
    if change == "no-typestr":
        monkeypatch.delattr(sys.modules["torch._tensor"], "_dtype_to_typestr")
    elif change == "hip":
        torch.version.hip = "6.0"
    elif change == "not-torch":
        monkeypatch.setattr(torch, "Tensor", Parameter)
    else:
        monkeypatch.setattr(torch, "_C", SimpleNamespace())
    t = Tensor(BASE)
    assert producers.read_interface(t) is None
    ours = interop.from_cuda_array_interface(fx, t)
    assert Tensor.asked == 1 and ours.shape == BASE.shape
