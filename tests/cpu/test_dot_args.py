"""Argument assembly of the dot family on the CPU (recording context of tests/gpu/
dot_fakes.py, with a real ``exec.blas.Blas`` over a recording stand-in for the cuBLAS
bindings): the cuBLAS arguments (operand order, leading dimensions, batch strides,
compute types, scalars in the host block) and the prepared call of a warm cache slot are
what the plan says; staging copies; k = 0; the integer kernel's parameters and grid;
the cuBLAS handle setup; a missing cuBLAS named before anything runs (grouped GEMM's
calls: test_dot_grouped_calls.py).
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
from dot_fakes import (
    BMM,
    MM,
    Capture,
    FakeLib,
    Rec,
    close_live_blas,
    is_copy,
    kinds,
    session,
)

from tenferro_cuda import _cublas
from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import BackendSourceError
from tenferro_cuda.ops import storage


@pytest.fixture
def fake_lib():
    """A recording cuBLAS bindings module behind ``_cublas`` (a real ``Blas`` loads it)."""
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
def blas(monkeypatch, fake_lib):
    cap = Capture()
    for name in ("gemm", "gemm_strided_batched", "gemm_grouped"):
        monkeypatch.setattr(_cublas, name, cap(name))
    monkeypatch.setattr(_cublas, "has_grouped", lambda: True)
    return cap


@pytest.fixture
def ctx():
    return Rec(real_blas=True)


@pytest.fixture
def s(ctx):
    return session(ctx)


def test_blas_call_arguments(blas, ctx, s):
    a, b, o = ctx.dev((2, 4, 3)), ctx.dev((2, 3, 5)), ctx.dev((2, 4, 5))
    s.dot_general_read_into_accum(a, b, BMM, DotGeneralAccumulation(2, 0.5), o)
    name, args = blas.calls[-1]
    assert name == "gemm_strided_batched"
    h, ta, tb, m, n, k, alpha, pa, dt, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, batch, comp, op, \
        use64 = args
    assert h is ctx.blas_impl.handle and op == "dot_general_read_into_accum" and not use64
    assert (m, n, k, batch) == (5, 4, 3, 2)  # row orientation: C^T = rhs^T lhs^T
    assert (pa, pb, pc) == (b.data_ptr(), a.data_ptr(), o.data_ptr())
    assert (dt, comp, lda, ldb, ldc, sa, sb, sc) == (_cublas.R_32F, _cublas.COMPUTE_32F, 5, 3,
                                                     5, 15, 12, 20)
    assert beta == alpha + 16 and struct.unpack("<f12xf", blas.scalar_bytes[:20]) == (2.0, 0.5)
    c128 = DType.COMPLEX128
    s.dot_general_read_into_accum(ctx.dev((4, 3), c128), ctx.dev((3, 5), c128), MM,
                                  DotGeneralAccumulation(1 - 2j, 3), ctx.dev((4, 5), c128))
    name, args = blas.calls[-1]
    assert name == "gemm" and args[8] == _cublas.C_64F and args[-3] == _cublas.COMPUTE_64F
    assert struct.unpack("<dddd", blas.scalar_bytes) == (1.0, -2.0, 3.0, 0.0)
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    s.dot_general(ctx.dev((4, 3)), ctx.dev((3, 5)), tf32)
    assert blas.calls[-1][1][-3] == _cublas.COMPUTE_32F_FAST_TF32
    h16 = DType.BFLOAT16
    s.dot_general(ctx.dev((4, 3), h16), ctx.dev((3, 5), h16), MM)
    assert blas.calls[-1][1][8] == _cublas.R_16BF and blas.calls[-1][1][-3] == 68


def test_staged_operands_and_output(blas, ctx, s):
    lhs = ctx.dev((3, 5, 4))  # contracting axes (0, 2) cannot merge
    rhs = ctx.dev((3, 4, 6))
    out = ctx.dev((5, 12))[:, ::2]  # no unit stride: staged
    cfg = DotGeneralConfig((0, 2), (0, 1))
    s.dot_general_read_into_accum(lhs, rhs, cfg, DotGeneralAccumulation(1.0, 2.0), out)
    assert sum(map(is_copy, ctx.calls)) == 3  # lhs staged, out read (beta != 0), written back
    assert blas.calls[-1][0] == "gemm"
    ctx.calls.clear()
    s.dot_general_read_into_accum(lhs, rhs, cfg, DotGeneralAccumulation(1.0, 0.0), out)
    assert sum(map(is_copy, ctx.calls)) == 2  # beta == 0: out not read


@pytest.mark.parametrize("beta,want", [(0, "fill"), (2.5, "scale"), (1, None)],
                         ids=["beta0", "beta2.5", "beta1"])
def test_k_zero_scales_out(blas, ctx, s, monkeypatch, beta, want):
    seen = []
    monkeypatch.setattr(storage, "fill", lambda c, out, v, op: seen.append(("fill", v)))
    monkeypatch.setattr(storage, "scale", lambda c, out, f, op: seen.append(("scale", f)))
    s.dot_general_read_into_accum(ctx.dev((4, 0)), ctx.dev((0, 5)), MM,
                                  DotGeneralAccumulation(3.0, beta), ctx.dev((4, 5)))
    assert blas.calls == []
    assert seen == ([(want, 0 if want == "fill" else beta)] if want else [])


@pytest.mark.parametrize("dtype", [d for d in DType if d.is_integer], ids=lambda d: d.value)
def test_int_kernel_parameters(ctx, s, dtype):
    lhs = ctx.dev((3, 70, 20), dtype)
    rhs = ctx.dev((3, 20, 130), dtype).permute((0, 2, 1)).permute((0, 2, 1))
    out = ctx.dev((3, 70, 130), dtype)
    alpha = int(np.iinfo(dtype.numpy).max) if dtype.is_unsigned_integer else -1
    s.dot_general_read_into_accum(lhs, rhs, BMM, DotGeneralAccumulation(alpha, 0), out)
    launch = [c for c in ctx.calls if c[0] == "launch"][-1]
    assert launch[1] == f"tf::dot_int<{dtype.ctype}>"
    assert launch[2:4] == ((3, 2, 3), (256, 1, 1))
    wide = dtype.itemsize == 8
    vals = launch[4]
    assert len(vals) == 19
    assert vals[:3] == (out.data_ptr(), lhs.data_ptr(), rhs.data_ptr())
    assert vals[3:7] == (3, 70, 130, 20)
    assert vals[7:16] == (1400, 20, 1, 2600, 130, 1, 9100, 130, 1)
    assert vals[16:] == (alpha & ((1 << (64 if wide else 32)) - 1), 0, 1)
    assert ctx.blas_asked == 0 and ctx.blas_impl is None


def _last_call(lib) -> tuple:
    """The last cuBLAS call with its alpha/beta host addresses replaced by the bytes there
    (bound calls keep their scalars in their own host block)."""
    name, args = lib.calls[-1]
    alpha = args[6]
    beta = args.index(alpha + 16, 7)
    args = list(args)
    args[6], args[beta] = ctypes.string_at(alpha, 16), ctypes.string_at(alpha + 16, 16)
    return name, tuple(args)


@pytest.mark.parametrize("shapes,cfg", [(((4, 3), (3, 5), (4, 5)), MM),
                                        (((2, 4, 3), (2, 3, 5), (2, 4, 5)), BMM)],
                         ids=["gemm", "strided_batched"])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.COMPLEX64], ids=lambda d: d.value)
def test_prepared_call_matches_uncached_call(fake_lib, ctx, s, shapes, cfg, dtype):
    a, b, o = (ctx.dev(sh, dtype) for sh in shapes)
    acc = DotGeneralAccumulation(1.5, 0.25)
    records = []
    for _ in range(2):
        s.dot_general_read_into_accum(a, b, cfg, acc, o)
        records.append(_last_call(fake_lib))
        s.dot_general_read_into_accum_cached(0, a, b, cfg, acc, o)
        records.append(_last_call(fake_lib))
    uncached, first_cached, _, warm = records
    assert warm == uncached == first_cached
    assert ctx.dot_slots[0].call is not None
    other = DotGeneralAccumulation(-2.0, 1.0)  # new scalars through the bound call
    s.dot_general_read_into_accum(a, b, cfg, other, o)
    want = _last_call(fake_lib)
    s.dot_general_read_into_accum_cached(0, a, b, cfg, other, o)
    assert _last_call(fake_lib) == want
    s.dot_general_read_into_accum_cached(0, a, b, cfg, acc, o)
    assert _last_call(fake_lib) == uncached


@pytest.mark.parametrize("dtype", [DType.FLOAT64, DType.COMPLEX128], ids=lambda d: d.value)
def test_repeated_dot_general_binds_the_same_call(fake_lib, ctx, s, dtype):
    a, b = ctx.dev((3, 4, 2), dtype), ctx.dev((3, 2, 5), dtype)
    records, outs = [], []
    for _ in range(4):
        outs.append(s.dot_general(a, b, BMM))
        name, args = _last_call(fake_lib)
        records.append((name, args[:16] + args[17:]))  # all but the output address
        assert args[16] == outs[-1].data_ptr()
    assert records[1:] == records[:-1]
    seen = ctx.memo[("dot", "repeat")]
    assert len(seen) == 1 and next(iter(seen.values())).call is not None
    assert kinds(ctx.calls).count("alloc") == 4


def test_handle_setup(fake_lib):
    ctx = Rec(real_blas=True)
    ctx.stream = 0xABC
    blas = ctx.blas("dot_general")
    assert ctx.blas("dot_general") is blas and ctx.calls == [("alloc_bytes", 32 << 20)]
    h = blas.handle
    names = [c[0] for c in fake_lib.calls]
    assert names == ["create", "set_stream", "set_pointer_mode", "set_math_mode",
                     "set_workspace"]
    args = {c[0]: c[1] for c in fake_lib.calls}
    assert args["set_stream"] == (0x5151, 0xABC)
    assert args["set_math_mode"] == (0x5151, 0) and args["set_pointer_mode"] == (0x5151, 0)
    assert args["set_workspace"] == (0x5151, h.owner.ptr, 32 << 20)
    blas.close()
    blas.close()
    assert [c for c in fake_lib.calls if c[0] == "destroy"] == [("destroy", (0x5151,))]
    assert h.owner is None


def test_missing_cublas_is_named_before_anything_runs(monkeypatch):
    """Float products without cuBLAS: BackendSourceError naming the library and the op,
    raised before the output is allocated; integer products do not need cuBLAS."""
    missing = BackendSourceError("cuBLAS is unavailable: libcublas.so.13 / libcublasLt.so.13 "
                                 "not found", op="cublas")

    def load():
        raise missing

    monkeypatch.setattr(_cublas, "load", load)
    ctx = Rec(real_blas=True)
    s = session(ctx)
    with pytest.raises(BackendSourceError, match=r"libcublas\.so\.13") as info:
        s.dot_general(ctx.dev((4, 3)), ctx.dev((3, 5)), MM)
    assert info.value.op == "dot_general" and ctx.calls == []
    with pytest.raises(BackendSourceError) as info:
        s.dot_general_read_into_accum_cached(0, ctx.dev((4, 3)), ctx.dev((3, 5)), MM,
                                             DotGeneralAccumulation(), ctx.dev((4, 5)))
    assert info.value.op == "dot_general_read_into_accum_cached"
    assert ctx.calls == [] and not ctx.dot_slots
    with pytest.raises(BackendSourceError) as info:
        s.grouped_gemm(GroupedGemmConfig([GemmJob(ctx.dev((4, 3)), ctx.dev((3, 5)),
                                                  ctx.dev((4, 5)))]))
    assert info.value.op == "grouped_gemm" and ctx.calls == []
    c64 = DType.COMPLEX64  # staged lhs: nothing is copied before the error either
    with pytest.raises(BackendSourceError) as info:
        s.grouped_gemm(GroupedGemmConfig([GemmJob(ctx.dev((3, 5, 4), c64), ctx.dev((3, 4, 6), c64),
                                                  ctx.dev((5, 6), c64),
                                                  DotGeneralConfig((0, 2), (0, 1)))]))
    assert info.value.op == "grouped_gemm" and ctx.calls == []
    i32 = DType.INT32
    s.dot_general(ctx.dev((4, 3), i32), ctx.dev((3, 5), i32), MM)
    assert kinds(ctx.calls) == ["alloc", "launch"]
