"""The dot family's session methods on the CPU, over a fake session: fake device tensors
(buffers with addresses but no memory), the real validation, planning, slot logic and
argument assembly, and recorders in place of allocation, cuBLAS and launches.

Checks: every error path raises before anything is allocated, planned into a slot, or
launched; cached slots are reused on equal keys and re-planned otherwise; the cuBLAS
arguments (operand order, scalars) and the integer kernel's parameter block and grid are
what the plan says; grouped GEMM forms groups and pointer arrays correctly.
"""

from __future__ import annotations

import ctypes
import itertools
import struct
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda import _cublas
from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import (
    BackendSourceError,
    RuntimeStateError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.ops.dot import DotOps
from tenferro_cuda.ops.dot_plan import OP_N
from tenferro_cuda.tensor import Tensor

MM = DotGeneralConfig((1,), (0,))
BMM = DotGeneralConfig((2,), (1,), (0,), (0,))
_addresses = itertools.count(0x10000, 0x10000)


class FakeBuffer:
    def __init__(self, nbytes, domain, stream):
        self.ptr = next(_addresses)
        self.nbytes, self.domain, self.stream = nbytes, domain, stream
        self.freed, self.ordinal = False, 0


class Fake(DotOps):
    """A session whose device work is recorded instead of run."""

    def __init__(self, stub_run: bool = True):
        self._rt = SimpleNamespace(domain=SimpleNamespace(value=7), ordinal=0,
                                   identity=SimpleNamespace(serial=1),
                                   info=SimpleNamespace(multiprocessor_count=132))
        self._state = SimpleNamespace(prepared={}, stream=object())
        self.calls = []
        self.stub = stub_run
        if stub_run:
            self._dot_run = self._record_run

    def _begin(self, op):
        return self._state

    def dev(self, shape, dtype=DType.FLOAT32):
        n = int(np.prod(shape)) * dtype.itemsize
        return Tensor._make(dtype, tuple(shape), buffer=FakeBuffer(n, 7, self._state.stream))

    def _alloc(self, dtype, shape, op):
        self.calls.append(("alloc", tuple(shape)))
        return self.dev(shape, dtype)

    def _dot_handle(self, op):
        self.calls.append(("handle",))
        return SimpleNamespace(value=0x77)

    def _dot_prepared(self, plan, dtype, precision, op):
        if not self.stub:
            return super()._dot_prepared(plan, dtype, precision, op)
        staged = (plan.lhs_perm, plan.rhs_perm, plan.out_perm) != (None, None, None)
        if dtype.is_integer or staged or plan.empty or plan.kzero:
            return None
        calls = self.calls

        class Call:
            def run(self, a, b, c, alpha, beta, op):
                calls.append(("call", plan, alpha, beta, precision, None))
        return Call()

    def _record_run(self, plan, lhs, rhs, out, dtype, alpha, beta, precision, op, temps=None):
        self.calls.append(("run", plan, alpha, beta, precision, temps))

    def _copy_into(self, src, dst, op):
        self.calls.append(("copy", src.shape, dst.shape))

    def _fill(self, out, value, op):
        self.calls.append(("fill", value))

    def _scale(self, out, factor, op):
        self.calls.append(("scale", factor))

    def _fn(self, family, expression):
        self.calls.append(("fn", family, expression))
        return "fn"

    def _launch(self, fn, grid, block, params, op, shared=0):
        self.calls.append(("launch", grid, block, op))

    def upload_host_tensor(self, array):
        self.calls.append(("upload", np.array(array)))
        return self.dev(array.shape, DType.INT64)


@pytest.fixture
def s():
    return Fake()


# --- error paths: nothing allocated, planned or launched ---------------------------------------
def _errors(s: Fake):
    f64 = DType.FLOAT64
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    host = Tensor.from_numpy(np.zeros((4, 3), np.float32))
    freed = s.dev((3, 5))
    freed.buffer.freed = True
    big = s.dev((8, 8))
    acc = DotGeneralAccumulation(2.0, 1.0)
    g = s.dot_general
    into = s.dot_general_read_into
    accum = s.dot_general_read_into_accum
    cached = s.dot_general_read_into_accum_cached
    return [
        ("lhs_host", lambda: g(host, b, MM), RuntimeStateError),
        ("rhs_reclaimed", lambda: g(a, freed, MM), RuntimeStateError),
        ("lhs_not_tensor", lambda: g(np.zeros((4, 3)), b, MM), ValidationError),
        ("dtype_mismatch", lambda: g(a, s.dev((3, 5), f64), MM), ValidationError),
        ("bool", lambda: g(s.dev((4, 3), DType.BOOL), s.dev((3, 5), DType.BOOL), MM),
         UnsupportedDTypeError),
        ("extent_mismatch", lambda: g(a, s.dev((4, 5)), MM), ValidationError),
        ("config_type", lambda: g(a, b, ((1,), (0,))), ValidationError),
        ("tf32_float64", lambda: g(s.dev((4, 3), f64), s.dev((3, 5), f64),
                                   DotGeneralConfig((1,), (0,), precision="tf32")),
         ValidationError),
        ("into_out_shape", lambda: into(a, b, MM, s.dev((5, 4))), ValidationError),
        ("into_out_dtype", lambda: into(a, b, MM, s.dev((4, 5), f64)), ValidationError),
        ("into_out_host", lambda: into(a, b, MM, Tensor.from_numpy(np.zeros((4, 5), "f4"))),
         RuntimeStateError),
        ("into_out_overlaps_lhs", lambda: into(big[:4, :3], b, MM, big[:4, 3:8]),
         ValidationError),
        ("into_out_self_overlap", lambda: into(a, b, MM, big.view((4, 5), (1, 1))),
         ValidationError),
        ("accum_complex_alpha", lambda: accum(a, b, MM, DotGeneralAccumulation(1j), o),
         ValidationError),
        ("accum_not_accumulation", lambda: accum(a, b, MM, (1.0, 0.0), o), ValidationError),
        ("accum_int_overflow", lambda: accum(s.dev((4, 3), DType.INT8), s.dev((3, 5), DType.INT8),
                                             MM, DotGeneralAccumulation(1000),
                                             s.dev((4, 5), DType.INT8)), ValidationError),
        ("cached_slot_negative", lambda: cached(-1, a, b, MM, acc, o), ValidationError),
        ("cached_slot_bool", lambda: cached(True, a, b, MM, acc, o), ValidationError),
        ("cached_slot_str", lambda: cached("0", a, b, MM, acc, o), ValidationError),
        ("cached_bad_out", lambda: cached(0, a, b, MM, acc, s.dev((4, 4))), ValidationError),
        ("cached_none_bad_out", lambda: cached(None, a, b, MM, acc, s.dev((4, 4))),
         ValidationError),
        ("grouped_not_config", lambda: s.grouped_gemm([GemmJob(a, b, o)]), ValidationError),
    ]


ERROR_IDS = [c[0] for c in _errors(Fake())]


@pytest.mark.parametrize("name", ERROR_IDS)
def test_error_paths_do_nothing(s, name):
    case = {c[0]: c for c in _errors(s)}[name]
    with pytest.raises(case[2]) as info:
        case[1]()
    assert info.value.op.startswith(("dot_general", "grouped_gemm"))
    assert s.calls == []
    assert not s._state.prepared.get(("dot", "slots"))


def _grouped_errors(s: Fake):
    f32 = DType.FLOAT32
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    big = s.dev((8, 10))
    job = GemmJob(a, b, o)
    tf32 = DotGeneralConfig((1,), (0,), precision="tf32")
    return [
        ("dtype_mismatch", [job, GemmJob(s.dev((4, 3), DType.FLOAT64), s.dev((3, 5), DType.FLOAT64),
                                         s.dev((4, 5), DType.FLOAT64))], "jobs\\[1\\]"),
        ("job_shape", [job, GemmJob(a, s.dev((4, 5)), o)], "jobs\\[1\\]"),
        ("outputs_overlap", [GemmJob(a, b, big[:4, :5]), GemmJob(a, b, big[2:6, 3:8])],
         "jobs\\[1\\].out overlaps jobs\\[0\\].out"),
        ("out_overlaps_other_input", [GemmJob(big[:4, :3], b, o), GemmJob(a, b, big[:4, 2:7])],
         "overlaps"),
        ("precision_disagrees", [job, GemmJob(a, b, s.dev((4, 5), f32), tf32)], "precision"),
        ("host_out", [GemmJob(a, b, Tensor.from_numpy(np.zeros((4, 5), "f4")))], "jobs\\[0\\]"),
        ("bool", [GemmJob(s.dev((4, 3), DType.BOOL), s.dev((3, 5), DType.BOOL),
                          s.dev((4, 5), DType.BOOL))], "jobs\\[0\\]"),
    ]


@pytest.mark.parametrize("name", [c[0] for c in _grouped_errors(Fake())])
def test_grouped_error_paths_do_nothing(s, name):
    case = {c[0]: c for c in _grouped_errors(s)}[name]
    with pytest.raises((ValidationError, UnsupportedDTypeError, RuntimeStateError),
                       match=case[2]) as info:
        s.grouped_gemm(GroupedGemmConfig(case[1]))
    assert info.value.op == "grouped_gemm"
    assert s.calls == []


# --- success paths (recorded) ---------------------------------------------------------------------
def test_dot_general_allocates_once_after_checks(s):
    out = s.dot_general(s.dev((2, 4, 3)), s.dev((2, 3, 5)), BMM)
    assert out.shape == (2, 4, 5) and out.dtype is DType.FLOAT32
    kinds = [c[0] for c in s.calls]
    assert kinds == ["handle", "alloc", "run"]
    assert s.calls[2][2:5] == (1.0, 0.0, "default")


@pytest.mark.parametrize("dtype,unit", [(DType.INT32, (1, 0)), (DType.COMPLEX64, (1 + 0j, 0j))],
                         ids=["int32", "complex64"])
def test_dot_general_unit_scalars(s, dtype, unit):
    s.dot_general(s.dev((4, 3), dtype), s.dev((3, 5), dtype), MM)
    run = s.calls[-1]
    assert run[2:4] == unit and [type(x) for x in run[2:4]] == [type(x) for x in unit]
    assert ("handle",) not in s.calls if dtype.is_integer else ("handle",) in s.calls


def test_read_into_overwrites(s):
    s.dot_general_read_into(s.dev((4, 3)), s.dev((3, 5)), MM, s.dev((4, 5)))
    assert [c[0] for c in s.calls] == ["handle", "run"] and s.calls[-1][2:4] == (1.0, 0.0)


def test_accum_passes_scalars_and_conj_only_for_complex(s):
    acc = DotGeneralAccumulation(2, -1, lhs_conj=True, rhs_conj=True)
    s.dot_general_read_into_accum(s.dev((4, 3)), s.dev((3, 5)), MM, acc, s.dev((4, 5)))
    plan = s.calls[-1][1]
    assert s.calls[-1][2:4] == (2.0, -1.0) and OP_N in (plan.transa, plan.transb)
    c64 = DType.COMPLEX64
    s.dot_general_read_into_accum(s.dev((4, 3), c64), s.dev((3, 5), c64), MM, acc,
                                  s.dev((4, 5), c64))
    plan = s.calls[-1][1]
    assert (plan.transa, plan.transb) == (2, 2)


# --- cached slots ---------------------------------------------------------------------------------
def test_cached_slot_reuse_and_invalidation(s):
    a, b, o = s.dev((4, 3)), s.dev((3, 5)), s.dev((4, 5))
    acc = DotGeneralAccumulation(1.0, 1.0)
    run = s.dot_general_read_into_accum_cached
    run(3, a, b, MM, acc, o)
    first = s.calls[-1]
    assert first[0] == "run" and first[5] == [None, None, None]
    n_handle = s.calls.count(("handle",))
    run(3, s.dev((4, 3)), s.dev((3, 5)), DotGeneralConfig((1,), (0,)),
        DotGeneralAccumulation(0.5, 2), s.dev((4, 5)))
    again = s.calls[-1]
    assert again[0] == "call" and again[1] is first[1] and again[2:4] == (0.5, 2.0)
    assert [type(x) for x in again[2:4]] == [float, float]
    assert s.calls.count(("handle",)) == n_handle  # warm slot: no re-planning
    run(3, s.dev((4, 2)), s.dev((2, 5)), MM, acc, o)  # shape change
    assert s.calls[-1][1] is not first[1] and s.calls[-1][1].k == 2
    run(3, a, b, MM, acc, s.dev((5, 4)).T)  # stride change
    assert not s.calls[-1][1].swap
    replanned = s.calls[-1][1]
    run(3, a, b, DotGeneralConfig((1,), (0,), precision="tf32"), acc, s.dev((5, 4)).T)
    assert s.calls[-1][1] is not replanned and s.calls[-1][4] == "tf32"
    run(4, a, b, MM, acc, o)
    assert set(s._state.prepared[("dot", "slots")]) == {3, 4}
    s.dot_general_cache_clear(3)
    assert set(s._state.prepared[("dot", "slots")]) == {4}
    s.dot_general_cache_clear()
    assert s._state.prepared[("dot", "slots")] == {}


def test_cached_staged_plan_reuses_temporaries(s):
    lhs, rhs = s.dev((3, 5, 4)), s.dev((3, 4, 6))  # lhs contracting axes do not merge
    cfg = DotGeneralConfig((0, 2), (0, 1))
    out = s.dev((5, 6))
    for _ in range(2):
        s.dot_general_read_into_accum_cached(0, lhs, rhs, cfg, DotGeneralAccumulation(), out)
    first, second = [c for c in s.calls if c[0] in ("run", "call")]
    assert first[0] == second[0] == "run" and second[5] is first[5] and first[1] is second[1]


def test_cached_conj_change_replans(s):
    c64 = DType.COMPLEX64
    a, b, o = s.dev((4, 3), c64), s.dev((3, 5), c64), s.dev((4, 5), c64)
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(), o)
    p0 = s.calls[-1][1]
    s.dot_general_read_into_accum_cached(0, a, b, MM, DotGeneralAccumulation(lhs_conj=True), o)
    assert s.calls[-1][1] is not p0 and 2 in (s.calls[-1][1].transa, s.calls[-1][1].transb)


def test_cached_warm_slot_still_checks_call_values(s):
    big = s.dev((8, 8))
    a, b = big[:4, :3], s.dev((3, 5))
    out = s.dev((4, 8))[:, :5]
    acc = DotGeneralAccumulation(1.0, 0.0)
    s.dot_general_read_into_accum_cached(1, a, b, MM, acc, out)
    n = len(s.calls)
    with pytest.raises(ValidationError, match="overlaps"):  # same shapes/strides as out
        s.dot_general_read_into_accum_cached(1, a, b, MM, acc, big[4:, :5].view(
            (4, 5), (8, 1), 0))
    with pytest.raises(ValidationError, match="real"):
        s.dot_general_read_into_accum_cached(1, a, b, MM, DotGeneralAccumulation(1j), out)
    with pytest.raises(RuntimeStateError):
        s.dot_general_read_into_accum_cached(1, a, Tensor.from_numpy(np.zeros((3, 5), "f4")),
                                             MM, acc, out)
    assert len(s.calls) == n


def test_cached_none_does_not_store(s):
    s.dot_general_read_into_accum_cached(None, s.dev((4, 3)), s.dev((3, 5)), MM,
                                         DotGeneralAccumulation(), s.dev((4, 5)))
    assert s.calls[-1][0] == "run" and s.calls[-1][5] is None
    assert not s._state.prepared.get(("dot", "slots"))


# --- argument assembly ----------------------------------------------------------------------------
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


def test_grouped_empty_does_nothing(s):
    s.grouped_gemm(GroupedGemmConfig(()))
    assert s.calls == []


class FakeLib:
    """Stands in for nvmath.bindings.cublas: records every call."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def fn(*args):
            self.calls.append((name, args))
            return 0x5151 if name == "create" else None
        return fn


@pytest.fixture
def fake_lib():
    saved = dict(_cublas._state)
    lib = FakeLib()
    _cublas._state.clear()
    _cublas._state.update(lib=lib, version=(13, 1, 0))
    yield lib
    _cublas._state.clear()
    _cublas._state.update(saved)


@pytest.mark.parametrize("shapes,cfg", [(((4, 3), (3, 5), (4, 5)), MM),
                                        (((2, 4, 3), (2, 3, 5), (2, 4, 5)), BMM)],
                         ids=["gemm", "strided_batched"])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.COMPLEX64], ids=lambda d: d.value)
def test_prepared_call_matches_uncached_call(fake_lib, shapes, cfg, dtype):
    s = Fake(stub_run=False)
    a, b, o = (s.dev(sh, dtype) for sh in shapes)
    acc = DotGeneralAccumulation(2 if dtype.is_integer else 1.5, 0.25)
    records = []
    for _ in range(2):
        s.dot_general_read_into_accum(a, b, cfg, acc, o)
        records.append((fake_lib.calls[-1], ctypes.string_at(s._dot_scalars()[1], 32)))
        s.dot_general_read_into_accum_cached(0, a, b, cfg, acc, o)
        records.append((fake_lib.calls[-1], ctypes.string_at(s._dot_scalars()[1], 32)))
    uncached, first_cached, _, warm = records
    assert warm == uncached == first_cached
    assert s._state.prepared[("dot", "slots")][0].call is not None


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
