"""Zero-copy adoption of foreign GPU arrays (PyTorch, CuPy, JAX, Numba, ...).

``from_dlpack(obj)`` and ``from_cuda_array_interface(obj)`` return a Tensor (compact
row-major arrays) or a TensorView over a flat base tensor (any other strides, negative
included) whose ``DeviceBuffer`` lives in this session's allocation domain, on the session
stream, with no pool: it is never freed by us. Its ``owner`` keeps the producer alive
(``dlpack.ForeignOwner`` calls the DLPack deleter exactly once; ``cai.HeldProducer`` holds
the exporting object) and lets go only when the session stream has finished the work
enqueued so far (``_foreign.release_when_idle``). Stream order, without a host wait:
- DLPack: the producer's ``__dlpack__(stream=<session stream>)`` makes our stream wait;
- CAI: a ``stream`` entry gets an event recorded on it that the session stream waits on.
Everything is validated before anything changes: host arrays raise ValidationError
(pointing to ``upload_host_tensor``), arrays on another CUDA device RuntimeStateError.
"""

from __future__ import annotations

import math

from .. import _foreign
from ..cai import HeldProducer, interface_of, parse_interface
from ..dlpack import check_device, consume, parse_capsule, request_capsule
from ..dtypes import DType
from ..errors import BackendSourceError, RuntimeStateError, ValidationError
from ..kernels import device
from ..memory import DeviceBuffer
from ..tensor import Tensor, TensorView
from ._base import OpsBase

__all__ = ["InteropOps", "validate_producer"]


def _is_capsule(obj: object) -> bool:
    return type(obj).__name__ == "PyCapsule"


def validate_producer(obj: object, ordinal: int, op: str = "from_dlpack") -> None:
    """Check a DLPack producer before anything is asked of it (no CUDA call).

    Raises ValidationError for objects without ``__dlpack__`` and for host arrays,
    RuntimeStateError for arrays on another CUDA device.
    """
    if not hasattr(obj, "__dlpack__"):
        raise ValidationError(f"expected an object with __dlpack__ (a PyTorch, CuPy or JAX "
                              f"GPU array) or a DLPack capsule, got {type(obj).__name__}",
                              op=op)
    device_of = getattr(obj, "__dlpack_device__", None)
    if device_of is not None:
        check_device(device_of(), ordinal, op)


def _compact(shape, strides) -> bool:
    expect = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def _span(shape, strides) -> tuple[int, int]:
    lo = hi = 0
    for n, st in zip(shape, strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + 1


class InteropOps(OpsBase):
    def from_dlpack(self, obj: object) -> Tensor | TensorView:
        """Adopt a GPU array through DLPack without copying.

        Parameters
        ----------
        obj : object
            An object with ``__dlpack__`` (a PyTorch, CuPy or JAX array, a tenferro
            device tensor) on this session's device, or a DLPack capsule. A capsule
            carries no stream: its producer must have finished writing it.

        Returns
        -------
        Tensor or TensorView
            A tensor (compact arrays) or a view (other strides) sharing the memory; the
            producer stays alive as long as it does.
        """
        op = "from_dlpack"
        state = self._begin(op)
        _foreign.drain()
        rt = self._rt
        if _is_capsule(obj):
            capsule = obj
        else:
            validate_producer(obj, rt.ordinal, op)
            capsule = request_capsule(obj, int(state.stream), op)
        info = parse_capsule(capsule, op)
        check_device(info.device, rt.ordinal, op)
        owner = consume(capsule, info.managed, info.versioned, state.stream, rt)
        return self._adopt(info.data, info.dtype, info.shape, info.strides, owner)

    def from_cuda_array_interface(self, obj: object) -> Tensor | TensorView:
        """Adopt a GPU array through the CUDA Array Interface (v0-v3) without copying.

        Parameters
        ----------
        obj : object
            An object exposing ``__cuda_array_interface__`` (kept alive while the result
            is), or the interface dict itself (then the caller keeps the producer alive).
            A ``stream`` entry is ordered before the session stream with an event.

        Returns
        -------
        Tensor or TensorView
            A tensor (compact arrays) or a view (other strides) sharing the memory.
        """
        op = "from_cuda_array_interface"
        state = self._begin(op)
        _foreign.drain()
        info = parse_interface(interface_of(obj, op), op)
        if math.prod(info.shape):
            self._check_pointer(info.data, op)
        if info.stream is not None:
            _foreign.order_after(state.stream, device.stream_handle(info.stream), None, op)
        owner = HeldProducer(obj, state.stream, self._rt)
        return self._adopt(info.data, info.dtype, info.shape, info.strides, owner)

    def _check_pointer(self, address: int, op: str) -> None:
        """ValidationError for host memory, RuntimeStateError for another device."""
        try:
            ordinal = device.pointer_device_ordinal(address)
        except BackendSourceError:
            raise ValidationError(
                f"address 0x{address:x} is not CUDA device memory (a host array?); copy host "
                f"data with session.upload_host_tensor(array)", op=op) from None
        if ordinal != self._rt.ordinal:
            raise RuntimeStateError(f"the array is on CUDA device {ordinal}; this session "
                                    f"runs on CUDA device {self._rt.ordinal}", op=op)

    def _adopt(self, data: int, dtype: DType, shape: tuple[int, ...],
               strides: tuple[int, ...] | None, owner: object) -> Tensor | TensorView:
        """A pool-less buffer over foreign memory, as a tensor or a view of a flat base."""
        rt, stream = self._rt, self._state.stream
        item = dtype.itemsize
        size = math.prod(shape)

        def buffer(ptr: int, nbytes: int) -> DeviceBuffer:
            return DeviceBuffer(ptr, nbytes, None, stream, domain=rt.domain.value,
                                ordinal=rt.ordinal, owner=owner)

        if size == 0 or strides is None or _compact(shape, strides):
            return Tensor._make(dtype, tuple(shape), buffer=buffer(data, size * item))
        lo, hi = _span(shape, strides)
        base = Tensor._make(dtype, (hi - lo,), buffer=buffer(data + lo * item, (hi - lo) * item))
        return TensorView(base, shape, strides, -lo)
