"""cast and convert on the GPU: all 225 dtype pairs on special and random values against
the projection rules of docs/dtypes.md (bit-exact): float -> int truncates toward zero and
saturates, NaN -> 0; int -> int wraps; every conversion to a float rounds once to nearest
even; complex -> real drops the imaginary part; numeric -> bool is != 0. convert agrees
with cast where the lattice allows it. This also verifies tf::convert of types.cuh."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_cast_ref import BF16, cast_ref
from test_elementwise_ref import mismatch, random_array, specials

from tenferro_cuda.dtypes import ALL_DTYPES, DType, lattice_allows
from tenferro_cuda.errors import UnsupportedDTypeConversionError

D = DType
PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]
IDS = [f"{a.value}-{b.value}" for a, b in PAIRS]
# Values at the edges of the target ranges and of rounding (as float64 / Python ints).
FLOAT_EDGES = [127.0, 127.9, 128.0, -128.0, -128.5, -129.0, 255.0, 255.9, 256.0, -0.9, -1.5,
               2147483647.0, 2147483648.0, -2147483648.0, -2147483904.0, 9.2233720368547e18,
               9.3e18, -9.3e18, 65504.0, 65519.99, 65520.0, 3.3895e38, 3.4e38, 1e-8, 1e-40,
               1.0009765625, 1.00048828125, 1.0 + 2.0 ** -8 + 2.0 ** -30, 0.1, 1e300, -1e300,
               32767.0, 32767.9, 32768.0, -32768.0, -32768.9, -32769.0, 65535.0, 65535.9,
               65536.0, 4294967295.0, 4294967296.0, 1.8446744073709550e19, 1.8446744073709552e19,
               2.0e19]
INT64_EDGES = [2**62 + 2**54 + 1, -(2**62 + 2**54 + 1), 2**62 + 2**54, 2**53 + 1, 2**24 + 1,
               2**31, -(2**31) - 1, 65520, 65519, 256, 255, -129, 2**63 - 1]
# above the float32 / bfloat16 midpoints near 2^63 (2^63 + 2^39 + 1, 2^63 + 2^55 + 1), where
# a conversion through float64 would round twice; 2^53 + 1; the top bit; all ones
UINT64_EDGES = [2**63 + 2**39 + 1, 2**63 + 2**55 + 1, 2**63 + 2**39, 2**53 + 1, 2**63,
                2**64 - 1, 2**64 - 2**40, 2**32, 2**32 - 1, 65535, 65536]


def cast_inputs(dtype: DType) -> np.ndarray:
    rng = np.random.default_rng(31)
    base = specials(dtype.numpy)
    if dtype.is_float:
        with np.errstate(over="ignore"):
            extra = np.array(FLOAT_EDGES, np.float64).astype(dtype.numpy)
        base = np.concatenate([base, extra, -extra])
    elif dtype is D.INT64:
        base = np.concatenate([base, np.array(INT64_EDGES, np.int64)])
    elif dtype is D.UINT64:
        base = np.concatenate([base, np.array(UINT64_EDGES, np.uint64)])
    elif dtype.is_complex:
        real = specials(dtype.real.numpy)
        re, im = np.meshgrid(real, real[::3], indexing="ij")
        base = np.concatenate([base, (re + 1j * im).reshape(-1).astype(dtype.numpy)])
    scale = 1e3 if dtype is not D.BFLOAT16 else 1e2
    rnd = random_array(rng, dtype.numpy, (300,))
    if dtype.is_float or dtype.is_complex:
        rnd = (rnd * np.asarray(scale, dtype.real.numpy)).astype(dtype.numpy)
    return np.concatenate([base, rnd])


@pytest.mark.parametrize("src,dst", PAIRS, ids=IDS)
def test_cast_pair(s, src, dst):
    a = cast_inputs(src)
    got = down(s, s.cast(up(s, a), dst))
    assert got.dtype == dst.numpy
    assert mismatch(got, cast_ref(a, dst.numpy), None) is None


@pytest.mark.parametrize("src,dst", [(D.FLOAT32, D.BFLOAT16), (D.INT64, D.FLOAT16),
                                     (D.COMPLEX128, D.INT8), (D.BOOL, D.COMPLEX64)], ids=str)
def test_cast_strided_views(s, src, dst):
    a = cast_inputs(src)[:240].reshape(12, 20)
    x = up(s, a)
    for view, ref in [(x.T, a.T), (x[::-1, 1::3], a[::-1, 1::3]), (x[5, ::2], a[5, ::2])]:
        assert mismatch(down(s, s.cast(view, dst)), cast_ref(ref, dst.numpy), None) is None


def test_cast_accepts_names_and_numpy_dtypes(s):
    x = up(s, np.array([1.5, -2.5], np.float32))
    assert down(s, s.cast(x, "int32")).tolist() == [1, -2]
    assert down(s, s.cast(x, np.float64)).dtype == np.float64
    assert down(s, s.cast(x, BF16)).dtype == BF16


def test_int64_to_bfloat16_rounds_once(s):
    # 2^62 + 2^54 + 1 lies just above a bfloat16 midpoint; via double it would tie to even.
    got = down(s, s.cast(up(s, np.array([2**62 + 2**54 + 1], np.int64)), D.BFLOAT16))
    assert float(got[0]) == float(2**62 + 2**55)


def test_uint64_to_float32_and_bfloat16_round_once(s):
    x = up(s, np.array([2**63 + 2**39 + 1, 2**63 + 2**55 + 1], np.uint64))
    f32 = down(s, s.cast(x, D.FLOAT32))
    assert float(f32[0]) == float(2**63 + 2**40)  # through float64: the tie, to 2^63
    assert float(down(s, s.cast(x, D.BFLOAT16))[1]) == float(2**63 + 2**56)
    c64 = down(s, s.cast(x, D.COMPLEX64))
    assert c64[0] == np.complex64(2**63 + 2**40)


def test_float_to_unsigned_saturates(s):
    x = up(s, np.array([-1.0, -0.5, 65535.9, 65536.0, 4294967296.0, 2.0e19, np.nan, np.inf,
                        -np.inf], np.float64))
    assert down(s, s.cast(x, D.UINT16)).tolist() == [0, 0, 65535, 65535, 65535, 65535, 0,
                                                     65535, 0]
    assert down(s, s.cast(x, D.UINT32)).tolist() == [0, 0, 65535, 65536, 2**32 - 1,
                                                     2**32 - 1, 0, 2**32 - 1, 0]
    assert down(s, s.cast(x, D.UINT64)).tolist() == [0, 0, 65535, 65536, 2**32, 2**64 - 1, 0,
                                                     2**64 - 1, 0]
    assert down(s, s.cast(x, D.INT16)).tolist() == [-1, 0, 32767, 32767, 32767, 32767, 0,
                                                    32767, -32768]


def test_integer_casts_wrap(s):
    x = up(s, np.array([-1, -32768, 65535, 2**32 + 5], np.int64))
    assert down(s, s.cast(x, D.UINT16)).tolist() == [65535, 32768, 65535, 5]
    assert down(s, s.cast(x, D.INT16)).tolist() == [-1, -32768, -1, 5]
    assert down(s, s.cast(x, D.UINT32)).tolist() == [2**32 - 1, 2**32 - 32768, 65535, 5]
    assert down(s, s.cast(x, D.UINT64)).tolist() == [2**64 - 1, 2**64 - 32768, 65535,
                                                     2**32 + 5]


ALLOWED = [(a, b) for a, b in PAIRS if lattice_allows(a, b)]
REFUSED = [(a, b) for a, b in PAIRS if not lattice_allows(a, b)]


@pytest.mark.parametrize("src,dst", ALLOWED, ids=[f"{a.value}-{b.value}" for a, b in ALLOWED])
def test_convert_allowed(s, src, dst):
    a = cast_inputs(src)
    x = up(s, a)
    got = down(s, s.convert(x, dst))
    assert mismatch(got, down(s, s.cast(x, dst)), None) is None
    if src is not D.BOOL and dst.is_numeric:  # value preserving: the round trip is exact
        back = cast_ref(got, src.numpy)
        assert mismatch(back, a, None) is None


@pytest.mark.parametrize("src,dst", REFUSED, ids=[f"{a.value}-{b.value}" for a, b in REFUSED])
def test_convert_refused(s, src, dst):
    x = up(s, np.zeros(3, src.numpy))
    with pytest.raises(UnsupportedDTypeConversionError) as info:
        s.convert(x, dst)
    assert info.value.op == "convert"
