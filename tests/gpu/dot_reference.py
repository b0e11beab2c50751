"""numpy references of the dot family, shared by tests/cpu (planner emulation) and
tests/gpu (device results): ``dot_ref`` follows ``jax.lax.dot_general``."""

from __future__ import annotations

import math

import numpy as np


def free_axes(rank: int, *used) -> list[int]:
    taken = {a for axes in used for a in axes}
    return [a for a in range(rank) if a not in taken]


def dot_ref(lhs: np.ndarray, rhs: np.ndarray, config, lhs_conj: bool = False,
            rhs_conj: bool = False) -> np.ndarray:
    """``dot_general`` in float64/complex128 (integers: int64, wrapping)."""
    lb, rb = list(config.lhs_batch_dims), list(config.rhs_batch_dims)
    lc, rc = list(config.lhs_contracting_dims), list(config.rhs_contracting_dims)
    lf = free_axes(lhs.ndim, lb, lc)
    rf = free_axes(rhs.ndim, rb, rc)
    bs = [lhs.shape[a] for a in lb]
    ms = [lhs.shape[a] for a in lf]
    ns = [rhs.shape[a] for a in rf]
    ks = [lhs.shape[a] for a in lc]
    wide = _wide(lhs.dtype)
    left = np.asarray(lhs).astype(wide).transpose(lb + lf + lc)
    right = np.asarray(rhs).astype(wide).transpose(rb + rc + rf)
    left = left.reshape(math.prod(bs), math.prod(ms), math.prod(ks))
    right = right.reshape(math.prod(bs), math.prod(ks), math.prod(ns))
    if lhs_conj:
        left = np.conj(left)
    if rhs_conj:
        right = np.conj(right)
    return np.matmul(left, right).reshape(bs + ms + ns)


def _wide(dtype) -> np.dtype:
    d = np.dtype(dtype)
    if d.kind in "iub":
        return np.dtype(np.int64)
    if d.kind == "c":
        return np.dtype(np.complex128)
    return np.dtype(np.float64)


def accum_ref(lhs, rhs, config, alpha, beta, out_before, lhs_conj=False, rhs_conj=False):
    """``alpha * op(lhs) . op(rhs) + beta * out`` in the wide type (beta == 0 ignores
    out, NaN included); integers wrap to the operands' dtype."""
    prod = dot_ref(lhs, rhs, config, lhs_conj, rhs_conj)
    res = alpha * prod
    if beta != 0:
        res = res + beta * np.asarray(out_before).astype(prod.dtype)
    if np.dtype(lhs.dtype).kind in "iu":
        return np.asarray(res, dtype=np.int64).astype(lhs.dtype)
    return res


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max(max |want|, tiny), in float64/complex128."""
    got = np.asarray(got).astype(np.complex128)
    want = np.asarray(want).astype(np.complex128)
    if want.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got - want))) / scale


def tolerance(dtype_name: str, k: int) -> float:
    """Relative tolerances (issue 6): float32 1e-5 sqrt(k), bfloat16 1e-2; "tf32" for
    float32/complex64 products allowed to use TF32."""
    root = math.sqrt(max(k, 1))
    return {
        "float16": 2e-3,
        "bfloat16": 1e-2,
        "float32": 1e-5 * root,
        "complex64": 1e-5 * root,
        "tf32": 1e-3 * root,
        "float64": 1e-12 * root,
        "complex128": 1e-12 * root,
    }[dtype_name]
