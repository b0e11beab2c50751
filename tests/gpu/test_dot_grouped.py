"""grouped_gemm on the device: jobs of mixed shapes, batches, transposed and staged
layouts, strided outputs, per-job alpha/beta, k = 0 and empty jobs, in one call; real
float dtypes through cuBLAS grouped GEMM, complex and integer dtypes job by job;
validation (overlapping outputs, dtype and precision disagreements) changes nothing."""

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
