"""How a fused kernel walks memory (pure Python, no device).

The outputs are new compact row-major tensors of the plan's output shape; the kernel
runs over their flat index. ``walk`` coalesces that shape with the strides of every input
an output depends on (``ops/_layout.coalesce``: axes contiguous in every operand merge,
extent-1 axes drop) and gives each input a layout class:

- ``s``: one value for every element (a rank-0 input, or a view whose strides are all 0
  after merging, e.g. a broadcast scalar): read once per thread;
- ``c``: compact along the flat index (stride 1 after merging to one axis): the
  **contiguous** path, 16-byte vectors when every compact pointer is 16-byte aligned;
- ``r``: at most three merged axes, every array with stride 1 or 0 along the last one
  (a bias row, a column, a middle axis broadcast beside compact rows): the
  **broadcast-rows** path, one rank-3 ``tf::Layout`` per such input (leading extents of
  1 pad the rank), 16-byte vectors along the rows;
- ``l``: anything else (transposed, sliced, negative strides, more axes): the
  **strided** path with one ``tf::Layout`` per such input, one division chain per
  element for all of them;
- ``u``: no output depends on it: not passed to the kernel.

The contiguous path is taken when every ``c``/``l`` candidate is compact; otherwise the
broadcast-rows path when it fits, else the strided path, unless the merged walk has more
than 8 axes (``walk`` returns None: the plan is declined). Kernels index with 32 bits:
launches are split below ``CHUNK`` elements (``ops/elementwise/layout.chunks``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ...kernels.args import MAX_RANK
from ...tensor import _Strided, compact_strides
from .._layout import coalesce


class Walk(NamedTuple):
    path: str  # the kernel path: contig, bcast or strided
    classes: str  # one layout class per input: c, s, r, l or u
    shape: tuple[int, ...]  # merged
    arrays: tuple[int, ...]  # inputs of class c or l, in order
    strides: tuple[tuple[int, ...], ...]  # merged strides: the outputs', then each array's
    offsets: tuple[int, ...]  # element offsets: 0 for the outputs, then each array's

    @property
    def contig(self) -> bool:
        return self.path == "contig"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def walk(shape: Sequence[int], inputs: Sequence[_Strided], live: Sequence[bool]) -> Walk | None:
    """The walk of outputs of ``shape`` over ``inputs`` (``live[k]``: an output needs
    input k; live inputs have ``shape`` or rank 0); None when it needs > 8 axes."""
    classes = ["u" if not used else "s" if x.ndim == 0 else "?"
               for x, used in zip(inputs, live)]
    cand = [k for k, c in enumerate(classes) if c == "?"]
    for k in cand:
        assert tuple(inputs[k].shape) == tuple(shape), (inputs[k].shape, shape)
    cshape, cstrides = coalesce(shape, compact_strides(shape), *(inputs[k].strides for k in cand))
    arrays = []
    for k, st in zip(cand, cstrides[1:]):
        if cshape and all(s == 0 for s in st):
            classes[k] = "s"
        else:
            arrays.append(k)
    astrides = [cstrides[0]] + [st for k, st in zip(cand, cstrides[1:]) if k in arrays]
    if len(cshape) <= 1 and all(st[0] == 1 for st in astrides[1:] if st):
        path, cls = "contig", "c"
    elif len(cshape) <= 3 and all(st[-1] in (0, 1) for st in astrides[1:]):
        path, cls = "bcast", "r"  # the outputs' last stride is 1 (compact, merged)
    elif len(cshape) > MAX_RANK:
        return None
    else:
        path, cls = "strided", "l"
    for k in arrays:
        classes[k] = cls
    return Walk(path, "".join(classes), tuple(cshape), tuple(arrays), tuple(astrides),
                (0, *(inputs[k].offset for k in arrays)))
