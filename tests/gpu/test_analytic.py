"""Analytic ops on the GPU (exp log sin cos tanh sqrt rsqrt expm1 log1p pow) against numpy:
every op x float16/bfloat16/float32/float64/complex64/complex128 on random data in the
op's domain and on special values, with per-dtype tolerances (sqrt of real floats is
bit-exact: rounded once); integer pow by binary powering with wrapping; a negative
integer exponent is a deferred error."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up
from test_elementwise_ref import REF, inputs_for, mismatch, pairs, specials, tolerance

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError

D = DType
UNARY = ("exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1", "log1p")
INEXACT = [d for d in ALL_DTYPES if d.is_inexact]
CASES = [(op, d) for op in (*UNARY, "pow") for d in INEXACT]
IDS = [f"{op}-{d.value}" for op, d in CASES]
POLES = {"log": 0, "rsqrt": 0, "log1p": -1}  # complex arguments left out of the specials


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
@pytest.mark.parametrize("form", ["", "_read"])
def test_random(s, op, dtype, form):
    arrays = inputs_for(np.random.default_rng(21), op, dtype.numpy, (1024 + 33,))
    xs = [up(s, a) for a in arrays]
    if form:  # views at an odd offset: the unaligned (element-wise) contiguous path
        xs = [x[1:] for x in xs]
        arrays = [a[1:] for a in arrays]
    got = down(s, getattr(s, op + form)(*xs))
    want, _ = REF[op](*arrays)
    assert mismatch(got, want, tolerance(op, dtype.numpy)) is None


def _special_operands(op: str, dtype: DType) -> list[np.ndarray]:
    vals = specials(dtype.numpy)
    if dtype.is_complex and op in POLES:
        vals = vals[vals != POLES[op]]
    return list(pairs(vals)) if op == "pow" else [vals]


@pytest.mark.parametrize("op", ["exp", "pow", "log1p"])
@pytest.mark.parametrize("dtype", [D.FLOAT32, D.COMPLEX64], ids=str)
def test_transposed_views(s, op, dtype):
    arrays = inputs_for(np.random.default_rng(22), op, dtype.numpy, (70, 45))
    got = down(s, getattr(s, op + "_read")(*[up(s, a).T for a in arrays]))
    want, _ = REF[op](*[a.T for a in arrays])
    assert mismatch(got, want, tolerance(op, dtype.numpy)) is None


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_special_values(s, op, dtype):
    arrays = _special_operands(op, dtype)
    got = down(s, getattr(s, op)(*[up(s, a) for a in arrays]))
    want, _ = REF[op](*arrays)
    if dtype.is_complex and op == "pow":
        # Complex pow has no standard special-value table (C99 leaves cpow open): it is
        # exp(b log a). Finite results must match numpy; where numpy's result is not
        # finite, ours must not be finite either (inf and nan parts may differ).
        fin = np.isfinite(want)
        assert not np.isfinite(got[~fin]).any()
        got, want = got[fin], want[fin]
    assert mismatch(got, want, tolerance(op, dtype.numpy)) is None


@pytest.mark.parametrize("dtype", [D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64], ids=str)
def test_sqrt_is_correctly_rounded(s, dtype):
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    rng = np.random.default_rng(5)
    raw = rng.integers(0, np.iinfo(bits).max // 2, size=4096, dtype=np.uint64).astype(bits)
    x = raw.view(dtype.numpy)  # positive finite (and some NaN) bit patterns
    want, _ = REF["sqrt"](x)
    assert mismatch(down(s, s.sqrt(up(s, x))), want, None) is None


@pytest.mark.parametrize("dtype", [D.INT8, D.UINT8, D.INT32, D.INT64], ids=str)
def test_integer_pow(s, dtype):
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype.numpy)
    a = rng.integers(info.min, info.max, 500, endpoint=True, dtype=np.int64).astype(dtype.numpy)
    b = rng.integers(0, 70, 500, dtype=np.int64).astype(dtype.numpy)
    want, err = REF["pow"](a, b)
    assert not err
    assert np.array_equal(down(s, s.pow(up(s, a), up(s, b))), want)


@pytest.mark.parametrize("dtype", [D.INT8, D.INT32, D.INT64], ids=str)
def test_negative_integer_exponent_is_deferred(s, dtype):
    out = s.pow_read(up(s, np.array([2, 3], dtype.numpy)), up(s, np.array([2, -1], dtype.numpy)))
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and info.value.op == "pow_read"
    assert np.array_equal(down(s, out), np.array([4, 0], dtype.numpy))


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [D.BOOL, D.INT8, D.UINT8, D.INT32, D.INT64], ids=str)
def test_integer_input_rejected(s, op, dtype):
    with pytest.raises(UnsupportedDTypeError) as info:
        getattr(s, op)(up(s, np.ones(3, dtype.numpy)))
    assert info.value.op == op


@pytest.mark.parametrize("cplx", [D.COMPLEX64, D.COMPLEX128], ids=str)
def test_complex_pow_real_scalar(s, cplx):
    z = inputs_for(np.random.default_rng(3), "pow", cplx.numpy, (50,))[0]
    got = down(s, s.pow(up(s, z), up(s, np.array(2.0, cplx.real.numpy))))
    assert mismatch(got, (z * z).astype(cplx.numpy), tolerance("pow", cplx.numpy)) is None
