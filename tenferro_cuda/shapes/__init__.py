"""Shape inference and argument validation, pure Python (no device): one module per op
family, plus the checks they share here, and the alias rule for outputs (``aliasing.py``:
overlap judged by device byte ranges). Every function raises ValidationError (or an
UnsupportedDType* error) *before* anything is allocated or launched. Nothing here imports
the layers above (tensors are read through their fields: ``shape``, ``strides``,
``base.buffer``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError
from ..values import int_sequence

MAX_RANK = 8
_prod = math.prod
SIZE_LIMIT = 1 << 63  # extents, element counts and byte sizes are int64 (strides, pool)
ADDRESS_LIMIT = 1 << 64  # device addresses and stream handles are 64-bit


def check_size(shape: Sequence[int], op: str, itemsize: int = 1) -> None:
    """Every extent, and the byte size ``prod(shape) * itemsize``, below 2**63 (the int64
    of every stride, size and allocation); ValidationError kind ``overflow`` otherwise.
    An empty shape still needs every extent below 2**63."""
    if 0 < _prod(shape) * itemsize < SIZE_LIMIT:  # the usual case: then so is each extent
        return
    if max(shape, default=0) >= SIZE_LIMIT:
        raise ValidationError(f"shape {tuple(shape)}: an extent of 2**63 or more does not "
                              "fit int64", op=op, kind="overflow")
    if math.prod(shape) * itemsize >= SIZE_LIMIT:
        raise ValidationError(f"shape {tuple(shape)} of {itemsize}-byte elements needs "
                              f"{math.prod(shape) * itemsize} bytes (2**63 or more does not "
                              "fit int64)", op=op, kind="overflow")


def check_rank(shape: Sequence[int], op: str, limit: int = MAX_RANK) -> None:
    if len(shape) > limit:
        raise ValidationError(f"rank {len(shape)} exceeds the supported maximum of {limit}",
                              op=op, kind="rank_mismatch")


def normalize_axes(axes: Sequence[int], rank: int, op: str, *, allow_negative: bool = False,
                   what: str = "axes") -> tuple[int, ...]:
    """Axes as ints in range(rank), no duplicates (ValidationError otherwise; bools are
    not axes)."""
    items = int_sequence(axes, op, what)
    out = list(items)
    for i, a in enumerate(out):
        if allow_negative and -rank <= a < 0:
            out[i] = a + rank
        elif not 0 <= a < rank:
            raise ValidationError(f"{what}: axis {a} is out of range for rank {rank}",
                                  op=op, kind="axis_out_of_bounds")
    if len(set(out)) != len(out):
        raise ValidationError(f"{what}: duplicate axes in {items}", op=op,
                              kind="duplicate_axis")
    return tuple(out)


def check_permutation(perm: Sequence[int], rank: int, op: str) -> tuple[int, ...]:
    p = normalize_axes(perm, rank, op, what="perm")
    if len(p) != rank:
        raise ValidationError(f"perm {tuple(perm)} must list each of the {rank} axes once",
                              op=op, kind="rank_mismatch")
    return p


def same_dtype(op: str, *dtypes: DType) -> DType:
    first = dtypes[0]
    for d in dtypes[1:]:
        if d is not first:
            raise ValidationError(
                f"dtype mismatch: {', '.join(x.value for x in dtypes)} (no implicit "
                "promotion; use convert or cast)", op=op, kind="dtype_mismatch")
    return first


def same_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    first = tuple(shapes[0])
    for s in shapes[1:]:
        if tuple(s) != first:
            raise ValidationError(
                f"shape mismatch: {' vs '.join(str(tuple(x)) for x in shapes)}", op=op,
                kind="shape_mismatch")
    return first


def require_dtype(dtype: DType, op: str, ok: bool, what: str) -> None:
    if not ok:
        raise UnsupportedDTypeError(f"{op} is not defined for {dtype.value} ({what})", op=op)


def check_out(out_shape: Sequence[int], out_dtype: DType, shape: Sequence[int],
              dtype: DType, op: str) -> None:
    """A caller-owned output must have exactly the result's shape and dtype."""
    if tuple(out_shape) != tuple(shape):
        raise ValidationError(f"out has shape {tuple(out_shape)}; the result has shape "
                              f"{tuple(shape)}", op=op, kind="shape_mismatch")
    if out_dtype is not dtype:
        raise ValidationError(f"out has dtype {out_dtype.value}; the result has dtype "
                              f"{dtype.value}", op=op, kind="dtype_mismatch")


_CUDA_DEVICE_TYPES = (2, 3, 13)  # DLPack: kDLCUDA, kDLCUDAHost, kDLCUDAManaged


_ADOPT = "adopt it with from_dlpack or from_cuda_array_interface first"
_UPLOAD = "upload it with upload_host_tensor first"


def describe_array(t: object) -> tuple[str, str]:
    """(what, what to do) for an array of another library; ("", "") for an object that
    is no array."""
    name = type(t).__name__
    if isinstance(t, np.generic):  # a numpy scalar is no array in the wrong place
        return "", ""
    if hasattr(t, "__cuda_array_interface__"):
        return f"a {name} GPU array of another library, not adopted", _ADOPT
    if hasattr(t, "__dlpack_device__"):
        try:
            device_type = int(t.__dlpack_device__()[0])  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - only the message depends on it
            device_type = 0
        if device_type in _CUDA_DEVICE_TYPES:
            return f"a {name} GPU array of another library, not adopted", _ADOPT
        return f"a {name} host array", _UPLOAD
    if hasattr(t, "__array__") or hasattr(t, "__array_interface__"):
        return f"a {name} host array", _UPLOAD
    return "", ""
