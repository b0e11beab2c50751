"""Kernel parameter blocks packed once and reused.

An ``ArgPack`` holds a byte buffer with every parameter at its aligned offset and a
``void*[]`` whose entries point at them; ``address`` is what ``cuLaunchKernel`` takes.
Refilling it is one ``struct.pack_into``. ``cuLaunchKernel`` copies the parameters at
launch, so a pack can be refilled right after a launch returns. Packs are per thread
(kept in the runtime's ThreadState), never shared between threads.

Codes: ``P`` device pointer, ``q``/``Q`` 64-bit ints, ``i``/``I`` 32-bit ints, ``f``/``d``
floats, ``L`` a ``tf::Layout`` (bytes from ``layout_bytes``), ``S<n>`` n raw bytes
(8-aligned), ``X<n>`` n raw bytes 16-aligned (a complex128 scalar, say).
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Sequence

MAX_RANK = 8
_LAYOUT = struct.Struct(f"<{MAX_RANK}q{MAX_RANK}qqii")
LAYOUT_SIZE = _LAYOUT.size
_SIMPLE = {"P": ("Q", 8), "q": ("q", 8), "Q": ("Q", 8), "i": ("i", 4), "I": ("I", 4),
           "f": ("f", 4), "d": ("d", 8)}
_TOKEN_RE = re.compile(r"[PqQiIfdL]|[SX]\d+")


def layout_bytes(shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> bytes:
    """A packed ``tf::Layout``; ``len(shape) <= 8``."""
    n = len(shape)
    if n > MAX_RANK or len(strides) != n:
        from ..errors import ValidationError

        raise ValidationError(f"a layout takes at most {MAX_RANK} axes and one stride per "
                              f"axis (got shape {tuple(shape)}, strides {tuple(strides)})",
                              op="layout", kind="rank_mismatch")
    pad = (0,) * (MAX_RANK - n)
    return _LAYOUT.pack(*shape, *pad, *strides, *pad, offset, n, 0)


def parse_codes(codes: str) -> tuple[list[str], list[int], list[str], int]:
    """(tokens, byte offsets, struct format of each, total size) of an argument block
    with every parameter at its natural alignment."""
    tokens = _TOKEN_RE.findall(codes)
    if "".join(tokens) != codes:
        raise ValueError(f"bad argument codes {codes!r}")
    offsets, fmts = [], []
    pos = 0
    for tok in tokens:
        if tok in _SIMPLE:
            code, size = _SIMPLE[tok]
            align = size
        elif tok == "L":
            code, size, align = f"{LAYOUT_SIZE}s", LAYOUT_SIZE, 8
        else:
            size = int(tok[1:])
            code, align = f"{size}s", (16 if tok[0] == "X" else 8)
        pos += (-pos) % align
        offsets.append(pos)
        fmts.append(code)
        pos += size
    return tokens, offsets, fmts, pos


class ArgPack:
    """A reusable parameter block for one kernel signature (see module docstring)."""

    __slots__ = ("codes", "_struct", "_buf", "_ptrs", "_shift", "address")

    def __init__(self, codes: str) -> None:
        tokens, offsets, fmts, size = parse_codes(codes)
        fmt = ["<"]
        pos = 0
        for off, code in zip(offsets, fmts):
            if off > pos:
                fmt.append(f"{off - pos}x")
            fmt.append(code)
            pos = off + struct.calcsize("<" + code)
        self.codes = codes
        self._struct = struct.Struct("".join(fmt))
        self._buf = ctypes.create_string_buffer(max(size, 1) + 16)
        base = ctypes.addressof(self._buf)
        shift = (-base) % 16  # 16-align the block so X-slots are aligned in memory
        self._ptrs = (ctypes.c_void_p * max(len(offsets), 1))(
            *[base + shift + off for off in offsets])
        self._shift = shift
        self.address = ctypes.addressof(self._ptrs)

    def pack(self, *values) -> int:
        """Write ``values`` in order; return the ``void**`` address for the launch."""
        self._struct.pack_into(self._buf, self._shift, *values)
        return self.address
