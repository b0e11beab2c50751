"""dot_general on the device against numpy, for every layout class and every numeric
dtype: plain matmul, transposed operands (op T without copies), batch axes in any
position, several contracting axes (mergeable or staged), outer products, rank-0 results,
matrix-vector, broadcast (stride-0) and reversed (negative-stride) operands, extent-1
axes, the 4-d contraction needing permutations, k = 0 and empty results."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dot_reference import check_close, device_view, dot_ref, sample
from gpu_util import down

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralConfig as C

DTYPES = [d for d in tc.ALL_DTYPES if d.is_numeric]

CASES = [
    ("matmul", (33, 17), "c", (17, 45), "c", C((1,), (0,))),
    ("lhs_transposed", (33, 17), "T", (17, 45), "c", C((1,), (0,))),
    ("rhs_transposed", (33, 17), "c", (17, 45), "T", C((1,), (0,))),
    ("both_transposed", (33, 17), "T", (17, 45), "T", C((1,), (0,))),
    ("padded_views", (33, 17), "s", (17, 45), "s", C((1,), (0,))),
    ("step2_views", (9, 17), "S", (17, 6), "S", C((1,), (0,))),
    ("bmm", (3, 20, 17), "c", (3, 17, 12), "c", C((2,), (1,), (0,), (0,))),
    ("batch_last", (20, 17, 3), "c", (17, 12, 3), "c", C((1,), (0,), (2,), (2,))),
    ("batch_middle", (20, 3, 17), "c", (17, 3, 12), "c", C((2,), (0,), (1,), (1,))),
    ("two_batch_dims", (2, 5, 3, 7), "p1023", (3, 7, 2, 4), "c",
     C((3,), (1,), (0, 2), (2, 0))),
    ("two_contract", (10, 6, 7), "c", (6, 7, 9), "c", C((1, 2), (0, 1))),
    ("contract_staged", (6, 10, 7), "c", (6, 7, 9), "c", C((0, 2), (0, 1))),
    ("outer", (13,), "c", (7, 2), "c", C((), ())),
    ("rank0", (29,), "c", (29,), "c", C((0,), (0,))),
    ("matvec", (21, 29), "c", (29,), "c", C((1,), (0,))),
    ("vecmat_transposed", (29,), "c", (21, 29), "T", C((0,), (1,))),
    ("broadcast_batch", (4, 9, 8), "b0", (4, 8, 5), "c", C((2,), (1,), (0,), (0,))),
    ("reversed", (9, 8), "n0", (8, 5), "n1", C((1,), (0,))),
    ("extent_one", (1, 9, 1, 8), "c", (8, 1, 5), "p210", C((3,), (0,))),
    ("four_d_permuted", (6, 5, 4, 3), "c", (5, 6, 3, 4), "c", C((0, 2), (1, 3))),
    ("k_zero", (7, 0), "c", (0, 5), "c", C((1,), (0,))),
    ("empty_result", (0, 4), "c", (4, 5), "c", C((1,), (0,))),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.value)
def test_dot_general(s, rng, dtype, case):
    _, ls, ll, rs, rl, config = case
    lhs, lvals = device_view(s, sample(dtype, ls, rng), ll)
    rhs, rvals = device_view(s, sample(dtype, rs, rng), rl)
    out = s.dot_general(lhs, rhs, config)
    want = dot_ref(lvals, rvals, config)
    assert out.shape == want.shape and out.dtype is dtype
    got = down(s, out)
    k = math.prod(ls[a] for a in config.lhs_contracting_dims)
    if dtype.is_integer:
        want = want.astype(dtype.numpy)
    check_close(got, want, dtype.value, k)


REPEATED = ["matmul", "lhs_transposed", "padded_views", "bmm", "batch_last", "matvec",
            "broadcast_batch", "reversed", "contract_staged"]


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in REPEATED],
                         ids=lambda c: c[0])
@pytest.mark.parametrize("dtype", [tc.float32, tc.float64, tc.complex128, tc.int32],
                         ids=lambda d: d.value)
def test_repeated_calls_with_new_data(s, rng, dtype, case):
    """Calls repeating a request's shapes, strides, dtypes and config (the remembered,
    bound path from the second call on) still compute each call's own product."""
    _, ls, ll, rs, rl, config = case
    outs = []
    for _ in range(4):
        lhs, lvals = device_view(s, sample(dtype, ls, rng), ll)
        rhs, rvals = device_view(s, sample(dtype, rs, rng), rl)
        outs.append((s.dot_general(lhs, rhs, config), dot_ref(lvals, rvals, config)))
    k = math.prod(ls[a] for a in config.lhs_contracting_dims)
    for out, want in outs:
        got = down(s, out)
        check_close(got, want.astype(dtype.numpy) if dtype.is_integer else want, dtype.value,
                    k)


@pytest.mark.parametrize("dtype", [tc.float32, tc.complex64], ids=lambda d: d.value)
def test_default_precision_is_exact_float32(s, dtype):
    """1 + 2^-20 is not a TF32 value: a TF32 product rounds it to 1 and sums to exactly 64;
    float32 arithmetic keeps part of it (how much depends on the summation order)."""
    x = np.full((64, 64), 1 + 2.0 ** -20, dtype.numpy)
    y = np.ones((64, 64), dtype.numpy)
    out = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), C((1,), (0,))))
    assert np.all(out.real > 64) and np.all(out.real <= np.float32(64 + 2.0 ** -14))


@pytest.mark.parametrize("dtype", [tc.float32, tc.complex64], ids=lambda d: d.value)
def test_tf32_precision_is_close(s, rng, dtype):
    x, y = sample(dtype, (96, 256), rng), sample(dtype, (256, 80), rng)
    cfg = C((1,), (0,), precision="tf32")
    got = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), cfg))
    check_close(got, dot_ref(x, y, cfg), "tf32", 256)


@pytest.mark.parametrize("dtype", [tc.float16, tc.bfloat16], ids=lambda d: d.value)
def test_half_types_accumulate_in_float32(s, dtype):
    """4096 ones: a 16-bit accumulator stops at 2048 (fp16) or 256 (bf16)."""
    x = np.ones((2, 4096), dtype.numpy)
    y = np.ones((4096, 3), dtype.numpy)
    out = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), C((1,), (0,))))
    assert np.all(out.astype(np.float32) == 4096.0)


def test_large_square_float64(s, rng):
    x, y = sample(tc.float64, (512, 384), rng), sample(tc.float64, (384, 640), rng)
    got = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), C((1,), (0,))))
    check_close(got, x @ y, "float64", 384)
