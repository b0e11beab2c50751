"""The checks of a strided view's fields (``tensor.TensorView`` and every view a tensor
makes: ``view``, slicing, ``permute``, ``T``, iteration), before the view exists.

Shape and strides are sequences of ints (no bools, sets, iterators or strings), the
offset an int (not a bool); every extent and the byte size fit int64, so do the strides
and the offset (kind ``overflow``); as many strides as extents (``rank_mismatch``); every
element the view addresses lies in its base (``axis_out_of_bounds``). An empty view may
sit anywhere. The rank is not bounded here: a host tensor may have any rank numpy allows,
and the ops refuse more than ``MAX_RANK`` axes themselves. ``check_extent`` is the same
rule for a foreign array about to be adopted (DLPack, CUDA Array Interface): its elements
lie in the 64-bit address space, above NULL.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError
from . import ADDRESS_LIMIT, SIZE_LIMIT, check_size, int_sequence

__all__ = ["view_fields", "index_fields", "check_extent", "signed_strides", "is_row_major"]

_BOOLS = (bool, np.bool_)


def is_row_major(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether ``strides`` are the compact row-major strides of ``shape`` (axes of extent
    1 may carry any stride): the elements form one dense run."""
    expect = 1
    for n, st in zip(reversed(shape), reversed(strides)):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def _offset(offset: Any, op: str) -> int:
    """A view's offset other than a plain int: an integer (not a bool), else
    ValidationError."""
    if not isinstance(offset, _BOOLS):
        try:
            return operator.index(offset)
        except TypeError:
            pass
    raise ValidationError(f"offset must be an int (got {offset!r})", op=op)


def view_fields(base_size: int, itemsize: int, shape: object, strides: object,
                offset: Any, op: str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(shape, strides, offset) of a view of a base of ``base_size`` elements of
    ``itemsize`` bytes, checked (see the module docstring)."""
    shape_t = int_sequence(shape, op, "shape")
    strides_t = int_sequence(strides, op, "strides")
    off = offset if type(offset) is int else _offset(offset, op)
    if shape_t and min(shape_t) < 0:
        raise ValidationError(f"shape entries must be >= 0 (got {shape_t})", op=op)
    if len(strides_t) != len(shape_t):
        raise ValidationError(f"{len(shape_t)} extents but {len(strides_t)} strides", op=op,
                              kind="rank_mismatch")
    check_size(shape_t, op, itemsize)
    if (strides_t and (min(strides_t) <= -SIZE_LIMIT or max(strides_t) >= SIZE_LIMIT)) \
            or not -SIZE_LIMIT < off < SIZE_LIMIT:
        raise ValidationError(f"strides {strides_t} and offset {off} must fit int64", op=op,
                              kind="overflow")
    if 0 not in shape_t:
        lo = hi = off
        for n, st in zip(shape_t, strides_t):
            if st > 0:
                hi += (n - 1) * st
            else:
                lo += (n - 1) * st
        if lo < 0 or hi + 1 > base_size:
            raise ValidationError(
                f"view (shape {shape_t}, strides {strides_t}, offset {off}) addresses "
                f"elements [{lo}, {hi + 1}) outside its base of {base_size} elements", op=op,
                kind="axis_out_of_bounds")
    return shape_t, strides_t, off


def index_fields(shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                 key: Any) -> tuple[list[int], list[int], int]:
    """(shape, strides, offset) of ``view[key]``: basic indexing -- ints, slices with any
    nonzero step, one Ellipsis; anything else (None, a list, an array: views cannot
    gather) is a ValidationError (``op="getitem"``), as are bad slice bounds."""
    op = "getitem"
    ndim = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]  # (never ==: arrays)
    if len(ellipses) > 1:
        raise ValidationError("at most one Ellipsis", op=op)
    if ellipses:
        i = ellipses[0]
        key = key[:i] + (slice(None),) * (ndim - len(key) + 1) + key[i + 1:]
    if len(key) > ndim:
        raise ValidationError(f"too many indices ({len(key)}) for rank {ndim}", op=op,
                              kind="rank_mismatch")
    key = key + (slice(None),) * (ndim - len(key))
    out_shape: list[int] = []
    out_strides: list[int] = []
    for k, n, st in zip(key, shape, strides):
        if isinstance(k, slice):
            try:
                if type(k.start) in _BOOLS or type(k.stop) in _BOOLS or type(k.step) in _BOOLS:
                    raise TypeError("bools are not slice bounds")
                start, stop, step = k.indices(n)
            except (TypeError, ValueError) as exc:  # bounds not ints, a zero step
                raise ValidationError(f"bad slice {k!r}: {exc}", op=op) from None
            count = len(range(start, stop, step))
            offset += start * st if count else 0
            out_shape.append(count)
            # (a huge step on an axis of one element: any stride does, keep it int64)
            out_strides.append(st * step if count > 1 or abs(st * step) < SIZE_LIMIT else st)
        elif isinstance(k, (bool, np.bool_)):
            raise ValidationError("boolean indices are not supported (no masks in views)",
                                  op=op)
        elif isinstance(k, (int, np.integer)):
            idx = int(k) + n if int(k) < 0 else int(k)
            if not 0 <= idx < n:
                raise ValidationError(f"index {int(k)} out of range for extent {n}", op=op,
                                      kind="axis_out_of_bounds")
            offset += idx * st
        else:
            raise ValidationError(f"unsupported index {k!r} (views take ints, slices and "
                                  "Ellipsis; gather takes index arrays)", op=op)
    return out_shape, out_strides, offset


def check_extent(address: int, shape: tuple[int, ...], strides: tuple[int, ...] | None,
                 item: int, op: str) -> None:
    """ValidationError unless the elements of a foreign array (first element at
    ``address``; element strides, None: row-major) lie in the 64-bit address space, above
    NULL. An empty array may have any address, NULL included."""
    if strides is None:
        size = 1
        for n in shape:
            size *= n
        if not size:
            return
        lo, hi = 0, size
    else:
        lo = hi = 0
        for n, st in zip(shape, strides):
            if not n:
                return
            if st > 0:
                hi += (n - 1) * st
            else:
                lo += (n - 1) * st
        hi += 1
    start, end = address + lo * item, address + hi * item
    if start <= 0 or end > ADDRESS_LIMIT:
        where = "NULL" if address == 0 else f"0x{address:x}"
        raise ValidationError(f"the array's elements (shape {shape}, strides {strides}, from "
                              f"{where}) do not lie in the device address space above NULL",
                              op=op)


def signed_strides(strides: tuple[int, ...], item: int) -> tuple[int, ...]:
    """Element strides whose byte value ``s * item`` is in [2**63, 2**64) read as the
    negative byte strides they are in 64-bit address arithmetic. Such a stride is what a
    producer gives that divides a negative byte stride by the item size as an unsigned
    number (CuPy does, for a reversed array of items wider than a byte): a kernel that
    multiplies it back gets the producer's addresses; a correct stride of an axis of two
    or more elements is never in that range (it would leave the address space; on an
    axis of one element a stride addresses nothing). Others are kept: the extent
    check refuses what lies outside the address space."""
    return tuple((s * item - ADDRESS_LIMIT) // item
                 if SIZE_LIMIT <= s * item < ADDRESS_LIMIT else s for s in strides)
