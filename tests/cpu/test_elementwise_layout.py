"""ops/elementwise/layout.py: the walk plan (contiguous / broadcast rows / strided /
tiled), its element mapping, the vector rule of the broadcast rows, and the chunking of
large walks (pure Python)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tenferro_cuda.errors import ValidationError
from tenferro_cuda.ops.elementwise.layout import (
    bcast_vectors,
    chunks,
    pad3,
    plan,
    tile_bytes,
    tiled_grid,
)
from tenferro_cuda.tensor import compact_strides


def _offsets(shape, strides, offset):
    """Element offsets of every logical index, row-major."""
    return [offset + sum(i * s for i, s in zip(idx, strides))
            for idx in itertools.product(*[range(n) for n in shape])]


def _walk(p, k):
    """Offsets of operand k in the order the plan visits them."""
    if p.contiguous:
        n = p.size
        if p.shape and p.strides[k][0] == 0:
            return [p.offsets[k]] * n
        return [p.offsets[k] + i for i in range(n)]
    return _offsets(p.shape, p.strides[k], p.offsets[k])


def _check_mapping(shape, out, inputs, p):
    """The plan visits the same (out, input...) element tuples as the logical walk."""
    want = list(zip(_offsets(shape, *out), *[
        _offsets(shape, s if s is not None else (0,) * len(shape), o) for s, o in inputs]))
    got = list(zip(*[_walk(p, k) for k in range(1 + len(inputs))]))
    assert sorted(got) == sorted(want)


CASES = {
    # name: (shape, out (strides, offset), inputs [(strides | None, offset)], expected path)
    "compact": ((3, 5), ((5, 1), 0), [((5, 1), 0), ((5, 1), 0)], "contiguous"),
    "offset views": ((4,), ((1,), 3), [((1,), 7), ((1,), 1)], "contiguous"),
    "rank0 broadcast": ((2, 3), ((3, 1), 0), [(None, 5), ((3, 1), 0)], "contiguous"),
    "all rank 0": ((), ((), 0), [((), 2), ((), 0)], "contiguous"),
    "extent one axes": ((1, 4, 1), ((4, 1, 1), 0), [((9, 1, 9), 0)], "contiguous"),
    "stride0 input": ((6,), ((1,), 0), [((0,), 2)], "contiguous"),
    "reversed all": ((5,), ((-1,), 4), [((-1,), 4)], "contiguous"),
    "reversed input": ((5,), ((1,), 0), [((-1,), 4)], "strided"),
    "step 2": ((4, 3), ((3, 1), 0), [((6, 2), 0)], "strided"),
    "small transpose": ((3, 5), ((5, 1), 0), [((1, 3), 0)], "strided"),
    "big transpose": ((40, 50), ((50, 1), 0), [((1, 40), 0), ((50, 1), 0)], "tiled"),
    "transposed out": ((40, 50), ((1, 40), 0), [((50, 1), 0)], "tiled"),
    "batched transpose": ((3, 20, 30), ((600, 30, 1), 0), [((600, 1, 20), 0)], "tiled"),
    "rank 6 permuted": ((2, 3, 2, 3, 2, 2), ((72, 24, 12, 4, 2, 1), 0),
                        [((1, 2, 6, 12, 36, 72), 0)], "strided"),
    "rank 9 compact": ((2,) * 9, (compact_strides((2,) * 9), 0),
                       [(compact_strides((2,) * 9), 0)], "contiguous"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_plan(name):
    shape, out, inputs, path = CASES[name]
    p = plan(shape, out, inputs, "op")
    got = "contiguous" if p.contiguous else ("tiled" if p.tiled else "strided")
    assert got == path
    _check_mapping(shape, out, inputs, p)
    if p.contiguous:
        assert len(p.shape) <= 1
        assert p.broadcast == tuple(bool(p.shape) and st[0] == 0 for st in p.strides[1:])
    if p.tiled:
        assert len(p.shape) == 3 and p.tiled & 1
        assert all(0 < abs(p.strides[k + 1][1]) < abs(p.strides[k + 1][2])
                   for k in range(len(inputs)) if p.tiled & (2 << k))


def test_tiled_marks_only_transposed_inputs():
    p = plan((64, 64), ((64, 1), 0), [((64, 1), 0), ((1, 64), 0), ((1, 64), 7)], "op")
    assert p.tiled == 1 | 4 | 8
    assert tiled_grid(p) == (2, 2, 1)
    p = plan((3, 33, 65), ((2145, 65, 1), 0), [((2145, 1, 33), 0)], "op")
    assert tiled_grid(p) == (3, 2, 3)


def test_too_many_strided_axes():
    shape = (2,) * 9
    strides = tuple(4 ** (8 - i) for i in range(9))  # no two axes merge
    with pytest.raises(ValidationError) as info:
        plan(shape, (compact_strides(shape), 0), [(strides, 0)], "add_read")
    assert info.value.kind == "rank_mismatch" and info.value.op == "add_read"


def test_tile_bytes():
    assert tile_bytes(4) == 32 * 33 * 4
    assert tile_bytes(1) == (32 * 33 + 15) // 16 * 16
    assert tile_bytes(16) == 32 * 33 * 16


@pytest.mark.parametrize("shape,limit", [
    ((10,), 4), ((7, 9), 10), ((3, 4, 5), 7), ((2, 50), 20), ((5, 3, 40), 16), ((4,), 100),
], ids=str)
def test_chunks_cover_the_walk_in_order(shape, limit):
    strides = [compact_strides(shape), tuple(-s for s in compact_strides(shape))]
    offsets = [3, math.prod(shape) - 1]
    pieces = list(chunks(shape, strides, offsets, limit))
    assert all(math.prod(s) < limit for s, _, _ in pieces)
    for k in range(2):
        got = [o for s, st, off in pieces for o in _offsets(s, st[k], off[k])]
        assert got == _offsets(shape, strides[k], offsets[k])
    assert (len(pieces) == 1) == (math.prod(shape) < limit)


def test_chunks_elementwise_equivalence():
    rng = np.random.default_rng(1)
    data = rng.standard_normal(600)
    shape, st, off = (6, 10, 10), (100, 1, 10), 0  # a transposed inner block
    pieces = list(chunks(shape, [st], [off], 64))
    seen = np.concatenate([data[_offsets(s, strides[0], o[0])] for s, strides, o in pieces])
    assert np.array_equal(seen, data[_offsets(shape, st, off)])


BCAST_CASES = {
    # name: (shape, out (strides, offset), inputs [(strides | None, offset)], rank-3 shape
    #        of the broadcast-rows walk or None for another path)
    "row vector": ((32, 64), ((64, 1), 0), [((64, 1), 0), ((0, 1), 0)], (1, 32, 64)),
    "column vector": ((32, 64), ((64, 1), 0), [((64, 1), 0), ((1, 0), 0)], (1, 32, 64)),
    "middle axis": ((4, 8, 16), ((128, 16, 1), 0), [((128, 16, 1), 0), ((16, 0, 1), 3)],
                    (4, 8, 16)),
    "leading axis merges": ((4, 8, 16), ((128, 16, 1), 0), [((0, 16, 1), 0)], (1, 4, 128)),
    "rank0 and row": ((5, 6), ((6, 1), 0), [(None, 2), ((0, 1), 1)], (1, 5, 6)),
    "slice of columns": ((8, 64), ((64, 1), 0), [((72, 1), 4)], (1, 8, 64)),
    "reversed rows": ((8, 64), ((64, 1), 0), [((-64, 1), 448)], (1, 8, 64)),
    "strided out rows": ((8, 64), ((80, 1), 4), [((0, 1), 0)], (1, 8, 64)),
    "reversed out": ((6, 5), ((-5, 1), 25), [((0, 1), 0)], (1, 6, 5)),
    "scalar view": ((16, 64), ((64, 1), 0), [((0, 0), 0)], None),  # contiguous
    "step 2": ((4, 3), ((3, 1), 0), [((6, 2), 0)], None),  # strided
    "transposed": ((40, 50), ((50, 1), 0), [((1, 40), 0)], None),  # tiled
    "rank 4 left": ((2, 3, 4, 5), ((60, 20, 5, 1), 0), [((0, 5, 0, 1), 0)], None),
}


@pytest.mark.parametrize("name", list(BCAST_CASES))
def test_bcast_plan(name):
    shape, out, inputs, walk = BCAST_CASES[name]
    p = plan(shape, out, inputs, "op", bcast=True)
    assert p.bcast == (walk is not None)
    _check_mapping(shape, out, inputs, p)
    if walk is not None:
        assert not p.contiguous and not p.tiled and p.shape == walk
        assert len(p.strides) == 1 + len(inputs) and all(len(st) == 3 for st in p.strides)
        assert p.strides[0][2] == 1 and all(st[2] in (0, 1) for st in p.strides[1:])
    assert plan(shape, out, inputs, "op").bcast is False  # a family without the kernel


def test_bcast_plan_leaves_the_other_paths_alone():
    for shape, out, inputs, path in CASES.values():
        p = plan(shape, out, inputs, "op", bcast=True)
        if p.bcast:
            assert path == "strided" and all(st[2] in (0, 1) for st in p.strides[1:])
        else:
            got = "contiguous" if p.contiguous else ("tiled" if p.tiled else "strided")
            assert got == path


@pytest.mark.parametrize("shape,strides,addresses,items,vec,want", [
    ((1, 8, 64), [(0, 64, 1), (0, 0, 1)], [4096, 8192], [4, 4], 4, True),
    ((1, 8, 62), [(0, 62, 1), (0, 0, 1)], [4096, 8192], [4, 4], 4, False),  # rows of 62
    ((1, 8, 64), [(0, 64, 1), (0, 0, 1)], [4096, 8196], [4, 4], 4, False),  # bias at +4 B
    ((1, 8, 64), [(0, 64, 1), (0, 1, 0)], [4096, 8196], [4, 4], 4, True),  # column: any
    ((1, 8, 64), [(0, 64, 1), (0, 70, 1)], [4096, 8192], [4, 4], 4, False),  # rows 70 apart
    ((1, 1, 64), [(0, 64, 1), (0, 70, 1)], [4096, 8192], [4, 4], 4, True),  # one row
    ((2, 8, 64), [(512, 64, 1), (2, 0, 1)], [4096, 8192], [4, 4], 4, False),  # axis 0
    ((1, 8, 64), [(0, 64, 1), (0, 0, 1)], [4096, 8196], [4, 1], 4, True),  # 4-byte bools
    ((1, 8, 64), [(0, 64, 1), (0, 0, 1)], [4104, 8192], [16, 16], 1, False),  # 8 B of 16
], ids=str)
def test_bcast_vectors(shape, strides, addresses, items, vec, want):
    assert bcast_vectors(shape, strides, addresses, items, vec) is want


def test_pad3():
    assert pad3((5, 6), [(6, 1), (0, 1)]) == ((1, 5, 6), [(0, 6, 1), (0, 0, 1)])
    assert pad3((2, 3, 4), [(12, 4, 1)]) == ((2, 3, 4), [(12, 4, 1)])
