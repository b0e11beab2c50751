"""The dot_general layout planner (ops/dot/plan.py), on the CPU.

Each plan is *executed* by an emulator of what the device does with it: staging copies
(``view.permute(perm)`` compacted), then cuBLAS's column-major ``gemm``/``gemm strided
batched`` semantics (op N/T/C, leading dimensions, batch strides; argument checks as
cuBLAS makes them; every address bounds-checked) or the integer kernel's strided loops,
then the copy back of a staged output. The result must equal the numpy reference, and
every byte outside the output view must be untouched. A table of named layout classes
pins the expected decisions (which operand is copied, the transpose flags); a seeded
fuzzer covers random ranks, axis roles, permutations, slices, reversed and broadcast
axes.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from dot_reference import accum_ref, free_axes

from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.ops.dot.plan import OP_C, OP_N, OP_T, plan_dot
from tenferro_cuda.tensor import compact_strides


class V:
    """A strided view of a flat numpy buffer (element strides and offset)."""

    def __init__(self, flat, shape, strides, offset=0):
        self.flat, self.shape, self.strides = flat, tuple(shape), tuple(strides)
        self.offset = offset

    def index(self):
        idx = np.full(self.shape, self.offset, dtype=np.int64)
        for ax, (n, st) in enumerate(zip(self.shape, self.strides)):
            sh = [1] * len(self.shape)
            sh[ax] = n
            idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(sh)
        return idx

    def values(self):
        return self.flat[self.index()]

    def permute(self, perm):
        return V(self.flat, [self.shape[p] for p in perm], [self.strides[p] for p in perm],
                 self.offset)


def _compact(v: V) -> V:
    data = np.array(v.values()).reshape(-1)
    return V(data, v.shape, compact_strides(v.shape), 0)


def _read(flat, off, rows, cols, op, ld):
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    idx = off + (r + c * ld if op == OP_N else c + r * ld)
    assert idx.size == 0 or (idx.min() >= 0 and idx.max() < flat.size), "out-of-bounds read"
    vals = flat[idx]
    return np.conj(vals) if op == OP_C else vals


def _emulate_blas(plan, a: V, b: V, c: V, alpha, beta):
    first, second = (b, a) if plan.swap else (a, b)
    m, n, k = plan.m, plan.n, plan.k
    assert plan.lda >= max(1, m if plan.transa == OP_N else k), "cuBLAS rejects lda"
    assert plan.ldb >= max(1, k if plan.transb == OP_N else n), "cuBLAS rejects ldb"
    assert plan.ldc >= max(1, m), "cuBLAS rejects ldc"
    assert min(plan.stride_a, plan.stride_b, plan.stride_c) >= 0
    for i in range(plan.batch):
        pa = first.offset + i * plan.stride_a
        pb = second.offset + i * plan.stride_b
        pc = c.offset + i * plan.stride_c
        prod = _read(first.flat, pa, m, k, plan.transa, plan.lda) @ _read(
            second.flat, pb, k, n, plan.transb, plan.ldb)
        res = alpha * prod
        if beta != 0:
            res = res + beta * _read(c.flat, pc, m, n, OP_N, plan.ldc)
        r = np.arange(m)[:, None]
        cc = np.arange(n)[None, :]
        c.flat[pc + r + cc * plan.ldc] = res


def _emulate_int(plan, a: V, b: V, c: V, alpha, beta):
    lb, lm, lk, rb, rk, rn, ob, om, on = plan.int_strides
    im = np.arange(plan.m)[:, None]
    jn = np.arange(plan.n)[None, :]
    kr = np.arange(plan.k)[None, :]
    kc = np.arange(plan.k)[:, None]
    for z in range(plan.batch):
        left = a.flat[a.offset + z * lb + im * lm + kr * lk]
        right = b.flat[b.offset + z * rb + kc * rk + jn * rn]
        idx = c.offset + z * ob + im * om + jn * on
        res = alpha * (left @ right)
        if beta != 0:
            res = res + beta * c.flat[idx]
        c.flat[idx] = res


def emulate(plan, lhs: V, rhs: V, out: V, alpha, beta, blas: bool) -> None:
    """Apply ``plan`` to flat buffers as the device would."""
    if plan.empty:
        return
    if plan.kzero:
        idx = out.index()
        out.flat[idx] = 0 if beta == 0 else beta * out.flat[idx]
        return
    a = lhs if plan.lhs_perm is None else _compact(lhs.permute(plan.lhs_perm))
    b = rhs if plan.rhs_perm is None else _compact(rhs.permute(plan.rhs_perm))
    target, back = out, None
    if plan.out_perm is not None:
        back = out.permute(plan.out_perm)
        target = _compact(back) if beta != 0 else V(
            np.full(math.prod(back.shape), np.nan, out.flat.dtype) if out.flat.dtype.kind in
            "fc" else np.zeros(math.prod(back.shape), out.flat.dtype), back.shape,
            compact_strides(back.shape))
    (_emulate_blas if blas else _emulate_int)(plan, a, b, target, alpha, beta)
    if back is not None:
        back.flat[back.index()] = target.values()


# --- building views ------------------------------------------------------------------------
def make_view(rng, shape, layout: str, dtype, pad: float = np.nan) -> V:
    """A view of ``shape`` over a fresh random buffer; ``layout`` is one of
    c (compact), T (axes stored reversed), p<digits> (stored in that axis order),
    s (sliced from a larger buffer: offset, padded rows, inner step 2 when 'S'),
    n<axis> (axis reversed), b<axis> (axis broadcast, stride 0)."""
    shape = tuple(shape)
    nd = len(shape)
    order = list(range(nd))
    if layout == "T":
        order = order[::-1]
    elif layout.startswith("p"):
        order = [int(ch) for ch in layout[1:]]
    store = [shape[a] for a in order]
    step = 2 if layout == "S" else 1
    if layout in ("s", "S"):
        store = [s + 1 for s in store]
    st_store = [s * step for s in compact_strides(store)]
    size = max(math.prod(store), 1) * step + 3
    kind = np.dtype(dtype).kind
    if kind in "iu":
        flat = rng.integers(-100, 100, size).astype(dtype)
    else:
        flat = rng.standard_normal(size).astype(dtype)
        if kind == "c":
            flat = flat + 1j * rng.standard_normal(size)
    strides = [0] * nd
    for pos, a in enumerate(order):
        strides[a] = st_store[pos]
    offset = 2 if layout in ("s", "S") else 0
    if layout.startswith("n") and nd:
        ax = int(layout[1:])
        offset += (shape[ax] - 1) * strides[ax] if shape[ax] else 0
        strides[ax] = -strides[ax]
    if layout.startswith("b") and nd:
        strides[int(layout[1:])] = 0
    return V(flat.astype(dtype), shape, strides, offset)


def out_shape_of(lshape, rshape, cfg):
    lf = free_axes(len(lshape), cfg.lhs_batch_dims, cfg.lhs_contracting_dims)
    rf = free_axes(len(rshape), cfg.rhs_batch_dims, cfg.rhs_contracting_dims)
    return (tuple(lshape[a] for a in cfg.lhs_batch_dims) + tuple(lshape[a] for a in lf)
            + tuple(rshape[a] for a in rf))


def check_case(rng, lshape, llay, rshape, rlay, cfg, olay, dtype, blas, lconj=False,
               rconj=False, alpha=1.5, beta=-0.5):
    lhs = make_view(rng, lshape, llay, dtype)
    rhs = make_view(rng, rshape, rlay, dtype)
    oshape = out_shape_of(lshape, rshape, cfg)
    out = make_view(rng, oshape, olay, dtype)
    if np.dtype(dtype).kind in "iu":
        alpha, beta = 3, -2
    plan = plan_dot((lshape, rshape, oshape), (lhs.strides, rhs.strides, out.strides), cfg,
                    lconj, rconj, blas)
    before = out.flat.copy()
    want_vals = accum_ref(lhs.values(), rhs.values(), cfg, alpha, beta, out.values(),
                          lconj, rconj)
    emulate(plan, lhs, rhs, out, alpha, beta, blas)
    expect = before.astype(np.result_type(before, want_vals))
    expect[out.index()] = want_vals
    got = out.flat
    mask = np.ones(got.size, bool)
    mask[out.index().reshape(-1)] = False
    assert np.array_equal(got[mask], before[mask], equal_nan=True), "bytes outside out changed"
    if np.dtype(dtype).kind in "iu":
        assert np.array_equal(got, expect.astype(dtype))
    else:
        np.testing.assert_allclose(got[~mask], expect[~mask], rtol=1e-12, atol=1e-12)
    return plan


def cfg(lc, rc, lb=(), rb=()):
    return DotGeneralConfig(lc, rc, lb, rb)


# name, lhs shape/layout, rhs shape/layout, config, out layout, conj, expectations
CASES = [
    ("matmul", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, out_perm=None, swap=True, transa=OP_N, transb=OP_N)),
    ("matmul_lhsT", (4, 3), "T", (3, 5), "c", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, transb=OP_T)),
    ("matmul_rhsT", (4, 3), "c", (3, 5), "T", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, transa=OP_T)),
    ("matmul_bothT", (4, 3), "T", (3, 5), "T", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, transa=OP_T, transb=OP_T)),
    ("matmul_outT", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "T", (0, 0),
     dict(out_perm=None, swap=False, lhs_perm=None, rhs_perm=None)),
    ("matmul_out_padded", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "s", (0, 0),
     dict(out_perm=None, ldc=6)),
    ("matmul_out_step2", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "S", (0, 0),
     dict(out_perm=(0, 1))),
    ("matmul_in_padded", (4, 3), "s", (3, 5), "s", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, lda=6, ldb=4)),
    ("bmm", (2, 4, 3), "c", (2, 3, 5), "c", cfg((2,), (1,), (0,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, batch=2, stride_a=15, stride_b=12, stride_c=20)),
    ("batch_last", (4, 3, 2), "c", (3, 5, 2), "c", cfg((1,), (0,), (2,), (2,)), "c", (0, 0),
     {}),
    ("batch_middle", (4, 2, 3), "c", (3, 2, 5), "c", cfg((2,), (0,), (1,), (1,)), "c",
     (0, 0), dict(lhs_perm=None, rhs_perm=None)),
    ("two_contract", (4, 3, 2), "c", (3, 2, 5), "c", cfg((1, 2), (0, 1)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, k=6)),
    ("two_contract_swapped", (4, 3, 2), "c", (3, 2, 5), "c", cfg((2, 1), (1, 0)), "c",
     (0, 0), dict(lhs_perm=None, rhs_perm=None, k=6)),
    ("contract_split", (3, 4, 2), "c", (3, 2, 5), "c", cfg((0, 2), (0, 1)), "c", (0, 0),
     dict(rhs_perm=None)),
    ("outer", (3,), "c", (4,), "c", cfg((), ()), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, out_perm=None, k=1)),
    ("vecdot_rank0", (5,), "c", (5,), "c", cfg((0,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None, out_perm=None, m=1, n=1)),
    ("matvec", (4, 5), "c", (5,), "c", cfg((1,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None)),
    ("vecmat", (5,), "c", (5, 4), "c", cfg((0,), (0,)), "c", (0, 0),
     dict(lhs_perm=None, rhs_perm=None)),
    ("broadcast_batch", (3, 4, 5), "b0", (3, 5, 2), "c", cfg((2,), (1,), (0,), (0,)), "c",
     (0, 0), dict(lhs_perm=None, stride_b=0)),
    ("reversed_lhs", (4, 3), "n0", (3, 5), "c", cfg((1,), (0,)), "c", (0, 0), {}),
    ("extent_one", (1, 4, 1, 3), "c", (3, 1, 5), "p210", cfg((3,), (0,)), "c", (0, 0), {}),
    ("k_zero", (4, 0), "c", (0, 5), "c", cfg((1,), (0,)), "c", (0, 0), dict(kzero=True)),
    ("empty_m", (0, 3), "c", (3, 5), "c", cfg((1,), (0,)), "c", (0, 0), dict(empty=True)),
    ("empty_batch", (0, 2, 3), "c", (0, 3, 4), "c", cfg((2,), (1,), (0,), (0,)), "c",
     (0, 0), dict(empty=True)),
    ("four_d_perm", (4, 3, 5, 2), "c", (3, 4, 2, 5), "c", cfg((0, 2), (1, 3)), "c", (0, 0),
     dict(out_perm=None)),
    ("batch_interleaved", (2, 4, 3, 3), "c", (3, 3, 5, 2), "c",
     cfg((3,), (1,), (0, 2), (3, 0)), "c", (0, 0), {}),
    ("conj_lhs", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "c", (1, 0),
     dict(transb=OP_C, rhs_perm=None)),
    ("conj_rhs", (4, 3), "c", (3, 5), "c", cfg((1,), (0,)), "c", (0, 1),
     dict(transa=OP_C, lhs_perm=None)),
    ("conj_both_transposed", (4, 3), "T", (3, 5), "T", cfg((1,), (0,)), "c", (1, 1),
     dict(transa=OP_C, transb=OP_C, lhs_perm=None, rhs_perm=None)),
    ("conj_bmm_outT", (2, 4, 3), "c", (2, 3, 5), "p021", cfg((2,), (1,), (0,), (0,)),
     "p021", (1, 1), {}),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["blas", "int"])
def test_plan_table(case, mode):
    name, ls, ll, rs, rl, config, ol, (lconj, rconj), expect = case
    blas = mode == "blas"
    dtype = np.complex128 if blas else np.int64
    rng = np.random.default_rng(sum(map(ord, name)))
    plan = check_case(rng, ls, ll, rs, rl, config, ol, dtype, blas, bool(lconj), bool(rconj))
    if blas:
        got = plan.describe()
        assert {k: got[k] for k in expect} == expect


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    nb, nc = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    nlf, nrf = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    ext = lambda: int(rng.choice([1, 2, 3]))  # noqa: E731
    b_ext = [ext() for _ in range(nb)]
    c_ext = [ext() for _ in range(nc)]
    lshape_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [
        ("f", ext()) for _ in range(nlf)]
    rshape_roles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + [
        ("f", ext()) for _ in range(nrf)]
    rng.shuffle(lshape_roles)
    rng.shuffle(rshape_roles)

    def build(roles):
        shape, bpos, cpos = [], {}, {}
        for ax, (role, x) in enumerate(roles):
            if role == "b":
                shape.append(b_ext[x])
                bpos[x] = ax
            elif role == "c":
                shape.append(c_ext[x])
                cpos[x] = ax
            else:
                shape.append(x)
        return shape, bpos, cpos

    ls, lbp, lcp = build(lshape_roles)
    rs, rbp, rcp = build(rshape_roles)
    corder = list(rng.permutation(nc))
    config = cfg(tuple(lcp[i] for i in corder), tuple(rcp[i] for i in corder),
                 tuple(lbp[i] for i in range(nb)), tuple(rbp[i] for i in range(nb)))

    def layout(nd):
        kinds = ["c", "T", "s", "S"] + ([f"n{int(rng.integers(nd))}",
                                          "p" + "".join(map(str, rng.permutation(nd)))]
                                         if nd else [])
        return str(rng.choice(kinds))

    oshape = out_shape_of(ls, rs, config)
    return ls, layout(len(ls)), rs, layout(len(rs)), config, layout(len(oshape)), rng


@pytest.mark.parametrize("seed", range(160), ids=[f"seed{s}" for s in range(160)])
@pytest.mark.parametrize("mode", ["blas", "int"])
def test_plan_fuzz(seed, mode):
    ls, ll, rs, rl, config, ol, rng = _random_case(seed)
    blas = mode == "blas"
    conj = tuple(bool(x) for x in rng.integers(0, 2, 2)) if blas else (False, False)
    beta = [0, 1, -0.5][seed % 3]
    check_case(rng, ls, ll, rs, rl, config, ol, np.complex128 if blas else np.int64, blas,
               *conj, beta=beta)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))),
                         ids=["".join(map(str, p)) for p in itertools.permutations(range(3))])
def test_plan_out_any_axis_order(perm):
    """An output stored in any axis order is written without staging when one of its
    matrix axes is contiguous, else through a temporary."""
    rng = np.random.default_rng(7)
    config = cfg((2,), (1,), (0,), (0,))
    plan = check_case(rng, (2, 4, 3), "c", (2, 3, 5), "c", config,
                      "p" + "".join(map(str, perm)), np.float64, True)
    assert (plan.out_perm is None) == (perm[-1] != 0)


def test_plan_bench_contraction_copies_both_inputs_once():
    """lhs (a,b,c,d) contracting (0,2) with rhs axes (1,3): each input is staged once
    keeping its innermost axis innermost; the output is written directly."""
    rng = np.random.default_rng(3)
    plan = check_case(rng, (4, 3, 5, 2), "c", (3, 4, 2, 5), "c", cfg((0, 2), (1, 3)), "c",
                      np.float64, True)
    assert plan.lhs_perm is not None and plan.lhs_perm[-1] == 3
    assert plan.rhs_perm is not None and plan.rhs_perm[-1] == 3
    assert plan.out_perm is None


def test_plan_large_sizes_switch_to_64bit_api():
    n = 1 << 31
    plan = plan_dot(((2, n), (n, 2), (2, 2)), ((n, 1), (2, 1), (2, 1)), cfg((1,), (0,)))
    assert plan.use64 and plan.k == n
    small = plan_dot(((2, 3), (3, 2), (2, 2)), ((3, 1), (2, 1), (2, 1)), cfg((1,), (0,)))
    assert not small.use64
