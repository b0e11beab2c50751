"""The plumbing every op family uses: entry checks, residency, allocation, launches.

An op method follows one pattern:
    state = self._begin(op)                     # thread, scope, runtime, context
    ... validate with shapes.py (raises before anything is allocated) ...
    out = self._alloc(dtype, shape, op)         # compact device tensor
    fn = self._fn(family, expression)           # compiled + loaded once, then a dict hit
    self._launch(fn, grid, block, pack.pack(...), op, shared=0)
Success means the work is enqueued on ``state.stream``; nothing here synchronizes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .. import _context
from ..dtypes import DType
from ..errors import RuntimeStateError, ValidationError
from ..kernels import device
from ..kernels.args import ArgPack
from ..tensor import Tensor, _Strided

if TYPE_CHECKING:
    from ..memory import DeviceBuffer
    from ..runtime import CudaRuntime, ThreadState
    from ..session import Scope

_LOST = device.lost_contexts()  # the shared set itself
_get_ident = threading.get_ident
_current_id = device.current_context_id
BLOCK = 256


class OpsBase:
    """State and helpers shared by the session's op mixins."""

    _rt: CudaRuntime
    _state: ThreadState
    _thread: int
    _scope: Scope

    # --- entry ---------------------------------------------------------------------------
    def _begin(self, op: str):
        if _get_ident() != self._thread:
            raise RuntimeStateError(
                "this session belongs to another thread; open a session in this thread",
                op=op)
        if not self._scope.alive:
            raise RuntimeStateError("the session's scope has ended", op=op)
        rt = self._rt
        if rt.context_id in _LOST or rt.closed:
            rt.check_alive(op)
        if _current_id() != rt.context_id:  # user code switched contexts: ours again
            _context.ensure_current(rt.context, rt.context_id)
        return self._state

    def _resident(self, t, op: str, what: str = "input") -> None:
        """Raise RuntimeStateError unless ``t`` is a live device tensor/view of this session."""
        if not isinstance(t, _Strided):
            raise ValidationError(f"{what} must be a Tensor or TensorView "
                                  f"(got {type(t).__name__})", op=op)
        buf = t.base.buffer
        rt = self._rt
        if buf is not None and not buf.freed and buf.domain == rt.domain.value \
                and buf.stream is self._state.stream:
            return
        self._not_resident(t, op, what)

    def _not_resident(self, t, op: str, what: str) -> None:
        rt = self._rt
        here = f"runtime {rt.identity.serial} on device {rt.ordinal}"
        buf = t.base.buffer
        if buf is None:
            found = "a host tensor (upload it with upload_host_tensor first)"
        elif buf.freed:
            found = "a reclaimed tensor (its buffer was released)"
        elif buf.ordinal != rt.ordinal:
            found = f"a tensor on device {buf.ordinal}"
        elif buf.domain != rt.domain.value:
            found = f"a tensor of another runtime (allocation domain {buf.domain})"
        else:
            found = "a tensor created on another thread's stream"
        raise RuntimeStateError(
            f"{what}: expected a device tensor resident on {here} "
            f"(allocation domain {rt.domain.value}); found {found}", op=op)

    # --- memory --------------------------------------------------------------------------
    def _alloc(self, dtype: DType, shape: tuple[int, ...], op: str) -> Tensor:
        n = 1
        for s in shape:
            n *= s
        buf = self._rt.pool.alloc(n * dtype.itemsize, self._state.stream, op)
        return Tensor._make(dtype, tuple(shape), buffer=buf)

    # --- kernels -------------------------------------------------------------------------
    def _fn(self, family: str, expression: str):
        return self._rt.function(family, expression)

    def _pack(self, key, codes: str) -> ArgPack:
        """This thread's reusable ArgPack for ``key`` (one per kernel signature use)."""
        prepared = self._state.prepared
        pack = prepared.get(key)
        if pack is None:
            pack = prepared[key] = ArgPack(codes)
        return pack

    def _launch(self, fn, grid, block, params: int, op: str, shared: int = 0) -> None:
        device.launch(fn, grid, block, shared, self._state.stream, params, op)

    def _launch1d(self, fn, blocks: int, params: int, op: str, block: int = BLOCK) -> None:
        device.launch3(fn, blocks, block, self._state.stream, params, op)

    def _grid(self, n: int, block: int = BLOCK, per_thread: int = 1) -> int:
        """Blocks for a grid-stride loop over ``n`` items: enough to fill the device."""
        need = -(-n // (block * per_thread))
        cap = self._rt.info.multiprocessor_count * 16
        return max(1, min(need, cap))

    if TYPE_CHECKING:
        # The storage helpers every family may call. They are implemented by TransferOps
        # (ops/transfer.py; PermuteCopyOps overrides the copies) and only declared here,
        # for the type checker: the session always has TransferOps among its bases.
        def _compact(self, view: _Strided, op: str) -> Tensor: ...

        def _copy_into(self, src: _Strided, dst: _Strided, op: str) -> None: ...

        def _fill(self, out: _Strided, value: object, op: str) -> None: ...

        def _scale(self, out: _Strided, factor: object, op: str) -> None: ...


def _buf(t: _Strided) -> DeviceBuffer:
    """The device buffer under ``t``, for a residency-checked (or freshly allocated)
    tensor or view, where it is never None."""
    buf = t.base.buffer
    if buf is None:
        raise RuntimeStateError("expected a device tensor; found a host tensor")
    return buf
