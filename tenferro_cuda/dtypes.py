"""The 15 dtypes of tenferro_cuda, their host (numpy/ml_dtypes) and device (C++) types,
and the promotion lattice that ``convert`` follows.

``ml_dtypes`` (the host type of bfloat16; importing it costs most of a second) is imported
on first need only: ``DType.BFLOAT16.numpy``, or ``as_dtype`` of a dtype numpy does not
know natively once ``ml_dtypes`` is loaded (a bfloat16 array can only exist after that).

The lattice is *value preserving*: ``convert(a -> b)`` is allowed exactly when every
value of ``a`` is representable in ``b`` without change (identity included). ``cast`` is
the projection between any pair and follows the rules in ``docs/dtypes.md``.
"""

from __future__ import annotations

import enum
import sys
import threading

import numpy as np

from .errors import UnsupportedDTypeError

__all__ = ["DType", "ALL_DTYPES", "lattice_allows", "as_dtype"]


class DType(enum.Enum):
    """A tensor element type. ``value`` is the short name (``"float32"``)."""

    BOOL = "bool"
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    UINT64 = "uint64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"

    # Members are singletons compared by identity: hash them the same way (in C) instead
    # of through Enum's Python-level ``hash(self._name_)``; dtype-keyed lookups are on
    # every op's hot path.
    __hash__ = object.__hash__

    @property
    def numpy(self) -> np.dtype:
        """The host dtype (``ml_dtypes.bfloat16`` for BFLOAT16, imported on first use)."""
        try:
            return _NUMPY[self]
        except KeyError:
            return _load_bfloat16()

    @property
    def dtype(self) -> np.dtype:
        """The host dtype, for numpy: ``np.dtype(tc.float32)`` and ``np.zeros(3, tc.int8)``
        work because numpy reads a ``dtype`` attribute."""
        return self.numpy

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def ctype(self) -> str:
        """The C++ type used by the kernels in ``ptx/``."""
        return _CTYPE[self]

    @property
    def code(self) -> int:
        """A small stable integer (position in ``ALL_DTYPES``)."""
        return _CODE[self]

    @property
    def is_bool(self) -> bool:
        return self is DType.BOOL

    @property
    def is_integer(self) -> bool:
        return self in _INTEGERS

    @property
    def is_signed_integer(self) -> bool:
        return self in _SIGNED

    @property
    def is_unsigned_integer(self) -> bool:
        return self in _INTEGERS and self not in _SIGNED

    @property
    def is_float(self) -> bool:
        """Real floating point (float16, bfloat16, float32, float64)."""
        return self in _FLOATS

    @property
    def is_complex(self) -> bool:
        return self in (DType.COMPLEX64, DType.COMPLEX128)

    @property
    def is_inexact(self) -> bool:
        return self.is_float or self.is_complex

    @property
    def is_numeric(self) -> bool:
        return self is not DType.BOOL

    @property
    def real(self) -> DType:
        """The real counterpart of a complex dtype; the dtype itself otherwise."""
        return {DType.COMPLEX64: DType.FLOAT32, DType.COMPLEX128: DType.FLOAT64}.get(self, self)

    @property
    def complex(self) -> DType:
        """The complex counterpart of float32/float64 (or of a complex dtype)."""
        table = {DType.FLOAT32: DType.COMPLEX64, DType.FLOAT64: DType.COMPLEX128}
        if self.is_complex:
            return self
        if self not in table:
            raise UnsupportedDTypeError(f"{self.value} has no complex counterpart")
        return table[self]

    def __repr__(self) -> str:
        return f"tenferro_cuda.{self.value}"

    @classmethod
    def of(cls, value: object) -> DType:
        """Map a DType, a numpy dtype (or anything numpy accepts) or a name to a DType."""
        return as_dtype(value)


ALL_DTYPES: tuple[DType, ...] = tuple(DType)
_SIGNED = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.INT64})
_INTEGERS = _SIGNED | {DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64}
_FLOATS = frozenset({DType.FLOAT16, DType.BFLOAT16, DType.FLOAT32, DType.FLOAT64})
_CODE = {d: i for i, d in enumerate(ALL_DTYPES)}

# The host dtypes numpy has natively; BFLOAT16 joins both maps in ``_load_bfloat16``.
_NUMPY: dict[DType, np.dtype] = {
    DType.BOOL: np.dtype(np.bool_),
    DType.INT8: np.dtype(np.int8),
    DType.UINT8: np.dtype(np.uint8),
    DType.INT16: np.dtype(np.int16),
    DType.UINT16: np.dtype(np.uint16),
    DType.INT32: np.dtype(np.int32),
    DType.UINT32: np.dtype(np.uint32),
    DType.INT64: np.dtype(np.int64),
    DType.UINT64: np.dtype(np.uint64),
    DType.FLOAT16: np.dtype(np.float16),
    DType.FLOAT32: np.dtype(np.float32),
    DType.FLOAT64: np.dtype(np.float64),
    DType.COMPLEX64: np.dtype(np.complex64),
    DType.COMPLEX128: np.dtype(np.complex128),
}
_FROM_NUMPY = {v: k for k, v in _NUMPY.items()}
_ITEMSIZE: dict[DType, int] = {d: npd.itemsize for d, npd in _NUMPY.items()}
_ITEMSIZE[DType.BFLOAT16] = 2
_BF16_LOCK = threading.Lock()


def _load_bfloat16() -> np.dtype:
    """Import ``ml_dtypes`` and add bfloat16 to the host maps (once; thread safe)."""
    with _BF16_LOCK:
        if DType.BFLOAT16 not in _NUMPY:
            import ml_dtypes

            npd = np.dtype(ml_dtypes.bfloat16)
            _FROM_NUMPY[npd] = DType.BFLOAT16
            _NUMPY[DType.BFLOAT16] = npd
        return _NUMPY[DType.BFLOAT16]


_CTYPE: dict[DType, str] = {
    DType.BOOL: "bool",
    DType.INT8: "signed char",
    DType.UINT8: "unsigned char",
    DType.INT16: "short",
    DType.UINT16: "unsigned short",
    DType.INT32: "int",
    DType.UINT32: "unsigned int",
    DType.INT64: "long long",
    DType.UINT64: "unsigned long long",
    DType.FLOAT16: "tf::half",
    DType.BFLOAT16: "tf::bfloat16",
    DType.FLOAT32: "float",
    DType.FLOAT64: "double",
    DType.COMPLEX64: "tf::complex<float>",
    DType.COMPLEX128: "tf::complex<double>",
}

# Direct edges of the value-preserving lattice; ``lattice_allows`` takes the closure.
# Integers widen within their signedness and an unsigned N-bit integer also fits the
# signed 2N-bit one (jax's lattice); an integer reaches the narrowest float whose
# significand holds it (8 bits: float16/bfloat16, 16: float32, 32: float64), so 64-bit
# integers reach no float.
_EDGES: dict[DType, tuple[DType, ...]] = {
    DType.BOOL: (DType.INT8, DType.UINT8),
    DType.INT8: (DType.INT16, DType.FLOAT16, DType.BFLOAT16),
    DType.UINT8: (DType.INT16, DType.UINT16, DType.FLOAT16, DType.BFLOAT16),
    DType.INT16: (DType.INT32, DType.FLOAT32),
    DType.UINT16: (DType.INT32, DType.UINT32, DType.FLOAT32),
    DType.INT32: (DType.INT64, DType.FLOAT64),
    DType.UINT32: (DType.INT64, DType.UINT64, DType.FLOAT64),
    DType.INT64: (),
    DType.UINT64: (),
    DType.FLOAT16: (DType.FLOAT32,),
    DType.BFLOAT16: (DType.FLOAT32,),
    DType.FLOAT32: (DType.FLOAT64, DType.COMPLEX64),
    DType.FLOAT64: (DType.COMPLEX128,),
    DType.COMPLEX64: (DType.COMPLEX128,),
    DType.COMPLEX128: (),
}


def _closure() -> dict[DType, frozenset[DType]]:
    out = {}
    for start in ALL_DTYPES:
        seen = {start}
        todo = [start]
        while todo:
            for nxt in _EDGES[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        out[start] = frozenset(seen)
    return out


_REACH = _closure()


def lattice_allows(src: DType, dst: DType) -> bool:
    """True when ``convert(src -> dst)`` preserves every value of ``src``."""
    return dst in _REACH[src]


def as_dtype(value: object) -> DType:
    """Normalise ``value`` (DType, name, numpy dtype or scalar type) to a DType."""
    if isinstance(value, DType):
        return value
    if value is None:
        raise UnsupportedDTypeError("not a dtype: None")
    if isinstance(value, str):
        try:
            return DType(value)
        except ValueError:
            pass
    try:
        npd = np.dtype(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, SyntaxError, OverflowError) as exc:
        # (ValueError: an object whose .dtype is no numpy dtype, a bad sub-array shape;
        # SyntaxError: a malformed comma-separated format string such as "i4,(2")
        raise UnsupportedDTypeError(f"not a dtype: {value!r}") from exc
    found = _FROM_NUMPY.get(npd)
    if found is not None:
        return found
    # Only ml_dtypes makes bfloat16 host arrays: if it is loaded, npd may be one.
    if "ml_dtypes" in sys.modules and npd == _load_bfloat16():
        return DType.BFLOAT16
    raise UnsupportedDTypeError(
        f"dtype {npd} is not one of {', '.join(d.value for d in ALL_DTYPES)}"
    )
