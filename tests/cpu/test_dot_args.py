"""Argument assembly of the dot family on the CPU (fake session of tests/gpu/
dot_fakes.py): the cuBLAS arguments (operand order, leading dimensions, batch strides,
compute types, scalars in the host block) and the prepared call of a warm cache slot are
what the plan says; staging copies; k = 0; the integer kernel's parameter block and grid;
grouped GEMM's groups, pointer arrays and scalars; the cuBLAS handle setup; a missing
cuBLAS named before anything runs.
"""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest
from dot_fakes import BMM, MM, Fake, FakeBuffer, FakeLib

from tenferro_cuda import _cublas
from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import BackendSourceError
from tenferro_cuda.ops.dot import DotOps


class Capture:
    def __init__(self):
        self.calls = []

    def __call__(self, name):
        def record(*args, **kwargs):
            if name == "gemm_grouped":  # host scalar arrays live only during the call
                groups = len(args[15])
                self.scalars = [list((ctypes.c_float * groups).from_address(args[i]))
                                for i in (6, 12)]
            self.calls.append((name, args))
        return record


@pytest.fixture
def blas(monkeypatch):
    cap = Capture()
    for name in ("gemm", "gemm_strided_batched", "gemm_grouped"):
        monkeypatch.setattr(_cublas, name, cap(name))
    monkeypatch.setattr(_cublas, "has_grouped", lambda: True)
    return cap


def _scalar_bytes(s, n):
    buf, addr = s._dot_scalars()
    return ctypes.string_at(addr, n)


def test_blas_call_arguments(blas):
    s = Fake(stub_run=False)
    a, b, o = s.dev((2, 4, 3)), s.dev((2, 3, 5)), s.dev((2, 4, 5))
    s.dot_general_read_into_accum(a, b, BMM, DotGeneralAccumulation(2, 0.5), o)
    name, args = blas.calls[-1]
    assert name == "gemm_strided_batched"
    h, ta, tb, m, n, k, alpha, pa, dt, lda, sa, pb, ldb, sb, beta, pc, ldc, sc, batch, comp, op, \
        use64 = args
    assert (m, n, k, batch) == (5, 4, 3, 2)  # row orientation: C^T = rhs^T lhs^T
    assert (pa, pb, pc) == (b.data_ptr(), a.data_ptr(), o.data_ptr())
    assert (dt, comp, lda, ldb, ldc, sa, sb, sc) == (_cublas.R_32F, _cublas.COMPUTE_32F, 5, 3,
                                                     5, 15, 12, 20)
    assert beta == alpha + 16 and struct.unpack("<f12xf", _scalar_bytes(s, 20)) == (2.0, 0.5)
    c128 = DType.COMPLEX128
    s.dot_general_read_into_accum(s.dev((4, 3), c128), s.dev((3, 5), c128), MM,
                                  DotGeneralAccumulation(1 - 2j, 3), s.dev((4, 5), c128))
    name, args = blas.calls[-1]
    assert name == "gemm" and args[8] == _cublas.C_64F and args[-3] == _cublas.COMPUTE_64F
    assert struct.unpack("<dddd", _scalar_bytes(s, 32)) == (1.0, -2.0, 3.0, 0.0)
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    s.dot_general(s.dev((4, 3)), s.dev((3, 5)), tf32)
    assert blas.calls[-1][1][-3] == _cublas.COMPUTE_32F_FAST_TF32
    h16 = DType.BFLOAT16
    s.dot_general(s.dev((4, 3), h16), s.dev((3, 5), h16), MM)
    assert blas.calls[-1][1][8] == _cublas.R_16BF and blas.calls[-1][1][-3] == 68


def test_staged_operands_and_output(blas):
    s = Fake(stub_run=False)
    lhs = s.dev((3, 5, 4))  # contracting axes (0, 2) cannot merge
    rhs = s.dev((3, 4, 6))
    out = s.dev((5, 12))[:, ::2]  # no unit stride: staged
    cfg = DotGeneralConfig((0, 2), (0, 1))
    s.dot_general_read_into_accum(lhs, rhs, cfg, DotGeneralAccumulation(1.0, 2.0), out)
    copies = [c for c in s.calls if c[0] == "copy"]
    assert len(copies) == 3  # lhs staged, out read (beta != 0), out written back
    assert blas.calls[-1][0] == "gemm"
    s.calls.clear()
    s.dot_general_read_into_accum(lhs, rhs, cfg, DotGeneralAccumulation(1.0, 0.0), out)
    assert len([c for c in s.calls if c[0] == "copy"]) == 2  # beta == 0: out not read


@pytest.mark.parametrize("beta,want", [(0, ("fill", 0)), (2.5, ("scale", 2.5)), (1, None)],
                         ids=["beta0", "beta2.5", "beta1"])
def test_k_zero_scales_out(blas, beta, want):
    s = Fake(stub_run=False)
    s.dot_general_read_into_accum(s.dev((4, 0)), s.dev((0, 5)), MM,
                                  DotGeneralAccumulation(3.0, beta), s.dev((4, 5)))
    assert blas.calls == []
    assert [c for c in s.calls if c[0] in ("fill", "scale")] == ([want] if want else [])


@pytest.mark.parametrize("dtype", [DType.INT8, DType.UINT8, DType.INT32, DType.INT64],
                         ids=lambda d: d.value)
def test_int_kernel_parameters(dtype):
    s = Fake(stub_run=False)
    lhs = s.dev((3, 70, 20), dtype)
    rhs = s.dev((3, 20, 130), dtype).permute((0, 2, 1)).permute((0, 2, 1))
    out = s.dev((3, 70, 130), dtype)
    alpha = 255 if dtype is DType.UINT8 else -1
    s.dot_general_read_into_accum(lhs, rhs, BMM, DotGeneralAccumulation(alpha, 0), out)
    fn = [c for c in s.calls if c[0] == "fn"][-1]
    assert fn[1:] == ("dot_int", f"tf::dot_int<{dtype.ctype}>")
    launch = [c for c in s.calls if c[0] == "launch"][-1]
    assert launch[1:3] == ((3, 2, 3), (256, 1, 1))
    wide = dtype is DType.INT64
    pack = s._state.prepared[("dot_int", wide)]
    vals = pack._struct.unpack_from(pack._buf, pack._shift)
    assert len(vals) == 19
    assert vals[:3] == (out.data_ptr(), lhs.data_ptr(), rhs.data_ptr())
    assert vals[3:7] == (3, 70, 130, 20)
    assert vals[7:16] == (1400, 20, 1, 2600, 130, 1, 9100, 130, 1)
    assert vals[16:] == (alpha & ((1 << (64 if wide else 32)) - 1), 0, 1)
    assert ("handle",) not in s.calls


def test_grouped_blas_groups_and_pointers(blas):
    s = Fake(stub_run=False)
    f32 = DType.FLOAT32
    item = f32.itemsize
    j0 = GemmJob(s.dev((2, 4, 3)), s.dev((2, 3, 5)), s.dev((2, 4, 5)), BMM)
    j1 = GemmJob(s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5)))  # same gemm shape: same group
    j2 = GemmJob(s.dev((6, 3)), s.dev((3, 5)), s.dev((6, 5)),
                 accumulation=DotGeneralAccumulation(2.0, 1.0))
    j3 = GemmJob(s.dev((6, 0)), s.dev((0, 5)), s.dev((6, 5)))  # k = 0: beta * out
    s.grouped_gemm(GroupedGemmConfig([j0, j1, j2, j3]))
    name, args = blas.calls[-1]
    assert name == "gemm_grouped" and len(blas.calls) == 1
    h, ta, tb, m, n, k, alpha, pa, dt, lda, pb, ldb, beta, pc, ldc, sizes, comp, op = args
    assert (m, n, k, sizes) == ([5, 5], [4, 6], [3, 3], [3, 1])
    assert (lda, ldb, ldc) == ([5, 5], [3, 3], [5, 5])
    total = 4
    assert (pb - pa, pc - pa) == (8 * total, 16 * total)
    flat = [c for c in s.calls if c[0] == "upload"][-1][1].reshape(3, total)
    want_a = [j0.rhs.data_ptr(), j0.rhs.data_ptr() + 15 * item, j1.rhs.data_ptr(),
              j2.rhs.data_ptr()]
    want_b = [j0.lhs.data_ptr(), j0.lhs.data_ptr() + 12 * item, j1.lhs.data_ptr(),
              j2.lhs.data_ptr()]
    want_c = [j0.out.data_ptr(), j0.out.data_ptr() + 20 * item, j1.out.data_ptr(),
              j2.out.data_ptr()]
    assert flat.tolist() == [want_a, want_b, want_c]
    assert blas.scalars == [[1.0, 2.0], [0.0, 1.0]]
    assert ("fill", 0) in s.calls


@pytest.mark.parametrize("dtype", [DType.COMPLEX64, DType.INT32], ids=lambda d: d.value)
def test_grouped_complex_and_int_run_per_job(dtype):
    s = Fake()
    jobs = [GemmJob(s.dev((4, 3), dtype), s.dev((3, 5), dtype), s.dev((4, 5), dtype))
            for _ in range(3)]
    s.grouped_gemm(GroupedGemmConfig(jobs))
    assert [c[0] for c in s.calls].count("run") == 3


@pytest.fixture
def fake_lib():
    saved = dict(_cublas._state)
    lib = FakeLib()
    _cublas._state.clear()
    _cublas._state.update(lib=lib, version=(13, 1, 0))
    yield lib
    _cublas._state.clear()
    _cublas._state.update(saved)


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
def test_prepared_call_matches_uncached_call(fake_lib, shapes, cfg, dtype):
    s = Fake(stub_run=False)
    a, b, o = (s.dev(sh, dtype) for sh in shapes)
    acc = DotGeneralAccumulation(1.5, 0.25)
    records = []
    for _ in range(2):
        s.dot_general_read_into_accum(a, b, cfg, acc, o)
        records.append(_last_call(fake_lib))
        s.dot_general_read_into_accum_cached(0, a, b, cfg, acc, o)
        records.append(_last_call(fake_lib))
    uncached, first_cached, _, warm = records
    assert warm == uncached == first_cached
    assert s._state.prepared[("dot", "slots")][0].call is not None
    other = DotGeneralAccumulation(-2.0, 1.0)  # new scalars through the bound call
    s.dot_general_read_into_accum(a, b, cfg, other, o)
    want = _last_call(fake_lib)
    s.dot_general_read_into_accum_cached(0, a, b, cfg, other, o)
    assert _last_call(fake_lib) == want
    s.dot_general_read_into_accum_cached(0, a, b, cfg, acc, o)
    assert _last_call(fake_lib) == uncached


@pytest.mark.parametrize("dtype", [DType.FLOAT64, DType.COMPLEX128], ids=lambda d: d.value)
def test_repeated_dot_general_binds_the_same_call(fake_lib, dtype):
    s = Fake(stub_run=False)
    a, b = s.dev((3, 4, 2), dtype), s.dev((3, 2, 5), dtype)
    records, outs = [], []
    for _ in range(4):
        outs.append(s.dot_general(a, b, BMM))
        name, args = _last_call(fake_lib)
        records.append((name, args[:16] + args[17:]))  # all but the output address
        assert args[16] == outs[-1].data_ptr()
    assert records[1:] == records[:-1]
    seen = s._state.prepared[("dot", "repeat")]
    assert len(seen) == 1 and next(iter(seen.values())).call is not None
    assert [c[0] for c in s.calls].count("alloc") == 4


def test_handle_setup(fake_lib):
    s = Fake(stub_run=False)
    allocs = []

    def alloc(nbytes, stream, op):
        allocs.append(nbytes)
        return FakeBuffer(nbytes, 7, stream)

    s._rt.pool = SimpleNamespace(alloc=alloc)
    s._state.stream = 0xABC
    h = DotOps._dot_handle(s, "dot_general")  # the real method, not Fake's recorder
    assert DotOps._dot_handle(s, "dot_general") is h and allocs == [32 << 20]
    names = [c[0] for c in fake_lib.calls]
    assert names == ["create", "set_stream", "set_pointer_mode", "set_math_mode",
                     "set_workspace"]
    args = {c[0]: c[1] for c in fake_lib.calls}
    assert args["set_stream"] == (0x5151, 0xABC)
    assert args["set_math_mode"] == (0x5151, 0) and args["set_pointer_mode"] == (0x5151, 0)
    assert args["set_workspace"] == (0x5151, h.owner.ptr, 32 << 20)
    h.close()
    h.close()
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
    monkeypatch.setattr(Fake, "_dot_handle", DotOps._dot_handle)
    s = Fake(stub_run=False)
    with pytest.raises(BackendSourceError, match=r"libcublas\.so\.13") as info:
        s.dot_general(s.dev((4, 3)), s.dev((3, 5)), MM)
    assert info.value.op == "dot_general" and s.calls == []
    with pytest.raises(BackendSourceError):
        s.dot_general_read_into_accum_cached(0, s.dev((4, 3)), s.dev((3, 5)), MM,
                                             DotGeneralAccumulation(), s.dev((4, 5)))
    assert s.calls == [] and not s._state.prepared.get(("dot", "slots"))
    i32 = DType.INT32
    s.dot_general(s.dev((4, 3), i32), s.dev((3, 5), i32), MM)
    assert [c[0] for c in s.calls] == ["alloc", "fn", "launch"]
