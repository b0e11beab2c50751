"""Plumbing shared by gather, scatter and the slicing ops: running a planned launch, view
copies (a plain device memcpy when both sides are dense and unshifted) and outputs padded
to whole 32-bit words (scatter's 8/16-bit atomics update the word that holds an element).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...dtypes import DType
from ...exec.context import ExecContext
from ...tensor import Tensor
from .plan import Launch, is_dense
from .plan_copy import Dynamic, copy_launch

__all__ = ["run", "copy_view", "alloc_words"]


def run(ctx: ExecContext, launch: Launch, op: str) -> None:
    """Enqueue one planned launch."""
    ctx.launch(ctx.function(launch.family, launch.expression), launch.codes, launch.grid,
               launch.args, op, block=(launch.block, 1, 1))


def copy_view(ctx: ExecContext, shape: Sequence[int], itemsize: int,
              dst: tuple[int, Sequence[int]], src: tuple[int, Sequence[int]], op: str,
              dyn: Dynamic | None = None) -> None:
    """Enqueue dst[i] = src[i] over ``shape``; views as (data_ptr, element strides)."""
    n = math.prod(shape)
    if n == 0:
        return
    if dyn is None and is_dense(shape, dst[1]) and is_dense(shape, src[1]):
        ctx.copy(dst[0], src[0], n * itemsize, op)
        return
    run(ctx, copy_launch(itemsize, shape, dst, src, ctx.sm_count, dyn), op)


def alloc_words(ctx: ExecContext, dtype: DType, shape: tuple[int, ...], op: str) -> Tensor:
    """A compact tensor whose buffer is a whole number of 32-bit words."""
    nbytes = math.prod(shape) * dtype.itemsize
    buf = ctx.alloc_bytes(-(-nbytes // 4) * 4, op)
    return Tensor._make(dtype, tuple(shape), buffer=buf)
