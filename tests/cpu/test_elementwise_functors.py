"""The elementwise functors of ptx/include/tenferro/ops.cuh on every dtype, and the cast
projection between every pair of dtypes, compiled by the host C++ compiler against the
emulation of the CUDA built-ins of tests/reference/cuda_emu.py (float16 and bfloat16
through its correctly rounded stand-ins for the PTX conversions) and run on every pair
of special values (integers: 0, 1, the extremes, the top bit, -1; floats: signed zeros,
infinities, NaN, the extremes, subnormals) and on random operands, against the numpy
reference of tests/gpu (test_elementwise_ref.py, stablehlo_ref.py, test_cast_ref.py)
with its tolerances (the host's libm stands in for CUDA's: exact ops must match bit for
bit, transcendental ones within the tolerance). This checks the device definitions of
wrapping, division, powers, shifts, bit counts, rounding, the StableHLO float ops,
complex arithmetic and every conversion without a GPU; the GPU tier runs the same
references through the kernels. Skipped when no host C++ compiler is present."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from reference import cuda_emu
from test_cast import cast_inputs
from test_cast_ref import cast_ref
from test_elementwise_ref import REF, inputs_for, mismatch, tolerance
from test_elementwise_values import special_operands

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.shapes.elementwise import CAST_KINDS, KINDS

INTS = [d for d in ALL_DTYPES if d.is_integer]
OPS = [(k, d) for k in KINDS for d in ALL_DTYPES if KINDS[k].instantiable(d)]
CASTS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]


def _op_wrapper(i: int, key: str, dtype: DType) -> str:
    kind = KINDS[key]
    f, t = kind.functor, dtype.ctype
    roles = "abc"[:kind.arity]
    params = ", ".join(f"const void* {r}" for r in roles)
    args = ", ".join(f"((const typename Ty::{r}*){r})[i]" for r in roles)
    return (f'extern "C" void op{i}({params}, void* o, long n, int* err) {{ '
            f"typedef {f}::types<{t}> Ty; Err e{{err, 1}}; for (long i = 0; i < n; ++i) "
            f"((typename Ty::out*)o)[i] = {f}::apply<{t}>({args}, e); }}")


def _cast_wrapper(i: int, src: DType, dst: DType) -> str:
    f = CAST_KINDS[dst].functor
    return (f'extern "C" void cast{i}(const void* a, void* o, long n) {{ Err e{{nullptr, 0}}; '
            f"for (long i = 0; i < n; ++i) (({dst.ctype}*)o)[i] = "
            f"{f}::apply<{src.ctype}>(((const {src.ctype}*)a)[i], e); }}")


def _build_args() -> dict:
    lines = ['#include "shim.h"', '#include "tenferro/ops.cuh"', "using namespace tf;"]
    lines += [_op_wrapper(i, k, dt) for i, (k, dt) in enumerate(OPS)]
    lines += [_cast_wrapper(i, a, b) for i, (a, b) in enumerate(CASTS)]
    return dict(name="ew_functors", wrappers="\n".join(lines), optimize="-O0")


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def lib():
    return cuda_emu.build(**_build_args())


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


def _run(lib, i: int, arrays, want: np.ndarray) -> tuple[np.ndarray, int]:
    arrays = [np.ascontiguousarray(a) for a in arrays]
    out = np.empty(want.shape, want.dtype)
    err = ctypes.c_int(0)
    getattr(lib, f"op{i}")(*[_ptr(a) for a in arrays], _ptr(out), ctypes.c_long(out.size),
                           ctypes.byref(err))
    return out, err.value


@pytest.mark.parametrize("i", range(len(OPS)), ids=[f"{k}-{d.value}" for k, d in OPS])
def test_functor_matches_numpy(lib, i):
    key, dtype = OPS[i]
    tol = tolerance(key, dtype.numpy)
    for arrays in (special_operands(key, dtype, every_triple=True),
                   inputs_for(np.random.default_rng(3), key, dtype.numpy, (2000,))):
        with np.errstate(all="ignore"):
            want, error = REF[key](*arrays)
        got, raised = _run(lib, i, arrays, want)
        assert mismatch(got, want, tol) is None, mismatch(got, want, tol)
        assert bool(raised) == error  # negative exponents of signed dtypes among specials


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.value)
def test_division_by_zero_raises_and_gives_zero(lib, dtype):
    for key in ("div", "rem"):
        i = OPS.index((key, dtype))
        a, b = np.array([5, 7], dtype.numpy), np.array([0, 2], dtype.numpy)
        got, raised = _run(lib, i, [a, b], REF[key](a, b)[0])
        assert raised == 1 and got[0] == 0 and got[1] == REF[key](a, b)[0][1]


@pytest.mark.parametrize("i", range(len(CASTS)), ids=[f"{a.value}-{b.value}" for a, b in CASTS])
def test_cast_matches_numpy(lib, i):
    src, dst = CASTS[i]
    a = np.ascontiguousarray(cast_inputs(src))
    out = np.empty(a.shape, dst.numpy)
    getattr(lib, f"cast{i}")(_ptr(a), _ptr(out), ctypes.c_long(a.size))
    assert mismatch(out, cast_ref(a, dst.numpy), None) is None
