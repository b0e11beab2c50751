"""Zero-copy adoption of foreign GPU arrays (PyTorch, CuPy, JAX, Numba, ...).

``from_dlpack(obj, stream=None)`` and ``from_cuda_array_interface(obj, stream=None)``
return a Tensor (compact row-major arrays) or a TensorView over a flat base tensor (any
other strides, negative included) whose ``DeviceBuffer`` lives in this session's
allocation domain, on the session stream, with no pool: it is never freed by us. Its
``owner`` keeps the producer alive (``dlpack.ForeignOwner`` calls the DLPack deleter
exactly once; ``cai.HeldProducer`` holds the exporting object), carries the read-only flag
(``shapes/aliasing.check_writable``) and lets go only when the session stream has finished
the work enqueued so far (``_foreign.release_when_idle``).

Stream order, without a host wait, one pooled event at most (``_foreign.order``):
- ``stream=None``, DLPack: the producer is asked with ``__dlpack__(stream=1)`` -- the
  cheapest request, free for a producer whose work is on the legacy default stream --
  and the session stream then waits for stream 1. A PyTorch tensor is asked with
  ``stream=-1`` instead, and the session stream waits for PyTorch's current stream, read
  directly (``producers.py``: the same order, without PyTorch's own event work). Our own
  tensors are asked with the session stream, so a tensor of this stream costs no event
  at all. A bare capsule carries no stream: its producer must have finished writing it.
- ``stream=None``, CAI: a ``stream`` entry (v3) is waited for; none means no ordering.
- ``stream=S`` (a handle or a ``__cuda_stream__`` object: the stream the producer's data
  was written on) replaces both: the producer is asked with ``stream=-1`` and the session
  stream waits for S (nothing when S is the session stream). ``stream=-1``: no ordering.
Everything is validated before anything changes: host arrays raise ValidationError
(pointing to ``upload_host_tensor``), arrays on another CUDA device RuntimeStateError,
arrays that reach past their allocation ValidationError (asked of the driver for every
CAI array and for DLPack capsules of no known library: a bare capsule or a producer class
of no ``KNOWN_PRODUCERS`` module).
The producer's own code (``__dlpack__``, the interface property) runs through
``exec.guard.foreign_call_over``, which puts our context back on top if the code changed
it; a producer of no known array library (``KNOWN_PRODUCERS``: its class's top-level
module) runs through ``foreign_call_saved`` instead, which puts the caller's whole stack
back exactly. A plain PyTorch tensor's interface is read from the tensor instead
(``producers.read_interface``: PyTorch's C getters, exactly what its property would say;
no producer code runs, so no guard is needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable

# _dlpack_export and cai install Tensor's export protocol; the export's copy is ours.
from ... import _dlpack_export, _foreign
from ...cai import HeldProducer, interface_of, parse_interface
from ...dlpack import CAPSULE_TYPE, DLPACK_VERSION, check_device, consume, read_capsule
from ...dtypes import DType
from ...errors import BackendSourceError, RuntimeStateError, ValidationError
from ...exec import guard
from ...exec.context import ExecContext
from ...memo import BoundedCache
from ...tensor import Tensor, TensorView, _Strided, is_row_major
from .. import storage
from .producers import current_stream, read_interface

__all__ = ["METHODS", "validate_producer", "request_capsule"]

_LEGACY = 1
_NO_SYNC = -1
_legacy_only: set[type] = set()  # producer types whose __dlpack__ takes stream= alone
_no_sync_refused: set[type] = set()  # producer types whose __dlpack__ fails on stream=-1
_order = _foreign.order
_stream_of = _foreign.stream_of
_drain = _foreign.drain
_parked = _foreign._parked


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


def request_capsule(obj, stream: int, op: str = "from_dlpack"):
    """``obj.__dlpack__(stream=stream, max_version=(1, 1), copy=False)``, or the pre-1.0
    ``obj.__dlpack__(stream=stream)`` for producers that take nothing else (remembered per
    type); the producer's BufferError becomes ValidationError."""
    method = obj.__dlpack__  # type: ignore[attr-defined]
    kind = type(obj)
    if stream == _NO_SYNC:
        if kind in _no_sync_refused:
            stream = _LEGACY
        else:
            try:
                return _ask(method, kind, stream, op)
            except (ValidationError, TypeError):
                raise
            except Exception:  # noqa: BLE001 - a producer that takes -1 for a handle
                # (jax's __dlpack__ does): ask it to order before stream 1 instead, which
                # every producer takes; the consumer's ordering is unchanged. The type is
                # remembered only when that works (a producer refusing this array on any
                # stream raises its own error, and its next array is asked with -1 again).
                capsule = _ask(method, kind, _LEGACY, op)
                _no_sync_refused.add(kind)
                return capsule
    return _ask(method, kind, stream, op)


def _ask(method, kind: type, stream: int, op: str):
    try:
        if kind not in _legacy_only:
            try:
                return method(stream=stream, max_version=DLPACK_VERSION, copy=False)
            except TypeError:  # a producer older than DLPack 1.0 / array API 2023.12
                capsule = method(stream=stream)
                _legacy_only.add(kind)
                return capsule
        return method(stream=stream)
    except BufferError as exc:
        raise ValidationError(f"the producer cannot export this array without a copy or "
                              f"at all: {exc}", op=op) from exc


def _source(ctx: ExecContext, stream: object, op: str) -> int | None:
    """The producer stream a caller named (None: the protocol decides; -1: no order)."""
    if stream is None:
        return None
    value = _foreign.stream_value(stream, op, ValidationError)
    if value < -1:
        raise ValidationError(f"stream must be None, -1 or a stream handle (got {value})",
                              op=op)
    return value if value != 0 else _LEGACY


def _wait_for(ctx: ExecContext, producer: int) -> None:
    """The session stream waits for ``producer`` (a handle; nothing for ours or -1)."""
    if producer != _NO_SYNC and producer != int(ctx.stream):
        _order(ctx, ctx.stream, _stream_of(producer), True)  # (inside an op: ours is current)


def from_dlpack(ctx: ExecContext, obj: object, stream: object = None) -> Tensor | TensorView:
    """Adopt a GPU array through DLPack without copying.

    Parameters
    ----------
    obj : object
        An object with ``__dlpack__`` (a PyTorch, CuPy or JAX array, a tenferro
        device tensor) on this session's device, or a DLPack capsule.
    stream : int, object with ``__cuda_stream__``, or None
        None: the producer orders its pending work before the session stream (a bare
        capsule is taken as finished). A stream (a handle, or an object with
        ``__cuda_stream__`` such as this session's ``stream``, a PyTorch, CuPy or
        cuda.core stream): the producer's data was written on it, and the session
        stream waits for it. ``-1``: no ordering at all (the data is ready).

    Returns
    -------
    Tensor or TensorView
        A tensor (compact arrays) or a view (other strides) sharing the memory; the
        producer stays alive as long as it does. Two adoptions of one array are two
        tensors over the same memory (the alias rule compares addresses). A capsule
        flagged read-only gives a tensor that no op accepts as an output.
    """
    op = "from_dlpack"
    if _parked:
        _drain()
    source = None if stream is None else _source(ctx, stream, op)
    if isinstance(obj, _Strided) and _is_ours(ctx, obj):
        return _same_memory(ctx, obj, source)  # type: ignore[arg-type]
    if type(obj) is CAPSULE_TYPE:
        capsule, wait, known = obj, source, False
    else:
        validate_producer(obj, ctx.ordinal, op)
        known = _is_known(type(obj))
        if source is not None:
            ask, wait = _NO_SYNC, source
        elif isinstance(obj, _Strided):  # ours: ordered by our export, free on one stream
            ask, wait = int(ctx.stream), None
        else:
            current = current_stream(obj, ctx.ordinal)  # PyTorch's, read directly
            ask, wait = (_LEGACY, _LEGACY) if current is None else (_NO_SYNC, current)
        capsule = _foreign_call(ctx, known, request_capsule, obj, ask, op)
    data, shape, strides, dtype, device, versioned, readonly, managed, _, deleter = \
        read_capsule(capsule, op)
    if device[0] != 2 or device[1] != ctx.ordinal:
        check_device(device, ctx.ordinal, op)
    if not known and 0 not in shape:  # (a bare capsule, or of no known library)
        _check_memory(ctx, data, dtype, shape, strides, op)
    if wait is not None:
        _wait_for(ctx, wait)
    owner = consume(capsule, managed, versioned, ctx.stream, ctx.runtime, deleter, readonly)
    return _adopt(ctx, data, dtype, shape, strides, owner)


def from_cuda_array_interface(ctx: ExecContext, obj: object,
                              stream: object = None) -> Tensor | TensorView:
    """Adopt a GPU array through the CUDA Array Interface (v0-v3) without copying.

    Parameters
    ----------
    obj : object
        An object exposing ``__cuda_array_interface__`` (kept alive while the result
        is), or the interface dict itself (then the caller keeps the producer alive).
    stream : int, object with ``__cuda_stream__``, or None
        None: the dict's ``stream`` entry (v3) is waited for, no entry means no
        ordering. A stream (a handle or an object with ``__cuda_stream__``): the
        data was written on it and the session stream waits for it instead. ``-1``:
        no ordering.

    Returns
    -------
    Tensor or TensorView
        A tensor (compact arrays) or a view (other strides) sharing the memory;
        read-only when the interface says so (``data[1]``).
    """
    op = "from_cuda_array_interface"
    if _parked:
        _drain()
    source = None if stream is None else _source(ctx, stream, op)
    if isinstance(obj, _Strided) and _is_ours(ctx, obj):
        return _same_memory(ctx, obj, source)  # type: ignore[arg-type]
    if type(obj) is dict:
        info = parse_interface(obj, op)
    else:  # a plain PyTorch tensor is read from the tensor, anything else asked
        info = read_interface(obj) or parse_interface(
            _foreign_call(ctx, _is_known(type(obj)), interface_of, obj, op), op)
    if 0 not in info.shape:
        _check_memory(ctx, info.data, info.dtype, info.shape, info.strides, op)
    wait = info.stream if source is None else source
    if wait is not None:
        _wait_for(ctx, wait)
    owner = HeldProducer(obj, ctx.stream, ctx.runtime, info.readonly)
    return _adopt(ctx, info.data, info.dtype, info.shape, info.strides, owner)


KNOWN_PRODUCERS = frozenset({"torch", "cupy", "jax", "jaxlib", "numba", "numpy", "cuda",
                             "tenferro_cuda"})
_known_types: BoundedCache = BoundedCache(512)  # classes made on the fly: bounded


def _foreign_call(ctx: ExecContext, known: bool, fn: Callable, *args: object):
    """``fn(*args)``, code of a producer, under the context guard: the light one for the
    array libraries of ``KNOWN_PRODUCERS`` (``known``, from ``_is_known``), the exact one
    for any other."""
    if known:
        return guard.foreign_call_over(ctx.context, ctx.context_id, fn, *args)
    return guard.foreign_call_saved(fn, *args)


def _is_known(kind: type) -> bool:
    """Whether ``kind`` is a class of one of the array libraries of ``KNOWN_PRODUCERS``
    (its top-level module)."""
    known = _known_types.get(kind)
    if known is None:
        module = getattr(kind, "__module__", None) or ""
        known = _known_types.put(kind, module.partition(".")[0] in KNOWN_PRODUCERS)
    return known


def _is_ours(ctx: ExecContext, obj: _Strided) -> bool:
    """Whether the tensor or view ``obj`` is resident on this context."""
    buf = obj.base.buffer
    return buf is not None and buf.home is ctx.home


def _same_memory(ctx: ExecContext, t: _Strided, source: int | None) -> Tensor | TensorView:
    """Adopting one of this context's own tensors: a new tensor or view over the same
    buffer (no capsule, no second buffer), so that reclaiming either one leaves neither
    usable over released memory."""
    if source is not None:
        _wait_for(ctx, source)
    if isinstance(t, Tensor):
        return Tensor._make(t.dtype, t.shape, buffer=t.buffer)
    return TensorView(t.base, t.shape, t.strides, t.offset)


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


def _check_memory(ctx: ExecContext, data: int, dtype: DType, shape: tuple[int, ...],
                  strides: tuple[int, ...] | None, op: str) -> None:
    """``_check_pointer`` for ``data``, then ValidationError when the first or last byte
    that ``shape`` and ``strides`` reach from it is not device memory of this session's
    device (the array claims more than its allocation): checked here, because a kernel
    reading there would fault and take the context with it. (Memory of another allocation
    of the same device passes: the driver cannot say whose it is.)"""
    _check_pointer(ctx, data, op)
    item = dtype.itemsize
    if strides is None:
        lo, hi = 0, math.prod(shape)
    else:
        lo, hi = _span(shape, strides)
    for address in (data + lo * item, data + hi * item - 1):
        if address == data:
            continue
        try:
            ordinal = ctx.pointer_device(address)
        except BackendSourceError:
            ordinal = None
        if ordinal != ctx.ordinal:
            raise ValidationError(
                f"the array (shape {shape}, element strides {strides}, from "
                f"0x{data:x}) reaches 0x{address:x}, which is not device memory of "
                f"CUDA device {ctx.ordinal}: its shape or strides claim more than its "
                f"allocation", op=op)


def _span(shape, strides) -> tuple[int, int]:
    lo = hi = 0
    for n, st in zip(shape, strides):
        if st > 0:
            hi += (n - 1) * st
        else:
            lo += (n - 1) * st
    return lo, hi + 1


def _adopt(ctx: ExecContext, data: int, dtype: DType, shape: tuple[int, ...],
           strides: tuple[int, ...] | None, owner: object) -> Tensor | TensorView:
    """A pool-less buffer over foreign memory, as a tensor or a view of a flat base."""
    item = dtype.itemsize
    size = math.prod(shape)
    if strides is None or size == 0 or is_row_major(shape, strides):
        return Tensor._make(dtype, shape, buffer=ctx.adopt(data, size * item, owner))
    lo, hi = _span(shape, strides)
    base = Tensor._make(dtype, (hi - lo,),
                        buffer=ctx.adopt(data + lo * item, (hi - lo) * item, owner))
    return TensorView(base, shape, strides, -lo)


def export_copy(f, ctx: ExecContext, tensor: _Strided, consumer: int | None,
                op: str) -> Tensor:
    """The compact copy an export with ``copy=True`` hands over (``_dlpack_export``; our
    context is current): a dense tensor is copied by one memcpy on the consumer's stream
    after it waits for ours (ours then waits for it, so neither buffer is reused under the
    copy); a strided view is compacted on our stream, which the consumer then waits for;
    with no consumer stream (-1) the copy is made on ours."""
    if consumer is None or not tensor.is_contiguous:
        out = storage.materialize(ctx, tensor, op)
        if consumer is not None:
            f.order(ctx, consumer, ctx.stream)
        return out
    out = ctx.alloc(tensor.dtype, tensor.shape, op)
    f.order(ctx, consumer, ctx.stream)  # the source's writes and the allocation
    if out.size:
        f.copy_on(consumer, out.data_ptr(), tensor.data_ptr(), out.nbytes, op)
    f.order(ctx, ctx.stream, consumer)  # neither buffer is reused under the copy
    return out


_dlpack_export.install_copy(export_copy)

METHODS: tuple[tuple[str, Callable], ...] = (
    ("from_dlpack", from_dlpack), ("from_cuda_array_interface", from_cuda_array_interface),
)
