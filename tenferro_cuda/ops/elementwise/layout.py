"""How an elementwise call walks memory (pure Python, no device).

``plan`` takes the output's and the inputs' strides and element offsets over one logical
shape and picks the kernel path:

1. axes where the output runs backwards are flipped in every operand (the op is order
   independent), then axes are sorted by the output's stride, largest first, and
   ``coalesce`` merges what is contiguous in every operand;
2. if at most one axis remains and every operand has stride 1 along it (or 0: a
   broadcast value, read once per thread), the **contiguous** kernel runs on the data
   pointers at the planned offsets;
3. if (``bcast``) at most three axes remain, the output has stride 1 along the last and
   every input stride 1 or 0 (a broadcast view: a bias row, a column, a scalar, a middle
   axis), the **broadcast-rows** kernel runs on layouts padded to rank 3 (leading extents
   of 1): 16-byte vectors along the rows when ``bcast_vectors`` allows, a stride-0 input
   read once per vector;
4. otherwise the **strided** kernel runs with one ``tf::Layout`` per operand. At rank 2
   or 3 (a leading batch axis), when an input walks its rows faster than its columns (a
   transposed view), the **tiled** mode stages those inputs through shared memory so that
   they, and the output, are accessed along their stride-1 axes.

Kernels index with 32 bits: ``chunks`` splits a plan of 2^31 or more elements into
launches below ``CHUNK`` elements along the outer axes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ...errors import ValidationError
from ...kernels.args import MAX_RANK
from .._layout import coalesce

CHUNK = 1 << 30  # elements per launch (a multiple of every vector width)
TILE = 32
TILED_MIN = 16  # rows and columns below this use the plain strided path
GRID_YZ_LIMIT = 65535


class Plan(NamedTuple):
    contiguous: bool
    shape: tuple[int, ...]  # coalesced; rank 3 (batch, rows, cols) in tiled mode
    strides: tuple[tuple[int, ...], ...]  # per operand, output first
    offsets: tuple[int, ...]  # element offsets per operand, output first
    broadcast: tuple[bool, ...]  # per input: one value for all elements (contiguous path)
    tiled: int  # kernel mode: 0, or 1 | (2 << k) for each staged input k
    bcast: bool = False  # the broadcast-rows kernel (shape and strides of rank 3)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def plan(shape: Sequence[int], out: tuple[Sequence[int], int],
         inputs: Sequence[tuple[Sequence[int] | None, int]], op: str,
         bcast: bool = False) -> Plan:
    """The walk for ``out`` = f(inputs). Each operand is ``(strides, offset)``; an input's
    strides are None for a rank-0 operand broadcast over ``shape``. ``bcast``: the
    kernel family has the broadcast-rows kernel."""
    ndim = len(shape)
    strides = [list(out[0])] + [list(s) if s is not None else [0] * ndim for s, _ in inputs]
    offsets = [out[1]] + [off for _, off in inputs]
    for d in range(ndim):
        if strides[0][d] < 0 and shape[d] > 1:
            for k, st in enumerate(strides):
                offsets[k] += (shape[d] - 1) * st[d]
                st[d] = -st[d]
    order = sorted(range(ndim), key=lambda d: -strides[0][d])
    cshape, cstrides = coalesce([shape[d] for d in order], *([st[d] for d in order]
                                                             for st in strides))
    nin = len(inputs)
    if len(cshape) == 0 or (len(cshape) == 1 and cstrides[0][0] == 1
                            and all(st[0] in (0, 1) for st in cstrides[1:])):
        one = tuple(len(cshape) == 1 and st[0] == 0 for st in cstrides[1:])
        return Plan(True, cshape, tuple(cstrides), tuple(offsets), one, 0)
    if bcast and len(cshape) <= 3 and cstrides[0][-1] == 1 and all(
            st[-1] in (0, 1) for st in cstrides[1:]):
        shape3, strides3 = pad3(cshape, cstrides)
        return Plan(False, shape3, tuple(strides3), tuple(offsets), (False,) * nin, 0, True)
    if len(cshape) > MAX_RANK:
        raise ValidationError(
            f"the operands' layouts need {len(cshape)} strided axes after merging "
            f"contiguous ones; at most {MAX_RANK} are supported (copy an operand with "
            "to_contiguous_read first)", op=op, kind="rank_mismatch")
    mode = _tiled_mode(cshape, cstrides)
    if mode:
        if len(cshape) == 2:
            cshape = (1, *cshape)
            cstrides = [(0, *st) for st in cstrides]
        return Plan(False, tuple(cshape), tuple(cstrides), tuple(offsets), (False,) * nin,
                    mode)
    return Plan(False, tuple(cshape), tuple(cstrides), tuple(offsets), (False,) * nin, 0)


def _tiled_mode(cshape: Sequence[int], cstrides: Sequence[Sequence[int]]) -> int:
    if len(cshape) not in (2, 3):
        return 0
    rows, cols = cshape[-2], cshape[-1]
    batch = cshape[0] if len(cshape) == 3 else 1
    if rows < TILED_MIN or cols < TILED_MIN or -(-rows // TILE) > GRID_YZ_LIMIT \
            or batch > GRID_YZ_LIMIT:
        return 0
    mode = 0
    for k, st in enumerate(cstrides[1:]):
        if 0 < abs(st[-2]) < abs(st[-1]):
            mode |= 2 << k
    return 1 | mode if mode else 0


def bcast_vectors(shape: Sequence[int], strides: Sequence[Sequence[int]],
                  addresses: Sequence[int], items: Sequence[int], vec: int) -> bool:
    """Whether a broadcast-rows walk (rank 3) may move ``vec`` elements per vector: the
    rows are a multiple of ``vec`` long and every operand with stride 1 along them
    (``addresses``: of its first element; ``items``: its itemsize) starts each row on a
    ``vec``-element boundary. Operands with stride 0 along the rows are read one value
    at a time."""
    if shape[-1] % vec:
        return False
    for st, address, item in zip(strides, addresses, items):
        if st[-1] == 0:
            continue
        if address % (item * vec) or any(n > 1 and s % vec for n, s in zip(shape[:-1], st)):
            return False
    return True


def pad3(shape: Sequence[int], strides: Sequence[Sequence[int]]
         ) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """``shape`` and ``strides`` padded to rank 3 with leading extents of 1 (stride 0)."""
    pad = 3 - len(shape)
    return (1,) * pad + tuple(shape), [(0,) * pad + tuple(st) for st in strides]


def tiled_grid(p: Plan) -> tuple[int, int, int]:
    """Grid of the tiled mode: (column tiles, row tiles, batch)."""
    batch, rows, cols = p.shape
    return -(-cols // TILE), -(-rows // TILE), batch


def tile_bytes(item: int) -> int:
    """Shared memory of one staged 32x33 tile (``tf::tile_bytes`` in ewkernel.cuh)."""
    return (TILE * (TILE + 1) * item + 15) // 16 * 16


def chunks(shape: Sequence[int], strides: Sequence[Sequence[int]], offsets: Sequence[int],
           limit: int = CHUNK) -> Iterator[tuple[tuple[int, ...], tuple[tuple[int, ...], ...],
                                                   tuple[int, ...]]]:
    """(shape, strides, offsets) pieces of a strided walk, each below ``limit`` elements,
    covering it in order (a piece may drop leading axes)."""
    n = math.prod(shape)
    if n < limit:
        yield tuple(shape), tuple(tuple(st) for st in strides), tuple(offsets)
        return
    inner = math.prod(shape[1:])
    if inner >= limit:
        rest = [tuple(st[1:]) for st in strides]
        for i in range(shape[0]):
            sub = [off + i * st[0] for off, st in zip(offsets, strides)]
            yield from chunks(shape[1:], rest, sub, limit)
        return
    rows = max(1, (limit - 1) // inner)
    full = tuple(tuple(st) for st in strides)
    for start in range(0, shape[0], rows):
        count = min(rows, shape[0] - start)
        yield (count, *shape[1:]), full, tuple(off + start * st[0]
                                               for off, st in zip(offsets, strides))
