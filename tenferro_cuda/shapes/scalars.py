"""Scalar operands of the binary and ternary elementwise ops (pure Python): which values
are scalars, the dtype a scalar takes, and its bits for the kernel.

A scalar is a Python ``bool``, ``int``, ``float`` or ``complex`` (subclasses included), or
a numpy scalar: ``np.bool_``, any ``np.integer``, ``np.float16/32/64``, ``ml_dtypes``'
``bfloat16`` or ``np.complex64/128``. Anything else -- a 0-d array, a ``np.longdouble``, a
string -- is not. Its *kind* is bool, int, float or complex; a numpy scalar counts by its
kind and value, as the Python scalar of the same value would: its own numpy dtype plays no
part.

A scalar takes the dtype of its slot in the op -- the dtype of the tensor operands (the
``select`` predicate: bool) -- and must fit it (``docs/dtypes.md``):

- bool dtype: a bool scalar only;
- integer dtypes: bool and int scalars, in the dtype's range (kind ``overflow`` else);
- float dtypes: bool, int and float scalars, rounded once to nearest even as numpy's cast
  does (float16 and bfloat16 included, and ints beyond 2**53 without a rounding through
  float64); inf and NaN fit, a finite value that rounds past the dtype's largest finite
  value does not (kind ``overflow``);
- complex dtypes: every kind, each part rounded as for the real dtype of its parts.

Any other pairing -- a float with an integer tensor, a complex with a real one, an int
with bool -- is ``ValidationError`` kind ``dtype_mismatch``: numpy and jax would promote
the result to the scalar's kind, and tenferro_cuda never promotes implicitly.

``converter(dtype)`` gives the one conversion function of a dtype: it maps a value to its
bits (an ``int``: the value's bytes, little-endian; 16 bytes for complex128) or, when the
value is not a scalar or does not fit, to something that is not an ``int`` (None or a
``Misfit``). The fast path calls it directly; ``bits`` calls the same function and turns a
failure into the ``ValidationError``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import NamedTuple, TypeAlias

import numpy as np

from ..dtypes import ALL_DTYPES, DType
from ..errors import RuntimeStateError, ValidationError
from . import describe_array

__all__ = ["Scalar", "Converter", "Misfit", "is_scalar", "converter", "bits",
           "not_an_operand", "overflow_text", "shown", "as_builtin", "int_as_float"]

Scalar: TypeAlias = bool | int | float | complex | np.generic
"""A scalar operand: a Python bool, int, float or complex, or a numpy scalar (the type of
annotations; ``is_scalar`` is the rule)."""

BOOL, INT, FLOAT, COMPLEX = "bool", "int", "float", "complex"
_RANK = {BOOL: 0, INT: 1, FLOAT: 2, COMPLEX: 3}
_NUMPY_FLOATS = (np.float16, np.float32, np.float64)
_NUMPY_COMPLEX = (np.complex64, np.complex128)


class Misfit(NamedTuple):
    """Why a scalar does not fit a dtype: the ValidationError kind and the reason."""

    kind: str
    text: str


_TYPES = {bool: BOOL, int: INT, float: FLOAT, complex: COMPLEX, np.bool_: BOOL,
          **{t: INT for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                              np.uint32, np.uint64)},
          **{t: FLOAT for t in _NUMPY_FLOATS}, **{t: COMPLEX for t in _NUMPY_COMPLEX}}
_MAKE = {BOOL: bool, INT: int, FLOAT: float, COMPLEX: complex}


def _kind(value: object) -> tuple[str, object] | None:
    """(kind, the Python scalar of that kind with the same value); None: not a scalar."""
    kind = _TYPES.get(type(value))
    if kind is None:
        if isinstance(value, np.generic):
            if isinstance(value, np.integer):
                kind = INT
            elif value.dtype.name == "bfloat16":  # ml_dtypes' (loaded: it made this one)
                kind = _TYPES[type(value)] = FLOAT
            else:
                return None
        elif isinstance(value, int):  # a subclass (bool has none)
            kind = INT
        elif isinstance(value, float):
            kind = FLOAT
        elif isinstance(value, complex):
            kind = COMPLEX
        else:
            return None
    return kind, _MAKE[kind](value)  # type: ignore[operator]


def is_scalar(value: object) -> bool:
    """Whether ``value`` is a scalar operand (see the module docstring)."""
    return _kind(value) is not None


# --- the converters: one per dtype, its most common Python type first -------------------
Converter = Callable[[object], "int | Misfit | None"]
_PRECISION = {DType.FLOAT16: 11, DType.BFLOAT16: 8, DType.FLOAT32: 24, DType.FLOAT64: 53}
_BF16_MAX = (2 - 2 ** -7) * 2.0 ** 127
_LARGEST = {DType.FLOAT16: 65504.0, DType.BFLOAT16: _BF16_MAX,
            DType.FLOAT32: (2 - 2 ** -23) * 2.0 ** 127, DType.FLOAT64: 1.7976931348623157e308}
_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")


def overflow_text(dtype: DType) -> str:
    """The reason a finite value does not fit the float dtype ``dtype`` (or the real
    dtype of the parts of a complex one): "overflows float32 (its largest ...)"; for an
    integer dtype, its range: "is out of range for int32 [-2147483648, 2147483647]"."""
    real = dtype.real
    largest = _LARGEST.get(real)
    if largest is not None:
        return f"overflows {real.value} (its largest finite value is {largest!r})"
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        return f"is out of range for {dtype.value} [{info.min}, {info.max}]"
    return f"does not fit {dtype.value}"


def _overflow(dtype: DType) -> Misfit:
    return Misfit("overflow", overflow_text(dtype))


def shown(value: object) -> str:
    """``repr(value)`` for an error message; an int past Python's limit on int-to-string
    conversion (4300 digits, where ``repr`` raises ValueError) as its size in bits."""
    try:
        return repr(value)
    except ValueError:
        if isinstance(value, int):
            return f"<an int of {value.bit_length()} bits>"
        return f"<a {type(value).__name__} too long to print>"


def _bool_converter() -> Converter:
    def convert(value: object) -> int | Misfit | None:
        if type(value) is bool:
            return int(value)
        return _convert(value, DType.BOOL)
    return convert


def _int_converter(dtype: DType) -> Converter:
    """In range, as the two's-complement bits of the dtype's width."""
    lo, hi = int(np.iinfo(dtype.numpy).min), int(np.iinfo(dtype.numpy).max)
    mask = (1 << 8 * dtype.itemsize) - 1
    over = Misfit("overflow", f"is out of range for {dtype.value} [{lo}, {hi}]")

    def convert(value: object) -> int | Misfit | None:
        if type(value) is int:
            return value & mask if lo <= value <= hi else over  # type: ignore[operator]
        return _convert(value, dtype)
    return convert


_EXACT = 1 << 53  # ints of at most this magnitude are exact as float64


def _float_converter(dtype: DType) -> Converter:
    """float16/32/64 through ``struct``, which rounds a float once to nearest even and
    raises OverflowError for a finite one that rounds to infinity (an int exact in float64
    goes as that float)."""
    fmt = {DType.FLOAT16: ("<e", "<H"), DType.FLOAT32: ("<f", "<I"),
           DType.FLOAT64: ("<d", "<Q")}[dtype]
    pack, unpack = struct.Struct(fmt[0]).pack, struct.Struct(fmt[1]).unpack
    over = _overflow(dtype)

    def convert(value: object) -> int | Misfit | None:
        t = type(value)
        if t is float:
            x = value
        elif t is int and -_EXACT <= value <= _EXACT:  # type: ignore[operator]
            x = float(value)  # type: ignore[arg-type]
        else:
            return _convert(value, dtype)
        try:
            return unpack(pack(x))[0]
        except OverflowError:
            return over
    return convert


_F64, _U64 = struct.Struct("<d"), struct.Struct("<Q")


def _bf16(value: object) -> int | Misfit | None:
    """bfloat16: rounded once to nearest even from the float64 value (not through
    float32), subnormals included."""
    if type(value) is not float:
        return _convert(value, DType.BFLOAT16)
    u = _U64.unpack(_F64.pack(value))[0]
    if 897 <= u >> 52 & 0x7FF <= 1150:  # a normal bfloat16: 2**-126 <= |x| < 2**128
        # the sign, the 11 exponent bits and the top 7 significand bits, rounded to nearest
        # even on the 45 bits dropped
        r = (u + 0xFFFFFFFFFFF + (u >> 45 & 1)) >> 45
        if r & 0x3FF80 > 1150 << 7:  # rounded up to 2**128
            return _overflow(DType.BFLOAT16)
        return (r & 0x3FFFF) - (896 << 7) | (r >> 18) << 15  # the exponent rebiased
    x: float = value  # type: ignore[assignment]
    if math.isnan(x):
        return 0xFFC0 if u >> 63 else 0x7FC0
    if math.isfinite(x) and x != 0.0:
        _, e = math.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
        if e > 128:  # |x| >= 2**128
            return _overflow(DType.BFLOAT16)
        q = max(e, -125) - 8  # exponent of the last significand bit kept: subnormals
        # exact scalings around a round half to even (the sign kept for an underflow to 0)
        x = math.copysign(math.ldexp(round(math.ldexp(x, -q)), q), x)
    return _U32.unpack(_F32.pack(x))[0] >> 16  # exact in float32


def _complex_converter(dtype: DType) -> Converter:
    """Each part rounded as the real dtype of the parts (``struct``, as for the real
    dtypes); the imaginary part's bits above the real part's."""
    part = dtype.real
    if part is DType.FLOAT32:
        pack, unpack, shift = struct.Struct("<ff").pack, struct.Struct("<Q").unpack, 0
    else:
        pack, unpack, shift = struct.Struct("<dd").pack, struct.Struct("<QQ").unpack, 64
    over = _overflow(part)

    def convert(value: object) -> int | Misfit | None:
        t = type(value)
        try:
            if t is complex:
                words = unpack(pack(value.real, value.imag))  # type: ignore[attr-defined]
            elif t is float or t is int and -_EXACT <= value <= _EXACT:  # type: ignore[operator]
                words = unpack(pack(float(value), 0.0))  # type: ignore[arg-type]
            else:
                return _convert(value, dtype)
        except OverflowError:
            return over
        return words[0] | words[-1] << shift if shift else words[0]
    return convert


def int_as_float(v: int, dtype: DType) -> float | Misfit:
    """An int as a float that the dtype's converter leaves as the int rounded once."""
    if -(1 << 53) <= v <= 1 << 53:
        return float(v)  # exact
    a, shift = abs(v), abs(v).bit_length() - _PRECISION[dtype]
    q, r = divmod(a, 1 << shift)
    if r > 1 << (shift - 1) or (r == 1 << (shift - 1) and q & 1):
        q += 1  # to nearest, ties to even: exact in the dtype's precision, so in float64
    try:
        return math.copysign(float(q << shift), v)
    except OverflowError:
        return _overflow(dtype)


_BUILTIN = (int, float, complex)


def as_builtin(value: object, make: type[float] | type[complex]) -> float | complex | Misfit:
    """``make(value)`` -- ``make`` is ``float`` or ``complex`` -- for a number of any type
    (the BLAS scalars and fill values also take a Fraction, a Decimal, an np.longdouble),
    checked: a ``Misfit`` of kind ``overflow`` (and no text) for a finite value beyond
    float64 -- ``make`` raised OverflowError, or returned an infinite part for a finite one,
    as ``float()`` and ``complex()`` do for an np.longdouble or a Decimal -- and of kind
    ``invalid_argument`` when the value has no such conversion (a signaling NaN Decimal)."""
    try:
        v = make(value)  # type: ignore[arg-type, call-overload]
    except OverflowError:
        return Misfit("overflow", "")
    except (ValueError, TypeError, ArithmeticError) as e:
        return Misfit("invalid_argument", f"has no {make.__name__} value ({e})")
    if type(value) in _BUILTIN:
        return v  # int, float and complex overflow with an OverflowError
    got = (v.real, v.imag) if make is complex else (v,)
    want = (getattr(value, "real", value), getattr(value, "imag", 0)) if make is complex \
        else (value,)
    for have, part in zip(got, want):
        if math.isinf(have) and _finite(part):
            return Misfit("overflow", "")
    return v


def _finite(value: object) -> bool:
    try:
        return bool(-math.inf < value < math.inf)  # type: ignore[operator]
    except (TypeError, ValueError, ArithmeticError):
        return False


def _accepts(dtype: DType) -> str:
    if dtype is DType.BOOL:
        return "True or False"
    if dtype.is_integer:
        return "bool and int scalars"
    if dtype.is_float:
        return "bool, int and float scalars"
    return "bool, int, float and complex scalars"


def _convert(value: object, dtype: DType) -> int | Misfit | None:
    """Any value to ``dtype``: its kind decides, then the converter of ``dtype`` (or of
    its real part) takes it as the Python scalar of that kind."""
    got = _kind(value)
    if got is None:
        return None
    kind, v = got
    top = _TOP[dtype]
    if _RANK[kind] > _RANK[top]:
        article = "an" if kind == INT else "a"
        return Misfit("dtype_mismatch", f"is {article} {kind} scalar, and {dtype.value} takes "
                                        f"{_accepts(dtype)}")
    if kind == top:
        return _CONVERTERS[dtype](v)  # v is exactly bool, int, float or complex
    if top == COMPLEX:
        return _convert(v, dtype.real)  # the real part; the imaginary part's bits are 0
    if top == INT:
        return _CONVERTERS[dtype](int(v))  # type: ignore[call-overload]
    x = int_as_float(int(v), dtype)  # type: ignore[call-overload]
    return x if type(x) is Misfit else _CONVERTERS[dtype](x)


_TOP = {d: BOOL if d is DType.BOOL else INT if d.is_integer else FLOAT if d.is_float
        else COMPLEX for d in ALL_DTYPES}
_CONVERTERS: dict[DType, Converter] = {DType.BOOL: _bool_converter(),
                                       DType.BFLOAT16: _bf16}
_CONVERTERS.update({d: _int_converter(d) for d in ALL_DTYPES if d.is_integer})
_CONVERTERS.update({d: _float_converter(d) for d in (DType.FLOAT16, DType.FLOAT32,
                                                      DType.FLOAT64)})
_CONVERTERS.update({d: _complex_converter(d) for d in ALL_DTYPES if d.is_complex})


def converter(dtype: DType) -> Converter:
    """The conversion function of ``dtype``: a value to its bits (an ``int``), or None
    (not a scalar) or a ``Misfit`` (does not fit)."""
    return _CONVERTERS[dtype]


def bits(value: object, dtype: DType, op: str, role: str) -> int:
    """The bits of the scalar ``value`` as one element of ``dtype``; ValidationError when
    it is not a scalar or does not fit."""
    got = _CONVERTERS[dtype](value)
    if type(got) is int:
        return got  # type: ignore[return-value]
    if got is None:
        raise not_an_operand(value, op, role)
    assert isinstance(got, Misfit)
    hint = (" (a scalar takes the dtype of the tensor operands: no implicit promotion; cast "
            "the tensor, or pass a scalar of its kind)" if got.kind == "dtype_mismatch" else "")
    raise ValidationError(f"{role}={shown(value)} {got.text}{hint}", op=op, kind=got.kind)


def not_an_operand(value: object, op: str, role: str) -> Exception:
    """The error for an operand that is neither a tensor nor a scalar (returned): an
    array in the wrong place (a host array, another library's GPU array not adopted) is
    the residency rule's RuntimeStateError; anything else is a ValidationError."""
    found, hint = describe_array(value)
    if found:
        return RuntimeStateError(f"{role}: expected a device tensor of this session or a "
                                 f"scalar; found {found} ({hint})", op=op)
    return ValidationError(f"{role} must be a Tensor, TensorView or scalar (a bool, int, "
                           f"float, complex or numpy scalar; got {type(value).__name__})",
                           op=op)
