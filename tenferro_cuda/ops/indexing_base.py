"""Plumbing shared by the indexing mixins: running a planned launch, view copies (a plain
device memcpy when both sides are dense and unshifted) and outputs padded to whole 32-bit
words (scatter's 8/16-bit atomics update the word that holds an element).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..dtypes import DType
from ..kernels import device
from ..tensor import Tensor
from ._base import OpsBase
from .indexing_plan import Launch, is_dense
from .indexing_plan_copy import Dynamic, copy_launch


class IndexingBase(OpsBase):
    """Helpers of the gather, scatter and slicing mixins."""

    def _run(self, launch: Launch, op: str) -> None:
        fn = self._fn(launch.family, launch.expression)
        pack = self._pack((launch.family, launch.expression), launch.codes)
        self._launch(fn, launch.grid, (launch.block, 1, 1), pack.pack(*launch.args), op)

    def _sms(self) -> int:
        return self._rt.info.multiprocessor_count

    def _copy_view(self, shape: Sequence[int], itemsize: int, dst: tuple[int, Sequence[int]],
                   src: tuple[int, Sequence[int]], op: str, dyn: Dynamic | None = None
                   ) -> None:
        """Enqueue dst[i] = src[i] over ``shape``; views as (data_ptr, element strides)."""
        n = math.prod(shape)
        if n == 0:
            return
        if dyn is None and is_dense(shape, dst[1]) and is_dense(shape, src[1]):
            device.memcpy_dtod_async(dst[0], src[0], n * itemsize, self._state.stream, op)
            return
        self._run(copy_launch(itemsize, shape, dst, src, self._sms(), dyn), op)

    def _alloc_words(self, dtype: DType, shape: tuple[int, ...], op: str) -> Tensor:
        """A compact tensor whose buffer is a whole number of 32-bit words."""
        nbytes = math.prod(shape) * dtype.itemsize
        buf = self._rt.pool.alloc(-(-nbytes // 4) * 4, self._state.stream, op)
        return Tensor._make(dtype, tuple(shape), buffer=buf)
