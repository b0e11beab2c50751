"""How a tensor travels through NCCL: its NCCL datatype and element count.

- Ops that only move data (``all_gather``, ``broadcast``, ``send``/``recv``) send bytes
  (``ncclUint8``, ``nbytes`` elements), so every dtype travels, bool and complex too.
- Reductions use the dtype's own NCCL type. ``bool`` reduces as ``uint8`` with ``max``
  (any) and ``min`` (all) only; a complex tensor reduces as its real type with twice the
  elements, which is exact for ``sum`` and ``avg`` (they act on real and imaginary parts
  apart) and wrong for ``prod``, ``max`` and ``min``, which are refused. ``avg`` is for
  float and complex dtypes (an integer average would truncate).
"""

from __future__ import annotations

from .. import _nccl
from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError

__all__ = ["BYTES", "reduction", "check_reduce_op"]

BYTES = _nccl.DTYPES["uint8"]
_NATIVE = {DType.INT8: "int8", DType.UINT8: "uint8", DType.INT32: "int32",
           DType.UINT32: "uint32", DType.INT64: "int64", DType.UINT64: "uint64",
           DType.FLOAT16: "float16", DType.BFLOAT16: "bfloat16", DType.FLOAT32: "float32",
           DType.FLOAT64: "float64"}
_REAL = {DType.COMPLEX64: "float32", DType.COMPLEX128: "float64"}


def check_reduce_op(red: object, op: str) -> int:
    """The NCCL code of the reduction ``red`` (a name of ``_nccl.REDUCE_OPS``)."""
    if not isinstance(red, str) or red not in _nccl.REDUCE_OPS:
        raise ValidationError(f"op must be one of {tuple(_nccl.REDUCE_OPS)} (got {red!r})",
                              op=op)
    return _nccl.REDUCE_OPS[red]


def reduction(dtype: DType, red: str, op: str) -> tuple[int, int, int]:
    """``(datatype code, elements per tensor element, reduction code)`` for reducing
    ``dtype`` tensors with ``red``; UnsupportedDTypeError where the result would not be
    the elementwise reduction in ``dtype``."""
    code = check_reduce_op(red, op)
    if dtype is DType.BOOL:
        if red in ("max", "min"):
            return _nccl.DTYPES["uint8"], 1, code
        raise UnsupportedDTypeError(f"bool tensors reduce with 'max' (any) or 'min' (all) "
                                    f"only (got {red!r})", op=op)
    if dtype in _REAL:
        if red in ("sum", "avg"):
            return _nccl.DTYPES[_REAL[dtype]], 2, code
        raise UnsupportedDTypeError(f"{dtype.value} tensors reduce with 'sum' or 'avg' "
                                    f"only (got {red!r})", op=op)
    if dtype not in _NATIVE:
        raise UnsupportedDTypeError(f"NCCL cannot reduce {dtype.value} tensors", op=op)
    if red == "avg" and not dtype.is_float:
        raise UnsupportedDTypeError(f"'avg' is for float and complex tensors (got "
                                    f"{dtype.value}); use 'sum' and divide", op=op)
    return _nccl.DTYPES[_NATIVE[dtype]], 1, code
