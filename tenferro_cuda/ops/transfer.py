"""Explicit transfers and storage ops: upload, download, reclaim, fill, strided copy.

``upload_host_tensor`` enqueues a host-to-device copy (the host data is staged by the
driver before the call returns, so the numpy array may be dropped at once).
``download_to_host`` is one of the two host barriers: it returns a host tensor holding
the finished result. Everything else only enqueues.
"""

from __future__ import annotations

import numpy as np

from .. import _context
from ..debug import allow_host_sync
from ..errors import RuntimeStateError, ValidationError
from ..kernels import device
from ..tensor import Tensor, _Strided
from ._base import OpsBase, _buf
from ._layout import index_type, layouts_for

_STORAGE = {1: "tf::u8", 2: "unsigned short", 4: "tf::u32", 8: "tf::u64", 16: "tf::b128"}


class TransferOps(OpsBase):
    def upload_host_tensor(self, tensor) -> Tensor:
        """Copy a host tensor, host view or numpy array into a new device tensor."""
        op = "upload_host_tensor"
        state = self._begin(op)
        if isinstance(tensor, np.ndarray):
            tensor = Tensor.from_numpy(tensor)
        if not isinstance(tensor, _Strided):
            raise ValidationError(f"expected a host Tensor, TensorView or numpy array "
                                  f"(got {type(tensor).__name__})", op=op)
        if tensor.base.host is None:
            raise RuntimeStateError("the tensor is already on a device; upload takes a host "
                                    "tensor (use to_contiguous_read or copy_read_into)", op=op)
        data = tensor.numpy() if tensor.base is not tensor else tensor.base.host
        if not data.flags.c_contiguous:
            data = data.copy(order="C")
        out = self._alloc(tensor.dtype, tensor.shape, op)
        if out.nbytes:
            device.memcpy_htod_async(_buf(out).ptr, data.ctypes.data, out.nbytes,
                                      state.stream, op)
        return out

    def download_to_host(self, tensor) -> Tensor:
        """Copy a device tensor or view to a new host tensor; blocks until it is there."""
        op = "download_to_host"
        state = self._begin(op)
        if isinstance(tensor, _Strided) and tensor.base.buffer is None:
            raise RuntimeStateError("download_to_host takes a device tensor; this one is "
                                    "already on the host", op=op)
        self._resident(tensor, op)
        src = tensor if tensor.is_contiguous else self._compact(tensor, op)
        host = np.empty(tensor.shape, dtype=tensor.dtype.numpy)
        if host.nbytes:
            device.memcpy_dtoh_async(host.ctypes.data, src.data_ptr(), host.nbytes,
                                      state.stream, op)
            with allow_host_sync():
                device.stream_synchronize(state.stream, op)
        return Tensor.from_numpy(host)

    def reclaim_buffer(self, tensor: Tensor) -> None:
        """Release ``tensor``'s device memory now (stream-ordered); the tensor is unusable."""
        op = "reclaim_buffer"
        self._begin(op)
        if not isinstance(tensor, Tensor):
            raise ValidationError("reclaim_buffer takes an owned Tensor, not a view", op=op)
        self._resident(tensor, op)
        _buf(tensor).release()

    def copy_to(self, destination, tensor) -> Tensor:
        """Copy a tensor or view of this session into a new tensor of ``destination``
        (a session of another device, or this one), stream-ordered on both sides: the copy
        waits for this session's work and this session's later work (a free of ``tensor``,
        say) waits for the copy. Only the host is never blocked."""
        op = "copy_to"
        state = self._begin(op)
        self._resident(tensor, op)
        if not isinstance(destination, OpsBase):
            raise ValidationError("destination must be a CudaExecSession", op=op)
        if destination._rt is self._rt:
            destination._begin(op)
            return self._compact(tensor, op)
        src = tensor if tensor.is_contiguous else self._compact(tensor, op)
        ready = device.event_create()  # in this context: "the source is written"
        try:
            device.event_record(ready, state.stream)
            dst_state = destination._begin(op)  # makes the destination's context current
            out = destination._alloc(tensor.dtype, tensor.shape, op)
            if out.nbytes:
                device.stream_wait_event(dst_state.stream, ready)
                device.memcpy_peer_async(out.data_ptr(), destination._rt.context,
                                          src.data_ptr(), self._rt.context, out.nbytes,
                                          dst_state.stream)
                done = device.event_create()  # in the destination's context
                try:
                    device.event_record(done, dst_state.stream)
                    device.stream_wait_event(state.stream, done)
                finally:
                    device.event_destroy(done)
        finally:
            _context.ensure_current(self._rt.context, self._rt.context_id)
            device.event_destroy(ready)
        return out

    # --- storage kernels (used by other families and the kernel session) ---------------
    def _compact(self, view: _Strided, op: str) -> Tensor:
        out = self._alloc(view.dtype, view.shape, op)
        self._copy_into(view, out, op)
        return out

    def _copy_into(self, src: _Strided, dst: _Strided, op: str) -> None:
        """Enqueue dst[...] = src[...] for equal shapes and dtypes (validated by caller)."""
        n = src.size
        if n == 0:
            return
        item = src.dtype.itemsize
        if src.is_contiguous and dst.is_contiguous:
            device.memcpy_dtod_async(dst.data_ptr(), src.data_ptr(), n * item,
                                      self._state.stream, op)
            return
        shape, (dl, sl) = layouts_for(src.shape, dst, src)
        itype = index_type(n)
        fn = self._fn("copy", f"tf::strided_copy<{_STORAGE[item]}, {itype}>")
        pack = self._pack(("copy", itype), "PLPL" + ("I" if itype == "tf::u32" else "Q"))
        params = pack.pack(_buf(dst).ptr, dl, _buf(src).ptr, sl, n)
        self._launch1d(fn, self._grid(n), params, op)

    def _fill(self, out: _Strided, value, op: str) -> None:
        """Enqueue out[...] = value (a Python scalar of out's dtype)."""
        n = out.size
        if n == 0:
            return
        if not out.is_contiguous:
            tmp = self._alloc(out.dtype, out.shape, op)
            self._fill(tmp, value, op)
            self._copy_into(tmp, out, op)
            return
        item = out.dtype.itemsize
        raw = np.asarray(value, dtype=out.dtype.numpy).tobytes()
        if raw == bytes(item):
            device.memset_d8_async(out.data_ptr(), 0, n * item, self._state.stream, op)
            return
        fn = self._fn("copy", f"tf::fill<{_STORAGE[item]}>")
        code = "X16" if item == 16 else f"S{item}"
        pack = self._pack(("fill", item), f"P{code}q")
        self._launch1d(fn, self._grid(n), pack.pack(out.data_ptr(), raw, n), op)

    def _scale(self, out: _Strided, factor, op: str) -> None:
        """Enqueue out[...] *= factor (numeric dtypes, validated by the caller)."""
        n = out.size
        if n == 0:
            return
        raw = np.asarray(factor, dtype=out.dtype.numpy).tobytes()
        item = out.dtype.itemsize
        shape, (lay,) = layouts_for(out.shape, out)
        itype = index_type(n)
        fn = self._fn("copy", f"tf::scale_inplace<{out.dtype.ctype}, {itype}>")
        code = "X16" if item == 16 else f"S{item}"
        pack = self._pack(("scale", item, itype),
                          f"PL{code}" + ("I" if itype == "tf::u32" else "Q"))
        self._launch1d(fn, self._grid(n), pack.pack(_buf(out).ptr, lay, raw, n), op)
