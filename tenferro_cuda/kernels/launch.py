"""The launcher: the only path to ``cuLaunchKernel`` (through ``_driver_fast.launch``,
with the function and the stream in the form it takes, converted once when the launch
is prepared).

A ``PreparedLaunch`` holds a loaded function, its block shape and dynamic shared memory
(validated against the device when the launch is prepared), the stream, and a packed
parameter block laid out once from the kernel's argument codes (``kernels/args.py``): a
*head* of parameters written per call with one ``struct.pack_into``, and a *tail* of
constants (the error word, error codes) written once. ``run(gx, *head)`` and
``run3(grid, *head)`` write the head and launch; a failed launch raises the typed error
naming the op. For a hot path, ``bound(gx)`` is the launch of a ``gx``-block grid with
every argument bound: a call of no arguments that runs no Python code (a
``functools.partial`` of the binding's launch; the block is the one ``pack(*head)``
writes), unchecked: the caller passes what it raises to ``failed``, which raises the
typed error of a failed launch (or the exception itself, when it is not a driver
failure). ``put_tail(j, value)`` rewrites tail value ``j`` for the launches that
follow: a word the head does not carry because it rarely changes (the high half of a
complex128 scalar operand of an elementwise kernel). ``cuLaunchKernel`` copies the
parameters when it is called, so a prepared launch can be refilled right after it returns;
prepared launches belong to one execution context (one thread) and are never shared
between threads.

``pointer_slots`` lists the head positions that hold device pointers (code ``P``): what a
graph replay rebinds.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from .. import _driver, _driver_fast
from ..authority import Authority
from ..errors import ValidationError
from .args import parse_codes

__all__ = ["PreparedLaunch", "WatchedLaunch", "Layout", "layout", "check_geometry"]

_launch = _driver_fast.launch  # integer handles; raises _Failure (``.status``)
_Failure = _driver_fast.Failure
_handle = _driver_fast.handle  # a CUfunction's or CUstream's form for the launch
_failed = _driver.launch_failed


def check_geometry(info: Any, grid: Sequence[int], block: Sequence[int], shared: int,
                   op: str) -> None:
    """Raise ValidationError unless ``grid``/``block``/``shared`` fit the device limits of
    ``info`` (a CudaDeviceInfo): every dim >= 1, threads per block, per-axis block and grid
    limits, dynamic shared memory."""
    problems = []
    for name, dims in (("grid", grid), ("block", block)):
        if len(dims) != 3 or any(type(d) is not int or d < 1 for d in dims):
            problems.append(f"{name} must be three ints >= 1 (got {tuple(dims)})")
    if problems:
        raise ValidationError("; ".join(problems), op=op)
    threads = block[0] * block[1] * block[2]
    if threads > info.max_threads_per_block:
        problems.append(f"block {tuple(block)} has {threads} threads "
                        f"(device limit {info.max_threads_per_block})")
    for name, dims, limit in (("block", block, info.max_block_dims),
                              ("grid", grid, info.max_grid_dims)):
        if any(d > m for d, m in zip(dims, limit)):
            problems.append(f"{name} {tuple(dims)} exceeds the device limits {tuple(limit)}")
    if not 0 <= shared <= info.max_shared_per_block:
        problems.append(f"shared memory {shared} bytes is outside the device limit "
                        f"[0, {info.max_shared_per_block}]")
    if problems:
        raise ValidationError("; ".join(problems), op=op)


class Layout(NamedTuple):
    """What every launch of one argument-code string with one tail length shares: the
    head writer, the parameter offsets, the tail writers with their offsets, the size of
    the block and the ctypes type of its pointer array."""

    nhead: int
    pointer_slots: tuple[int, ...]
    head: struct.Struct
    offsets: tuple[int, ...]
    tail: tuple[tuple[int, struct.Struct], ...]
    size: int
    array: Any


_LAYOUTS: dict[tuple[str, int], Layout] = {}


def layout(codes: str, ntail: int) -> Layout:
    """The ``Layout`` of ``codes`` whose last ``ntail`` parameters are the tail (made once
    per process: a first kernel's launch is prepared without parsing its codes)."""
    found = _LAYOUTS.get((codes, ntail))
    if found is not None:
        return found
    tokens, offsets, fmts, size = parse_codes(codes)
    nhead = len(tokens) - ntail
    if nhead < 0:
        raise ValueError(f"{ntail} tail values for {len(tokens)} parameters")
    head = ["<"]
    pos = 0
    for off, fmt in zip(offsets[:nhead], fmts[:nhead]):
        if off > pos:
            head.append(f"{off - pos}x")
        head.append(fmt)
        pos = off + struct.calcsize("<" + fmt)
    found = Layout(nhead, tuple(i for i, t in enumerate(tokens[:nhead]) if t == "P"),
                   struct.Struct("".join(head)), tuple(offsets),
                   tuple((off, struct.Struct("<" + fmt))
                         for off, fmt in zip(offsets[nhead:], fmts[nhead:])),
                   max(size, 1), ctypes.c_void_p * max(len(tokens), 1))
    return _LAYOUTS.setdefault((codes, ntail), found)


class PreparedLaunch(Authority):
    """One kernel's launch on one stream, prepared (see the module docstring). It cannot
    be copied or pickled: it launches on its context's stream."""

    __slots__ = ("fn", "codes", "stream", "bx", "by", "bz", "shared", "op", "nhead",
                 "pointer_slots", "_head", "_shift", "_buf", "_ptrs", "pack", "_tail", "address",
                 "_fn", "_stream")

    def __init__(self, fn: Any, codes: str, stream: Any, info: Any, *,
                 block: tuple[int, int, int] = (256, 1, 1), shared: int = 0,
                 tail: tuple = (), op: str = "") -> None:
        check_geometry(info, (1, 1, 1), block, shared, op)
        lay = layout(codes, len(tail))
        self.fn, self.codes, self.stream, self.op = fn, codes, stream, op
        self._fn, self._stream = _handle(fn), _handle(stream)  # what the launch takes
        self.bx, self.by, self.bz = block
        self.shared = shared
        self.nhead = lay.nhead
        self.pointer_slots = lay.pointer_slots
        self._head = lay.head
        self._buf = ctypes.create_string_buffer(lay.size + 16)
        base = ctypes.addressof(self._buf)
        self._shift = shift = (-base) % 16  # 16-align the block (X slots)
        self._ptrs = lay.array(*[base + shift + off for off in lay.offsets])
        self.address = ctypes.addressof(self._ptrs)
        # The head writer with its buffer and offset bound: one call per launch.
        self.pack = functools.partial(lay.head.pack_into, self._buf, shift)
        # One writer per tail value, its buffer and offset bound (put_tail is one call).
        self._tail = tuple(functools.partial(writer.pack_into, self._buf, shift + off)
                           for off, writer in lay.tail)
        for j, value in enumerate(tail):
            self._tail[j](value)

    def put_tail(self, j: int, value: Any) -> None:
        """Write tail value ``j`` (the ``j``-th parameter after the head) for the launches
        that follow; launches already made copied theirs."""
        self._tail[j](value)

    def run(self, gx: int, *head: Any) -> None:
        """Write the head parameters and launch a grid of (gx, 1, 1) blocks."""
        self.pack(*head)
        try:
            _launch(self._fn, gx, 1, 1, self.bx, self.by, self.bz, self.shared, self._stream,
                    self.address, 0)
        except _Failure as exc:
            self.failed(exc)

    def run3(self, grid: Sequence[int], *head: Any) -> None:
        """``run`` with a 3-D grid."""
        self.pack(*head)
        try:
            _launch(self._fn, grid[0], grid[1], grid[2], self.bx, self.by, self.bz,
                    self.shared, self._stream, self.address, 0)
        except _Failure as exc:
            self.failed(exc)

    def bound(self, gx: int) -> Callable[[], Any]:
        """The launch of a grid of (gx, 1, 1) blocks with the parameters ``pack`` wrote:
        unchecked (see the module docstring); pass what it raises to ``failed``."""
        return functools.partial(_launch, self._fn, gx, 1, 1, self.bx, self.by, self.bz,
                                 self.shared, self._stream, self.address, 0)

    def failed(self, exc: BaseException) -> NoReturn:
        """Raise the typed error of a launch that raised ``exc``: a driver failure as
        ``run`` raises it, anything else as it is."""
        if isinstance(exc, _Failure):
            _failed(exc.status, self.op)  # type: ignore[attr-defined]
        raise exc

    def __repr__(self) -> str:
        return (f"PreparedLaunch({self.codes!r}, block=({self.bx}, {self.by}, {self.bz}), "
                f"shared={self.shared}, op={self.op!r})")


class WatchedLaunch(PreparedLaunch):
    """A ``PreparedLaunch`` of a kernel that may write its context's deferred-error word:
    every launch counts itself in ``watch`` (an ``exec.device_errors.ErrorWatch``), so
    that the next ``synchronize`` reads the word. Launches of other kernels pay nothing."""

    __slots__ = ("watch",)

    def __init__(self, fn: Any, codes: str, stream: Any, info: Any, watch: Any,
                 **kwargs: Any) -> None:
        super().__init__(fn, codes, stream, info, **kwargs)
        self.watch = watch

    def run(self, gx: int, *head: Any) -> None:
        self.watch.count += 1
        PreparedLaunch.run(self, gx, *head)

    def run3(self, grid: Sequence[int], *head: Any) -> None:
        self.watch.count += 1
        PreparedLaunch.run3(self, grid, *head)

    def bound(self, gx: int) -> Callable[[], Any]:
        """``PreparedLaunch.bound``, counting each launch in ``watch``."""
        go, watch = PreparedLaunch.bound(self, gx), self.watch

        def counted() -> None:
            watch.count += 1
            go()
        return counted
