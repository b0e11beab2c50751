"""Creation: ``iota``, ``full``, ``zeros``, ``ones`` and ``empty`` make new compact device
tensors on the session stream, filled on the device: nothing is uploaded from the host.

``full`` (and ``zeros``/``ones``) writes with ``ops.storage.fill`` (one ``cuMemsetD8Async``
when the value's bytes are all zero, else the ``fill`` kernel of ``ptx/copy.cu``); ``iota``
launches ``ptx/creation.cu``. ``empty`` only allocates: its contents are whatever the pool
hands out (earlier tensors' data, or anything else), so every element must be written
before it is read. Shape, dtype, dimension and value are validated before anything is
allocated (``shapes/creation.py``, ``ops.storage.fill.value_bytes``). Each op only
enqueues.

``METHODS`` lists (method name, function) pairs for the session facade.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...dtypes import DType
from ...exec.context import ExecContext
from ...shapes import creation as shapes
from ...tensor import Tensor
from .._layout import index_type
from ..storage import fill
from ..storage.fill import value_bytes

__all__ = ["METHODS", "iota", "full", "zeros", "ones", "empty"]


def iota(ctx: ExecContext, dtype: DType | str, shape: int | Sequence[int],
         dimension: int) -> Tensor:
    """A new tensor whose elements count 0, 1, 2, ... along ``dimension`` (StableHLO iota).

    Parameters
    ----------
    dtype : DType, str or numpy dtype
        A numeric dtype (integer, float or complex; not bool). An integer dtype must hold
        every index (an int8 iota has at most 128 steps); floats round large indices to
        nearest even.
    shape : int or sequence of int
        The extents (ints >= 0, rank 1 to 8); an int is a rank-1 shape.
    dimension : int
        The axis that counts, in ``range(len(shape))``.

    Returns
    -------
    Tensor
        A new compact device tensor (the fill is enqueued).

    Raises
    ------
    ValidationError
        A bad shape, a dimension out of range (kind ``axis_out_of_bounds``), or more steps
        than the integer dtype holds (kind ``overflow``).
    UnsupportedDTypeError
        Bool, or not a dtype of the library.
    RuntimeStateError
        The session is closed or used from another thread.
    """
    op = "iota"
    dt, dims, axis = shapes.iota(dtype, shape, dimension, op)
    out = ctx.alloc(dt, dims, op)
    n = out.size
    if n == 0:
        return out
    if dims[axis] == 1:  # every index is 0: all-zero bytes in every dtype
        ctx.memset(out.data_ptr(), 0, out.nbytes, op)
        return out
    itype = index_type(n)
    fn = ctx.function("creation", f"tf::iota<{dt.ctype}, {itype}>")
    code = "I" if itype == "tf::u32" else "Q"
    ctx.launch(fn, "P" + code * 3, (ctx.grid(n), 1, 1),
               (out.data_ptr(), math.prod(dims[axis + 1:]), dims[axis], n), op)
    return out


def _full(ctx: ExecContext, shape: object, value: object, dtype: object, op: str) -> Tensor:
    dt = shapes.dtype_of(dtype, op)
    dims = shapes.shape_of(shape, op, dt.itemsize)
    value_bytes(value, dt, op)  # validated before the allocation
    out = ctx.alloc(dt, dims, op)
    fill(ctx, out, value, op)
    return out


def full(ctx: ExecContext, shape: int | Sequence[int], value: object,
         dtype: DType | str) -> Tensor:
    """A new tensor with every element equal to ``value``.

    Parameters
    ----------
    shape : int or sequence of int
        The extents (ints >= 0, rank <= 8); an int is a rank-1 shape.
    value : bool, int, float or complex (or a numpy scalar)
        A value of ``dtype``: an int in range, a float that does not overflow it (inf and
        NaN are kept; integral floats for integer dtypes), complex only for complex dtypes,
        True/False (or 0/1) for bool.
    dtype : DType, str or numpy dtype
        The element type.

    Returns
    -------
    Tensor
        A new compact device tensor (the fill is enqueued: one memset when the value's
        bytes are zero, else one fill kernel).

    Raises
    ------
    ValidationError
        A bad shape, or a value ``dtype`` cannot hold (kind ``overflow`` when out of range).
    UnsupportedDTypeError
        Not a dtype of the library.
    RuntimeStateError
        The session is closed or used from another thread.
    """
    return _full(ctx, shape, value, dtype, "full")


def zeros(ctx: ExecContext, shape: int | Sequence[int], dtype: DType | str) -> Tensor:
    """A new tensor of zeros (False for bool), written by one memset.

    Parameters
    ----------
    shape : int or sequence of int
        The extents (ints >= 0, rank <= 8); an int is a rank-1 shape.
    dtype : DType, str or numpy dtype
        The element type.

    Returns
    -------
    Tensor
        A new compact device tensor (the fill is enqueued).

    Raises
    ------
    ValidationError
        A bad shape.
    UnsupportedDTypeError
        Not a dtype of the library.
    RuntimeStateError
        The session is closed or used from another thread.
    """
    return _full(ctx, shape, 0, dtype, "zeros")


def ones(ctx: ExecContext, shape: int | Sequence[int], dtype: DType | str) -> Tensor:
    """A new tensor of ones (True for bool).

    Parameters
    ----------
    shape : int or sequence of int
        The extents (ints >= 0, rank <= 8); an int is a rank-1 shape.
    dtype : DType, str or numpy dtype
        The element type.

    Returns
    -------
    Tensor
        A new compact device tensor (the fill is enqueued).

    Raises
    ------
    ValidationError
        A bad shape.
    UnsupportedDTypeError
        Not a dtype of the library.
    RuntimeStateError
        The session is closed or used from another thread.
    """
    return _full(ctx, shape, 1, dtype, "ones")


def empty(ctx: ExecContext, shape: int | Sequence[int], dtype: DType | str) -> Tensor:
    """A new tensor whose contents are undefined: it is allocated, nothing is written.

    The memory comes from the pool as it is and holds whatever was there before (data of
    freed tensors included). Write every element (an ``*_into`` op, ``copy_read_into``)
    before reading it.

    Parameters
    ----------
    shape : int or sequence of int
        The extents (ints >= 0, rank <= 8); an int is a rank-1 shape.
    dtype : DType, str or numpy dtype
        The element type.

    Returns
    -------
    Tensor
        A new compact device tensor (no launch, no copy).

    Raises
    ------
    ValidationError
        A bad shape.
    UnsupportedDTypeError
        Not a dtype of the library.
    RuntimeStateError
        The session is closed or used from another thread.
    """
    op = "empty"
    dt = shapes.dtype_of(dtype, op)
    dims = shapes.shape_of(shape, op, dt.itemsize)
    return ctx.alloc(dt, dims, op)


METHODS: tuple[tuple[str, Callable], ...] = (
    ("iota", iota), ("full", full), ("zeros", zeros), ("ones", ones), ("empty", empty))
