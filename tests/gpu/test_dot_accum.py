"""dot_general_read_into / _read_into_accum on the device: alpha/beta per dtype,
conjugation on either side in every transpose class, outputs that are strided views
inside a larger buffer (bytes outside the view untouched; beta = 0 never reads out),
k = 0 giving beta * out, empty outputs, and errors that change nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dot_reference import accum_ref, check_close, device_view, element_index, sample
from gpu_util import down

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralAccumulation as Acc
from tenferro_cuda.configs.dot import DotGeneralConfig as C

MM = C((1,), (0,))
BMM = C((2,), (1,), (0,), (0,))
FLOATS = [tc.float16, tc.bfloat16, tc.float32, tc.float64, tc.complex64, tc.complex128]
INTS = [d for d in tc.ALL_DTYPES if d.is_integer]


def _scalars(dtype):
    if dtype.is_integer:
        neg = int(np.iinfo(dtype.numpy).max) - 1 if dtype.is_unsigned_integer else -2
        return [(1, 0), (3, neg), (0, 1), (5, 1)]
    out = [(1, 0), (2.5, -1.5), (0, 1), (-1, 1)]
    if dtype.is_complex:
        out += [(1 - 2j, 0.5j)]
    return out


ALPHA_BETA = [(d, ab) for d in FLOATS + INTS for ab in _scalars(d)]


@pytest.mark.parametrize("dtype,ab", ALPHA_BETA,
                         ids=[f"{d.value}-a{a}-b{b}" for d, (a, b) in ALPHA_BETA])
def test_alpha_beta(s, rng, dtype, ab):
    alpha, beta = ab
    x, y, o = sample(dtype, (17, 13), rng), sample(dtype, (13, 11), rng), sample(
        dtype, (17, 11), rng)
    out = s.upload_host_tensor(o)
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(alpha, beta), out)
    want = accum_ref(x, y, MM, alpha, beta, o)
    check_close(down(s, out), want, dtype.value, 13)


CONJ_LAYOUTS = [
    ("matmul", (9, 7), "c", (7, 6), "c", MM, "c"),
    ("lhs_T", (9, 7), "T", (7, 6), "c", MM, "c"),
    ("rhs_T", (9, 7), "c", (7, 6), "T", MM, "c"),
    ("both_T", (9, 7), "T", (7, 6), "T", MM, "c"),
    ("out_T", (9, 7), "c", (7, 6), "c", MM, "T"),
    ("bmm_out_permuted", (3, 9, 7), "p021", (3, 7, 6), "c", BMM, "p021"),
]
CONJ = [(d, lay, flags) for d in (tc.complex64, tc.complex128) for lay in CONJ_LAYOUTS
        for flags in ((True, False), (False, True), (True, True))]


@pytest.mark.parametrize("dtype,case,flags", CONJ,
                         ids=[f"{d.value}-{c[0]}-l{int(f[0])}r{int(f[1])}" for d, c, f in CONJ])
def test_conjugation(s, rng, dtype, case, flags):
    _, ls, ll, rs, rl, cfg, ol = case
    lhs, lv = device_view(s, sample(dtype, ls, rng), ll)
    rhs, rv = device_view(s, sample(dtype, rs, rng), rl)
    o = sample(dtype, tuple(accum_ref(lv, rv, cfg, 1, 0, None).shape), rng)
    out, _ = device_view(s, o, ol)
    s.dot_general_read_into_accum(lhs, rhs, cfg, Acc(2 - 1j, 0.5, *flags), out)
    want = accum_ref(lv, rv, cfg, 2 - 1j, 0.5, o, *flags)
    check_close(down(s, out), want, dtype.value, 7)


def test_conjugation_ignored_for_real(s, rng):
    x, y = sample(tc.float64, (5, 4), rng), sample(tc.float64, (4, 3), rng)
    out = s.upload_host_tensor(np.zeros((5, 3)))
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(1.0, 0.0, True, True), out)
    check_close(down(s, out), x @ y, "float64", 4)


OUT_VIEWS = [(d, lay, beta) for d in (tc.float32, tc.complex128, tc.bfloat16, tc.int32)
             for lay in ("s", "S", "sT", "n0") for beta in (0, 1)]


def _sentinel(dtype):
    return 77 if dtype.is_integer else 7.25


@pytest.mark.parametrize("dtype,layout,beta", OUT_VIEWS,
                         ids=[f"{d.value}-{lay}-beta{b}" for d, lay, b in OUT_VIEWS])
def test_out_view_sentinels(s, rng, dtype, layout, beta):
    """Only the view's elements change; with beta = 0 even NaN in out is overwritten."""
    x, y = sample(dtype, (12, 9), rng), sample(dtype, (9, 10), rng)
    init = sample(dtype, (12, 10), rng)
    if beta == 0 and not dtype.is_integer:
        init = np.full((12, 10), np.nan, dtype.numpy)
    out, _ = device_view(s, init, layout, fill=_sentinel(dtype))
    before = down(s, out.base).reshape(-1)
    alpha = 3 if dtype.is_integer else 1.5
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(alpha, beta), out)
    after = down(s, out.base).reshape(-1)
    inside = element_index(out)
    mask = np.ones(after.size, bool)
    mask[inside.reshape(-1)] = False
    assert after[mask].tobytes() == before[mask].tobytes()
    check_close(after[inside], accum_ref(x, y, MM, alpha, beta, init), dtype.value, 9)


KZERO = [(d, beta) for d in (tc.float32, tc.complex64, tc.float16, tc.int32)
         for beta in (0, 1, 2)]


@pytest.mark.parametrize("dtype,beta", KZERO, ids=[f"{d.value}-beta{b}" for d, b in KZERO])
def test_k_zero_gives_beta_out(s, rng, dtype, beta):
    init = sample(dtype, (6, 5), rng)
    if beta == 0 and not dtype.is_integer:
        init[0, 0] = np.nan
    out, _ = device_view(s, init, "s", fill=_sentinel(dtype))
    before = down(s, out.base)
    lhs = s.upload_host_tensor(np.zeros((6, 0), dtype.numpy))
    rhs = s.upload_host_tensor(np.zeros((0, 5), dtype.numpy))
    s.dot_general_read_into_accum(lhs, rhs, MM, Acc(3, beta), out)
    got = down(s, out)
    want = np.zeros_like(init) if beta == 0 else (init * beta).astype(dtype.numpy)
    check_close(got, want, dtype.value, 1)
    mask = np.ones(before.shape, bool)
    mask[1:, 1:] = False
    assert down(s, out.base)[mask].tobytes() == before[mask].tobytes()


@pytest.mark.parametrize("dtype", [tc.float32, tc.int8, tc.complex128], ids=lambda d: d.value)
def test_empty_outputs(s, dtype):
    z = np.zeros
    out = s.dot_general(s.upload_host_tensor(z((0, 4), dtype.numpy)),
                        s.upload_host_tensor(z((4, 5), dtype.numpy)), MM)
    assert out.shape == (0, 5) and down(s, out).shape == (0, 5)
    empty = s.upload_host_tensor(z((3, 0), dtype.numpy))
    s.dot_general_read_into(s.upload_host_tensor(z((3, 4), dtype.numpy)),
                            s.upload_host_tensor(z((4, 0), dtype.numpy)), MM, empty)
    b = s.dot_general(s.upload_host_tensor(z((0, 2, 3), dtype.numpy)),
                      s.upload_host_tensor(z((0, 3, 4), dtype.numpy)), BMM)
    assert b.shape == (0, 2, 4)


def test_read_into_overwrites_nan(s, rng):
    x, y = sample(tc.float32, (8, 5), rng), sample(tc.float32, (5, 4), rng)
    out = s.upload_host_tensor(np.full((8, 4), np.nan, np.float32))
    s.dot_general_read_into(s.upload_host_tensor(x), s.upload_host_tensor(y), MM, out)
    check_close(down(s, out), x.astype(np.float64) @ y, "float32", 5)


def test_errors_change_nothing(s, rng):
    x, y = sample(tc.float32, (8, 5), rng), sample(tc.float32, (5, 4), rng)
    lhs, rhs = s.upload_host_tensor(x), s.upload_host_tensor(y)
    o = sample(tc.float32, (8, 4), rng)
    out = s.upload_host_tensor(o)
    with pytest.raises(tc.ValidationError):
        s.dot_general_read_into_accum(lhs, rhs, MM, Acc(1j, 0.0), out)
    with pytest.raises(tc.ValidationError):
        s.dot_general_read_into_accum(lhs, rhs, MM, Acc(1.0, 0.0), s.upload_host_tensor(
            np.zeros((8, 5), np.float32)))
    with pytest.raises(tc.ValidationError):
        s.dot_general_read_into(lhs, s.upload_host_tensor(sample(tc.float64, (5, 4), rng)),
                                MM, out)
    with pytest.raises(tc.UnsupportedDTypeError):
        s.dot_general(s.upload_host_tensor(np.ones((2, 2), bool)),
                      s.upload_host_tensor(np.ones((2, 2), bool)), MM)
    with pytest.raises(tc.RuntimeStateError):
        s.dot_general(tc.Tensor.from_numpy(x), rhs, MM)
    big = s.upload_host_tensor(np.zeros((8, 9), np.float32))
    with pytest.raises(tc.ValidationError, match="overlaps"):
        s.dot_general_read_into(big[:, :5], rhs, MM, big[:, 5:])
    assert down(s, out).tobytes() == o.tobytes()
    assert not np.any(down(s, big))


def test_tf32_rejected_for_float64(s, rng):
    x = s.upload_host_tensor(sample(tc.float64, (4, 4), rng))
    with pytest.raises(tc.ValidationError, match="tf32"):
        s.dot_general(x, x, C((1,), (0,), precision="tf32"))


def test_many_contracting_and_batch_views(s, rng):
    """A strided batch view (every other batch entry), several contracting axes and a
    permuted output, accumulated twice."""
    dtype = tc.float64
    lfull = sample(dtype, (6, 5, 3, 4), rng)
    rfull = sample(dtype, (3, 4, 3, 7), rng)
    lhs = s.upload_host_tensor(lfull)[::2]  # (3, 5, 3, 4): batch stride doubled
    rhs = s.upload_host_tensor(rfull)
    cfg = C((2, 3), (0, 1), (0,), (2,))
    o = sample(dtype, (3, 5, 7), rng)
    out, _ = device_view(s, o, "p210")
    s.dot_general_read_into_accum(lhs, rhs, cfg, Acc(1.0, 1.0), out)
    s.dot_general_read_into_accum(lhs, rhs, cfg, Acc(1.0, 1.0), out)
    want = 2 * accum_ref(lfull[::2], rfull, cfg, 1.0, 0, None) + o
    check_close(down(s, out), want, "float64", 12)
    assert math.isfinite(float(np.abs(want).max()))
