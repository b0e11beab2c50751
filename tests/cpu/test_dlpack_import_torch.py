"""``from_dlpack`` of a PyTorch tensor with no ``stream=``: PyTorch's current stream is
read directly (``ops/interop/producers.py``), the tensor is asked with ``stream=-1`` and the
session stream waits for that stream; any PyTorch we cannot read that way, and every other
producer, is asked with ``stream=1`` as the protocol says. A stand-in ``torch`` module
plays PyTorch."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, Interop, Producer

from tenferro_cuda.memo import BoundedCache
from tenferro_cuda.ops import interop
from tenferro_cuda.ops.interop import producers

SIDE = 0xD00D


class _TensorBase:
    """The stand-in ``torch.Tensor`` (its export is the hand-made producer's)."""

    __dlpack__ = Producer.__dlpack__


def _torch(stream=0, version="2.11.0", probe=True, hip=None):
    module = SimpleNamespace(Tensor=_TensorBase, __version__=version,
                             version=SimpleNamespace(hip=hip), _C=SimpleNamespace())
    module.asked_for, module.current = [], stream
    if probe:
        def raw(index):
            module.asked_for.append(index)
            if isinstance(module.current, Exception):
                raise module.current
            return module.current

        module._C._cuda_getCurrentRawStream = raw
    return module


class TorchTensor(Producer, _TensorBase):
    """A producer whose class lives in the ``torch`` package."""


TorchTensor.__module__ = "torch"


class NotATensor(Producer):
    """In the ``torch`` package, but no ``torch.Tensor``."""


NotATensor.__module__ = "torch.nn"


@pytest.fixture
def fx(monkeypatch):
    monkeypatch.setattr(producers, "_probes", BoundedCache(512))
    return Interop(monkeypatch)


def _import(fx, monkeypatch, torch, cls=TorchTensor, stream=None):
    monkeypatch.setitem(sys.modules, "torch", torch)
    p = cls(np.arange(6.0).reshape(2, 3))
    t = interop.from_dlpack(fx, p, stream)
    assert t.data_ptr() == p.array.ctypes.data and t.shape == (2, 3)
    return p


@pytest.mark.parametrize("current,orders", [
    (0, [(OUR_STREAM, 1)]),          # PyTorch's default stream: the legacy stream
    (SIDE, [(OUR_STREAM, SIDE)]),    # a side stream made current with torch.cuda.stream
    (OUR_STREAM, []),                # PyTorch works on our stream (ExternalStream)
], ids=["default", "side", "ours"])
def test_torch_is_asked_with_minus_one_and_its_stream_is_waited_for(fx, monkeypatch,
                                                                     current, orders):
    torch = _torch(current)
    p = _import(fx, monkeypatch, torch)
    assert p.asked == [-1] and fx.orders == orders
    assert torch.asked_for == [fx.ordinal]
    assert fx.made <= 1


@pytest.mark.parametrize("torch", [
    _torch(version="2.3.1"), _torch(probe=False), _torch(RuntimeError("no CUDA")),
    _torch(hip="6.2"), _torch(version="unknown"),
], ids=["old", "no-probe", "probe-fails", "rocm", "bad-version"])
def test_a_torch_we_cannot_read_is_asked_the_protocol_way(fx, monkeypatch, torch):
    p = _import(fx, monkeypatch, torch)
    assert p.asked == [1] and fx.orders == [(OUR_STREAM, 1)]


def test_other_classes_of_the_torch_package_are_asked_the_protocol_way(fx, monkeypatch):
    p = _import(fx, monkeypatch, _torch(SIDE), NotATensor)
    assert p.asked == [1] and fx.orders == [(OUR_STREAM, 1)]


class OwnExport(TorchTensor):
    """A ``torch.Tensor`` subclass with its own ``__dlpack__`` (it may order differently)."""

    def __dlpack__(self, **kwargs):
        return super().__dlpack__(**kwargs)


def test_a_subclass_with_its_own_export_is_asked_the_protocol_way(fx, monkeypatch):
    plain = _import(fx, monkeypatch, _torch(SIDE))
    assert plain.asked == [-1]  # the inherited export: PyTorch's stream read directly
    own = _import(fx, monkeypatch, _torch(SIDE), OwnExport)
    assert own.asked == [1] and fx.orders[-1] == (OUR_STREAM, 1)


def test_a_named_stream_still_wins(fx, monkeypatch):
    torch = _torch(SIDE)
    p = _import(fx, monkeypatch, torch, stream=0xAB00)
    assert p.asked == [-1] and fx.orders == [(OUR_STREAM, 0xAB00)]
    assert torch.asked_for == []  # the caller said which stream: PyTorch is not asked


def test_the_current_stream_is_read_on_every_import(fx, monkeypatch):
    torch = _torch(SIDE)
    _import(fx, monkeypatch, torch)
    first = list(fx.orders)
    torch.current = 0  # torch.cuda.stream(...) left
    _import(fx, monkeypatch, torch)
    assert first == [(OUR_STREAM, SIDE)] and fx.orders[1:] == [(OUR_STREAM, 1)]
