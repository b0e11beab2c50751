"""The typing rule of scalar operands (shapes/scalars.py, docs/dtypes.md "Scalar operands"):
which values are scalars, which kinds each dtype takes, integer ranges, rounding once to
nearest even (numpy's cast for float16/32/64; bfloat16 and ints beyond 2**53 against an
exact rational reference, where a rounding through float32 or float64 would differ),
special values, numpy scalars by kind and value, and ``infer`` with scalar operands."""

from __future__ import annotations

import enum
import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.shapes.elementwise import KINDS, infer
from tenferro_cuda.shapes.scalars import Misfit, bits, converter, is_scalar

D = DType
KIND_OF = {d: 0 if d is D.BOOL else 1 if d.is_integer else 3 if d.is_complex else 2
           for d in ALL_DTYPES}  # bool < int < float < complex
SAMPLES = [(True, 0), (np.bool_(False), 0), (3, 1), (np.int8(2), 1), (np.uint64(7), 1),
           (2.5, 2), (np.float32(0.5), 2), (ml_dtypes.bfloat16(1.5), 2), (1 - 2j, 3),
           (np.complex64(2j), 3)]


def _numpy_bits(value, dtype: DType) -> int:
    with np.errstate(all="ignore"):
        return int.from_bytes(np.asarray(value, dtype.numpy).tobytes(), "little")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("value,kind", SAMPLES, ids=lambda v: repr(v))
def test_kind_table(dtype, value, kind):
    """A dtype takes the scalars of its kind and of the kinds below (bool < int < float <
    complex), whatever their numpy type; the value is numpy's cast of it."""
    got = converter(dtype)(value)
    if kind > KIND_OF[dtype]:
        assert isinstance(got, Misfit) and got.kind == "dtype_mismatch"
        with pytest.raises(ValidationError) as info:
            bits(value, dtype, "add", "rhs")
        assert info.value.kind == "dtype_mismatch" and info.value.op == "add"
        assert str(info.value).startswith(f"add: rhs={value!r} is ")
    else:
        assert got == _numpy_bits(complex(value) if kind == 3 else float(value)
                                  if kind == 2 else int(value), dtype)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d.is_integer], ids=str)
def test_integer_ranges(dtype):
    info = np.iinfo(dtype.numpy)
    for v in (info.min, info.max, 0, -1 if info.min else 1):
        assert bits(v, dtype, "add", "rhs") == _numpy_bits(v, dtype)
    for v in (info.min - 1, info.max + 1, 2**200):
        with pytest.raises(ValidationError) as exc:
            bits(v, dtype, "add", "rhs")
        assert exc.value.kind == "overflow" and f"[{info.min}, {info.max}]" in str(exc.value)


def _edge_floats(rng, n: int = 4000) -> list[float]:
    out = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.99, 65520.0, 3.3895313892515355e38,
           3.3961775292304767e38, 3.4028235e38, 3.4028235677973366e38, 1e-8, 6e-8, 1e-40,
           1e-45, 1.4e-45, 7e-46, 5e-324, 1.7976931348623157e308]
    for _ in range(n):
        f32 = float(np.float32(rng.uniform(-1.9, 1.9) * 2.0 ** rng.integers(-140, 128)))
        step = math.ldexp(1.0, math.frexp(f32)[1] - 25) if f32 else 1e-46
        out.append(f32 + step * rng.choice([-1, 0, 1, 0.5, -0.5, 2**-20]))
    return out


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.FLOAT32, D.FLOAT64, D.COMPLEX64], ids=str)
def test_float_rounding_is_numpys_cast(dtype):
    rng = np.random.default_rng(5)
    for x in _edge_floats(rng):
        value = complex(x, -x / 3) if dtype.is_complex else x
        got = converter(dtype)(value)
        with np.errstate(all="ignore"):
            cast = np.asarray(value, dtype.numpy)
        if np.all(np.isfinite(cast)):
            assert got == _numpy_bits(value, dtype), x
        else:  # a finite value rounded past the largest one
            assert isinstance(got, Misfit) and got.kind == "overflow", x


def _exact_bits(value: Fraction, precision: int, emin: int, emax: int, width: int) -> int:
    """The IEEE binary format (``width`` bits) nearest ``value``, ties to even; -1: overflow."""
    sign = 1 << (width - 1) if value < 0 else 0
    a = abs(value)
    if a == 0:
        return sign
    e = math.floor(math.log2(a.numerator) - math.log2(a.denominator))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = max(e, emin) - (precision - 1)  # exponent of the last significand bit
    scaled = a / Fraction(2) ** q
    m = math.floor(scaled)
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m % 2):
        m += 1
    if m >= 2**precision:  # carried into the next binade
        m //= 2
        q += 1
    exp_bits = width - precision
    if q + precision - 1 > emax:
        return -1
    if m < 2 ** (precision - 1):  # subnormal
        return sign | m
    biased = q + precision - 1 + (2 ** (exp_bits - 1) - 1)
    return sign | biased << (precision - 1) | (m - 2 ** (precision - 1))


FORMATS = {D.FLOAT16: (11, -14, 15, 16), D.BFLOAT16: (8, -126, 127, 16),
           D.FLOAT32: (24, -126, 127, 32), D.FLOAT64: (53, -1022, 1023, 64)}


def _check_exact(dtype: DType, value) -> None:
    want = _exact_bits(Fraction(value), *FORMATS[dtype])
    if value == 0 and math.copysign(1.0, value) < 0:
        want = 1 << (FORMATS[dtype][3] - 1)  # -0.0 (a Fraction has no signed zero)
    got = converter(dtype)(value)
    if want < 0:
        assert isinstance(got, Misfit) and got.kind == "overflow", value
    else:
        assert got == want, (value, hex(got), hex(want))  # type: ignore[arg-type]


def test_bfloat16_rounds_once_from_float64():
    """bfloat16 from the float64 value, not through float32 (where 1 + 2**-8 + 2**-30
    would first become the tie 1 + 2**-8 and then round to even, 1.0)."""
    assert converter(D.BFLOAT16)(1 + 2**-8 + 2**-30) == 0x3F81
    assert converter(D.BFLOAT16)(1 + 2**-8) == 0x3F80
    rng = np.random.default_rng(8)
    for x in _edge_floats(rng):
        if math.isfinite(x):
            _check_exact(D.BFLOAT16, x)
    for x in (float("inf"), -float("inf")):
        assert converter(D.BFLOAT16)(x) == _numpy_bits(x, D.BFLOAT16)


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64], ids=str)
def test_big_ints_round_once(dtype):
    """An int beyond 2**53 is rounded from its exact value: 2**60 + 2**36 + 1 is above the
    float32 tie 2**60 + 2**36, which float64 would make of it first."""
    cases = [2**60 + 2**36 + 1, -(2**60 + 2**36 + 1), 2**60 + 2**36, 2**53 + 1, 2**64 - 1,
             2**127 * 3, 2**1023 * 3, 10**300 + 7, 2**16 - 17, 65520, 2**100 + 2**76 + 3]
    rng = np.random.default_rng(9)
    cases += [int(rng.integers(1, 2**62)) << int(rng.integers(0, 80)) | 1 for _ in range(300)]
    for v in cases:
        _check_exact(dtype, v)


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64,
                                   D.COMPLEX64, D.COMPLEX128], ids=str)
def test_special_values_fit(dtype):
    width = 8 * dtype.real.itemsize
    for x in (float("inf"), -float("inf"), -0.0):
        got = converter(dtype)(x)
        assert got == _numpy_bits(x, dtype)
    nan = converter(dtype)(float("nan"))
    part = nan & ((1 << width) - 1)  # type: ignore[operator]
    exp = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[width]
    if dtype is D.BFLOAT16:
        exp = 0x7F80
    assert part & exp == exp and part & ~exp & ((1 << (width - 1)) - 1)  # a NaN


class Color(enum.IntEnum):
    RED = 2


@pytest.mark.parametrize("value,ok", [
    (1, True), (True, True), (1.5, True), (1j, True), (Color.RED, True), (np.int16(3), True),
    (np.uint32(3), True), (np.float16(1), True), (ml_dtypes.bfloat16(1), True),
    (np.complex64(1), True), (np.bool_(True), True), ("1", False), (None, False),
    ([1], False), (np.array(1.0), False), (np.longdouble(1), False),
    (np.datetime64("2020-01-01"), False), (Fraction(1, 2), False), (b"1", False)],
    ids=lambda v: type(v).__name__)
def test_what_is_a_scalar(value, ok):
    assert is_scalar(value) is ok
    if not ok and isinstance(value, np.ndarray):  # a host array: upload it
        with pytest.raises(RuntimeStateError, match="host array"):
            bits(value, D.FLOAT64, "mul", "lhs")
    elif not ok:
        with pytest.raises(ValidationError) as info:
            bits(value, D.FLOAT64, "mul", "lhs")
        assert info.value.kind == "invalid_argument" and "lhs must be a Tensor" in str(
            info.value)


def test_numpy_scalars_count_by_kind_and_value():
    pairs = [(np.float64(0.1), 0.1), (np.float32(0.1), float(np.float32(0.1))),
             (np.int64(-5), -5), (np.uint8(200), 200), (np.bool_(True), True),
             (np.complex64(1 + 2j), complex(np.complex64(1 + 2j)))]
    for np_value, py_value in pairs:
        for dtype in ALL_DTYPES:
            assert converter(dtype)(np_value) == converter(dtype)(py_value), (np_value, dtype)


def test_bits_are_little_endian_elements():
    assert bits(1.0, D.FLOAT32, "add", "rhs") == struct.unpack("<I", struct.pack("<f", 1))[0]
    assert bits(-1, D.INT32, "add", "rhs") == 0xFFFFFFFF
    assert bits(1 + 2j, D.COMPLEX128, "add", "rhs") == (
        0x3FF0000000000000 | 0x4000000000000000 << 64)
    assert bits(3, D.COMPLEX64, "add", "rhs") == 0x40400000
    assert bits(True, D.BOOL, "select", "pred") == 1


def test_infer_with_scalar_operands():
    add, select, clamp = KINDS["add"], KINDS["select"], KINDS["clamp"]
    inf = infer(add, [None, D.FLOAT16], [(), (2, 3)], "add")
    assert (inf.shape, inf.dtype, inf.primary, inf.promote) == ((2, 3), D.FLOAT16, D.FLOAT16,
                                                                (False, False))
    inf = infer(select, [None, D.INT8, None], [(), (4,), ()], "select")
    assert (inf.shape, inf.dtype) == ((4,), D.INT8)
    inf = infer(clamp, [D.FLOAT32, None, None], [(5,), (), ()], "clamp")
    assert (inf.shape, inf.dtype) == ((5,), D.FLOAT32)
    assert infer(KINDS["compare_lt"], [D.INT32, None], [(3,), ()], "compare").dtype is D.BOOL
    for kind, dtypes in ((add, [None, None]), (select, [D.BOOL, None, None]),
                         (clamp, [None, None, None])):
        with pytest.raises(ValidationError) as info:
            infer(kind, dtypes, [()] * len(dtypes), kind.name)
        assert info.value.kind == "invalid_argument"
