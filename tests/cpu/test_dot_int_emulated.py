"""ptx/dot_int.cu executed on the CPU: the real kernel source compiled by the host C++
compiler against the emulation of the CUDA built-ins of ``tests/reference/cuda_emu.py``
(each thread of a 256-thread block a fiber, blocks one after another on a 3-d grid).
Checked against numpy with wrapping arithmetic for every integer dtype: tile edges,
signed/zero/negative strides, beta = 0 not reading out, alpha/beta wrapping, and grids
smaller than the tile count (the grid-stride loops in x, y and z).
Skipped when no host C++ compiler is present.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from reference import cuda_emu

TYPES = {"i8": ("signed char", np.int8, "u32"), "u8": ("unsigned char", np.uint8, "u32"),
         "i16": ("short", np.int16, "u32"), "u16": ("unsigned short", np.uint16, "u32"),
         "i32": ("int", np.int32, "u32"), "u32": ("unsigned int", np.uint32, "u32"),
         "i64": ("long long", np.int64, "u64"), "u64": ("unsigned long long", np.uint64, "u64")}


def _wrappers() -> str:
    lines = ['#include "shim.h"', '#include "dot_int.cu"', "using namespace tf;"]
    for tag, (ctype, _, acc) in TYPES.items():
        lines.append(
            f'extern "C" void dot_{tag}(void* o, const void* a, const void* b, const long long* p, '
            f"{acc} alpha, {acc} beta, int bz, unsigned gx, unsigned gy, unsigned gz) {{ "
            f"emu_launch(gx, gy, gz, 256, 1, [&] {{ dot_int<{ctype}>(({ctype}*)o, "
            f"(const {ctype}*)a, (const {ctype}*)b, p[0], p[1], p[2], p[3], p[4], p[5], "
            "p[6], p[7], p[8], p[9], p[10], p[11], p[12], alpha, beta, bz); }); }")
    return "\n".join(lines)


def _build_args() -> dict:
    return dict(name="dot_int_emu", wrappers=_wrappers(), sources=("dot_int.cu",))


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def lib():
    return cuda_emu.build(**_build_args())


def _strided(rng, npd, shape, layout):
    """(flat buffer, element strides, element offset of index 0) for ``layout``:
    c compact, t last two axes swapped in memory, n last axis reversed, z batch stride 0,
    p padded rows."""
    info = np.iinfo(npd)
    b, r, c = shape
    if layout == "t":
        flat = rng.integers(info.min, info.max, b * r * c, dtype=npd, endpoint=True)
        return flat, (r * c, 1, r), 0
    if layout == "n":
        flat = rng.integers(info.min, info.max, b * r * c, dtype=npd, endpoint=True)
        return flat, (r * c, c, -1), c - 1
    if layout == "z":
        flat = rng.integers(info.min, info.max, r * c, dtype=npd, endpoint=True)
        return flat, (0, c, 1), 0
    if layout == "p":
        flat = rng.integers(info.min, info.max, b * r * (c + 3) + 5, dtype=npd, endpoint=True)
        return flat, (r * (c + 3), c + 3, 1), 5
    flat = rng.integers(info.min, info.max, b * r * c, dtype=npd, endpoint=True)
    return flat, (r * c, c, 1), 0


def _gather(flat, shape, strides, off):
    idx = off + sum(np.arange(n).reshape([-1 if i == a else 1 for i in range(3)]) * st
                    for a, (n, st) in enumerate(zip(shape, strides)))
    return flat[idx], idx


CASES = [  # batch, m, n, k, lhs layout, rhs layout, out layout, grid divisor
    (1, 1, 1, 1, "c", "c", "c", 1),
    (2, 70, 65, 33, "c", "c", "c", 1),
    (3, 64, 64, 16, "t", "t", "p", 1),
    (2, 130, 20, 17, "n", "z", "t", 1),
    (2, 65, 129, 5, "p", "n", "n", 1),
    (5, 70, 70, 40, "c", "t", "c", 4),  # grid smaller than the tiles: grid-stride loops
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}{c[5]}{c[6]}"
                                              f"-g{c[7]}" for c in CASES])
@pytest.mark.parametrize("tag", list(TYPES), ids=list(TYPES))
@pytest.mark.parametrize("beta_zero", [False, True], ids=["beta", "beta0"])
def test_kernel_matches_wrapping_reference(lib, tag, case, beta_zero):
    batch, m, n, k, ll, rl, ol, div = case
    ctype, npd, acc = TYPES[tag]
    rng = np.random.default_rng(m * 7 + n + k)
    lf, ls, lo = _strided(rng, npd, (batch, m, k), ll)
    rf, rs, ro = _strided(rng, npd, (batch, k, n), rl)
    of, os_, oo = _strided(rng, npd, (batch, m, n), "c" if ol == "z" else ol)
    lhs, _ = _gather(lf, (batch, m, k), ls, lo)
    rhs, _ = _gather(rf, (batch, k, n), rs, ro)
    old, oidx = _gather(of, (batch, m, n), os_, oo)
    before = of.copy()
    alpha, beta = (-3, 0 if beta_zero else 7) if tag[0] == "i" else (3, 0 if beta_zero else 250)
    mask = (1 << (64 if acc == "u64" else 32)) - 1
    params = (ctypes.c_longlong * 13)(batch, m, n, k, *ls, *rs, *os_)
    item = np.dtype(npd).itemsize
    grid = (max(1, -(-n // 64) // div), max(1, -(-m // 64) // div), max(1, batch // div))
    ctype_acc = ctypes.c_uint64 if acc == "u64" else ctypes.c_uint32
    fn = getattr(lib, f"dot_{tag}")
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_void_p, ctype_acc, ctype_acc, ctypes.c_int,
                                           ctypes.c_uint, ctypes.c_uint, ctypes.c_uint]
    fn(of.ctypes.data + oo * item, lf.ctypes.data + lo * item, rf.ctypes.data + ro * item,
       params, alpha & mask, beta & mask, int(beta_zero), *grid)
    want = alpha * np.matmul(lhs.astype(np.int64), rhs.astype(np.int64))
    if not beta_zero:
        want = want + beta * old.astype(np.int64)
    assert np.array_equal(of[oidx], want.astype(npd))
    outside = np.ones(of.size, bool)
    outside[oidx.reshape(-1)] = False
    assert np.array_equal(of[outside], before[outside])
