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


def _wrap64(v: int) -> int:
    """``v`` modulo 2**64 as an int64 value (uint64 scalars above int64's range)."""
    return (int(v) + (1 << 63)) % (1 << 64) - (1 << 63)


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
    if np.dtype(lhs.dtype).kind in "iu":  # int64 arithmetic wraps modulo 2**64: scalars too
        alpha, beta = (_wrap64(v) for v in (alpha, beta))
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


# --- device operands (GPU tests) -----------------------------------------------------------
def sample(dtype, shape, rng) -> np.ndarray:
    """Random values of a tenferro dtype: full range for integers (products wrap),
    standard normal for floats (rounded to the dtype), complex normal for complex."""
    npd = np.dtype(dtype.numpy)
    if dtype.is_integer:
        info = np.iinfo(npd)
        return rng.integers(info.min, info.max, shape, dtype=npd, endpoint=True)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(npd)
    return rng.standard_normal(shape).astype(npd)


def device_view(s, array: np.ndarray, layout: str, fill=0):
    """(device view, logical values) of ``array`` stored as ``layout``:
    c compact, T axes stored reversed, p<perm> stored in that axis order, s padded (offset
    and longer rows), S every other element of the last axis, sT transposed inside a
    padded buffer, n<axis> that axis reversed, b<axis> broadcast along that axis (stride
    0; the values are made constant along it). Padding holds ``fill``."""
    from gpu_util import up

    a = np.asarray(array)
    nd = a.ndim
    if layout == "c" or nd == 0:
        return up(s, a), a
    if layout == "T" or layout.startswith("p"):
        perm = list(range(nd))[::-1] if layout == "T" else [int(c) for c in layout[1:]]
        inverse = list(np.argsort(perm))
        return up(s, np.ascontiguousarray(a.transpose(perm))).permute(inverse), a
    if layout in ("s", "S", "sT"):
        stored = a.transpose(list(range(nd))[::-1]) if layout == "sT" else a
        step = 2 if layout == "S" else 1
        shape = [n + 1 for n in stored.shape]
        shape[-1] = (stored.shape[-1] + 1) * step
        big = np.full(shape, fill, a.dtype)
        idx = tuple(slice(1, 1 + n) for n in stored.shape[:-1]) + (
            slice(step, step + stored.shape[-1] * step, step),)
        big[idx] = stored
        view = up(s, big)[idx]
        return (view.permute(list(range(nd))[::-1]) if layout == "sT" else view), a
    axis = int(layout[1:])
    if layout[0] == "n":
        t = up(s, np.ascontiguousarray(np.flip(a, axis)))
        idx = tuple(slice(None, None, -1) if i == axis else slice(None) for i in range(nd))
        return t[idx], a
    if layout[0] == "b":
        base = np.ascontiguousarray(a.take(0, axis=axis))
        t = up(s, base)
        strides = list(t.strides)
        strides.insert(axis, 0)
        return t.view(a.shape, strides, 0), np.broadcast_to(np.expand_dims(base, axis), a.shape)
    raise ValueError(f"unknown layout {layout!r}")


def check_close(got, want, dtype_name: str, k: int) -> None:
    if np.dtype(got.dtype).kind in "iu":
        assert got.dtype == want.dtype and np.array_equal(got, want)
        return
    err = rel_error(got, want)
    tol = tolerance(dtype_name, k)
    assert err <= tol, f"relative error {err:.3g} > {tol:.3g} ({dtype_name}, k={k})"


def element_index(view) -> np.ndarray:
    """Flat element offsets (into ``view.base``) of every element of ``view``."""
    idx = np.full(view.shape, view.offset, dtype=np.int64)
    for ax, (n, st) in enumerate(zip(view.shape, view.strides)):
        sh = [1] * len(view.shape)
        sh[ax] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(sh)
    return idx
