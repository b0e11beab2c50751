"""What we read from a producer we know without asking it: its current stream, and a
PyTorch tensor's CUDA Array Interface.

``from_dlpack(x)`` with no ``stream=`` needs the session stream ordered after the work the
producer has enqueued on its current stream. The protocol's way is to ask
``x.__dlpack__(stream=1)`` (the producer orders its current stream before the legacy
default stream) and then make the session stream wait for stream 1. PyTorch does its part
in Python, through ``torch.cuda.current_stream()`` and ``default_stream()``: 13 to 21 us,
against 3 to 5 us when asked with ``stream=-1``.

For a PyTorch tensor we therefore read PyTorch's current stream of the device ourselves
(``torch._C._cuda_getCurrentRawStream``, 0.1 us), ask with ``stream=-1`` and make the
session stream wait for that stream (one pooled event, nothing when it is the session
stream). That is exactly the order the protocol gives -- PyTorch orders the same stream,
its current one -- with the producer's event work left out. Every other producer, a
subclass of ``torch.Tensor`` with its own ``__dlpack__``, and a PyTorch without that
function or older than 2.4, is asked with ``stream=1`` as before.

The CUDA Array Interface of a plain PyTorch CUDA tensor is read the same way
(``read_interface``): PyTorch's ``__cuda_array_interface__`` property builds its dict in
Python (1.9 us on an H100, then 1.1 us for us to parse it), while the fields it is built
from are C getters of the tensor (1.0 us together, checks included). The reader gives
exactly what the property describes (pointer, 0 for an empty tensor; shape; element
strides, None when PyTorch calls the tensor contiguous; dtype by PyTorch's own
``_dtype_to_typestr``; writable; no stream, as PyTorch's interface is version 2) and
takes only tensors the property would describe without a word of its own: the exact
class ``torch.Tensor`` with its own property (not replaced), no ``__torch_function__``
handler or mode active, a strided CUDA tensor that does not require grad, of a dtype both
sides have. Anything else -- a subclass, a tensor that requires grad, a sparse one, a
dtype the interface lacks -- is asked through the property, which describes it or raises
its own error as before.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ...cai import CAIInfo, dtype_from_typestr
from ...memo import BoundedCache

__all__ = ["current_stream", "read_interface"]

_UNKNOWN = object()
# per producer class: its stream probe, or None (classes made on the fly: bounded)
_probes: BoundedCache = BoundedCache(512)
# per producer class: its interface reader, or None
_readers: BoundedCache = BoundedCache(512)


def current_stream(obj: object, ordinal: int) -> int | None:
    """The raw handle (>= 1; the NULL stream is the legacy stream 1) of the stream the
    producer of ``obj`` works on now on device ``ordinal``, or None when we cannot read
    it without the producer's help."""
    kind = type(obj)
    probe = _probes.get(kind, _UNKNOWN)
    if probe is _UNKNOWN:
        probe = _probes.put(kind, _probe_for(kind))
    if probe is None:
        return None
    try:
        return probe(ordinal) or 1
    except Exception:  # noqa: BLE001 - the protocol's way still works
        return None


def _probe_for(kind: type) -> Callable[[int], int] | None:
    module = getattr(kind, "__module__", None) or ""
    if module.partition(".")[0] != "torch":
        return None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(getattr(torch, "Tensor", None), type) \
            or not issubclass(kind, torch.Tensor):
        return None
    if getattr(getattr(torch, "version", None), "hip", None) or _version(torch) < (2, 4):
        return None  # ROCm streams, or a __dlpack__ that may not take stream=-1
    if getattr(kind, "__dlpack__", None) is not getattr(torch.Tensor, "__dlpack__", None):
        return None  # a subclass with its own export: it orders as it says, when asked
    probe = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    return probe if callable(probe) else None


def _version(torch) -> tuple[int, int]:
    try:
        major, minor = str(torch.__version__).split(".")[:2]
        return int(major), int(minor)
    except (AttributeError, ValueError):
        return (0, 0)


def read_interface(obj: object) -> CAIInfo | None:
    """The CUDA Array Interface of ``obj`` read from the object itself, exactly as its
    producer's ``__cuda_array_interface__`` would give it, or None: ask the producer."""
    kind = type(obj)
    reader = _readers.get(kind, _UNKNOWN)
    if reader is _UNKNOWN:
        reader = _readers.put(kind, _reader_for(kind))
    return None if reader is None else reader(obj)


def _reader_for(kind: type) -> Callable[[object], CAIInfo | None] | None:
    torch = sys.modules.get("torch") if getattr(kind, "__module__", None) == "torch" else None
    if torch is None or kind is not getattr(torch, "Tensor", None) \
            or getattr(getattr(torch, "version", None), "hip", None):
        return None
    prop = vars(kind).get("__cuda_array_interface__")
    has_handler = getattr(getattr(torch, "_C", None), "_has_torch_function_unary", None)
    to_typestr = getattr(sys.modules.get("torch._tensor"), "_dtype_to_typestr", None)
    strided = getattr(torch, "strided", None)
    if not isinstance(prop, property) or not callable(has_handler) \
            or not callable(to_typestr) or strided is None:
        return None
    dtypes = {}
    for value in vars(torch).values():
        if isinstance(value, getattr(torch, "dtype", ())) and value not in dtypes:
            try:
                dtypes[value] = dtype_from_typestr(to_typestr(value))
            except Exception:  # noqa: BLE001 - a dtype PyTorch's interface or ours lacks
                continue

    def read(t):
        if kind.__cuda_array_interface__ is not prop or has_handler(t):
            return None  # the property was replaced, or a handler may change its answer
        dtype = dtypes.get(t.dtype)
        if dtype is None or not t.is_cuda or t.layout is not strided or t.requires_grad:
            return None  # the property's own answer or error
        ptr = t.data_ptr() if t.numel() else 0
        strides = None if t.is_contiguous() else t.stride()
        # (the fields in order, without CAIInfo's generated __new__)
        return tuple.__new__(CAIInfo, (ptr, tuple(t.shape), strides, dtype, False, None))

    return read if dtypes else None
