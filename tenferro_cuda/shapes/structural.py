"""Validation, shape inference and view algebra of the structural ops (pure Python).

Every function raises ``ValidationError`` before anything is allocated or launched. The
view helpers turn an op into a strided *source view* (or destination view) of the same
storage, so that each structural op is one permutation copy:

- ``transpose(x, perm)``: output axis i is input axis ``perm[i]``.
- ``broadcast_in_dim(x, shape, dims)`` (StableHLO): operand axis i maps to output axis
  ``dims[i]``; ``len(dims) == x.ndim``; dims unique and in ``range(len(shape))`` (any
  order); ``x.shape[i]`` is 1 or ``shape[dims[i]]``. Source strides: the operand's stride
  where the extents agree, 0 where the operand extent is 1 and on every new axis.
- ``extract_diagonal(x, a, b)``: ``a != b``, both in range. Axis ``b`` is removed; the
  diagonal takes axis ``a``'s place (position ``a`` if ``a < b`` else ``a - 1``) with
  extent ``min(n_a, n_b)``; ``out[..., i, ...] = x[..., i (axis a), ..., i (axis b), ...]``
  (numpy's ``diagonal`` with the diagonal kept in place instead of moved last).
- ``embed_diagonal(x, a, b)``: the inverse. ``a`` in ``range(x.ndim)``, ``b`` in
  ``range(x.ndim + 1)``. A new axis of extent ``n_a`` is inserted at position ``b``; input
  axis ``a`` lands at ``a2 = a if a < b else a + 1``; ``out[idx] = x[idx without axis b]``
  where ``idx[a2] == idx[b]``, 0 elsewhere. ``extract_diagonal(embed_diagonal(x, a, b),
  a2, b) == x`` and ``embed_diagonal(extract_diagonal(y, a, b), d, b)`` restores the
  diagonal of ``y`` (``d`` the diagonal's position), zeros elsewhere.
- ``tril(x, k)`` / ``triu(x, k)``: on the last two axes (rank >= 2); element (r, c) is kept
  when ``c - r <= k`` (tril) or ``c - r >= k`` (triu), as in numpy.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from ..errors import ValidationError
from . import check_permutation, check_rank, check_size, int_sequence
from .views import is_row_major


def int_tuple(values, op: str, what: str) -> tuple[int, ...]:
    """A sequence of ints (``values.int_sequence``: no sets, iterators or bools)."""
    return int_sequence(values, op, what)


def _int(value, op: str, what: str) -> int:
    """One int (not a bool, not np.bool_)."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise ValidationError(f"{what} must be an int (got {value!r})", op=op) from None


def _axis(value, limit: int, op: str, what: str) -> int:
    a = _int(value, op, what)
    if not 0 <= a < limit:
        raise ValidationError(f"{what} = {a} is out of range for rank {limit}", op=op,
                              kind="axis_out_of_bounds")
    return a


def out_shape(shape, op: str, itemsize: int = 1) -> tuple[int, ...]:
    """A requested output shape: ints >= 0, rank <= 8, every extent and the byte size
    (of ``itemsize``-byte elements) below 2**63 (``shapes.check_size``)."""
    dims = int_tuple(shape, op, "shape")
    if any(s < 0 for s in dims):
        raise ValidationError(f"shape entries must be >= 0 (got {dims})", op=op)
    check_rank(dims, op)
    check_size(dims, op, itemsize)
    return dims


# --- transpose -------------------------------------------------------------------------
def transpose(shape: Sequence[int], perm, op: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(perm, output shape); ``perm`` must list every axis exactly once."""
    p = check_permutation(perm, len(shape), op)
    return p, tuple(shape[a] for a in p)


def permuted(shape: Sequence[int], strides: Sequence[int], perm: Sequence[int]):
    """(shape, strides) of the view whose axis i is axis ``perm[i]``."""
    return tuple(shape[a] for a in perm), tuple(strides[a] for a in perm)


# --- reshape ---------------------------------------------------------------------------
def reshape(shape: Sequence[int], new_shape, op: str) -> tuple[int, ...]:
    dims = out_shape(new_shape, op)
    if math.prod(dims) != math.prod(shape):
        raise ValidationError(
            f"cannot reshape {tuple(shape)} ({math.prod(shape)} elements) to {dims} "
            f"({math.prod(dims)} elements)", op=op, kind="shape_mismatch")
    return dims


def shares_storage(shape: Sequence[int], strides: Sequence[int], offset: int,
                   base_size: int) -> bool:
    """True when a (view) layout is its whole base buffer in row-major order, so a reshape
    can return a Tensor over the same buffer instead of copying."""
    return offset == 0 and math.prod(shape) == base_size and is_row_major(shape, strides)


# --- broadcast_in_dim ------------------------------------------------------------------
def broadcast_in_dim(shape: Sequence[int], new_shape, dims, op: str, itemsize: int = 1):
    """(output shape, dims) under the StableHLO rules (module docstring); the output of
    ``itemsize``-byte elements must stay below 2**63 bytes."""
    out = out_shape(new_shape, op, itemsize)
    d = int_tuple(dims, op, "dims")
    if len(d) != len(shape):
        raise ValidationError(f"dims {d} must have one entry per operand axis "
                              f"({len(shape)})", op=op, kind="rank_mismatch")
    for a in d:
        if not 0 <= a < len(out):
            raise ValidationError(f"dims: axis {a} is out of range for output rank "
                                  f"{len(out)}", op=op, kind="axis_out_of_bounds")
    if len(set(d)) != len(d):
        raise ValidationError(f"dims: duplicate axes in {d}", op=op, kind="duplicate_axis")
    for i, (n, a) in enumerate(zip(shape, d)):
        if n != 1 and n != out[a]:
            raise ValidationError(
                f"operand axis {i} has extent {n}; it maps to output axis {a} of extent "
                f"{out[a]} (must be equal, or the operand extent 1)", op=op,
                kind="shape_mismatch")
    return out, d


def broadcast_strides(shape: Sequence[int], strides: Sequence[int], out: Sequence[int],
                      dims: Sequence[int]) -> tuple[int, ...]:
    """Source strides over the output shape (0 on broadcast axes)."""
    st = [0] * len(out)
    for n, s, a in zip(shape, strides, dims):
        if n == out[a]:
            st[a] = s
    return tuple(st)


# --- diagonals -------------------------------------------------------------------------
def extract_diagonal(shape: Sequence[int], a, b, op: str) -> tuple[tuple[int, ...], int]:
    """(output shape, position of the diagonal axis)."""
    r = len(shape)
    a = _axis(a, r, op, "axis_a")
    b = _axis(b, r, op, "axis_b")
    if a == b:
        raise ValidationError(f"axis_a and axis_b must differ (both {a})", op=op,
                              kind="duplicate_axis")
    pos = a if a < b else a - 1
    out = [n for i, n in enumerate(shape) if i != b]
    out[pos] = min(shape[a], shape[b])
    return tuple(out), pos


def diagonal_view(shape: Sequence[int], strides: Sequence[int], a: int, b: int):
    """(shape, strides) of the diagonal view of axes (a, b) (see extract_diagonal)."""
    pos = a if a < b else a - 1
    sh = [n for i, n in enumerate(shape) if i != b]
    st = [s for i, s in enumerate(strides) if i != b]
    sh[pos] = min(shape[a], shape[b])
    st[pos] = strides[a] + strides[b]
    return tuple(sh), tuple(st)


def embed_diagonal(shape: Sequence[int], a, b, op: str) -> tuple[tuple[int, ...], int]:
    """(output shape, output position of input axis a)."""
    r = len(shape)
    a = _axis(a, r, op, "axis_a")
    b = _axis(b, r + 1, op, "axis_b")
    out = list(shape)
    out.insert(b, shape[a])
    check_rank(out, op)
    return tuple(out), (a if a < b else a + 1)


def embed_view_strides(out_strides: Sequence[int], a: int, b: int) -> tuple[int, ...]:
    """Strides, over the *input* shape, of the diagonal of a compact output (embed)."""
    kept = [s for i, s in enumerate(out_strides) if i != b]  # input axis i -> kept[i]
    kept[a] += out_strides[b]
    return tuple(kept)


# --- tril / triu -----------------------------------------------------------------------
def triangular(shape: Sequence[int], k, op: str) -> int:
    if len(shape) < 2:
        raise ValidationError(f"{op} needs rank >= 2 (got rank {len(shape)})", op=op,
                              kind="rank_mismatch")
    return _int(k, op, "k")


# --- copies ----------------------------------------------------------------------------
def self_overlapping(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Conservative: True unless distinct indices provably address distinct elements
    (sorted by |stride|, each stride exceeds the span of the smaller axes)."""
    axes = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    if math.prod(shape) == 0:
        return False
    span = 0
    for s, n in axes:
        if s <= span:
            return True
        span += s * (n - 1)
    return False
