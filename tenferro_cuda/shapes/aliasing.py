"""The alias rule for outputs, in one place: judged by device memory, never by objects.

Two views overlap when the device byte ranges they address intersect (a conservative
test: views that interleave without sharing an element count as overlapping). Different
``Tensor`` objects over the same memory -- a ``reshape`` that shares its input's buffer,
a slice of it, two adoptions of one foreign array -- are the same memory, because only
addresses are compared.

An output may be exactly the same view as an input (same address, dtype, shape and
element strides) only for an elementwise op, which reads each element before writing it
(in place). Every other overlap of an output with an input is a ``ValidationError``,
raised before anything is written; so is an output that addresses one element twice.

Read-only memory is never an output: ``check_writable`` refuses a tensor over memory
adopted read-only (a DLPack capsule flagged ``READ_ONLY``, a CUDA Array Interface with
``data[1]`` True; the flag lives on the buffer's owner). ``check_output`` applies it first,
and the paths that judge overlap without ``check_output`` call it themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..dtypes import DType
from ..errors import ValidationError

__all__ = ["Strided", "byte_range", "overlaps", "same_view", "check_output",
           "self_overlapping", "check_distinct_elements", "disjoint_or_same",
           "check_writable", "read_only"]


class Strided(Protocol):
    """What the rules here read of a tensor or view (``tensor.Strided`` has it all):
    ``shapes/`` sits below the tensors and reads them through these fields."""

    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @property
    def base(self) -> Any: ...  # the Tensor whose ``buffer`` (None on the host) holds it

    @property
    def size(self) -> int: ...

    def span(self) -> tuple[int, int]: ...

    def data_ptr(self) -> int: ...


def byte_range(t: Strided) -> tuple[int, int]:
    """[low, high) device addresses addressed by a device view (empty: low == high)."""
    buf = t.base.buffer
    base = buf.ptr if buf is not None else 0
    item = t.dtype.itemsize
    lo, hi = t.span()
    return base + lo * item, base + hi * item


def overlaps(a: Strided, b: Strided) -> bool:
    """Whether the device byte ranges addressed by ``a`` and ``b`` intersect."""
    if a.size == 0 or b.size == 0:
        return False
    alo, ahi = byte_range(a)
    blo, bhi = byte_range(b)
    return alo < bhi and blo < ahi


def same_view(a: Strided, b: Strided) -> bool:
    """Whether ``a`` and ``b`` address the same elements in the same order with the same
    dtype (extent-1 axes may carry any stride)."""
    if a.dtype is not b.dtype or a.shape != b.shape or a.data_ptr() != b.data_ptr():
        return False
    return all(n == 1 or sa == sb for n, sa, sb in zip(a.shape, a.strides, b.strides))


def disjoint_or_same(out_ptr: int, out_bytes: int, in_ptr: int, in_bytes: int) -> bool:
    """The rule for two compact runs of one shape and dtype: the same run (in place) or
    no shared byte."""
    return out_ptr == in_ptr or out_ptr + out_bytes <= in_ptr or in_ptr + in_bytes <= out_ptr


def read_only(buffer) -> bool:
    """Whether ``buffer`` (a DeviceBuffer) is memory adopted read-only."""
    owner = buffer.owner
    return owner is not None and getattr(owner, "readonly", False) is True


def check_writable(out: Strided, op: str, what: str = "out") -> None:
    """Raise ValidationError when ``out`` is read-only memory (see the module doc)."""
    buf = out.base.buffer
    if buf is not None and buf.owner is not None and read_only(buf):
        raise ValidationError(f"{what} is read-only: its memory was adopted from a producer "
                              "that marked it read-only, so no op writes into it (copy it "
                              "with to_contiguous_read first)", op=op)


def check_output(out: Strided, inputs: Sequence[Strided], roles: Sequence[str], op: str,
                 in_place: bool = False, what: str = "out") -> None:
    """Raise ValidationError when ``out`` is read-only or overlaps an input (an exact
    in-place view is allowed when ``in_place``)."""
    check_writable(out, op, what)
    for x, role in zip(inputs, roles):
        if overlaps(out, x) and not (in_place and same_view(out, x)):
            allowed = (" (only an output that is exactly the same view as an input may "
                       "alias it)" if in_place else "")
            raise ValidationError(f"{what} overlaps {role} in device memory; outputs must "
                                  f"not alias inputs{allowed}", op=op)


def self_overlapping(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True unless every index of the view addresses a distinct element (a sufficient
    test: each axis must step past everything the axes with smaller strides reach)."""
    if 0 in shape:
        return False
    span = 0
    for n, st in sorted(((n, abs(st)) for n, st in zip(shape, strides) if n > 1),
                        key=lambda t: t[1]):
        if st <= span:
            return True
        span += (n - 1) * st
    return False


def check_distinct_elements(out: Strided, op: str, what: str = "out") -> None:
    """Raise ValidationError when ``out`` addresses some element more than once."""
    if self_overlapping(out.shape, out.strides):
        raise ValidationError(f"{what} (shape {out.shape}, strides {out.strides}) addresses "
                              "some elements more than once", op=op)
