"""Products over device arrays of operand addresses (grouped GEMM), and the pinned host
memory those arrays are uploaded from.

- ``PointerGemm`` is the cuBLAS side of a grouped call, bound once: uniform groups of
  problems (equal transposes, sizes, leading dimensions and scalars) whose A, B and C
  addresses sit in one device array -- every A address, then every B, then every C, group
  after group. One ``cublasGemmBatchedEx`` per group, or, for several groups of a real
  float dtype on cuBLAS 12.5+, one ``cublasGemmGroupedBatchedEx`` whose per-group
  parameters are host arrays made here once. ``run(pointers, op)`` takes only the
  address of the pointer array.
- ``PinnedRing`` is page-locked host memory the pointer arrays are copied through, so
  that their upload is a true asynchronous copy (a copy from pageable memory may wait for
  the stream). The ring is used front to back and starts over only when the stream has
  finished every earlier copy (``cuStreamQuery``), so no region is rewritten while a
  copy from it may still be pending; when it is full and the stream busy, or an array is
  larger than the ring, that one array is copied from pageable memory instead. Never
  blocks. Freed by ``close`` (the owning ``Blas`` closes with its context) or, failing
  that, by a finalizer holding only the address.
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _cublas, _driver, _driver_memory
from ..authority import Authority

__all__ = ["PointerGemm", "PinnedRing", "RING_BYTES"]

RING_BYTES = 64 << 10  # 2,730 problems' addresses per pass through the ring


def _free_host(ptr: int) -> None:
    """Free pinned memory; never raises (it runs as a finalizer)."""
    if ptr and not sys.is_finalizing():
        try:
            _driver_memory.host_free(ptr)  # returns the status
        except Exception:  # noqa: BLE001 - a driver that can no longer be loaded
            pass


class PinnedRing(Authority):
    """Pinned staging for uploads of small host arrays (see the module docstring)."""

    __slots__ = ("ptr", "head", "_finalizer", "__weakref__")

    def __init__(self) -> None:
        self.ptr = _driver_memory.host_alloc_pinned(RING_BYTES)
        self.head = 0
        self._finalizer = weakref.finalize(self, _free_host, self.ptr)
        self._finalizer.atexit = False

    def take(self, stream: Any, nbytes: int) -> int:
        """The host address of ``nbytes`` free bytes of the ring, 16-byte aligned, or 0
        when none can be given without waiting."""
        if nbytes > RING_BYTES or not self.ptr:
            return 0
        head = self.head
        if head + nbytes > RING_BYTES:
            if not _driver.stream_query(stream):
                return 0
            head = 0
        self.head = (head + nbytes + 15) & -16
        return self.ptr + head

    def upload(self, ctx: Any, dst: int, data: np.ndarray, op: str) -> None:
        """Enqueue the copy of the C-contiguous ``data`` to device address ``dst`` on
        ``ctx``'s stream."""
        nbytes = data.nbytes
        if not nbytes:
            return
        src = data.ctypes.data
        at = self.take(ctx.stream, nbytes)
        if at:
            ctypes.memmove(at, src, nbytes)
            src = at
        ctx.upload(dst, src, nbytes, op)

    def close(self) -> None:
        """Free the pinned memory now (idempotent); the stream must be idle."""
        self._finalizer()
        self.ptr = 0


class PointerGemm:
    """The bound cuBLAS calls of a grouped product (see the module docstring).

    ``keys`` are the groups, each (transa, transb, m, n, k, lda, ldb, ldc, alpha, beta);
    ``sizes`` the problems per group. ``layout``/``is_complex`` pack alpha and beta for
    the batched calls (``exec.blas.BLAS_TYPES``); ``scale`` is the host scalar type of
    the grouped call's alpha/beta arrays, None where cuBLAS has no grouped form (complex).
    """

    __slots__ = ("handle", "cuda_type", "compute", "total", "batched", "grouped", "_keep")

    def __init__(self, handle: Any, keys: Sequence[tuple], sizes: Sequence[int],
                 cuda_type: int, compute: int, layout: Any, is_complex: bool,
                 scale: Any) -> None:
        self.handle, self.cuda_type, self.compute = handle, cuda_type, compute
        self.total = sum(sizes)
        self.batched: list[tuple] = []
        self.grouped: tuple | None = None
        if scale is not None and len(keys) > 1 and _cublas.has_grouped():
            self._bind_grouped(keys, sizes, scale)
            return
        blocks = ctypes.create_string_buffer(48 * max(1, len(keys)))
        base = ctypes.addressof(blocks)
        offset = 0
        for g, (key, size) in enumerate(zip(keys, sizes)):
            alpha, beta = key[8], key[9]
            if is_complex:
                layout.pack_into(blocks, 48 * g, alpha.real, alpha.imag, beta.real, beta.imag)
            else:
                layout.pack_into(blocks, 48 * g, alpha, beta)
            self.batched.append((*key[:8], size, offset, base + 48 * g))
            offset += size
        self._keep: Any = blocks

    def _bind_grouped(self, keys: Sequence[tuple], sizes: Sequence[int], scale: Any) -> None:
        groups = len(keys)
        params = [[*key[:8], size] for key, size in zip(keys, sizes)]
        ints = np.array(params, dtype=np.int32).T.copy()  # row i: parameter i per group
        scalars = np.array([[k[8] for k in keys], [k[9] for k in keys]], dtype=np.dtype(scale))
        at = ints.ctypes.data
        rows = [at + 4 * groups * i for i in range(9)]  # ..., ldc, then the group sizes
        self.grouped = (*rows, scalars.ctypes.data,
                        scalars.ctypes.data + scalars.itemsize * groups, groups)
        self._keep = (ints, scalars)

    def run(self, pointers: int, op: str) -> None:
        """Enqueue every product; ``pointers``: device address of the address array."""
        total = self.total
        pa, pb, pc = pointers, pointers + 8 * total, pointers + 16 * total
        h, ct, compute = self.handle, self.cuda_type, self.compute
        if self.grouped is not None:
            ta, tb, m, n, k, lda, ldb, ldc, sizes, alphas, betas, groups = self.grouped
            _cublas.gemm_grouped(h, ta, tb, m, n, k, alphas, pa, ct, lda, pb, ldb, betas,
                                 pc, ldc, groups, sizes, compute, op)
            return
        for ta, tb, m, n, k, lda, ldb, ldc, size, at, scalars in self.batched:
            _cublas.gemm_batched(h, ta, tb, m, n, k, scalars, pa + 8 * at, ct, lda,
                                 pb + 8 * at, ldb, scalars + 16, pc + 8 * at, ldc, size,
                                 compute, op)
