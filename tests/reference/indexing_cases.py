"""Test data of the indexing family: the StableHLO specification's worked examples (inputs,
dimension numbers and the results printed in the spec), hand-worked slicing examples, and
hypothesis strategies that draw valid gather/scatter configurations over ranks 0-5.

Configs are plain dicts of GatherConfig/ScatterConfig keyword arguments, so the CPU tier
can build them, the reference can read them (``ns``) and the GPU tier can run them.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

GATHER_DEFAULTS = {"operand_batching_dims": (), "start_indices_batching_dims": ()}
SCATTER_DEFAULTS = {"input_batching_dims": (), "scatter_indices_batching_dims": ()}


def ns(cfg: dict, defaults: dict) -> SimpleNamespace:
    return SimpleNamespace(**{**defaults, **cfg})


_A24 = np.arange(1, 25, dtype=np.int32).reshape(3, 4, 2)
_A48 = np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2)
_IDX_B = np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                   [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], dtype=np.int64)

SPEC_GATHER = [
    dict(  # StableHLO spec, gather (without batching dimensions)
        id="spec-gather", operand=_A24,
        indices=np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 2]]], np.int64),
        cfg=dict(offset_dims=(2, 3), collapsed_slice_dims=(0,), start_index_map=(1, 0),
                 index_vector_dim=2, slice_sizes=(1, 2, 2)),
        expected=np.array([[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                           [[[9, 10], [11, 12]], [[11, 12], [13, 14]],
                            [[17, 18], [19, 20]]]], np.int32)),
    dict(  # StableHLO spec, gather with batching dimensions (and a clamped index 9)
        id="spec-gather-batching", operand=_A48.astype(np.int32), indices=_IDX_B,
        cfg=dict(offset_dims=(3, 4), collapsed_slice_dims=(1,), operand_batching_dims=(0,),
                 start_indices_batching_dims=(1,), start_index_map=(2, 1),
                 index_vector_dim=3, slice_sizes=(1, 1, 2, 2)),
        expected=np.array(
            [[[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
              [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
             [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
              [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]],
            np.int32)),
]

SPEC_SCATTER = [
    dict(  # StableHLO spec, scatter (add, without batching dimensions)
        id="spec-scatter", operand=_A24,
        indices=np.array([[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [2, 0]]], np.int64),
        updates=np.ones((2, 3, 2, 2), np.int32), combiner="add",
        cfg=dict(update_window_dims=(2, 3), inserted_window_dims=(0,),
                 scatter_dims_to_operand_dims=(1, 0), index_vector_dim=2),
        expected=np.array([[[1, 2], [5, 6], [8, 9], [8, 9]],
                           [[10, 11], [12, 13], [14, 15], [16, 17]],
                           [[18, 19], [20, 21], [21, 22], [23, 24]]], np.int32)),
    dict(  # StableHLO spec, scatter with batching dimensions (index 9 is skipped)
        id="spec-scatter-batching", operand=_A48, indices=_IDX_B,
        updates=np.ones((2, 2, 3, 2, 2), np.int64), combiner="add",
        cfg=dict(update_window_dims=(3, 4), inserted_window_dims=(1,),
                 input_batching_dims=(0,), scatter_indices_batching_dims=(1,),
                 scatter_dims_to_operand_dims=(2, 1), index_vector_dim=3),
        expected=np.array(
            [[[[3, 4], [6, 7], [6, 7], [7, 8]], [[9, 10], [11, 12], [15, 16], [17, 18]],
              [[17, 18], [19, 20], [22, 23], [24, 25]]],
             [[[25, 26], [28, 29], [30, 31], [31, 32]], [[35, 36], [38, 39], [38, 39],
                                                       [39, 40]],
              [[41, 42], [44, 45], [46, 47], [47, 48]]]], np.int64)),
]

# Hand-worked: a window that hangs over the end (start 3, size 3, extent 5) is skipped whole
# by XLA ("window") while the StableHLO text keeps its in-bounds elements ("element").
OVERHANG = dict(operand=np.zeros(5, np.int32), indices=np.array([[3], [0]], np.int32),
                updates=np.array([[1, 2, 3], [10, 20, 30]], np.int32),
                cfg=dict(update_window_dims=(1,), inserted_window_dims=(),
                         scatter_dims_to_operand_dims=(0,), index_vector_dim=1),
                window=np.array([10, 20, 30, 0, 0], np.int32),
                element=np.array([10, 20, 30, 1, 2], np.int32))

_X = np.array([[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], np.int32)
SLICE_EXAMPLES = [
    dict(id="rows-cols", x=_X, starts=(1, 2), limits=(3, 4), strides=(1, 1),
         expected=np.array([[1, 1], [1, 1]], np.int32)),
    dict(id="strided", x=np.arange(10, dtype=np.int32).reshape(2, 5), starts=(0, 1),
         limits=(2, 5), strides=(1, 2), expected=np.array([[1, 3], [6, 8]], np.int32)),
]
DYNAMIC_SLICE_EXAMPLE = dict(  # StableHLO spec: start (-1, 3) clamps to (0, 2)
    x=np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.int32),
    starts=np.array([-1, 3], np.int64), sizes=(2, 2),
    expected=np.array([[1, 1], [1, 1]], np.int32))
DYNAMIC_UPDATE_SLICE_EXAMPLE = dict(  # StableHLO spec
    x=np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], np.int32),
    update=np.ones((2, 2), np.int32), starts=np.array([-1, 3], np.int64),
    expected=np.ones((4, 4), np.int32))
PAD_EXAMPLES = [
    dict(id="interior", x=np.array([[1, 2, 3], [4, 5, 6]], np.int32), low=(0, 1),
         high=(2, 1), interior=(1, 2),
         expected=np.array([[0, 1, 0, 0, 2, 0, 0, 3, 0], [0] * 9, [0, 4, 0, 0, 5, 0, 0, 6, 0],
                            [0] * 9, [0] * 9], np.int32)),
    dict(id="crop", x=np.arange(6, dtype=np.int32).reshape(2, 3), low=(-1, 1), high=(0, -2),
         interior=(0, 1), expected=np.array([[0, 3, 0, 4]], np.int32)),
]
REVERSE_EXAMPLE = dict(x=np.array([[1, 2], [3, 4], [5, 6]], np.int32), dims=(1,),
                       expected=np.array([[2, 1], [4, 3], [6, 5]], np.int32))


# --- hypothesis strategies --------------------------------------------------------------------
def _extent(max_extent):
    """0 about one time in 13, else 1..max_extent."""
    return st.integers(0, 4 * max_extent).map(lambda v: 0 if v == 0 else 1 + v % max_extent)


def _subset(draw, pool, size, ordered):
    perm = draw(st.permutations(list(pool)))[:size]
    return tuple(sorted(perm)) if ordered else tuple(perm)


def _index_side(draw, nb, k, extra_max):
    """(index rank, index_vector_dim, index batch axes, batching axes of the indices)."""
    extra = draw(st.integers(0, extra_max))
    explicit = k != 1 or draw(st.booleans())
    nbatch = nb + extra
    irank = nbatch + (1 if explicit else 0)
    ivd = draw(st.integers(0, irank - 1)) if explicit else irank
    batch_axes = [d for d in range(irank) if d != ivd]
    return irank, ivd, batch_axes, _subset(draw, batch_axes, nb, ordered=False)


def _operand_side(draw, max_rank, max_extent):
    rank = draw(st.integers(0, max_rank))
    shape = tuple(draw(st.lists(_extent(max_extent), min_size=rank, max_size=rank)))
    nb = draw(st.integers(0, min(2, rank)))
    batching = _subset(draw, range(rank), nb, ordered=True)
    rest = [d for d in range(rank) if d not in batching]
    inserted = _subset(draw, rest, draw(st.integers(0, len(rest))), ordered=True)
    k = draw(st.integers(0 if draw(st.integers(0, 3)) == 0 else min(1, len(rest)), len(rest)))
    smap = _subset(draw, rest, k, ordered=False)
    return shape, batching, inserted, smap


def _index_values(draw, shape, ishape):
    """Index tensor with values in [-3, extent + 3] (clamping and out-of-bounds)."""
    hi = max(shape) + 3 if shape else 3
    n = math.prod(ishape)
    vals = draw(st.lists(st.integers(-3, hi), min_size=n, max_size=n))
    return np.array(vals, dtype=np.int64).reshape(ishape)


@st.composite
def gather_cases(draw, max_rank=5, max_extent=3, max_elems=1500):
    """(operand shape, indices, cfg dict) of a valid gather."""
    shape, obd, col, smap = _operand_side(draw, max_rank, max_extent)
    irank, ivd, batch_axes, sibd = _index_side(draw, len(obd), len(smap), 2)
    ishape = [0] * irank
    for ax in batch_axes:
        ishape[ax] = draw(_extent(3))
    for od, ia in zip(obd, sibd):
        ishape[ia] = shape[od]
    if ivd < irank:
        ishape[ivd] = len(smap)
    sizes = [min(shape[d], 1) if d in obd or d in col else
             draw(st.integers(min(shape[d], 1), shape[d])) for d in range(len(shape))]
    window = [d for d in range(len(shape)) if d not in obd and d not in col]
    rank = len(batch_axes) + len(window)
    assume(rank <= 8)
    offset = _subset(draw, range(rank), len(window), ordered=True)
    nres = math.prod(ishape[a] for a in batch_axes) * math.prod(sizes[d] for d in window)
    assume(nres <= max_elems)
    assume(nres == 0 or all(sizes[d] == 1 for d in obd + col))
    cfg = dict(offset_dims=offset, collapsed_slice_dims=col, start_index_map=smap,
               index_vector_dim=ivd, slice_sizes=tuple(sizes), operand_batching_dims=obd,
               start_indices_batching_dims=sibd)
    return shape, _index_values(draw, shape, tuple(ishape)), cfg


@st.composite
def scatter_cases(draw, max_rank=5, max_extent=3, max_elems=1500):
    """(operand shape, indices, update shape, cfg dict) of a valid scatter."""
    shape, ibd, ins, smap = _operand_side(draw, max_rank, max_extent)
    irank, ivd, batch_axes, sibd = _index_side(draw, len(ibd), len(smap), 2)
    ishape = [0] * irank
    for ax in batch_axes:
        ishape[ax] = draw(_extent(3))
    for od, ia in zip(ibd, sibd):
        ishape[ia] = shape[od]
    if ivd < irank:
        ishape[ivd] = len(smap)
    window = [d for d in range(len(shape)) if d not in ibd and d not in ins]
    rank = len(batch_axes) + len(window)
    assume(rank <= 8)
    uwd = _subset(draw, range(rank), len(window), ordered=True)
    wsizes = iter([draw(st.integers(min(shape[d], 1), shape[d])) for d in window])
    bsizes = iter([ishape[a] for a in batch_axes])
    ushape = tuple(next(wsizes) if d in uwd else next(bsizes) for d in range(rank))
    assume(math.prod(ushape) <= max_elems and math.prod(shape) <= max_elems)
    cfg = dict(update_window_dims=uwd, inserted_window_dims=ins,
               scatter_dims_to_operand_dims=smap, index_vector_dim=ivd,
               input_batching_dims=ibd, scatter_indices_batching_dims=sibd)
    return shape, _index_values(draw, shape, tuple(ishape)), ushape, cfg
