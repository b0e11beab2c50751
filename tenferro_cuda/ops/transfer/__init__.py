"""Explicit transfers and buffer release: upload, download, reclaim, copies between
sessions.

``upload_host_tensor`` enqueues a host-to-device copy; the numpy array may be dropped as
soon as it returns. ``download_to_host`` is one of the two host barriers: it returns a
host tensor holding the finished result. ``copy_to`` copies into another session's
runtime (another device, usually), stream-ordered on both sides (``exec/peer.py`` has the
routes). Everything else only enqueues.

Transfers of at most ``WORD_BYTES`` (8) bytes go through the execution context's pinned
host word (``ExecContext.err_host``, the word ``synchronize`` reads the device error word
into) with one asynchronous copy, and a download with one stream synchronize: a copy from
pageable memory is staged by the driver, which may wait for the stream, and a download
into pageable memory waits inside the driver before the stream synchronize. The word is
reused only when no copy from it can be pending: an upload through it marks it busy, a
download (which ends with the stream idle) marks it free, and a busy word makes the
next small upload copy from pageable memory instead. Larger transfers copy directly from
or into the numpy array's own memory.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from ..._dlpack_export import exports_over
from ...errors import (
    RuntimeStateError,
    UnsupportedDTypeError,
    UnsupportedError,
    ValidationError,
)
from ...exec import guard, peer
from ...exec.context import ExecContext
from ...exec.entry import context_of
from ...exec.residency import resident
from ...shapes import check_size
from ...tensor import Tensor, TensorView, _Strided
from .. import storage

__all__ = ["METHODS", "WORD_BYTES"]

WORD_BYTES = 8  # ExecContext.err_host: page-locked, 8 bytes
_WORD_KEY = ("transfer", "word")


class _Word:
    """The context's pinned word as the small transfers see it: its address, a ctypes view
    of its bytes, and whether a copy from it may still be pending (see the module
    docstring). Kept in ``ctx.memo``; a word not found there (never used, or evicted) is
    taken to be busy until the next download."""

    __slots__ = ("address", "view", "pending")

    def __init__(self, address: int) -> None:
        self.address = address
        self.view = memoryview((ctypes.c_char * WORD_BYTES).from_address(address)).cast("B")
        self.pending = True


def _word(ctx: ExecContext) -> _Word:
    word = ctx.memo.get(_WORD_KEY)
    if word is None:
        word = ctx.memo.put(_WORD_KEY, _Word(ctx.err_host))
    return word


def _put(ctx: ExecContext, dst: int, data: np.ndarray, nbytes: int, op: str) -> None:
    """Enqueue the copy of the C-contiguous ``data`` to ``dst``; never waits."""
    if nbytes <= WORD_BYTES:
        word = _word(ctx)
        if not word.pending:
            ctypes.memmove(word.address, data.tobytes(), nbytes)
            word.pending = True
            ctx.upload(dst, word.address, nbytes, op)
            return
    ctx.upload(dst, data.ctypes.data, nbytes, op)


def upload_host_tensor(ctx: ExecContext, tensor: Tensor | TensorView | np.ndarray) -> Tensor:
    """Copy a host tensor, host view or numpy array into a new device tensor.

    Parameters
    ----------
    tensor : Tensor, TensorView or numpy.ndarray
        Host data (any layout; views are compacted on the host first).

    Returns
    -------
    Tensor
        A new compact device tensor; the copy is enqueued on the session stream.

    Raises
    ------
    ValidationError
        Not a host tensor, view or array.
    RuntimeStateError
        The tensor is already on a device.
    """
    op = "upload_host_tensor"
    if isinstance(tensor, np.ndarray):
        if isinstance(tensor, np.ma.MaskedArray):  # np.asarray would drop the mask
            raise UnsupportedError("masked arrays cannot be uploaded (the values under the "
                                   "mask would be taken as data): upload a.filled(value) "
                                   "or a.data", op=op)
        try:
            tensor = Tensor.from_numpy(tensor)
        except UnsupportedDTypeError as exc:
            raise UnsupportedDTypeError(str(exc), op=op) from None
    if not isinstance(tensor, _Strided):
        raise ValidationError(f"expected a host Tensor, TensorView or numpy array "
                              f"(got {type(tensor).__name__})", op=op)
    check_size(tensor.shape, op, tensor.dtype.itemsize)  # (any rank: the ops bound it)
    if tensor.base.host is None:
        raise RuntimeStateError("the tensor is already on a device; upload takes a host "
                                "tensor (use to_contiguous_read or copy_read_into)", op=op)
    data = tensor.numpy() if tensor.base is not tensor else tensor.base.host
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    out = ctx.alloc(tensor.dtype, tensor.shape, op)
    nbytes = data.nbytes
    if nbytes:
        _put(ctx, out.buffer.ptr, data, nbytes, op)  # type: ignore[union-attr]
    return out


def download_to_host(ctx: ExecContext, tensor: Tensor | TensorView) -> Tensor:
    """Copy a device tensor or view to a new host tensor; blocks until it is there.

    Parameters
    ----------
    tensor : Tensor or TensorView
        A device tensor or view of this session.

    Returns
    -------
    Tensor
        A host tensor (``.numpy()`` gives the data) of the same shape and dtype.

    Raises
    ------
    RuntimeStateError
        A host tensor, or one not resident on this session.
    """
    op = "download_to_host"
    if isinstance(tensor, _Strided) and tensor.base.buffer is None:
        raise RuntimeStateError("download_to_host takes a device tensor; this one is "
                                "already on the host", op=op)
    resident(ctx, tensor, op)
    check_size(tensor.shape, op, tensor.dtype.itemsize)  # an empty view may claim any extent
    src = tensor if type(tensor) is Tensor or tensor.is_contiguous else \
        storage.materialize(ctx, tensor, op)
    dtype, shape = tensor.dtype, tensor.shape
    count = src.size
    nbytes = count * dtype.itemsize
    if 0 < nbytes <= WORD_BYTES:
        word = _word(ctx)
        ctx.download(word.address, src.data_ptr(), nbytes, op)
        ctx.wait(op)
        word.pending = False  # the stream is idle: no copy from the word is pending
        host = np.frombuffer(word.view, dtype.numpy, count).reshape(shape).copy()
        return Tensor._make(dtype, shape, host=host)
    host = np.empty(shape, dtype=dtype.numpy)
    if nbytes:
        ctx.download(host.ctypes.data, src.data_ptr(), nbytes, op)
        ctx.wait(op)
        seen = ctx.memo.get(_WORD_KEY)
        if seen is not None:
            seen.pending = False
    return Tensor._make(dtype, shape, host=host)


def reclaim_buffer(ctx: ExecContext, tensor: Tensor) -> None:
    """Release ``tensor``'s device memory now (stream-ordered); every tensor over that
    buffer (reshapes of it included) is unusable afterwards.

    Parameters
    ----------
    tensor : Tensor
        An owned device tensor of this session (not a view).

    Raises
    ------
    ValidationError
        A view instead of an owned tensor.
    RuntimeStateError
        Not resident on this session (already reclaimed, say), or exported through
        DLPack to a consumer that still holds it (its memory must outlive that). The
        CUDA Array Interface has no release signal: a consumer that read it is not
        known here, so reclaim only what no consumer still reads.
    """
    op = "reclaim_buffer"
    if not isinstance(tensor, Tensor):
        raise ValidationError("reclaim_buffer takes an owned Tensor, not a view", op=op)
    buffer = resident(ctx, tensor, op)
    held = exports_over(buffer)
    if held:
        raise RuntimeStateError(f"this tensor's memory is exported through DLPack and "
                                f"{held} consumer(s) still hold it; drop them first", op=op)
    buffer.release()


def copy_to(ctx: ExecContext, destination: object, tensor: Tensor | TensorView,
            route: str = "auto") -> Tensor:
    """Copy a tensor or view of this session into a new tensor of ``destination``.

    The only way data moves between devices (ops never transfer implicitly). The copy is
    ordered after this session's earlier work and before ``destination``'s later work,
    and this session's later work (a free of ``tensor``, say) waits for it; the host is
    never blocked.

    Parameters
    ----------
    destination : CudaExecSession
        A session open on this thread: of another device, of this one, or this session.
    tensor : Tensor or TensorView
        A device tensor or view of this session (views are compacted here first).
    route : {"auto", "peer", "host"}
        ``"auto"``: a device-to-device copy when both sessions share the device or the
        driver allows peer access between the devices (``supports(PEER_COPY, peer=...)``),
        else staged through pinned host memory. ``"peer"``: direct or fail.
        ``"host"``: always staged through pinned host memory.

    Returns
    -------
    Tensor
        A new compact tensor resident on ``destination``.

    Raises
    ------
    ValidationError
        ``destination`` is not a session, or ``route`` is unknown.
    RuntimeStateError
        ``tensor`` is not resident on this session, or ``destination`` is closed or
        belongs to another thread.
    UnsupportedError
        ``route="peer"`` between devices without peer access.
    """
    op = "copy_to"
    buffer = resident(ctx, tensor, op)
    dst = context_of(destination, op)
    how = peer.choose(ctx, dst, route, op)
    if how == "same":
        return storage.materialize(ctx, tensor, op)
    src = tensor
    if not tensor.is_contiguous or (how == "peer" and not buffer.pooled):
        # the peer route reads pool memory only (the pool is what was opened to the peer)
        src = storage.materialize(ctx, tensor, op)
    with guard.within(dst.context, dst.context_id):
        out = dst.alloc(tensor.dtype, tensor.shape, op)
    ctx.link(dst).copy(how, out.data_ptr(), src.data_ptr(), out.nbytes, op)
    return out


METHODS: tuple[tuple[str, Callable], ...] = (
    ("upload_host_tensor", upload_host_tensor), ("download_to_host", download_to_host),
    ("reclaim_buffer", reclaim_buffer), ("copy_to", copy_to),
)
