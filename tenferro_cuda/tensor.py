"""Tensors and strided views.

- ``Tensor`` owns compact row-major storage (numpy C order): a ``DeviceBuffer`` on a
  runtime's pool, or a numpy array on the host (``Tensor.from_numpy``).
- ``TensorView`` borrows a tensor's storage with its own shape, signed element strides
  and element offset. Construction checks that every element it can address lies inside
  the base buffer. Views are what the ``*_read`` ops accept besides tensors, and what
  ``*_into`` ops may write through.
- Nothing here transfers data or touches the driver: transfers are session methods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .dtypes import DType, as_dtype
from .errors import RuntimeStateError, ValidationError
from .memo import BoundedCache

if TYPE_CHECKING:
    from .memory import DeviceBuffer

__all__ = ["Tensor", "TensorView", "compact_strides", "is_row_major", "install_export"]


_STRIDES: BoundedCache = BoundedCache(4096)  # memo of compact_strides for tuple shapes


def compact_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    if type(shape) is tuple:
        hit = _STRIDES.get(shape)
        if hit is not None:
            return hit
    out = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= max(int(shape[i]), 1)
    strides = tuple(out)
    if type(shape) is tuple:
        _STRIDES.put(shape, strides)
    return strides


def is_row_major(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether ``strides`` are the compact row-major strides of ``shape`` (axes of extent
    1 may carry any stride): the elements form one dense run."""
    expect = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def _check_shape(shape, op: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(s) for s in shape)
    except TypeError:
        raise ValidationError(f"shape must be a sequence of ints (got {shape!r})", op=op) from None
    if any(s < 0 for s in dims):
        raise ValidationError(f"shape entries must be >= 0 (got {dims})", op=op)
    return dims


class _Strided:
    """Shared read-only surface of tensors and views."""

    __slots__ = ()
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        """Compact row-major strides (at any offset; axes of extent 1 ignore their stride):
        the elements form one dense run starting at ``data_ptr()``."""
        return self.size == 0 or is_row_major(self.shape, self.strides)

    @property
    def base(self) -> Tensor:
        raise NotImplementedError

    @property
    def is_device(self) -> bool:
        return self.base.buffer is not None

    @property
    def is_host(self) -> bool:
        return self.base.host is not None

    def span(self) -> tuple[int, int]:
        """(lowest, highest + 1) element offsets addressed; (offset, offset) when empty."""
        if self.size == 0:
            return self.offset, self.offset
        lo = hi = self.offset
        for s, st in zip(self.shape, self.strides):
            if st > 0:
                hi += (s - 1) * st
            else:
                lo += (s - 1) * st
        return lo, hi + 1

    def data_ptr(self) -> int:
        """Device address of the element at index (0, ..., 0)."""
        buf = self.base.buffer
        if buf is None:
            raise RuntimeStateError("a host tensor has no device address", op="data_ptr")
        return buf.ptr + self.offset * self.dtype.itemsize

    # --- views ------------------------------------------------------------------------
    def view(self, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> TensorView:
        """A view of this storage; ``strides``/``offset`` in elements of the base."""
        return TensorView(self.base, shape, strides, offset)

    def permute(self, perm: Sequence[int]) -> TensorView:
        """A view with axes reordered: output axis i is input axis ``perm[i]``."""
        perm = tuple(int(p) for p in perm)
        if sorted(perm) != list(range(self.ndim)):
            raise ValidationError(f"perm must be a permutation of range({self.ndim}) "
                                  f"(got {perm})", op="permute")
        return TensorView(self.base, [self.shape[p] for p in perm],
                          [self.strides[p] for p in perm], self.offset)

    @property
    def T(self) -> TensorView:
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    def __getitem__(self, key) -> TensorView:
        """Basic indexing (ints, slices with any step, Ellipsis) as a view."""
        if not isinstance(key, tuple):
            key = (key,)
        if key.count(Ellipsis) > 1:
            raise ValidationError("at most one Ellipsis", op="getitem")
        if Ellipsis in key:
            i = key.index(Ellipsis)
            fill = (slice(None),) * (self.ndim - len(key) + 1)
            key = key[:i] + fill + key[i + 1:]
        if len(key) > self.ndim:
            raise ValidationError(f"too many indices ({len(key)}) for rank {self.ndim}",
                                  op="getitem", kind="rank_mismatch")
        key = key + (slice(None),) * (self.ndim - len(key))
        shape, strides, offset = [], [], self.offset
        for k, n, st in zip(key, self.shape, self.strides):
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                count = len(range(start, stop, step))
                offset += start * st if count else 0
                shape.append(count)
                strides.append(st * step)
            elif isinstance(k, (bool, np.bool_)):
                raise ValidationError("boolean indices are not supported (no masks in views)",
                                      op="getitem")
            elif isinstance(k, (int, np.integer)):
                idx = int(k) + n if int(k) < 0 else int(k)
                if not 0 <= idx < n:
                    raise ValidationError(f"index {int(k)} out of range for extent {n}",
                                          op="getitem", kind="axis_out_of_bounds")
                offset += idx * st
            else:
                raise ValidationError(f"unsupported index {k!r}", op="getitem")
        return TensorView(self.base, shape, strides, offset)

    def numpy(self) -> np.ndarray:
        """The host data as numpy (host tensors and views of them only)."""
        host = self.base.host
        if host is None:
            raise RuntimeStateError(
                "numpy() needs a host tensor; use session.download_to_host(t) first",
                op="numpy")
        item = self.dtype.itemsize
        flat = host.reshape(-1)
        if self.size == 0:
            return np.empty(self.shape, self.dtype.numpy)
        return np.lib.stride_tricks.as_strided(
            flat[self.offset:], self.shape, [s * item for s in self.strides], writeable=False
        ) if all(s >= 0 for s in self.strides) else _negative_view(flat, self)

    # --- interop: DLPack and the CUDA Array Interface ----------------------------------
    # The export protocol is the interop layer's (_dlpack_export.py, cai.py, above this
    # module), installed here by ``install_export`` when that layer is imported; the
    # session imports it, and a device tensor exists only through a session.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this device tensor's memory (stream-ordered; see
        docs/interop.md). ``stream``: the consumer's stream -- None or 1 (legacy default),
        2 (per-thread default), -1 (no synchronization), a handle, or an object with
        ``__cuda_stream__``."""
        return _EXPORT[0](self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _EXPORT[1](self)

    @property
    def __cuda_array_interface__(self) -> dict:
        return _EXPORT[2](self)

    # --- numpy: host tensors convert, device tensors refuse ----------------------------
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """numpy's conversion protocol (``np.asarray(t)``, ``np.array(t)``), host only.

        A host tensor or view gives its data: without a copy where numpy's rules allow
        (a read-only view, like ``numpy()``), a copy for ``copy=True``, a dtype change or
        negative strides; ``copy=False`` raises ``ValueError`` when a copy is needed. A
        device tensor raises ``TypeError``: numpy cannot read device memory, and nothing
        transfers implicitly -- ``session.download_to_host(t)`` first.
        """
        base = self.base
        if base.host is None:
            raise TypeError(f"{self!r} is in device memory, which numpy cannot read; use "
                            "session.download_to_host(t) to get a host tensor first")
        arr = self.numpy()
        copied = arr.size > 0 and not np.shares_memory(arr, base.host)
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"converting {self!r} to {np.dtype(dtype)} needs a copy "
                                 "(copy=False)")
            return arr.astype(dtype)
        if copy is False and copied:
            raise ValueError(f"{self!r} has negative strides: numpy needs a copy "
                             "(copy=False)")
        return arr.copy() if copy and not copied else arr

    def __repr__(self) -> str:
        kind = type(self).__name__
        buf = self.base.buffer
        if buf is None:
            where = "host"
        else:
            ordinal = getattr(buf, "ordinal", "?")  # (a repr must not raise)
            where = f"device {ordinal}" + (", reclaimed" if getattr(buf, "freed", False)
                                           else "")
        return f"{kind}(shape={self.shape}, dtype={self.dtype.value}, {where})"


def _host_capsule(tensor, stream, max_version, dl_device, copy):
    if tensor.base.buffer is None:
        raise BufferError("__dlpack__: this is a host tensor; export GPU tensors only "
                          "(tensor.numpy() gives the host data)")
    raise _not_installed("__dlpack__")


def _host_device(tensor) -> tuple[int, int]:
    if tensor.base.buffer is None:
        return (1, 0)  # (kDLCPU, 0)
    raise _not_installed("__dlpack_device__")


def _host_interface(tensor) -> dict:
    if tensor.base.buffer is None:
        raise AttributeError("a host tensor has no __cuda_array_interface__ "
                             "(tensor.numpy() gives the host data)")
    raise _not_installed("__cuda_array_interface__")


def _not_installed(op: str) -> RuntimeStateError:
    return RuntimeStateError("the interop layer (tenferro_cuda.ops.interop) is not loaded; "
                             "device tensors come from a session, which loads it", op=op)


# export_capsule, dlpack_device, export_interface: host tensors only until the interop
# layer installs its functions (which answer for host tensors the same way).
_EXPORT: list = [_host_capsule, _host_device, _host_interface]


def install_export(*, capsule=None, device=None, interface=None) -> None:
    """Install the device-tensor export protocol: ``_dlpack_export`` installs the DLPack
    functions and ``cai`` the interface when each is imported."""
    for i, fn in enumerate((capsule, device, interface)):
        if fn is not None:
            _EXPORT[i] = fn


def _negative_view(flat: np.ndarray, v: _Strided) -> np.ndarray:
    idx = np.full(v.shape, v.offset, dtype=np.int64)
    for axis, (n, st) in enumerate(zip(v.shape, v.strides)):
        shp = [1] * v.ndim
        shp[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shp)
    return flat[idx]


class Tensor(_Strided):
    """An owned, compact row-major tensor on one device, or on the host."""

    __slots__ = ("dtype", "shape", "strides", "offset", "buffer", "host", "__weakref__")
    buffer: DeviceBuffer | None
    host: np.ndarray | None

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("Tensor is made by a session (upload_host_tensor, ops) or "
                        "by Tensor.from_numpy(array)")

    @classmethod
    def _make(cls, dtype: DType, shape: tuple[int, ...], buffer=None, host=None) -> Tensor:
        t = object.__new__(cls)
        t.dtype = dtype
        t.shape = shape
        t.strides = compact_strides(shape)
        t.offset = 0
        t.buffer = buffer
        t.host = host
        return t

    @classmethod
    def from_numpy(cls, array: np.ndarray | object) -> Tensor:
        """A host tensor over ``array`` (copied only when not C-contiguous)."""
        arr = np.asarray(array)
        dtype = as_dtype(arr.dtype)
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")  # (np.ascontiguousarray would make rank 0 rank 1)
        return cls._make(dtype, tuple(arr.shape), host=arr)

    @property
    def base(self) -> Tensor:
        return self

    @property
    def reclaimed(self) -> bool:
        return self.buffer is not None and self.buffer.freed


class TensorView(_Strided):
    """A borrowed strided view of a tensor's storage (bounds checked)."""

    __slots__ = ("_base", "dtype", "shape", "strides", "offset")

    def __init__(self, base: Tensor, shape: Sequence[int], strides: Sequence[int],
                 offset: int = 0) -> None:
        if not isinstance(base, Tensor):
            raise ValidationError(f"a view needs a Tensor base (got {type(base).__name__})",
                                  op="view")
        shape_t = _check_shape(shape, "view")
        strides_t = tuple(int(s) for s in strides)
        if len(strides_t) != len(shape_t):
            raise ValidationError(f"{len(shape_t)} extents but {len(strides_t)} strides",
                                  op="view", kind="rank_mismatch")
        self._base = base
        self.dtype = base.dtype
        self.shape = shape_t
        self.strides = strides_t
        self.offset = int(offset)
        lo, hi = self.span()
        if self.size and (lo < 0 or hi > base.size):
            raise ValidationError(
                f"view (shape {shape_t}, strides {strides_t}, offset {self.offset}) addresses "
                f"elements [{lo}, {hi}) outside its base of {base.size} elements",
                op="view", kind="axis_out_of_bounds")

    @property
    def base(self) -> Tensor:
        return self._base
