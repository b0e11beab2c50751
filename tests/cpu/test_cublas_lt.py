"""The bound cuBLASLt call (``_cublas_lt.LtGemm``) over a recording fake of nvmath's
``cublasLt`` bindings: descriptors, the alignment the algorithm is chosen for, the
argument order of ``cublasLtMatmul`` and every fallback to cublasGemmEx."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import pytest

from tenferro_cuda import _cublas, _cublas_lt
from tenferro_cuda.errors import BackendSourceError


class FakeLt:
    MatmulDescAttribute = SimpleNamespace(TRANSA=3, TRANSB=4)
    MatrixLayoutAttribute = SimpleNamespace(BATCH_COUNT=5, STRIDED_BATCH_OFFSET=6)
    MatmulPreferenceAttribute = SimpleNamespace(
        MAX_WORKSPACE_BYTES=1, MIN_ALIGNMENT_A_BYTES=5, MIN_ALIGNMENT_B_BYTES=6,
        MIN_ALIGNMENT_C_BYTES=7, MIN_ALIGNMENT_D_BYTES=8)

    def __init__(self, algorithms: int = 1, fail_matmul: bool = False) -> None:
        self.algorithms, self.fail_matmul = algorithms, fail_matmul
        self.attrs: dict = {}
        self.layouts: list = []
        self.calls: list = []
        self.destroyed: list = []
        self.next = 100

        class Result:
            def __init__(inner) -> None:
                inner.buf = ctypes.create_string_buffer(96)
                inner.ptr = ctypes.addressof(inner.buf)
        self.MatmulHeuristicResult = Result

    def _new(self) -> int:
        self.next += 1
        return self.next

    def create(self) -> int:
        return self._new()

    def matmul_desc_create(self, compute, scale) -> int:
        self.desc = (compute, scale)
        return self._new()

    def _read(self, obj, attr, addr, size) -> None:
        fmt = {4: "<i", 8: "<q"}[size]
        self.attrs[(obj, attr)] = struct.unpack(fmt, ctypes.string_at(addr, size))[0]

    matmul_desc_set_attribute = _read
    matrix_layout_set_attribute = _read
    matmul_preference_set_attribute = _read

    def matrix_layout_create(self, dtype, rows, cols, ld) -> int:
        self.layouts.append((dtype, rows, cols, ld))
        return self._new()

    def matmul_preference_create(self) -> int:
        self.pref = self._new()
        return self.pref

    def matmul_preference_destroy(self, pref) -> None:
        self.destroyed.append(pref)

    def matmul_algo_get_heuristic(self, h, desc, a, b, c, d, pref, n, results, count):
        ctypes.c_int.from_address(count).value = self.algorithms

    def matmul(self, *args) -> None:
        if self.fail_matmul:
            raise RuntimeError("status 7")
        self.calls.append(args)


class Fallback:
    is_complex, swap = False, False
    layout = struct.Struct("<f12xf")  # alpha at 0, beta at 16, as exec/blas.py packs them

    pack = _cublas.PreparedGemm.pack  # the real scalar block, shared with LtGemm

    def __init__(self) -> None:
        self.runs: list = []
        self.buf = ctypes.create_string_buffer(48)
        self.alpha = self.beta = None

    def run(self, *args) -> None:
        self.runs.append(args)


def _plan(batch: int = 1, **kw):
    base = dict(transa=_cublas.OP_N, transb=_cublas.OP_T, m=8, n=6, k=4, lda=8, ldb=6,
                ldc=8, batch=batch, swap=False, stride_a=32, stride_b=24, stride_c=48)
    base.update(kw)
    return SimpleNamespace(**base)


class FakeHandle:  # a cuBLAS Handle: its workspace buffer and stream
    def __init__(self) -> None:
        self.owner = SimpleNamespace(ptr=0x7000, nbytes=1 << 20)
        self.workspace = self.owner.ptr
        self.stream = 55


def _handle():
    return FakeHandle()


def _bound(lt, plan=None, fallback=None):
    fb = fallback or Fallback()
    call = _cublas_lt.LtGemm(lt, _handle(), plan or _plan(), _cublas.R_32F,
                             _cublas.COMPUTE_32F, fb)
    return call, fb


def test_first_call_chooses_for_its_alignment_and_fills_the_addresses():
    lt = FakeLt()
    call, fb = _bound(lt)
    call.run(0x10000, 0x20000, 0x30040, 2.0, 0.5, "op")
    assert not fb.runs and len(lt.calls) == 1
    args = lt.calls[0]
    assert (args[3], args[5], args[8], args[10]) == (0x10000, 0x20000, 0x30040, 0x30040)
    assert args[13:] == (0x7000, 1 << 20, 55)
    assert args[7] == args[2] + 16
    assert struct.unpack("<f", ctypes.string_at(args[2], 4))[0] == 2.0
    assert struct.unpack("<f", ctypes.string_at(args[7], 4))[0] == 0.5
    pref = lt.pref
    assert lt.attrs[(pref, 1)] == 1 << 20
    assert [lt.attrs[(pref, a)] for a in (5, 6, 7, 8)] == [64] * 4  # 0x30040: 64-aligned
    assert lt.layouts == [(_cublas.R_32F, 8, 4, 8), (_cublas.R_32F, 6, 4, 6),
                          (_cublas.R_32F, 8, 6, 8)]
    assert lt.desc == (_cublas.COMPUTE_32F, _cublas.R_32F)
    assert pref in lt.destroyed


def test_less_aligned_addresses_take_the_fallback_and_aligned_ones_come_back():
    lt = FakeLt()
    call, fb = _bound(lt)
    call.run(0x10000, 0x20000, 0x30000, 1.0, 0.0, "op")
    call.run(0x10004, 0x20000, 0x30000, 1.0, 0.0, "op")  # 4-aligned: not what was chosen
    assert len(lt.calls) == 1 and fb.runs == [(0x10004, 0x20000, 0x30000, 1.0, 0.0, "op")]
    call.run(0x10100, 0x20000, 0x30000, 3.0, 0.0, "op")
    assert len(lt.calls) == 2 and lt.calls[1][3] == 0x10100
    assert struct.unpack("<f", ctypes.string_at(lt.calls[1][2], 4))[0] == 3.0


def test_no_algorithm_means_gemm_ex_from_then_on():
    lt = FakeLt(algorithms=0)
    call, fb = _bound(lt)
    for _ in range(3):
        call.run(0x10000, 0x20000, 0x30000, 1.0, 0.0, "op")
    assert not lt.calls and len(fb.runs) == 3


def test_batches_set_count_and_strides_and_swap_exchanges_the_operands():
    lt = FakeLt()
    fb = Fallback()
    fb.swap = True
    call, _ = _bound(lt, _plan(batch=7), fb)
    call.run(0x10000, 0x20000, 0x30000, 1.0, 0.0, "op")
    args = lt.calls[0]
    assert (args[3], args[5]) == (0x20000, 0x10000)
    counts = sorted(v for (obj, attr), v in lt.attrs.items() if attr == 5 and obj != lt.pref)
    strides = sorted(v for (obj, attr), v in lt.attrs.items() if attr == 6 and obj != lt.pref)
    assert counts == [7, 7, 7] and strides == [24, 32, 48]


def test_a_failed_matmul_raises_the_typed_error():
    lt = FakeLt(fail_matmul=True)
    call, _ = _bound(lt)
    with pytest.raises(BackendSourceError, match="cublasLtMatmul"):
        call.run(0x10000, 0x20000, 0x30000, 1.0, 0.0, "op")


def test_bind_without_the_bindings_keeps_gemm_ex(monkeypatch):
    monkeypatch.setattr(_cublas, "load_lt", lambda: None)
    assert _cublas_lt.bind(_handle(), _plan(), _cublas.R_32F, _cublas.COMPUTE_32F,
                           Fallback()) is None


def test_load_lt_only_beside_nvmath_cublas(monkeypatch):
    """A stand-in cuBLAS module (the emulated tests') never gets the real cuBLASLt."""
    monkeypatch.setattr(_cublas, "_state", {"lib": SimpleNamespace(), "version": (13, 1, 0)})
    assert _cublas.load_lt() is None
    assert _cublas._state["lt"] is None
