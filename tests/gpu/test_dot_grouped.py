"""grouped_gemm on the device: jobs of mixed shapes, batches, transposed and staged
layouts, strided outputs, per-job alpha/beta, k = 0 and empty jobs, in one call; float
and complex dtypes through cuBLAS batched/grouped GEMM over uniform groups, integer
dtypes job by job; repeated calls with one config (its planned run: reading the operands'
current contents, staged jobs' arrays uploaded each call, residency checked); validation
(overlapping outputs, dtype and precision disagreements) changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from dot_reference import accum_ref, check_close, device_view, sample
from gpu_util import down

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralAccumulation as Acc
from tenferro_cuda.configs.dot import DotGeneralConfig as C
from tenferro_cuda.configs.dot import GemmJob, GroupedGemmConfig

MM = C((1,), (0,))
BMM = C((2,), (1,), (0,), (0,))

JOBS = [  # lhs shape/layout, rhs shape/layout, config, out layout, alpha, beta
    ((4, 3), "c", (3, 5), "c", MM, "c", 1, 0),
    ((4, 3), "c", (3, 5), "c", MM, "c", 2, 1),          # same gemm, other scalars
    ((2, 6, 7), "c", (2, 7, 3), "c", BMM, "c", 1, 0),   # a strided batch
    ((9, 8), "T", (8, 4), "c", MM, "s", 1, 1),          # transposed lhs, padded out
    ((6, 10, 7), "c", (6, 7, 9), "c", C((0, 2), (0, 1)), "S", 1, 1),  # staged lhs and out
    ((5, 0), "c", (0, 6), "c", MM, "c", 1, 2),          # k = 0
    ((0, 3), "c", (3, 2), "c", MM, "c", 1, 0),          # empty
    ((33, 64), "c", (64, 17), "T", MM, "c", 1, 0),
]


def _jobs(s, rng, dtype, specs, conj=False):
    jobs, wants, ks = [], [], []
    for i, (ls, ll, rs, rl, cfg, ol, alpha, beta) in enumerate(specs):
        lhs, lv = device_view(s, sample(dtype, ls, rng), ll)
        rhs, rv = device_view(s, sample(dtype, rs, rng), rl)
        flags = (i % 2 == 1, i % 3 == 1) if conj else (False, False)
        o = sample(dtype, accum_ref(lv, rv, cfg, 1, 0, None).shape, rng)
        out, _ = device_view(s, o, ol)
        jobs.append(GemmJob(lhs, rhs, out, cfg, Acc(alpha, beta, *flags)))
        wants.append(accum_ref(lv, rv, cfg, alpha, beta, o, *flags))
        ks.append(max(1, int(np.prod([ls[a] for a in cfg.lhs_contracting_dims]))))
    return jobs, wants, ks


@pytest.mark.parametrize("dtype", [tc.float16, tc.bfloat16, tc.float32, tc.float64,
                                   tc.complex64, tc.complex128, tc.int8, tc.int32, tc.int64],
                         ids=lambda d: d.value)
def test_grouped_mixed_jobs(s, rng, dtype):
    jobs, wants, ks = _jobs(s, rng, dtype, JOBS, conj=dtype.is_complex)
    s.grouped_gemm(GroupedGemmConfig(jobs))
    for job, want, k in zip(jobs, wants, ks):
        check_close(down(s, job.out), want, dtype.value, k)


def test_grouped_many_small_jobs(s, rng):
    specs = []
    for _ in range(120):
        m, n, k = (int(v) for v in rng.integers(1, 24, 3))
        specs.append(((m, k), "c", (k, n), "c", MM, "c", 1.0, 0.5))
    jobs, wants, ks = _jobs(s, rng, tc.float32, specs)
    s.grouped_gemm(GroupedGemmConfig(jobs))
    for job, want, k in zip(jobs, wants, ks):
        check_close(down(s, job.out), want, "float32", k)


def test_grouped_tf32(s, rng):
    specs = [((40, 64), "c", (64, 24), "c", MM, "c", 1.0, 0.0)] * 3
    jobs, wants, ks = _jobs(s, rng, tc.float32, specs)
    s.grouped_gemm(GroupedGemmConfig(jobs, precision="tf32"))
    for job, want, k in zip(jobs, wants, ks):
        check_close(down(s, job.out), want, "tf32", k)


def test_grouped_validation_changes_nothing(s, rng):
    f32 = tc.float32
    x, y = sample(f32, (4, 3), rng), sample(f32, (3, 5), rng)
    lhs, rhs = s.upload_host_tensor(x), s.upload_host_tensor(y)
    init = np.arange(80, dtype=np.float32).reshape(8, 10)
    big = s.upload_host_tensor(init)
    bad = [
        [GemmJob(lhs, rhs, big[:4, :5]), GemmJob(lhs, rhs, big[2:6, 3:8])],
        [GemmJob(lhs, rhs, big[:4, :5]), GemmJob(big[4:8, :3], rhs, big[4:8, 4:9])],
        [GemmJob(lhs, rhs, big[:4, :5]),
         GemmJob(s.upload_host_tensor(x.astype(np.float64)),
                 s.upload_host_tensor(y.astype(np.float64)),
                 s.upload_host_tensor(np.zeros((4, 5))))],
        [GemmJob(lhs, rhs, big[:4, :5]),
         GemmJob(lhs, rhs, big[4:8, 5:], C((1,), (0,), precision="tf32"))],
    ]
    for jobs in bad:
        with pytest.raises(tc.ValidationError):
            s.grouped_gemm(GroupedGemmConfig(jobs))
    assert down(s, big).tobytes() == init.tobytes()


def _small_ints(dtype, shape, rng):
    """Values whose products and sums stay exact in every float dtype."""
    return rng.integers(-3, 4, shape).astype(dtype.numpy)


def test_grouped_uniform_group_and_repeats(s, rng):
    """64 jobs of one shape (one batched call): against numpy on the first call and on
    repeated calls with the same config, which reuse its uploaded address array."""
    f32 = tc.float32
    lhs = [sample(f32, (128, 80), rng) for _ in range(64)]
    rhs = [sample(f32, (80, 96), rng) for _ in range(64)]
    jobs = [GemmJob(s.upload_host_tensor(a), s.upload_host_tensor(b),
                    s.upload_host_tensor(np.zeros((128, 96), np.float32)))
            for a, b in zip(lhs, rhs)]
    cfg = GroupedGemmConfig(jobs)
    for _ in range(3):
        s.grouped_gemm(cfg)
        for job, a, b in zip(jobs, lhs, rhs):
            check_close(down(s, job.out), a.astype(np.float64) @ b, "float32", 80)


@pytest.mark.parametrize("dtype", [tc.float32, tc.float64, tc.complex64, tc.int32],
                         ids=lambda d: d.value)
def test_grouped_repeats_read_current_contents(s, rng, dtype):
    """A repeated call reads what its operands hold now: ``x += l . r`` (beta 1) then
    ``y = x . r2`` with a transposed, a staged and a batched job in each call."""
    cfg2 = C((0, 2), (0, 1))
    shapes = [((5, 4), "c", (4, 6)), ((7, 3), "T", (3, 6)), ((3, 5, 4), "c", (3, 4, 6))]
    first, second, xs, ys, wants = [], [], [], [], []
    for ls, ll, rs in shapes:
        cfg = cfg2 if len(ls) == 3 else MM
        lhs, lv = device_view(s, _small_ints(dtype, ls, rng), ll)
        rhs, rv = device_view(s, _small_ints(dtype, rs, rng), "c")
        x0 = np.zeros(accum_ref(lv, rv, cfg, 1, 0, None).shape, dtype.numpy)
        x = s.upload_host_tensor(x0)
        r2 = _small_ints(dtype, (x0.shape[1], 2), rng)
        y = s.upload_host_tensor(np.zeros((x0.shape[0], 2), dtype.numpy))
        first.append(GemmJob(lhs, rhs, x, cfg, Acc(1, 1)))
        second.append(GemmJob(x, s.upload_host_tensor(r2), y))
        xs.append(x)
        ys.append(y)
        wants.append((accum_ref(lv, rv, cfg, 1, 0, None), r2))
    accumulate, chain = GroupedGemmConfig(first), GroupedGemmConfig(second)
    for n in range(1, 4):
        s.grouped_gemm(accumulate)
        s.grouped_gemm(chain)
        for x, y, (prod, r2) in zip(xs, ys, wants):
            want_x = (n * prod).astype(dtype.numpy)
            assert np.array_equal(down(s, x), want_x)
            assert np.array_equal(down(s, y), (want_x @ r2).astype(dtype.numpy))


def test_grouped_staged_repeats_past_the_pinned_ring(s, rng):
    """A config with a staged job uploads its address array on every call through the
    pinned staging ring: 18 problems (432 bytes) a call, so 400 calls go round the 64 KiB
    ring more than twice (or copy from pageable memory while the stream is busy)."""
    f32 = tc.float32
    l3, r3 = _small_ints(f32, (16, 6, 3), rng), _small_ints(f32, (16, 3, 5), rng)
    ls, rs = _small_ints(f32, (4, 3, 2), rng), _small_ints(f32, (4, 2, 5), rng)
    batched = GemmJob(s.upload_host_tensor(l3), s.upload_host_tensor(r3),
                      s.upload_host_tensor(np.zeros((16, 6, 5), np.float32)), BMM, Acc(1, 1))
    staged_out = s.upload_host_tensor(np.zeros((3, 5), np.float32))
    staged = GemmJob(s.upload_host_tensor(ls), s.upload_host_tensor(rs), staged_out,
                     C((0, 2), (0, 1)), Acc(1, 1))  # contracting (0, 2): lhs staged
    plain = GemmJob(s.upload_host_tensor(ls[0]), s.upload_host_tensor(rs[0]),
                    s.upload_host_tensor(np.zeros((3, 5), np.float32)), MM, Acc(1, 1))
    cfg = GroupedGemmConfig([batched, staged, plain])
    calls = 400
    for _ in range(calls):
        s.grouped_gemm(cfg)
    assert np.array_equal(down(s, batched.out), calls * np.matmul(l3, r3))
    assert np.array_equal(down(s, staged_out), calls * np.einsum("kmj,kjn->mn", ls, rs))
    assert np.array_equal(down(s, plain.out), calls * (ls[0] @ rs[0]))


def test_grouped_repeat_after_reclaim_raises(s, rng):
    f32 = tc.float32
    a, b = s.upload_host_tensor(sample(f32, (4, 3), rng)), s.upload_host_tensor(
        sample(f32, (3, 5), rng))
    out = s.upload_host_tensor(np.zeros((4, 5), np.float32))
    cfg = GroupedGemmConfig([GemmJob(a, b, out)])
    s.grouped_gemm(cfg)
    s.reclaim_buffer(b)
    with pytest.raises(tc.RuntimeStateError, match=r"jobs\[0\]\.rhs.*reclaimed"):
        s.grouped_gemm(cfg)
