"""Argument validation: scalar arguments of axpby, dot_general's
accumulation and pad's value. Every bad scalar must raise a typed TenferroError naming
the method, before anything is allocated or launched; nothing is silently coerced and no
raw Python exception escapes (docs/errors.md, docs/dtypes.md "Scalar operands")."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from dot_fakes import MM, Rec
from reference.fake_context import FakeSession

from tenferro_cuda.configs.dot import DotGeneralAccumulation
from tenferro_cuda.configs.indexing import PadConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import TenferroError, ValidationError

F32, F64, C64, I32, I64 = (DType.FLOAT32, DType.FLOAT64, DType.COMPLEX64, DType.INT32,
                           DType.INT64)


def _session():
    ctx = Rec()
    return ctx, FakeSession(ctx)


def _rejects(ctx, call, op, err=TenferroError, kind=None):
    """``call()`` raises ``err`` naming ``op`` (of ``kind``) and records no device work."""
    before = len(ctx.calls)
    with pytest.raises(err) as info:
        call()
    assert info.value.op == op
    if kind is not None:
        assert info.value.kind == kind
    assert ctx.calls[before:] == [], "work recorded by a rejected call"


# --- axpby_read_into_accum: alpha / beta ---------------------------------------------------
def test_axpby_huge_fraction_for_integer_dtype_is_an_overflow_error_not_keyerror():
    """scalar_bytes turns the float() OverflowError of a huge Fraction into _overflows(),
    whose overflow_text() looks the integer dtype up in a float-only table: KeyError."""
    ctx, s = _session()
    x, y = ctx.dev((3,), I32), ctx.dev((3,), I32)
    _rejects(ctx, lambda: s.axpby_read_into_accum(Fraction(10 ** 400), x, 1, y),
             "axpby_read_into_accum", ValidationError, "overflow")


def test_axpby_integral_fraction_is_not_rounded_through_float64():
    """Fraction(2**53 + 1) is an integral value that fits int64; it goes through
    float(), so alpha silently becomes 2**53 (and Fraction(2**63 - 1), which fits, is
    rejected as out of range)."""
    ctx, s = _session()
    x, y = ctx.dev((3,), I64), ctx.dev((3,), I64)
    launched = []
    ctx.launcher = lambda fn, grid, block, shared, args: launched.append(args)
    s.axpby_read_into_accum(Fraction(2 ** 53 + 1), x, 0, y)
    alpha = next(a for a in launched[0] if isinstance(a, bytes))
    assert int(np.frombuffer(alpha, np.int64)[0]) == 2 ** 53 + 1


@pytest.mark.parametrize("value,dtype", [
    (np.longdouble("1e4000"), F32), (np.longdouble("1e4000"), F64),
    (np.longdouble("1e4000"), C64), (Decimal("1e400"), C64)],
    ids=["longdouble_float32", "longdouble_float64", "longdouble_complex64",
         "decimal_complex64"])
def test_axpby_finite_scalar_beyond_float64_is_not_silently_infinite(value, dtype):
    """A finite alpha that overflows the dtype must raise (kind overflow); np.longdouble
    and Decimal values beyond float64 become inf silently (float() does not raise)."""
    ctx, s = _session()
    x, y = ctx.dev((3,), dtype), ctx.dev((3,), dtype)
    _rejects(ctx, lambda: s.axpby_read_into_accum(value, x, 1, y), "axpby_read_into_accum",
             ValidationError, "overflow")


def test_axpby_signaling_nan_decimal_is_a_validation_error_not_valueerror():
    ctx, s = _session()
    x, y = ctx.dev((3,), C64), ctx.dev((3,), C64)
    _rejects(ctx, lambda: s.axpby_read_into_accum(Decimal("sNaN"), x, 1, y),
             "axpby_read_into_accum", ValidationError)


# --- dot_general_read_into_accum: DotGeneralAccumulation scalars ---------------------------
@pytest.mark.parametrize("dtype", [F32, F64, C64], ids=lambda d: d.value)
def test_dot_accum_longdouble_alpha_beyond_float64_is_an_overflow_error(dtype):
    """np.longdouble passes DotGeneralAccumulation (a numbers.Number whose .item() stays a
    longdouble) and float()/complex() turn 1e4000 into inf without an OverflowError."""
    ctx, s = _session()
    acc = DotGeneralAccumulation(alpha=np.longdouble("1e4000"))
    a, b, out = ctx.dev((3, 4), dtype), ctx.dev((4, 5), dtype), ctx.dev((3, 5), dtype)
    _rejects(ctx, lambda: s.dot_general_read_into_accum(a, b, MM, acc, out),
             "dot_general_read_into_accum", ValidationError, "overflow")


def test_dot_accum_decimal_beyond_float64_is_an_overflow_error_for_complex():
    ctx, s = _session()
    acc = DotGeneralAccumulation(alpha=Decimal("1e400"))
    a, b, out = ctx.dev((3, 4), C64), ctx.dev((4, 5), C64), ctx.dev((3, 5), C64)
    _rejects(ctx, lambda: s.dot_general_read_into_accum(a, b, MM, acc, out),
             "dot_general_read_into_accum", ValidationError, "overflow")


def test_dot_accum_signaling_nan_decimal_is_a_validation_error_not_valueerror():
    ctx, s = _session()
    acc = DotGeneralAccumulation(alpha=Decimal("sNaN"))
    a, b, out = ctx.dev((3, 4), C64), ctx.dev((4, 5), C64), ctx.dev((3, 5), C64)
    _rejects(ctx, lambda: s.dot_general_read_into_accum(a, b, MM, acc, out),
             "dot_general_read_into_accum", ValidationError)


def test_grouped_gemm_longdouble_alpha_is_an_overflow_error():
    from tenferro_cuda.configs.dot import GemmJob, GroupedGemmConfig

    ctx, s = _session()
    job = GemmJob(ctx.dev((3, 4), F64), ctx.dev((4, 5), F64), ctx.dev((3, 5), F64),
                  accumulation=DotGeneralAccumulation(alpha=np.longdouble("1e4000")))
    _rejects(ctx, lambda: s.grouped_gemm(GroupedGemmConfig((job,))), "grouped_gemm",
             ValidationError, "overflow")


# --- pad: value ----------------------------------------------------------------------------
PAD = PadConfig((1, 1), (1, 1))


@pytest.mark.parametrize("dtype", [F32, DType.FLOAT16, C64], ids=lambda d: d.value)
@pytest.mark.parametrize("value", ["1.5", "1", None, [1.0], [1.0, 2.0], np.array([1.0, 2.0]),
                                   np.array(1.0)],
                         ids=["str_float", "str_int", "None", "list1", "list2", "array2",
                              "array0d"])
def test_pad_value_must_be_a_scalar(value, dtype):
    """pad_value_bytes hands anything but a complex to np.asarray(value, dtype): strings
    are parsed, None becomes NaN, a list or array gives raw bytes of another length."""
    ctx, s = _session()
    x = ctx.dev((3, 4), dtype)
    _rejects(ctx, lambda: s.pad(x, PAD, value), "pad", TenferroError)


@pytest.mark.parametrize("dtype,value", [(DType.UINT8, 300), (DType.INT8, -129),
                                         (DType.FLOAT16, 1e6), (F32, 1e39)],
                         ids=["uint8_300", "int8_-129", "float16_1e6", "float32_1e39"])
def test_pad_value_that_does_not_fit_is_kind_overflow(dtype, value):
    """docs/errors.md: 'a value does not fit the dtype' is kind overflow (pad says
    invalid_argument)."""
    ctx, s = _session()
    x = ctx.dev((3, 4), dtype)
    _rejects(ctx, lambda: s.pad(x, PAD, value), "pad", ValidationError, "overflow")
