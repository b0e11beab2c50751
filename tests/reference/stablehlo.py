"""A numpy reference of the StableHLO indexing ops, written as the specification's
definitions: loops over index spaces, one element at a time, no vectorised shortcuts.
Slow by design; use it on small tensors.

Configs are read by attribute (``GatherConfig``/``ScatterConfig`` or any namespace with
the same fields), so this module does not depend on tenferro_cuda.

Scatter follows a fixed schedule: update windows in row-major order of the update scatter
dimensions, each window's elements in row-major order. ``oob`` picks what happens to
updates outside the operand: ``"window"`` (XLA, what tenferro_cuda implements: a window
that does not fit is skipped whole) or ``"element"`` (the StableHLO text: each
out-of-bounds element is skipped).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def _indices(shape):
    return itertools.product(*[range(n) for n in shape])


def _start_index(indices, batch_index, ivd):
    """``start_indices[bi0, ..., :, ..., biN]`` or ``[start_indices[batch_index]]``."""
    if ivd < indices.ndim:
        head, tail = tuple(batch_index[:ivd]), tuple(batch_index[ivd:])
        return [int(indices[head + (k,) + tail]) for k in range(indices.shape[ivd])]
    return [int(indices[tuple(batch_index)])]


def _clamp(v, lo, hi):
    return min(max(v, lo), hi)


def gather_shape(operand_shape, indices_shape, cfg):
    ivd = cfg.index_vector_dim
    batch = [n for d, n in enumerate(indices_shape) if d != ivd]
    skip = set(cfg.collapsed_slice_dims) | set(cfg.operand_batching_dims)
    offs = [cfg.slice_sizes[d] for d in range(len(operand_shape)) if d not in skip]
    rank = len(batch) + len(offs)
    b, o = iter(batch), iter(offs)
    return tuple(next(o) if d in cfg.offset_dims else next(b) for d in range(rank))


def gather(operand, indices, cfg):
    """``result[result_index] = operand[operand_index]`` (StableHLO gather, clamped)."""
    shape = gather_shape(operand.shape, indices.shape, cfg)
    result = np.zeros(shape, operand.dtype)
    batch_dims = [d for d in range(len(shape)) if d not in cfg.offset_dims]
    ivd = cfg.index_vector_dim
    skip = set(cfg.collapsed_slice_dims) | set(cfg.operand_batching_dims)
    for result_index in _indices(shape):
        batch_index = [result_index[d] for d in batch_dims]
        start_index = _start_index(indices, batch_index, ivd)
        full_start = [0] * operand.ndim
        for d_start, d_operand in enumerate(cfg.start_index_map):
            full_start[d_operand] = _clamp(start_index[d_start], 0,
                                           operand.shape[d_operand]
                                           - cfg.slice_sizes[d_operand])
        full_batching = [0] * operand.ndim
        for d_operand, d_start in zip(cfg.operand_batching_dims,
                                      cfg.start_indices_batching_dims):
            full_batching[d_operand] = batch_index[d_start - (0 if d_start < ivd else 1)]
        offset_index = iter(result_index[d] for d in cfg.offset_dims)
        full_offset = [0 if d in skip else next(offset_index) for d in range(operand.ndim)]
        operand_index = tuple(s + b + o for s, b, o in zip(full_start, full_batching,
                                                           full_offset))
        result[result_index] = operand[operand_index]
    return result


# --- scatter combiners (the update_computation) ------------------------------------------------
def _wrap(value: int, dtype) -> int:
    info = np.iinfo(dtype)
    span = info.max - info.min + 1
    return (value - info.min) % span + info.min


def _neg(v) -> bool:
    return math.copysign(1.0, float(v)) < 0


def combine_add(a, b, dtype):
    if np.issubdtype(dtype, np.integer):
        return _wrap(int(a) + int(b), dtype)
    with np.errstate(all="ignore"):
        return (np.asarray(a, dtype) + np.asarray(b, dtype)).astype(dtype)[()]


def combine_max(a, b, dtype):
    """Maximum that propagates NaN and ranks +0 above -0."""
    if np.issubdtype(dtype, np.integer):
        return max(int(a), int(b))
    fa, fb = float(a), float(b)
    if fa != fa:
        return a
    if fb != fb:
        return b
    if fa == fb:
        return b if _neg(a) else a
    return a if fa > fb else b


def combine_min(a, b, dtype):
    if np.issubdtype(dtype, np.integer):
        return min(int(a), int(b))
    fa, fb = float(a), float(b)
    if fa != fa:
        return a
    if fb != fb:
        return b
    if fa == fb:
        return a if _neg(a) else b
    return a if fa < fb else b


COMBINERS = {
    "add": combine_add,
    "max": combine_max,
    "min": combine_min,
    "replace": lambda a, b, dtype: b,
}


def scatter(operand, indices, updates, cfg, combiner="add", oob="window"):
    """A copy of ``operand`` with ``updates`` combined in (StableHLO scatter)."""
    fn = COMBINERS[combiner]
    result = operand.copy()
    uwd = list(cfg.update_window_dims)
    usd = [d for d in range(updates.ndim) if d not in uwd]
    ivd = cfg.index_vector_dim
    skip = set(cfg.inserted_window_dims) | set(cfg.input_batching_dims)
    win_axes = [d for d in range(operand.ndim) if d not in skip]
    window = [1] * operand.ndim
    for ud, od in zip(uwd, win_axes):
        window[od] = updates.shape[ud]
    for scatter_index in _indices([updates.shape[d] for d in usd]):
        start_index = _start_index(indices, list(scatter_index), ivd)
        full_start = [0] * operand.ndim
        for d_start, d_input in enumerate(cfg.scatter_dims_to_operand_dims):
            full_start[d_input] = start_index[d_start]
        full_batching = [0] * operand.ndim
        for d_input, d_start in zip(cfg.input_batching_dims,
                                    cfg.scatter_indices_batching_dims):
            full_batching[d_input] = scatter_index[d_start - (0 if d_start < ivd else 1)]
        fits = all(0 <= full_start[d] <= operand.shape[d] - window[d]
                   for d in range(operand.ndim))
        if oob == "window" and not fits:
            continue
        for window_index in _indices([updates.shape[d] for d in uwd]):
            si, wi = iter(scatter_index), iter(window_index)
            update_index = tuple(next(wi) if d in uwd else next(si)
                                 for d in range(updates.ndim))
            wi2 = iter(window_index)
            full_window = [0 if d in skip else next(wi2) for d in range(operand.ndim)]
            result_index = tuple(s + b + w for s, b, w in zip(full_start, full_batching,
                                                              full_window))
            if not all(0 <= r < n for r, n in zip(result_index, operand.shape)):
                continue
            result[result_index] = fn(result[result_index], updates[update_index],
                                      operand.dtype)
    return result


# --- slicing ----------------------------------------------------------------------------------
def slice_(operand, starts, limits, strides):
    """``result[i] = operand[starts + i * strides]``."""
    shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(starts, limits, strides))
    result = np.zeros(shape, operand.dtype)
    for i in _indices(shape):
        result[i] = operand[tuple(s + k * st for s, k, st in zip(starts, i, strides))]
    return result


def dynamic_slice(operand, starts, sizes):
    """``result[i] = operand[clamp(starts, 0, shape - sizes) + i]``."""
    adj = [_clamp(int(s), 0, n - k) for s, n, k in zip(starts, operand.shape, sizes)]
    result = np.zeros(tuple(sizes), operand.dtype)
    for i in _indices(sizes):
        result[i] = operand[tuple(a + k for a, k in zip(adj, i))]
    return result


def dynamic_update_slice(operand, update, starts):
    adj = [_clamp(int(s), 0, n - k) for s, n, k in zip(starts, operand.shape, update.shape)]
    result = operand.copy()
    for j in _indices(update.shape):
        result[tuple(a + k for a, k in zip(adj, j))] = update[j]
    return result


def pad(operand, value, low, high, interior):
    """Element ``i`` of the operand lands at ``low + i * (interior + 1)`` if in bounds."""
    shape = tuple(lo + hi + n + max(n - 1, 0) * it
                  for n, lo, hi, it in zip(operand.shape, low, high, interior))
    result = np.full(shape, value, operand.dtype)
    for i in _indices(operand.shape):
        r = tuple(lo + k * (it + 1) for k, lo, it in zip(i, low, interior))
        if all(0 <= x < n for x, n in zip(r, shape)):
            result[r] = operand[i]
    return result


def concatenate(inputs, axis):
    shape = list(inputs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in inputs)
    result = np.zeros(tuple(shape), inputs[0].dtype)
    at = 0
    for x in inputs:
        for i in _indices(x.shape):
            r = list(i)
            r[axis] += at
            result[tuple(r)] = x[i]
        at += x.shape[axis]
    return result


def reverse(operand, dims):
    result = np.zeros(operand.shape, operand.dtype)
    for i in _indices(operand.shape):
        j = tuple(operand.shape[d] - 1 - k if d in dims else k for d, k in enumerate(i))
        result[i] = operand[j]
    return result
