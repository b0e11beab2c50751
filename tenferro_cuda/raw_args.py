"""The value types of a raw launch: ``LaunchConfig`` (grid, block, dynamic shared memory)
and ``KernelArg`` (one packed by-value parameter). Both validate what they are given and
raise ``ValidationError`` quoting the bad value; neither carries any authority. Also the
checks the raw and kernel sessions share for bytes and sequences of strings.
"""

from __future__ import annotations

import numbers
import operator
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsInt

from .errors import ValidationError

__all__ = ["LaunchConfig", "KernelArg"]

_BYTES_LIKE = (bytes, bytearray, memoryview)


def _bytes_like(value: object, what: str, op: str) -> bytes:
    """``value`` as bytes when it is bytes, a bytearray or a memoryview; anything else
    (an int would be that many zero bytes, a str has no encoding) is a ValidationError."""
    if type(value) is bytes:
        return value
    if isinstance(value, _BYTES_LIKE):
        try:
            return bytes(value)
        except ValueError as exc:  # a released memoryview
            raise ValidationError(f"{what}: {exc}", op=op) from None
    raise ValidationError(f"{what} must be bytes, a bytearray or a memoryview (got "
                          f"{type(value).__name__})", op=op)


def _texts(values: object, what: str, op: str) -> tuple[str, ...]:
    """``values`` as a tuple of str; a single str (a sequence of characters) is refused."""
    if (isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Sequence)
            or not all(isinstance(v, str) for v in values)):
        raise ValidationError(f"{what} must be a sequence of str (a list or tuple; not one "
                              f"string) (got {values!r:.200})", op=op)
    return tuple(values)


def _dim3(value, name: str) -> tuple[int, int, int]:
    try:
        given = (value,) if isinstance(value, int) else tuple(value)
        dims = tuple(operator.index(v) for v in given) + (1,) * (3 - len(given))
    except TypeError:
        dims = ()
    if len(dims) != 3 or any(type(d) is bool or d < 1 for d in dims):
        raise ValidationError(f"{name} must be up to three ints >= 1 (got {value!r})",
                              op="LaunchConfig")
    return dims  # type: ignore[return-value]


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block dimensions and dynamic shared memory bytes, validated."""

    grid: tuple[int, int, int] | int
    block: tuple[int, int, int] | int
    shared_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _dim3(self.grid, "grid"))
        object.__setattr__(self, "block", _dim3(self.block, "block"))
        if type(self.shared_bytes) is not int or self.shared_bytes < 0:
            raise ValidationError(f"shared_bytes must be an int >= 0 (got "
                                  f"{self.shared_bytes!r})", op="LaunchConfig")


_INTS = {"i32": ("<i", -(1 << 31), 1 << 31), "u32": ("<I", 0, 1 << 32),
         "i64": ("<q", -(1 << 63), 1 << 63), "u64": ("<Q", 0, 1 << 64)}


def _int(kind: str, v: object, name: str = "") -> KernelArg:
    fmt, lo, hi = _INTS[kind]
    try:
        value = operator.index(v)  # type: ignore[arg-type]
    except TypeError:
        value = None
    if value is None or type(v) is bool or not lo <= value < hi:
        raise ValidationError(f"KernelArg.{name or kind} takes an int in [{lo}, {hi - 1}] "
                              f"(got {v!r})", op="KernelArg")
    return KernelArg(struct.pack(fmt, value), struct.calcsize(fmt))


def _float(kind: str, fmt: str, v: object) -> KernelArg:
    if type(v) is bool or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise ValidationError(f"KernelArg.{kind} takes a real number (got {v!r})",
                              op="KernelArg")
    try:
        return KernelArg(struct.pack(fmt, float(v)), struct.calcsize(fmt))  # type: ignore
    except (OverflowError, TypeError, ValueError, struct.error) as exc:
        raise ValidationError(f"KernelArg.{kind} cannot hold {v!r}: {exc}",
                              op="KernelArg") from None


@dataclass(frozen=True)
class KernelArg:
    """One kernel parameter: packed bytes and their alignment. The constructors check
    the value's type and range (``ValidationError``)."""

    data: bytes
    align: int
    code: str = ""  # the ArgPack code, derived

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ("X" if self.align >= 16 else "S") + str(len(self.data)))

    @staticmethod
    def i32(v: int) -> KernelArg:
        return _int("i32", v)

    @staticmethod
    def u32(v: int) -> KernelArg:
        return _int("u32", v)

    @staticmethod
    def i64(v: int) -> KernelArg:
        return _int("i64", v)

    @staticmethod
    def u64(v: int) -> KernelArg:
        return _int("u64", v)

    @staticmethod
    def f32(v: float) -> KernelArg:
        return _float("f32", "<f", v)

    @staticmethod
    def f64(v: float) -> KernelArg:
        return _float("f64", "<d", v)

    @staticmethod
    def pointer(p: SupportsInt) -> KernelArg:
        """A device address: an int (or a numpy integer, anything with ``__index__``), a
        ``DevicePointer`` lent by the scope (checked), or a driver handle object that
        converts with ``int()`` (``CUdeviceptr``); a float, a string or a bool is a
        ValidationError."""
        if type(p) is not int and not hasattr(type(p), "__index__"):
            if isinstance(p, (numbers.Number, str, bytes)) or not hasattr(type(p), "__int__"):
                raise ValidationError(f"KernelArg.pointer takes a device address: an int, a "
                                      f"DevicePointer or a handle with __int__ (got {p!r:.80})",
                                      op="KernelArg")
            try:
                p = int(p)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ValidationError(f"KernelArg.pointer cannot convert {p!r:.80}: {exc}",
                                      op="KernelArg") from None
        return _int("u64", p, "pointer")

    @staticmethod
    def raw(data: bytes, align: int = 8) -> KernelArg:
        """Any by-value struct, given as its bytes (bytes, a bytearray or a memoryview; at
        least one byte). ``align`` is the struct's alignment, a power of two from 1 to 16:
        16 places it 16-byte aligned, anything less 8-byte aligned."""
        packed = _bytes_like(data, "KernelArg.raw data", "KernelArg")
        if not packed:
            raise ValidationError("KernelArg.raw data is empty (a kernel parameter has at "
                                  "least one byte)", op="KernelArg")
        if type(align) is not int or not 1 <= align <= 16 or align & (align - 1):
            raise ValidationError(f"KernelArg.raw align must be a power of two int from 1 to "
                                  f"16 (got {align!r})", op="KernelArg")
        return KernelArg(packed, align)
