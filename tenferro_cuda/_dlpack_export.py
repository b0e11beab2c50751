"""DLPack export: the capsules behind ``Tensor.__dlpack__`` (the table in docs/interop.md).

- ``max_version`` None or below (1, 0): a legacy ``"dltensor"`` capsule; otherwise
  ``"dltensor_versioned"`` (version (1, min(minor, 1))). ``data`` is the address of
  element (0, ..., 0), ``byte_offset`` 0; shape and element strides (maybe negative) are
  always given. Flags: ``READ_ONLY`` for memory adopted read-only (a legacy capsule cannot
  say so: BufferError), ``IS_COPIED`` for a copy.
- ``stream=S`` is the consumer's stream (``_foreign.consumer_stream``: None/1 legacy
  default, 2 per-thread default, -1 none, a handle or a ``__cuda_stream__`` object; 0
  BufferError): S waits for the tensor's stream with one pooled event before the capsule
  is returned; nothing when S is the tensor's own stream or -1.
- ``dl_device`` other than ``(kDLCUDA, ordinal)`` raises BufferError (export never moves
  data between devices). ``copy=True`` makes a compact copy, on the thread that owns the
  tensor's stream: a dense tensor is copied by one memcpy enqueued on S after S waits
  for the tensor's stream (and the tensor's stream then waits for S, so neither buffer
  is reused under it); a strided view is compacted on the tensor's stream, which S then
  waits for; with ``stream=-1`` the copy is made on the tensor's stream.
- Each capsule's header, shape and strides are one block written by one ``struct`` call,
  kept with the tensor by ``_dlpack_slots`` until the consumer lets go (it calls the
  deleter) or the capsule dies unconsumed. When S was a default stream (1 or 2), the
  deleter makes the tensor's stream wait for S before the tensor is let go, so that our
  later work on that memory (a write, or a reuse after a free) comes after the consumer's;
  any other S may be destroyed by then, and its consumer must have finished with the
  memory, as PyTorch and CuPy require for memory they import: nothing is ordered, and the
  deleter is a C function that runs no Python.
- **Repeated exports of one tensor** take a shorter path. The first export to the
  tensor's own stream, to ``stream=-1`` or to a default stream (None, 1 or 2), with no
  ``dl_device`` and no copy, marks the tensor; the second leaves a ``_Kit`` on it: the
  tensor's shape and strides packed once, and for the ``max_version`` last asked, the
  capsule's header packed once, pointing at them (twice: with each deleter). A later
  call with that ``max_version`` (the same tuple, as PyTorch passes, or an equal tuple
  of two ints, as CuPy makes for each call), such a stream and no ``dl_device``/copy
  checks only what can change -- the runtime open, not capturing and not lost
  (``ctx.eager``, ``lost_contexts``), no pending work, the tensor not reclaimed. For
  -1 or the tensor's own stream it hands the header to ``_dlpack_lease.export``, which
  reuses a block of the tensor's own once its consumer let go; for a default stream it
  orders that stream after the tensor's, as the full path does, and hands
  ``_dlpack_lease.export`` the header whose deleter is the release callback (the same
  block, reused the same way). Anything else takes the full path, which keeps the kit
  up to date.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import threading
from typing import Any

from . import _dlpack_lease as _lease
from . import _dlpack_slots as _slots
from .dlpack import (
    _CODE_BITS,
    _INTS,
    DLPACK_VERSION,
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    LEGACY,
    VERSIONED,
    DLDeviceType,
)
from .errors import RuntimeStateError
from .tensor import Tensor, install_export

__all__ = ["export_capsule", "live_exports", "exports_over", "dlpack_device", "install_copy"]

_CUDA = int(DLDeviceType.kDLCUDA)
_CPU_DEVICE = (DLDeviceType.kDLCPU, 0)
_CUDA_DEVICES: dict[int, tuple[DLDeviceType, int]] = {}
_ident = threading.get_ident
_f = None  # the _foreign module, bound on first use (it imports the driver)
_lost: set = set()  # the driver's lost contexts, bound with the first kit


def _foreign():
    global _f
    if _f is None:
        from . import _foreign as module

        _f = module
    return _f


def dlpack_device(tensor) -> tuple[DLDeviceType, int]:
    """``Tensor.__dlpack_device__``: (kDLCUDA, ordinal) for device tensors, (kDLCPU, 0)
    on host."""
    try:
        kit = tensor._kit
    except AttributeError:  # (a tensor made without one)
        kit = tensor._kit = None
    if kit is not None and kit is not _ONCE:
        return kit.device
    buf = tensor.buffer if type(tensor) is Tensor else tensor.base.buffer
    if buf is None:
        return _CPU_DEVICE
    ordinal = buf.origin.pool.ordinal
    device = _CUDA_DEVICES.get(ordinal)
    if device is None:
        device = _CUDA_DEVICES[ordinal] = (DLDeviceType.kDLCUDA, int(ordinal))
    return device


def _release(consumer, ctx, tensor) -> None:
    """When a consumer on a default stream lets go: our stream reuses or writes the
    memory of ``tensor`` only after that consumer's work so far (the deleter calls it,
    through ``functools.partial(_release, consumer, ctx)``)."""
    if ctx is None or ctx.closed:
        return
    buf = tensor.base.buffer
    # (a graph's block the graph gave up while this consumer held it counts too: it goes
    # back to the arena when this tensor goes, at the next look)
    if buf.home is None and getattr(buf.owner, "held_block", False) is not True:
        return
    capture = ctx.capture
    if capture is not None:  # not into the graph: as the capture ends, before its frees
        # make this memory reusable (the tensor is kept until then)
        capture.defer(lambda: _order_after(ctx, tensor, consumer))
        return
    try:
        (_f or _foreign()).order(ctx, buf.origin.stream, consumer)
    except Exception:  # noqa: BLE001 - runtime closed or context lost: nothing to order
        pass


def _order_after(ctx, tensor, consumer) -> None:
    try:
        _foreign().order(ctx, tensor.base.buffer.origin.stream, consumer)
    except Exception:  # noqa: BLE001 - runtime closed or context lost: nothing to order
        pass


_VERSIONS = {minor: (DLPACK_VERSION[0], minor) for minor in range(DLPACK_VERSION[1] + 1)}
# what consumers send -> what we make (None: legacy)
_USUAL = {(0, 0): None, (0, 8): None, (1, 0): _VERSIONS[0], (1, 1): _VERSIONS[1],
          (1, 2): _VERSIONS[1], (1, 3): _VERSIONS[1]}


def _version(max_version) -> tuple[int, int] | None:
    """The version of the versioned capsule to make for a ``max_version`` that is not one
    of the usual tuples (``_USUAL``), or None for a legacy one. A sequence of two
    integers (numpy's included); a string, a float or any other length is refused."""
    try:
        if isinstance(max_version, (str, bytes)):  # (a sequence, but of characters)
            raise TypeError
        major, minor = (operator.index(v) for v in max_version)
    except (TypeError, ValueError):
        raise BufferError(f"__dlpack__: max_version must be (major, minor) "
                          f"(got {max_version!r})") from None
    if major < 1:
        return None
    if major > DLPACK_VERSION[0]:
        return DLPACK_VERSION
    return _VERSIONS[min(max(minor, 0), DLPACK_VERSION[1])]


def _check_device(buf, dl_device) -> None:
    try:
        wanted = (int(dl_device[0]), int(dl_device[1]))
    except (TypeError, ValueError, IndexError):
        raise BufferError(f"__dlpack__: dl_device must be (device_type, device_id) "
                          f"(got {dl_device!r})") from None
    ordinal = buf.origin.pool.ordinal
    if wanted != (_CUDA, ordinal):
        raise BufferError(f"__dlpack__: the tensor is on CUDA device {ordinal}; "
                          f"dl_device={wanted} would need a copy to another device, which "
                          f"export never makes")


def export_capsule(tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule over this device tensor's memory (``Tensor.__dlpack__``; stream-
    ordered, see docs/interop.md). ``stream``: the consumer's stream -- None or 1 (legacy
    default), 2 (per-thread default), -1 (no synchronization), a handle, or an object with
    ``__cuda_stream__``."""
    try:
        kit = tensor._kit
    except AttributeError:  # (a tensor made without one)
        kit = tensor._kit = None
    if kit is not None and dl_device is None and (copy is None or copy is False) \
            and (max_version is kit.asked
                 or type(max_version) is tuple and len(max_version) == 2  # (a new tuple
                 and type(max_version[0]) is int is type(max_version[1])  # each call:
                 and max_version == kit.asked):  # CuPy's)
        ctx = kit.ctx
        if ctx.eager and not ctx.pending and kit.buf.home is not None \
                and ctx.context_id not in _lost:
            if type(stream) is int:
                if stream == -1 or stream == kit.own:
                    return _lease.export(tensor, kit.holder, kit.head, kit.name)
                if stream == 1 or stream == 2:
                    return _ordered(tensor, kit, ctx, stream)
            elif stream is None:
                return _ordered(tensor, kit, ctx, 1)
    op = "__dlpack__"
    buf = tensor.buffer if type(tensor) is Tensor else tensor.base.buffer
    if buf is None:
        raise BufferError("__dlpack__: this is a host tensor; export GPU tensors only "
                          "(tensor.numpy() gives the host data)")
    if buf.home is None:
        raise RuntimeStateError("cannot export a reclaimed tensor (its buffer was released)",
                                op=op)
    version = None
    if max_version is not None:
        version = False
        if type(max_version) is tuple and len(max_version) == 2 \
                and type(max_version[0]) is int is type(max_version[1]):
            version = _USUAL.get(max_version, False)
        if version is False:  # (_version says what is wrong with it, if anything)
            version = _version(max_version)
    if dl_device is not None:
        _check_device(buf, dl_device)
    if copy is not None and copy is not True and copy is not False:
        raise BufferError(f"__dlpack__: copy must be True, False or None (got {copy!r})")
    f = _f or _foreign()
    own = buf.origin.stream
    consumer = f.consumer_stream(stream, op, own)
    owner = buf.owner
    readonly = owner is not None and getattr(owner, "readonly", False) is True
    if readonly and version is None and not copy:
        raise BufferError("__dlpack__: this tensor is read-only and a legacy (unversioned) "
                          "capsule cannot say so; ask for max_version >= (1, 0)")
    ctx = f.export_context(buf, op)
    flags = FLAG_READ_ONLY if readonly else 0
    if copy:
        tensor = _copied(ctx, tensor, consumer, op)
        buf, flags = tensor.buffer, FLAG_IS_COPIED
    elif consumer is not None and consumer is not own and int(consumer) != int(own):
        if ctx is None:
            raise RuntimeStateError("the tensor's memory belongs to no live runtime; "
                                    "nothing can order a consumer after it", op=op)
        f.order(ctx, consumer, own)
    shape, dtype = tensor.shape, tensor.dtype
    code, bits = _CODE_BITS[dtype]
    ptr = buf.ptr
    data = ptr + tensor.offset * dtype.itemsize if ptr and 0 not in shape else 0
    release = None
    default = consumer is f.LEGACY_STREAM or consumer is f.PER_THREAD_STREAM
    if default:
        release = functools.partial(_release, consumer, ctx)
    if (default or consumer is None or consumer is own) and not copy and ctx is not None \
            and (stream is None or type(stream) is int) and _slots.CLEAR is not None \
            and (version or data) \
            and (max_version is None or type(max_version) is tuple):  # (not mutable)
        _remember(tensor, kit, ctx, buf, int(own), max_version, version, flags, data,
                  code, bits)
    return _slots.export(tensor, shape, tensor.strides, version, flags, data,
                         buf.origin.pool.ordinal, code, bits, _CUDA, release)


def _ordered(tensor, kit, ctx, consumer: int):
    """A kit's export to a consumer on a default stream (``consumer`` 1 or 2): ordered
    after the tensor's stream as the full path orders it, in the tensor's own block
    (``_dlpack_lease``) with the release callback."""
    (_f or _foreign()).order(ctx, consumer, kit.own)
    return _lease.export(tensor, kit.holder, kit.ordered, kit.name, kit.releases[consumer])


class _Kit:
    """What the exports of one tensor share (module doc). Never changed once on a tensor:
    another ``max_version`` gets a new kit (``pointed``), so a call on another thread
    reads one consistent kit."""

    __slots__ = ("ctx", "buf", "own", "device", "dims", "fields", "heads", "holder", "asked",
                 "head", "ordered", "name", "releases")
    ctx: Any  # the ExecContext of the tensor's memory
    buf: Any  # the tensor's DeviceBuffer
    own: int  # the handle of its stream
    device: tuple[DLDeviceType, int]
    dims: bytearray  # shape, then strides (int64), which every header points at
    fields: tuple[int, ...]  # flags, data, ordinal, ndim, code, bits, shape and strides at
    heads: dict[Any, tuple[bytes, bytes]]  # version (None: legacy) -> its two headers
    holder: list  # the tensor's resident record, once exported (``_dlpack_lease``)
    asked: object  # the max_version object the calls pass
    head: bytes  # its header, whose deleter is ``CLEAR``
    ordered: bytes  # the same with the deleter ``CALLBACK`` (a default-stream consumer)
    name: int  # the address of its capsule name
    releases: tuple  # [1], [2]: the release of a consumer on that default stream

    def pointed(self, asked, version) -> _Kit:
        """A kit like this one whose header is that of ``version`` (None: legacy), for
        calls passing the ``max_version`` object ``asked``."""
        heads = self.heads.get(version)
        if heads is None:
            clear = _slots.CLEAR or 0  # (never None where a kit is made)
            heads = self.heads[version] = (self._head(version, clear),
                                           self._head(version, _slots.CALLBACK))
        kit = _Kit()
        kit.ctx, kit.buf, kit.own, kit.device = self.ctx, self.buf, self.own, self.device
        kit.dims, kit.fields, kit.heads, kit.holder = self.dims, self.fields, self.heads, \
            self.holder
        kit.releases = self.releases
        kit.asked, (kit.head, kit.ordered) = asked, heads
        kit.name = _slots.NAMES[version is not None]
        return kit

    def _head(self, version, deleter: int) -> bytes:
        """The header of ``version`` (None: legacy) with ``deleter``."""
        flags, data, ordinal, n, code, bits, shape_p, strides_p = self.fields
        if version is None:
            return LEGACY.pack(data, _CUDA, ordinal, n, code, bits, 1, shape_p, strides_p,
                               0, 0, deleter).ljust(_slots.HEAD_SIZE, b"\0")
        return VERSIONED.pack(version[0], version[1], 0, deleter, flags, data, _CUDA,
                              ordinal, n, code, bits, 1, shape_p, strides_p, 0)


_ONCE = _Kit()  # the mark of a tensor exported once (``asked`` matches nothing)
_ONCE.asked, _ONCE.own = object(), 0


def _remember(tensor, kit, ctx, buf, own: int, asked, version, flags: int, data: int,
              code: int, bits: int) -> None:
    """After a full export that a kit could have made: mark the tensor, or give it a kit
    for ``asked``."""
    global _lost
    if kit is None:
        tensor._kit = _ONCE
        return
    if kit is _ONCE:
        shape, strides = tensor.shape, tensor.strides
        n = len(shape)
        # (shape and strides outside the capsule's block: one header fits every block)
        dims = bytearray(_INTS[n].pack(*shape) + _INTS[n].pack(*strides) if n else bytes(8))
        shape_p = ctypes.addressof((ctypes.c_char * len(dims)).from_buffer(dims))
        kit = _Kit()
        kit.ctx, kit.buf, kit.own, kit.dims, kit.heads = ctx, buf, own, dims, {}
        kit.holder = []
        # (bound to the context, not the tensor: the tensor holds its kit)
        kit.releases = (None, functools.partial(_release, 1, ctx),
                        functools.partial(_release, 2, ctx))
        kit.device = dlpack_device(tensor)
        kit.fields = (flags, data, int(buf.origin.pool.ordinal), n, code, bits, shape_p,
                      shape_p + 8 * n)
        _lost = _foreign()._driver.lost_contexts
    tensor._kit = kit.pointed(asked, version)


def _copied(ctx, tensor, consumer, op: str):
    """A compact copy of ``tensor`` for ``copy=True`` (see the module doc)."""
    f = _foreign()
    if ctx is None or ctx.thread != _ident():
        raise BufferError("__dlpack__(copy=True): the copy is made by the thread whose "
                          "session stream the tensor belongs to; export from that thread "
                          "or with copy=None")
    copier = _copier[0]
    if copier is None:  # (a device tensor comes from a session, which installs it)
        raise BufferError("__dlpack__(copy=True): no session has been opened in this "
                          "process, so no copy can be made")
    from .exec import guard

    return guard.call_current(ctx, copier, f, ctx, tensor, consumer, op)


# The copy of ``copy=True``, ``fn(_foreign, ctx, tensor, consumer stream, op)``: made by an
# op family (``ops/interop.export_copy``, installed when the session's ops are imported:
# the export sits below the op families and never imports them).
_copier: list = [None]


def install_copy(fn) -> None:
    """Install the function that makes the compact copy of ``copy=True``."""
    _copier[0] = fn


def exports_over(buffer) -> int:
    """How many exported capsules over ``buffer`` (of any tensor or view of it) still wait
    for their consumer's deleter."""
    return _slots.over(buffer)


def live_exports(tensor=None) -> int:
    """How many exported capsules (of ``tensor``, or of any tensor) still wait for their
    deleter (tests, diagnostics)."""
    return _slots.pending(tensor)


install_export(capsule=export_capsule, device=dlpack_device)
