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
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import DType, as_dtype
from .errors import RuntimeStateError, UnsupportedDTypeError, UnsupportedError, ValidationError
from .memo import BoundedCache
from .shapes import check_permutation
from .shapes.views import index_fields, is_row_major, view_fields

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


def _init_view(v: TensorView, base, shape, strides, offset, op: str) -> None:
    """Check (``shapes/views.py``) and set a view's fields."""
    if not isinstance(base, Tensor):
        raise ValidationError(f"a view needs a Tensor base (got {type(base).__name__})", op=op)
    v.shape, v.strides, v.offset = view_fields(base.size, base.dtype.itemsize, shape, strides,
                                               offset, op)
    v._base, v.dtype, v._kit = base, base.dtype, None


def _view(base: Tensor, shape, strides, offset: int, op: str) -> TensorView:
    v = object.__new__(TensorView)
    _init_view(v, base, shape, strides, offset, op)
    return v


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

    def __copy__(self):
        """``copy.copy``: another tensor object over the same storage. What repeated DLPack
        exports of this object share (``_dlpack_export``'s kit) stays with it: the copy
        is exported, and its exports are counted, as its own."""
        cls = type(self)
        new = object.__new__(cls)
        for name in cls.__slots__:
            if name != "__weakref__" and hasattr(self, name):
                setattr(new, name, getattr(self, name))
        new._kit = None
        return new

    # --- views ------------------------------------------------------------------------
    def view(self, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> TensorView:
        """A view of this storage; ``strides``/``offset`` in elements of the base."""
        return TensorView(self.base, shape, strides, offset)

    def permute(self, perm: Sequence[int]) -> TensorView:
        """A view with axes reordered: output axis i is input axis ``perm[i]``."""
        try:
            p = check_permutation(perm, self.ndim, "permute")
        except ValidationError as exc:
            raise ValidationError(f"perm must be a permutation of range({self.ndim}): "
                                  f"{exc.args[0]}", op="permute", kind=exc.kind) from None
        return _view(self.base, [self.shape[a] for a in p], [self.strides[a] for a in p],
                     self.offset, "permute")

    @property
    def T(self) -> TensorView:
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    def __getitem__(self, key) -> TensorView:
        """Basic indexing (ints, slices with any nonzero step, Ellipsis) as a view; any
        other key (None, a list, an array) is refused: views cannot gather."""
        shape, strides, offset = index_fields(self.shape, self.strides, self.offset, key)
        return _view(self.base, shape, strides, offset, "getitem")

    # --- Python protocols: rows are views; device memory is never read implicitly --------
    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[TensorView]:
        """The rows along axis 0 as views, reading no data (TypeError for rank 0)."""
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        base, shape, strides, step = self.base, self.shape[1:], self.strides[1:], self.strides[0]
        return (_view(base, shape, strides, self.offset + i * step, "iter")
                for i in range(self.shape[0]))

    def __contains__(self, value: object) -> bool:
        """``value in t``: numpy's answer on the host; a device tensor refuses (TypeError)."""
        return value in self.__array__()

    def __bool__(self) -> bool:
        """numpy's rule on the host: one element's truth value, other sizes are ambiguous
        (ValidationError); a device tensor refuses (TypeError: download it first)."""
        if self.base.host is not None and self.size != 1:
            raise ValidationError(f"the truth value of a tensor of {self.size} elements is "
                                  "ambiguous (numpy: use a.any() or a.all())", op="bool")
        return bool(self.__array__())

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
    # Host tensors only: the interop layer (_dlpack_export.py, cai.py; the session imports
    # it) replaces these three with the device-side protocol (``install_export``), which
    # answers for host tensors the same way.
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this device tensor's memory (stream-ordered; see
        docs/interop.md). ``stream``: the consumer's stream -- None or 1 (legacy default),
        2 (per-thread default), -1 (no synchronization), a handle, or an object with
        ``__cuda_stream__``."""
        if self.base.buffer is None:
            raise BufferError("__dlpack__: this is a host tensor; export GPU tensors only "
                              "(tensor.numpy() gives the host data)")
        raise _not_installed("__dlpack__")

    def __dlpack_device__(self) -> tuple[int, int]:
        if self.base.buffer is None:
            return (1, 0)  # (kDLCPU, 0)
        raise _not_installed("__dlpack_device__")

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.base.buffer is None:
            raise AttributeError("a host tensor has no __cuda_array_interface__ "
                                 "(tensor.numpy() gives the host data)")
        raise _not_installed("__cuda_array_interface__")

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


def _not_installed(op: str) -> RuntimeStateError:
    return RuntimeStateError("the interop layer (tenferro_cuda.ops.interop) is not loaded; "
                             "device tensors come from a session, which loads it", op=op)


def install_export(*, capsule=None, device=None, interface=None) -> None:
    """Install the device-tensor export protocol as the methods of tensors and views:
    ``_dlpack_export`` installs ``__dlpack__`` (``capsule(tensor, *, stream, max_version,
    dl_device, copy)``) and ``__dlpack_device__``, ``cai`` the interface property, when
    each is imported."""
    methods = {"__dlpack__": capsule, "__dlpack_device__": device,
               "__cuda_array_interface__": interface and property(interface)}
    for name, fn in methods.items():
        if fn is not None:
            setattr(_Strided, name, fn)


def _negative_view(flat: np.ndarray, v: _Strided) -> np.ndarray:
    idx = np.full(v.shape, v.offset, dtype=np.int64)
    for axis, (n, st) in enumerate(zip(v.shape, v.strides)):
        shp = [1] * v.ndim
        shp[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shp)
    return flat[idx]


class Tensor(_Strided):
    """An owned, compact row-major tensor on one device, or on the host."""

    __slots__ = ("dtype", "shape", "strides", "offset", "buffer", "host", "_kit", "__weakref__")
    buffer: DeviceBuffer | None
    host: np.ndarray | None
    _kit: Any  # what repeated DLPack exports share (``_dlpack_export``)

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
        t._kit = None
        return t

    @classmethod
    def from_numpy(cls, array: np.ndarray | object) -> Tensor:
        """A host tensor over ``array`` (copied only when not C-contiguous; masked arrays
        are refused: the mask would be dropped)."""
        op = "from_numpy"
        if isinstance(array, np.ma.MaskedArray):
            raise UnsupportedError("a masked array's mask would be dropped: use "
                                   "a.filled(value) or a.data", op=op)
        try:
            arr = np.asarray(array)  # (a device tensor refuses: TypeError, download first)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"expected a host array: {exc}", op=op) from None
        try:
            dtype = as_dtype(arr.dtype)
        except UnsupportedDTypeError as exc:
            raise UnsupportedDTypeError(exc.args[0], op=op) from None
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

    __slots__ = ("_base", "dtype", "shape", "strides", "offset", "_kit")
    _base: Tensor
    _kit: Any  # what repeated DLPack exports share (``_dlpack_export``)

    def __init__(self, base: Tensor, shape: Sequence[int], strides: Sequence[int],
                 offset: int = 0) -> None:
        _init_view(self, base, shape, strides, offset, "view")

    @property
    def base(self) -> Tensor:
        return self._base
