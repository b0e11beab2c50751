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
The producer's own code (``__dlpack__``, the interface property) runs through
``exec.guard.foreign_call``, which puts the thread's context back if it changed it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ... import _foreign
from ...cai import HeldProducer, interface_of, parse_interface
from ...dlpack import check_device, consume, parse_capsule, request_capsule
from ...dtypes import DType
from ...errors import BackendSourceError, RuntimeStateError, ValidationError
from ...exec import guard
from ...exec.context import ExecContext
from ...tensor import Tensor, TensorView, is_row_major

__all__ = ["METHODS", "validate_producer"]


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


def _span(shape, strides) -> tuple[int, int]:
    lo = hi = 0
    for n, st in zip(shape, strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + 1


def from_dlpack(ctx: ExecContext, obj: object) -> Tensor | TensorView:
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
        producer stays alive as long as it does. Two adoptions of one array are two
        tensors over the same memory (the alias rule compares addresses).
    """
    op = "from_dlpack"
    _foreign.drain()
    if _is_capsule(obj):
        capsule = obj
    else:
        validate_producer(obj, ctx.ordinal, op)
        capsule = guard.foreign_call(request_capsule, obj, int(ctx.stream), op)
    info = parse_capsule(capsule, op)
    check_device(info.device, ctx.ordinal, op)
    owner = consume(capsule, info.managed, info.versioned, ctx.stream, ctx.runtime)
    return _adopt(ctx, info.data, info.dtype, info.shape, info.strides, owner)


def from_cuda_array_interface(ctx: ExecContext, obj: object) -> Tensor | TensorView:
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
    _foreign.drain()
    info = parse_interface(guard.foreign_call(interface_of, obj, op), op)
    if math.prod(info.shape):
        _check_pointer(ctx, info.data, op)
    if info.stream is not None:
        _foreign.order_after(ctx.stream, info.stream, None, op)
    owner = HeldProducer(obj, ctx.stream, ctx.runtime)
    return _adopt(ctx, info.data, info.dtype, info.shape, info.strides, owner)


def _check_pointer(ctx: ExecContext, address: int, op: str) -> None:
    """ValidationError for host memory, RuntimeStateError for another device."""
    try:
        ordinal = ctx.pointer_device(address)
    except BackendSourceError:
        raise ValidationError(
            f"address 0x{address:x} is not CUDA device memory (a host array?); copy host "
            f"data with session.upload_host_tensor(array)", op=op) from None
    if ordinal != ctx.ordinal:
        raise RuntimeStateError(f"the array is on CUDA device {ordinal}; this session "
                                f"runs on CUDA device {ctx.ordinal}", op=op)


def _adopt(ctx: ExecContext, data: int, dtype: DType, shape: tuple[int, ...],
           strides: tuple[int, ...] | None, owner: object) -> Tensor | TensorView:
    """A pool-less buffer over foreign memory, as a tensor or a view of a flat base."""
    item = dtype.itemsize
    size = math.prod(shape)
    if size == 0 or strides is None or is_row_major(shape, strides):
        return Tensor._make(dtype, tuple(shape), buffer=ctx.adopt(data, size * item, owner))
    lo, hi = _span(shape, strides)
    base = Tensor._make(dtype, (hi - lo,),
                        buffer=ctx.adopt(data + lo * item, (hi - lo) * item, owner))
    return TensorView(base, shape, strides, -lo)


METHODS: tuple[tuple[str, Callable], ...] = (
    ("from_dlpack", from_dlpack), ("from_cuda_array_interface", from_cuda_array_interface),
)
