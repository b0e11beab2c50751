"""dot_general figures (issue 6), beside PyTorch and CuPy on the same sizes:

- square products: 8192^3 float32 (exact, TF32 off everywhere), 4096^3 float64,
  4096^3 complex64, 2048^3 complex128, 8192^3 bfloat16 -> TFLOP/s, target >= 98 % of
  torch.matmul; 8192^3 float32 with ``precision="tf32"`` against torch with TF32 allowed;
- batched 256 x (64x64 . 64x64) float64: host cost per call, target <= torch.bmm;
- a 4-d contraction that needs permutations (lhs (64,64,64,64) contracting axes (0, 2)
  with rhs axes (1, 3)): device time, target <= 1.2x torch.einsum;
- the cached form: host cost per call of a warm slot for a 64^3 float32 product, target
  <= 70 % of the uncached ``dot_general_read_into_accum`` call;
- grouped GEMM (issue 16): 64 products of 128x80 . 80x96 float32 per call, target <= 60 us,
  beside a torch.matmul loop and torch.bmm; 64 products of 4 shapes beside a loop.

FLOP counts: 2 m n k for real dtypes, 8 m n k for complex ones (every peer the same way).
"""

from __future__ import annotations

import numpy as np

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralAccumulation, DotGeneralConfig

from .common import Row, cupy_ms, host_us, peers, session_ms, torch_ms

FAMILY = "dot"
MM = DotGeneralConfig((1,), (0,))
SQUARES = [  # dtype name, n, measured torch TFLOP/s quoted by the issue
    ("float32", 8192, 50.7),
    ("float64", 4096, 60.7),
    ("complex64", 4096, 53.4),
    ("complex128", 2048, 58.3),
    ("bfloat16", 8192, 787.0),
]




def _tflops(dtype: tc.DType, m: int, n: int, k: int, ms: float | None) -> float | None:
    if ms is None or ms <= 0:
        return None
    flops = (8 if dtype.is_complex else 2) * m * n * k
    return flops / (ms * 1e-3) / 1e12


def _operand(s, dtype: tc.DType, shape, seed: int):
    """A device tensor of random values (generated on the device through a float32/64
    product would be slower to set up than an upload at these sizes)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape, dtype=np.float32)
    if dtype.is_complex:
        a = a + 1j * rng.standard_normal(shape, dtype=np.float32)
    return s.upload_host_tensor(a.astype(dtype.numpy))


def _torch_operands(torch, dtype: tc.DType, shape):
    tdt = getattr(torch, dtype.value)
    return torch.randn(shape, device="cuda", dtype=tdt)


def _ours_square(s, dtype: tc.DType, n: int, cfg: DotGeneralConfig) -> float | None:
    a, b = _operand(s, dtype, (n, n), 1), _operand(s, dtype, (n, n), 2)
    return _tflops(dtype, n, n, n, session_ms(s, lambda: s.dot_general(a, b, cfg)))


def _torch_square(torch, dtype: tc.DType, n: int, tf32: bool) -> float | None:
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        x, y = _torch_operands(torch, dtype, (n, n)), _torch_operands(torch, dtype, (n, n))
        return _tflops(dtype, n, n, n, torch_ms(lambda: torch.matmul(x, y)))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _cupy_square(cupy, dtype: tc.DType, n: int) -> float | None:
    if cupy is None or dtype is tc.bfloat16:
        return None
    x = cupy.ones((n, n), dtype=np.dtype(dtype.numpy))
    return _tflops(dtype, n, n, n, cupy_ms(lambda: cupy.matmul(x, x)))


def square_rows(s, torch, cupy) -> list[Row]:
    rows = []
    for name, n, quoted in SQUARES:
        dtype = tc.DType(name)
        rows.append(Row(FAMILY, f"matmul {n}^3 {name}", "TFLOP/s",
                        _ours_square(s, dtype, n, MM), torch=_torch_square(torch, dtype, n, False),
                        cupy=_cupy_square(cupy, dtype, n), target=">= 98% of torch.matmul",
                        note=f"issue quotes torch at {quoted} TFLOP/s"))
    n = 8192
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    rows.append(Row(FAMILY, f"matmul {n}^3 float32 precision=tf32", "TFLOP/s",
                    _ours_square(s, tc.float32, n, tf32),
                    torch=_torch_square(torch, tc.float32, n, True),
                    target=">= 98% of torch.matmul with TF32 allowed"))
    return rows


def bmm_host_row(s, torch) -> Row:
    bmm = DotGeneralConfig((2,), (1,), (0,), (0,))
    a = _operand(s, tc.float64, (256, 64, 64), 5)
    b = _operand(s, tc.float64, (256, 64, 64), 6)
    ours = host_us(lambda: s.dot_general(a, b, bmm), s.synchronize)
    tt = None
    if torch is not None:
        x = torch.randn((256, 64, 64), device="cuda", dtype=torch.float64)
        tt = host_us(lambda: torch.bmm(x, x), torch.cuda.synchronize)
    return Row(FAMILY, "bmm 256 x 64^3 float64 host cost", "us", ours, torch=tt,
               target="<= torch.bmm (20.4 us measured)")


def contraction_row(s, torch, cupy) -> Row:
    cfg = DotGeneralConfig((0, 2), (1, 3))
    a = _operand(s, tc.float32, (64, 64, 64, 64), 7)
    b = _operand(s, tc.float32, (64, 64, 64, 64), 8)
    ms = session_ms(s, lambda: s.dot_general(a, b, cfg))
    tt = cc = None
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        x = torch.randn((64, 64, 64, 64), device="cuda")
        y = torch.randn((64, 64, 64, 64), device="cuda")
        tt = torch_ms(lambda: torch.einsum("ijkl,aibk->jlab", x, y))
    if cupy is not None:
        x = cupy.ones((64, 64, 64, 64), dtype=np.float32)
        cc = cupy_ms(lambda: cupy.einsum("ijkl,aibk->jlab", x, x))
    return Row(FAMILY, "4-d contraction (64^4, axes (0,2)x(1,3)) float32", "ms", ms,
               torch=tt, cupy=cc, target="<= 1.2x torch.einsum",
               note="lhs and rhs staged by a permutation copy; output written directly")


def cached_rows(s) -> list[Row]:
    a = _operand(s, tc.float32, (64, 64), 9)
    b = _operand(s, tc.float32, (64, 64), 10)
    out = _operand(s, tc.float32, (64, 64), 11)
    acc = DotGeneralAccumulation(1.0, 0.0)
    uncached = host_us(lambda: s.dot_general_read_into_accum(a, b, MM, acc, out),
                       s.synchronize)
    none_slot = host_us(lambda: s.dot_general_read_into_accum_cached(None, a, b, MM, acc, out),
                        s.synchronize)
    warm = host_us(lambda: s.dot_general_read_into_accum_cached(0, a, b, MM, acc, out),
                   s.synchronize)
    s.dot_general_cache_clear()
    return [
        Row(FAMILY, "64^3 float32 accumulate, uncached", "us", uncached,
            note="dot_general_read_into_accum"),
        Row(FAMILY, "64^3 float32 accumulate, cache slot None", "us", none_slot),
        Row(FAMILY, "64^3 float32 accumulate, warm cache slot", "us", warm,
            target="<= 70% of the uncached call",
            note=f"{100 * warm / uncached:.0f}% of uncached",
            extra={"ratio": warm / uncached}),
    ]


GROUPED_SHAPES = [(128, 80, 96), (64, 128, 64), (96, 32, 200), (33, 17, 65)]  # m, k, n


def _grouped_jobs(s, shapes):
    from tenferro_cuda.configs.dot import GemmJob

    f32 = tc.float32
    return [GemmJob(_operand(s, f32, (m, k), 20 + i), _operand(s, f32, (k, n), 90 + i),
                    _operand(s, f32, (m, n), 160 + i)) for i, (m, k, n) in enumerate(shapes)]


def _torch_loop(torch, shapes):
    """torch.matmul(out=) over the same jobs, one call each."""
    xs = [(torch.randn((m, k), device="cuda"), torch.randn((k, n), device="cuda"),
           torch.empty((m, n), device="cuda")) for m, k, n in shapes]

    def loop():
        for x, y, z in xs:
            torch.matmul(x, y, out=z)
    return host_us(loop, torch.cuda.synchronize, calls=200)


def grouped_rows(s, torch) -> list[Row]:
    """Host cost per call (final synchronize included, so also bounded by the device) of
    ``grouped_gemm``: 64 equal products (one uniform group: one cublasGemmBatchedEx)
    beside a loop of torch.matmul and beside torch.bmm of the same data stacked; and 64
    products of 4 shapes (one cublasGemmGroupedBatchedEx) beside a torch.matmul loop.
    The config is built once and called repeatedly, as a training step would."""
    from tenferro_cuda.configs.dot import GroupedGemmConfig

    uniform = [GROUPED_SHAPES[0]] * 64
    mixed = [GROUPED_SHAPES[i % 4] for i in range(64)]
    rows = []
    jobs = _grouped_jobs(s, uniform)
    cfg = GroupedGemmConfig(jobs)
    ours = host_us(lambda: s.grouped_gemm(cfg), s.synchronize, calls=2000)
    loop = host_us(lambda: [s.dot_general_read_into(j.lhs, j.rhs, MM, j.out) for j in jobs],
                   s.synchronize, calls=200)
    t_loop = t_bmm = None
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        t_loop = _torch_loop(torch, uniform)
        x = torch.randn((64, 128, 80), device="cuda")
        y = torch.randn((64, 80, 96), device="cuda")
        z = torch.empty((64, 128, 96), device="cuda")
        t_bmm = host_us(lambda: torch.bmm(x, y, out=z), torch.cuda.synchronize, calls=2000)
    rows.append(Row(FAMILY, "grouped 64 x (128x80 . 80x96) float32, vs torch.matmul loop",
                    "us", ours, torch=t_loop, target="<= 60 us",
                    note=f"one dot_general_read_into per job: {loop:.1f} us",
                    extra={"loop_us": loop}))
    rows.append(Row(FAMILY, "grouped 64 x (128x80 . 80x96) float32, vs torch.bmm (stacked)",
                    "us", ours, torch=t_bmm, target="<= 60 us",
                    note="torch.bmm needs the operands in one stacked tensor"))
    jobs = _grouped_jobs(s, mixed)
    cfg = GroupedGemmConfig(jobs)
    ours = host_us(lambda: s.grouped_gemm(cfg), s.synchronize, calls=2000)
    t_loop = _torch_loop(torch, mixed) if torch is not None else None
    rows.append(Row(FAMILY, "grouped 64 jobs of 4 shapes float32, vs torch.matmul loop", "us",
                    ours, torch=t_loop, target="report",
                    note="shapes (m,k,n) " + ", ".join(map(str, GROUPED_SHAPES))))
    return rows


def run(session) -> list[Row]:
    torch, cupy = peers()
    s = session
    rows = square_rows(s, torch, cupy)
    rows.append(bmm_host_row(s, torch))
    rows.append(contraction_row(s, torch, cupy))
    rows += cached_rows(s)
    rows += grouped_rows(s, torch)
    return rows
