"""Worked examples of the StableHLO elementwise ops the library added (floor ... clz),
from the StableHLO specification and its interpreter tests (``stablehlo/tests/interpret``),
restricted to the library's dtypes, plus the shift and bit-count edges those leave out
(amounts of the bit width and more, negative amounts, unsigned arithmetic shifts, 0 and
all ones). Both tiers check them: the CPU tier against the numpy reference of
``tests/gpu/stablehlo_ref.py``, the GPU tier against the device.

``EXAMPLES``: name -> (op, input dtype, inputs, expected, exact). Expected arrays carry the
result dtype; ``exact`` False compares with a relative tolerance of 1e-12 (the spec's
transcendental values are printed to about 16 digits).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
INF, NAN = math.inf, math.nan
I8, U8, I32, I64 = np.int8, np.uint8, np.int32, np.int64
F16, F32, F64, C64, C128 = np.float16, np.float32, np.float64, np.complex64, np.complex128
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _a(values, dtype):
    return np.array(values, dtype=dtype)


def _case(op, dtype, inputs, expected, out_dtype=None, exact=True):
    ins = tuple(_a(v, dtype) for v in inputs)
    return op, np.dtype(dtype), ins, _a(expected, out_dtype or dtype), exact


def _tiny(dtype) -> float:
    """The smallest subnormal of a float dtype."""
    info = ml_dtypes.finfo(dtype) if dtype is BF16 else np.finfo(dtype)
    return float(info.smallest_subnormal)


def _rounding(op, dtype, expected):
    t = _tiny(dtype)
    return _case(op, dtype, [[-INF, -2.5, -t, -0.0, 0.0, t, 2.5, INF, NAN]], expected)


EXAMPLES = {
    # rounding (interpret/floor.mlir, ceil.mlir: +-the smallest subnormal; spec round_*)
    **{f"floor-{np.dtype(d).name}": _rounding("floor", d,
                                              [-INF, -3, -1, -0.0, 0.0, 0.0, 2, INF, NAN])
       for d in (BF16, F16, F32, F64)},
    **{f"ceil-{np.dtype(d).name}": _rounding("ceil", d,
                                             [-INF, -2, -0.0, -0.0, 0.0, 1, 3, INF, NAN])
       for d in (BF16, F16, F32, F64)},
    "round_nearest_afz": _case("round_nearest_afz", F64, [[-2.5, 0.4, 0.5, 0.6, 2.5]],
                               [-3.0, 0.0, 1.0, 1.0, 3.0]),
    "round_nearest_afz-edges": _case("round_nearest_afz", F32,
                                     [[-0.4, 0.49999997, 8388609.0, -1.5, -INF, NAN]],
                                     [-0.0, 0.0, 8388609.0, -2.0, -INF, NAN]),
    "round_nearest_even": _case("round_nearest_even", F64, [[-2.5, 0.4, 0.5, 0.6, 2.5]],
                                [-2.0, 0.0, 0.0, 1.0, 2.0]),
    "round_nearest_even-f16": _case("round_nearest_even", F16, [[-0.5, 1.5, 2.5, -3.5]],
                                    [-0.0, 2.0, 2.0, -4.0]),
    "is_finite": _case("is_finite", F64, [[-INF, INF, NAN, -10.0, -0.0, 0.0, 10.0]],
                       [False, False, False, True, True, True, True], np.bool_),
    # complex parts (interpret/real.mlir, imag.mlir, complex.mlir)
    "real-f64": _case("real", F64, [[1.0, 2.0]], [1.0, 2.0]),
    "real-c128": _case("real", C128, [[1 + 2j, 3 + 4j]], [1.0, 3.0], F64),
    "imag-f64": _case("imag", F64, [[1.0, -2.0]], [0.0, 0.0]),
    "imag-c64": _case("imag", C64, [[1 + 2j, 3 + 4j]], [2.0, 4.0], F32),
    "complex": _case("complex", F64, [[1.0, 3.0], [2.0, 4.0]], [1 + 2j, 3 + 4j], C128),
    # transcendental (interpret/*.mlir)
    "cbrt": _case("cbrt", F64, [[0.0, 1.0, 8.0, 27.0]], [0.0, 1.0, 2.0, 3.0], exact=False),
    "cbrt-c128": _case("cbrt", C128, [[3 + 4j]], [1.6289371459221759 + 0.5201745023045458j],
                       exact=False),
    "logistic": _case("logistic", F64, [[1.0, 2.0, 3.0, 4.0]],
                      [0.73105857863000488, 0.88079707797788244, 0.95257412682243322,
                       0.98201379003790844], exact=False),
    "logistic-c128": _case("logistic", C128, [[1 + 2j]],
                           [1.02141536417218054 + 0.40343870608154248j], exact=False),
    "tan": _case("tan", F64, [[0.0, 1.57079632, 3.14159265, 4.71238898]],
                 [0.0, 147169271.76124874, -3.5897930298416118e-9, 2599497068.2695704],
                 exact=False),
    "atan2": _case("atan2", F64, [[0.0, 1.0, -1.0], [0.0, 0.0, 0.0]],
                   [0.0, 1.5707963267948966, -1.5707963267948966], exact=False),
    "atan2-c128": _case("atan2", C128, [[1 + 0j, -1 + 0j], [0j, 0j]],
                        [1.5707963267948966 - 0j, -1.5707963267948966 + 0j], exact=False),
    # logical / bitwise (interpret/and.mlir, or.mlir, xor.mlir, not.mlir)
    "and-i8": _case("bitwise_and", I8, [[127, -128, -128], [0, 127, -128]], [0, 0, -128]),
    "and-u8": _case("bitwise_and", U8, [[0, 127, 255], [255, 255, 255]], [0, 127, 255]),
    "and-i64": _case("bitwise_and", I64, [[INT64_MAX, INT64_MIN, INT64_MIN],
                                          [0, INT64_MAX, INT64_MIN]], [0, 0, INT64_MIN]),
    "and-bool": _case("bitwise_and", np.bool_, [[False, False, True, True],
                                                [False, True, False, True]],
                      [False, False, False, True]),
    "and-spec": _case("bitwise_and", I32, [[1, 2, 3, 4], [5, 6, 7, 8]], [1, 2, 3, 0]),
    "or-i32": _case("bitwise_or", I32, [[2147483647, -2147483648, -2147483648],
                                        [0, 2147483647, -2147483648]],
                    [2147483647, -1, -2147483648]),
    "or-bool": _case("bitwise_or", np.bool_, [[False, False, True, True],
                                              [False, True, False, True]],
                     [False, True, True, True]),
    "xor-u8": _case("bitwise_xor", U8, [[0, 127, 255], [255, 255, 255]], [255, 128, 0]),
    "xor-i32": _case("bitwise_xor", I32, [[1, 2, 3, 4], [5, 6, 7, 8]], [4, 4, 4, 12]),
    "xor-bool": _case("bitwise_xor", np.bool_, [[False, False, True, True],
                                                [False, True, False, True]],
                      [False, True, True, False]),
    "not-i8": _case("bitwise_not", I8, [[127, -128, 0]], [-128, 127, -1]),
    "not-u8": _case("bitwise_not", U8, [[0, 127, 255]], [255, 128, 0]),
    "not-i32": _case("bitwise_not", I32, [[1, 2, 3, 4]], [-2, -3, -4, -5]),
    "not-i64": _case("bitwise_not", I64, [[INT64_MAX, INT64_MIN, 0]],
                     [INT64_MIN, INT64_MAX, -1]),
    "not-bool": _case("bitwise_not", np.bool_, [[False, True]], [True, False]),
    # shifts (interpret/shift_*.mlir) and their edges: amount >= width, negative amounts
    "shl-i64": _case("shift_left", I64, [[-1, 0, 1], [1, 2, 3]], [-2, 0, 8]),
    "shl-i8-edges": _case("shift_left", I8, [[1, 1, 1, 1, -1, 3], [7, 8, 9, -1, 127, 6]],
                          [-128, 0, 0, 0, 0, -64]),
    "shl-u8-edges": _case("shift_left", U8, [[1, 255, 255, 3], [7, 8, 255, 1]],
                          [128, 0, 0, 6]),
    "shl-i32-edges": _case("shift_left", I32, [[1, 1, 1, 5], [31, 32, 33, -2147483648]],
                           [-2147483648, 0, 0, 0]),
    "shl-i64-edges": _case("shift_left", I64, [[1, 1, 1], [63, 64, -1]], [INT64_MIN, 0, 0]),
    "sra-i64": _case("shift_right_arithmetic", I64, [[-1, 0, 8], [1, 2, 3]], [-1, 0, 1]),
    "sra-i8-edges": _case("shift_right_arithmetic", I8,
                          [[-128, -128, -128, 127, 127, -1, -7], [7, 8, -1, 8, 6, 100, 1]],
                          [-1, -1, -1, 0, 1, -1, -4]),
    "sra-u8-edges": _case("shift_right_arithmetic", U8, [[200, 200, 100, 100, 128],
                                                          [1, 8, 8, 1, 7]],
                          [228, 255, 0, 50, 255]),
    "sra-i32-edges": _case("shift_right_arithmetic", I32,
                           [[-2147483648, -2147483648, 2147483647, -5], [31, 32, 33, -1]],
                           [-1, -1, 0, -1]),
    "srl-i64": _case("shift_right_logical", I64, [[-1, 0, 8], [1, 2, 3]], [INT64_MAX, 0, 1]),
    "srl-i8-edges": _case("shift_right_logical", I8, [[-128, -1, -1, -1, 64], [7, 8, 1, -1, 6]],
                          [1, 0, 127, 0, 1]),
    "srl-u8-edges": _case("shift_right_logical", U8, [[255, 255, 128], [7, 8, 200]],
                          [1, 0, 0]),
    "srl-i64-edges": _case("shift_right_logical", I64, [[-1, -1, -1], [63, 64, -1]],
                           [1, 0, 0]),
    # bit counts (interpret/popcnt.mlir, count_leading_zeros.mlir), 0 and all ones
    "popcnt-i64": _case("popcnt", I64, [[0, 1, 2, 127, -1, INT64_MIN]], [0, 1, 1, 7, 64, 1]),
    "popcnt-i8": _case("popcnt", I8, [[0, -1, -128, 127, 85]], [0, 8, 1, 7, 4]),
    "popcnt-u8": _case("popcnt", U8, [[0, 255, 128, 15]], [0, 8, 1, 4]),
    "popcnt-i32": _case("popcnt", I32, [[0, -1, -2147483648, 2147483647]], [0, 32, 1, 31]),
    "clz-i64": _case("count_leading_zeros", I64, [[0, 1, 128, -1, INT64_MAX]],
                     [64, 63, 56, 0, 1]),
    "clz-i8": _case("count_leading_zeros", I8, [[0, 1, -1, 127, 16]], [8, 7, 0, 1, 3]),
    "clz-u8": _case("count_leading_zeros", U8, [[0, 1, 255, 128, 15]], [8, 7, 0, 0, 4]),
    "clz-i32": _case("count_leading_zeros", I32, [[0, 1, -1, 65536]], [32, 31, 0, 15]),
}
