"""grouped_gemm's calls on the CPU (the recording context of tests/gpu/dot_fakes.py with
a real ``exec.blas.Blas`` over a recording stand-in for the cuBLAS bindings, and pinned
host memory stood in for by ctypes buffers): uniform groups, the address arrays and where
they are uploaded from, the scalars, one batched call per group or one grouped call, the
planned repeated call (the same calls as the first, nothing uploaded), staged jobs'
per-call arrays, and the pinned ring's rules."""

from __future__ import annotations

import ctypes
import gc
import struct

import numpy as np
import pytest
from dot_fakes import BMM, Capture, FakeLib, PinnedStub, Rec, close_live_blas, session

from tenferro_cuda import _cublas
from tenferro_cuda.configs.dot import DotGeneralAccumulation as Acc
from tenferro_cuda.configs.dot import DotGeneralConfig, GemmJob, GroupedGemmConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError
from tenferro_cuda.exec.blas_groups import RING_BYTES, PinnedRing
from tenferro_cuda.ops.dot import grouped

F32, C64 = DType.FLOAT32, DType.COMPLEX64


@pytest.fixture
def pinned(monkeypatch):
    return PinnedStub().install(monkeypatch)


@pytest.fixture
def fake_lib(pinned):
    """A recording cuBLAS bindings module behind ``_cublas`` (real ``Blas`` objects made
    over it are closed before the pinned stand-in goes)."""
    saved = dict(_cublas._state)
    lib = FakeLib()
    _cublas._state.clear()
    _cublas._state.update(lib=lib, version=(13, 1, 0))
    try:
        yield lib
    finally:
        close_live_blas()
        _cublas._state.clear()
        _cublas._state.update(saved)


@pytest.fixture
def blas(monkeypatch, fake_lib, pinned):
    cap = Capture()
    for name in ("gemm", "gemm_strided_batched", "gemm_batched", "gemm_grouped"):
        monkeypatch.setattr(_cublas, name, cap(name))
    monkeypatch.setattr(_cublas, "has_grouped", lambda: True)
    return cap


@pytest.fixture
def ctx():
    return Rec(real_blas=True)


@pytest.fixture
def s(ctx):
    return session(ctx)


def _uploads(ctx):
    return [c for c in ctx.calls if c[0] == "upload"]


def _in_ring(pinned, host: int) -> bool:
    return any(ctypes.addressof(b) <= host < ctypes.addressof(b) + RING_BYTES
               for b in pinned.blocks)


def test_two_groups_are_one_grouped_call(blas, pinned, ctx, s):
    item = F32.itemsize
    dev = ctx.dev
    j0 = GemmJob(dev((2, 4, 3)), dev((2, 3, 5)), dev((2, 4, 5)), BMM)
    j1 = GemmJob(dev((4, 3)), dev((3, 5)), dev((4, 5)))  # same gemm shape: same group
    j2 = GemmJob(dev((6, 3)), dev((3, 5)), dev((6, 5)), accumulation=Acc(2.0, 1.0))
    j3 = GemmJob(dev((6, 0)), dev((0, 5)), dev((6, 5)))  # k = 0: beta * out
    s.grouped_gemm(GroupedGemmConfig([j0, j1, j2, j3]))
    assert [c[0] for c in blas.calls] == ["gemm_grouped"]
    h, ta, tb, m, n, k, alpha, pa, dt, lda, pb, ldb, beta, pc, ldc, groups, sizes, comp, op = \
        blas.calls[0][1]
    g = blas.grouped
    assert groups == 2 and (g["m"], g["n"], g["k"], g["sizes"]) == ([5, 5], [4, 6], [3, 3],
                                                                     [3, 1])
    assert (g["lda"], g["ldb"], g["ldc"], g["ta"], g["tb"]) == ([5, 5], [3, 3], [5, 5],
                                                                 [0, 0], [0, 0])
    assert (dt, comp, op) == (_cublas.R_32F, _cublas.COMPUTE_32F, "grouped_gemm")
    total = 4
    assert (pb - pa, pc - pa) == (8 * total, 16 * total)
    (upload,) = _uploads(ctx)
    assert upload[1] == pa and _in_ring(pinned, upload[3])  # from pinned staging
    want_a = [j0.rhs.data_ptr(), j0.rhs.data_ptr() + 15 * item, j1.rhs.data_ptr(),
              j2.rhs.data_ptr()]
    want_b = [j0.lhs.data_ptr(), j0.lhs.data_ptr() + 12 * item, j1.lhs.data_ptr(),
              j2.lhs.data_ptr()]
    want_c = [j0.out.data_ptr(), j0.out.data_ptr() + 20 * item, j1.out.data_ptr(),
              j2.out.data_ptr()]
    assert upload[2].reshape(3, total).tolist() == [want_a, want_b, want_c]
    assert blas.scalars == [[1.0, 2.0], [0.0, 1.0]]
    assert ("memset", j3.out.data_ptr(), 0, 120) in ctx.calls


def test_one_group_is_one_batched_call(blas, ctx, s):
    jobs = [GemmJob(ctx.dev((128, 80)), ctx.dev((80, 96)), ctx.dev((128, 96)),
                    accumulation=Acc(0.5, 2.0)) for _ in range(64)]
    s.grouped_gemm(GroupedGemmConfig(jobs))
    ((name, args),) = blas.calls
    assert name == "gemm_batched"
    h, ta, tb, m, n, k, alpha, pa, dt, lda, pb, ldb, beta, pc, ldc, batch, comp, op = args
    assert (ta, tb, m, n, k, lda, ldb, ldc, batch) == (0, 0, 96, 128, 80, 96, 80, 96, 64)
    assert beta == alpha + 16 and struct.unpack("<f12xf", blas.scalar_bytes[:20]) == (0.5, 2.0)
    (upload,) = _uploads(ctx)
    flat = upload[2].reshape(3, 64)
    assert upload[1] == pa and (pb, pc) == (pa + 8 * 64, pa + 16 * 64)
    assert flat.tolist() == [[j.rhs.data_ptr() for j in jobs], [j.lhs.data_ptr() for j in jobs],
                             [j.out.data_ptr() for j in jobs]]


def test_complex_groups_run_batched_with_conjugation(blas, ctx, s):
    dev = ctx.dev
    same = [GemmJob(dev((4, 3), C64), dev((3, 5), C64), dev((4, 5), C64),
                    accumulation=Acc(1 - 2j, 0.5, rhs_conj=True)) for _ in range(3)]
    other = GemmJob(dev((2, 3), C64), dev((3, 5), C64), dev((2, 5), C64))
    s.grouped_gemm(GroupedGemmConfig([*same, other]))
    assert [c[0] for c in blas.calls] == ["gemm_batched", "gemm_batched"]
    first, second = (c[1] for c in blas.calls)
    assert first[1] == _cublas.OP_C and first[8] == _cublas.C_32F and first[15] == 3
    assert second[1] == _cublas.OP_N and second[15] == 1
    assert second[7] == first[7] + 8 * 3  # the second group's A addresses follow
    assert second[10] == first[7] + 8 * 4 + 8 * 3 and second[13] == first[7] + 16 * 4 + 8 * 3


def test_without_grouped_api_each_group_is_a_batched_call(blas, monkeypatch, ctx, s):
    monkeypatch.setattr(_cublas, "has_grouped", lambda: False)
    jobs = [GemmJob(ctx.dev((4, 3)), ctx.dev((3, 5)), ctx.dev((4, 5))),
            GemmJob(ctx.dev((6, 3)), ctx.dev((3, 5)), ctx.dev((6, 5)))]
    s.grouped_gemm(GroupedGemmConfig(jobs))
    assert [(c[0], c[1][15]) for c in blas.calls] == [("gemm_batched", 1)] * 2


def test_integer_jobs_run_one_kernel_each():
    ctx = Rec()
    jobs = [GemmJob(ctx.dev((4, 3), DType.INT32), ctx.dev((3, 5), DType.INT32),
                    ctx.dev((4, 5), DType.INT32)) for _ in range(3)]
    session(ctx).grouped_gemm(GroupedGemmConfig(jobs))
    assert [c[0] for c in ctx.calls] == ["launch"] * 3 and ctx.blas_asked == 0


def _mixed(ctx):
    dev = ctx.dev
    return [GemmJob(dev((4, 3)), dev((3, 5)), dev((4, 5))),
            GemmJob(dev((2, 4, 3)), dev((2, 3, 5)), dev((2, 4, 5)), BMM),
            GemmJob(dev((3, 6)).T, dev((3, 5)), dev((6, 5))),  # a transposed lhs
            GemmJob(dev((5, 0)), dev((0, 2)), dev((5, 2)), accumulation=Acc(1, 3.0))]


def test_repeated_call_reuses_the_plan(blas, ctx, s, monkeypatch):
    """DESIGN 9: the repeated call is the first call with its planning kept -- the same
    cuBLAS calls and scalars, the k = 0 scale again, and no validation, allocation or
    upload."""
    cfg = GroupedGemmConfig(_mixed(ctx))
    s.grouped_gemm(cfg)
    first_blas, first_ctx = list(blas.calls), list(ctx.calls)
    assert [c[0] for c in first_ctx].count("upload") == 1
    planned = []
    real = grouped._plan
    monkeypatch.setattr(grouped, "_plan", lambda *a: planned.append(a) or real(*a))
    blas.calls.clear()
    ctx.calls.clear()
    s.grouped_gemm(cfg)
    assert planned == [] and blas.calls == first_blas
    assert [c for c in ctx.calls if c[0] in ("alloc", "upload")] == []
    assert [c for c in ctx.calls if c[0] == "launch"] == \
        [c for c in first_ctx if c[0] == "launch"]  # the scale of the k = 0 job
    again = GroupedGemmConfig(cfg.jobs)  # another config object: planned on its own
    blas.calls.clear()
    s.grouped_gemm(again)
    assert len(planned) == 1 and [c[0] for c in blas.calls] == [c[0] for c in first_blas]


def test_repeated_call_checks_residency(blas, ctx, s):
    jobs = _mixed(ctx)
    cfg = GroupedGemmConfig(jobs)
    s.grouped_gemm(cfg)
    jobs[1].rhs.buffer.release()
    blas.calls.clear()
    ctx.calls.clear()
    with pytest.raises(RuntimeStateError, match=r"jobs\[1\]\.rhs.*reclaimed") as info:
        s.grouped_gemm(cfg)
    assert info.value.op == "grouped_gemm" and blas.calls == [] and ctx.calls == []


def test_capture_takes_the_full_path(blas, ctx, s):
    """During a capture the planned run is not used: the call plans again, its address
    array goes to the capture as a constant of the graph (not through the stream), and
    that plan is not kept for later calls."""
    cfg = GroupedGemmConfig(_mixed(ctx))
    s.grouped_gemm(cfg)
    planned = ctx.memo.get(("grouped_gemm", id(cfg)))
    ctx.calls.clear()
    constants = []

    class Capture:
        def upload_constant(self, dst, data, op):
            constants.append((dst, data.nbytes, op))

    ctx.capture = Capture()
    s.grouped_gemm(cfg)
    assert [c[0] for c in ctx.calls].count("upload") == 0
    assert len(constants) == 1 and constants[0][2] == "grouped_gemm"
    assert ctx.memo.get(("grouped_gemm", id(cfg))) is planned
    ctx.capture = None
    ctx.calls.clear()
    s.grouped_gemm(cfg)
    assert [c[0] for c in ctx.calls].count("upload") == 0


def test_plan_is_forgotten_with_its_config(blas, ctx, s):
    cfg = GroupedGemmConfig(_mixed(ctx))
    s.grouped_gemm(cfg)
    key = ("grouped_gemm", id(cfg))
    assert ctx.memo.get(key) is not None
    del cfg
    gc.collect()
    assert ctx.memo.get(key) is None


def test_staged_jobs_fill_and_upload_the_array_per_call(blas, pinned, ctx, s):
    plain = GemmJob(ctx.dev((5, 4)), ctx.dev((4, 6)), ctx.dev((5, 6)))
    lhs = ctx.dev((3, 5, 4))  # contracting axes (0, 2) do not merge: lhs is staged
    staged = GemmJob(lhs, ctx.dev((3, 4, 6)), ctx.dev((5, 6)), DotGeneralConfig((0, 2), (0, 1)))
    cfg = GroupedGemmConfig([plain, staged])
    for _ in range(2):
        ctx.calls.clear()
        s.grouped_gemm(cfg)
        names = [c[0] for c in ctx.calls]
        assert names.count("upload") == 1 and names.index("upload") > names.index("alloc")
        (upload,) = _uploads(ctx)
        assert _in_ring(pinned, upload[3])
        flat = upload[2].reshape(3, -1)
        b_of = dict(zip(flat[1].tolist(), flat[2].tolist()))  # lhs side -> out
        assert b_of[plain.lhs.data_ptr()] == plain.out.data_ptr()
        assert staged.out.data_ptr() in flat[2] and lhs.data_ptr() not in flat[1]
    assert [c[0] for c in blas.calls].count("gemm_grouped") + \
        [c[0] for c in blas.calls].count("gemm_batched") == 2


class _Ctx:
    """What PinnedRing.upload asks of a context: its stream and ``upload``."""

    def __init__(self) -> None:
        self.stream = object()
        self.sources: list[int] = []

    def upload(self, dst, host, nbytes, op) -> None:
        self.sources.append(host)


def test_pinned_ring_rules(pinned):
    ring = PinnedRing()
    ctx = _Ctx()
    data = np.arange(1000, dtype=np.int64)  # 8,000 bytes: 8 fit in the ring
    for _ in range(8):
        ring.upload(ctx, 0, data, "op")
    assert ctx.sources == [ring.ptr + i * 8000 for i in range(8)] and pinned.queries == 0
    pinned.busy = True  # full and the stream busy: this one from pageable memory
    ring.upload(ctx, 0, data, "op")
    assert ctx.sources[-1] == data.ctypes.data and pinned.queries == 1
    pinned.busy = False  # full and idle: start over at the front
    ring.upload(ctx, 0, data[:3], "op")  # 24 bytes still fit at the end
    ring.upload(ctx, 0, data, "op")
    ring.upload(ctx, 0, data, "op")
    assert ctx.sources[-3:] == [ring.ptr + 64000, ring.ptr, ring.ptr + 8000]
    big = np.zeros(RING_BYTES // 8 + 1, np.int64)  # larger than the ring: never staged
    ring.upload(ctx, 0, big, "op")
    assert ctx.sources[-1] == big.ctypes.data and pinned.queries == 2
    ring.upload(ctx, 0, data[:0], "op")  # nothing to copy
    assert len(ctx.sources) == 13
    ptr = ring.ptr
    ring.close()
    ring.close()
    assert pinned.freed == [ptr]
    ring.upload(ctx, 0, data, "op")  # a closed ring stages nothing
    assert ctx.sources[-1] == data.ctypes.data


def test_blas_close_frees_its_ring(blas, pinned, ctx, s):
    s.grouped_gemm(GroupedGemmConfig([GemmJob(ctx.dev((4, 3)), ctx.dev((3, 5)),
                                              ctx.dev((4, 5)))]))
    ring = ctx.blas_impl._ring
    assert ring is not None and pinned.freed == []
    ctx.blas_impl.close()
    assert pinned.freed == [ctypes.addressof(pinned.blocks[0])]
