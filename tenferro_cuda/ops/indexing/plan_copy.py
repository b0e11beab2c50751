"""Launch plans of the slicing family: strided view copies (slice, reverse, concatenate,
dynamic_slice, dynamic_update_slice) and pad. Pure Python, tested on the CPU.

A copy coalesces the shared shape over both views, groups contiguous aligned elements into
units of up to 16 bytes, and copies rows (long inner runs) or single elements (short
ones). A dynamic shift (clamped device-side start indices) applies to the source or the
destination; units are only formed when every shifted stride is a multiple of the unit.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...kernels.args import MAX_RANK, layout_bytes
from ...kernels.families.gather import UNIT_OF_SIZE
from .._layout import coalesce
from .plan import (
    BLOCK,
    MAP_CODE,
    NO_MAP,
    ROW_MIN_UNITS,
    Launch,
    best_unit,
    grid_1d,
    index_code,
    index_map,
)

_PAD = struct.Struct(f"<{5 * MAX_RANK}qqii")
PAD_CODE = f"S{_PAD.size}"
MAX_GRID_Y = 65535


@dataclass(frozen=True)
class Dynamic:
    """Start indices read on the device: ``starts`` (data_ptr, element stride, int64?),
    and per operand axis its stride and clamp bound ``dim - size``; applied to the
    destination when ``on_dst`` (dynamic_update_slice), else to the source. An axis whose
    bound is 0 always clamps to 0: its stride is dropped (so it never blocks units)."""

    ptr: int
    stride: int
    wide: bool
    strides: tuple[int, ...]
    his: tuple[int, ...]
    on_dst: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "strides", tuple(
            st if hi > 0 else 0 for st, hi in zip(self.strides, self.his)))


def rows_unroll(unit: int) -> int:
    """Units per thread and row tile in copy_rows / pad_rows (``rows_unroll<U>``)."""
    return {16: 4, 8: 8, 4: 16}.get(unit, 8)


def _rows_grid(rows: int, cols: int, unit: int, sms: int) -> tuple[int, int, int]:
    by = min(rows, MAX_GRID_Y)
    need = -(-cols // (BLOCK * rows_unroll(unit)))
    bx = max(1, min(need, -(-sms * 32 // by)))
    return (bx, by, 1)


def copy_launch(itemsize: int, shape: Sequence[int], dst: tuple[int, Sequence[int]],
                src: tuple[int, Sequence[int]], sms: int, dyn: Dynamic | None = None
                ) -> Launch:
    """dst[i] = src[i] over ``shape``; views as (data_ptr, element strides)."""
    cshape, (dst_st, src_st) = coalesce(shape, dst[1], src[1])
    if not cshape:
        cshape, dst_st, src_st = (1,), (0,), (0,)
    g = 1
    if dst_st[-1] == 1 and src_st[-1] == 1:
        mult = list(dst_st[:-1]) + list(src_st[:-1]) + list(dyn.strides if dyn else ())
        g = best_unit(itemsize, cshape[-1], mult, (dst[0], src[0])) // itemsize
    unit = UNIT_OF_SIZE[itemsize * g]
    outer = tuple(cshape[:-1])
    cols = cshape[-1] // g
    dinc, sinc = (1, 1) if g > 1 else (dst_st[-1], src_st[-1])
    dout = [s // g for s in dst_st[:-1]]
    sout = [s // g for s in src_st[:-1]]
    if dyn is None:
        starts, dmap, on_dst = 0, NO_MAP, 0
    else:
        starts, on_dst = dyn.ptr, int(dyn.on_dst)
        dmap = index_map([s // g for s in dyn.strides], dyn.his, dyn.stride, dyn.wide)
    rows = math.prod(outer)
    if cols >= ROW_MIN_UNITS:
        return Launch("slicing", f"tf::copy_rows<{unit}>", f"PLPLqqqqP{MAP_CODE}i",
                      (dst[0], layout_bytes(outer, dout), src[0], layout_bytes(outer, sout),
                       rows, cols, dinc, sinc, starts, dmap, on_dst),
                      _rows_grid(rows, cols, itemsize * g, sms))
    full = outer + (cols,)
    n = rows * cols
    itype, icode = index_code(n)
    return Launch("slicing", f"tf::copy_elems<{unit}, {itype}>", f"PLPL{icode}P{MAP_CODE}i",
                  (dst[0], layout_bytes(full, dout + [dinc]), src[0],
                   layout_bytes(full, sout + [sinc]), n, starts, dmap, on_dst),
                  grid_1d(n, BLOCK, sms, 16))


def pad_map(out_shape: Sequence[int], low: Sequence[int], interior: Sequence[int],
            src_shape: Sequence[int], src_strides: Sequence[int]) -> bytes:
    """A packed ``tf::PadMap``: row axes in slots 0..r-2, the last axis in slot 7."""
    if not out_shape:
        out_shape, low, interior, src_shape, src_strides = (1,), (0,), (0,), (1,), (0,)
    fields = []
    for values in (out_shape, low, [i + 1 for i in interior], src_shape, src_strides):
        row = [0] * MAX_RANK
        row[:len(values) - 1] = list(values[:-1])
        row[MAX_RANK - 1] = values[-1]
        fields += row
    return _PAD.pack(*fields, 0, max(len(out_shape) - 1, 0), 0)


def pad_launch(itemsize: int, out_shape: Sequence[int], out_ptr: int, low: Sequence[int],
               interior: Sequence[int], src: tuple[int, Sequence[int], Sequence[int]],
               value: bytes, sms: int) -> Launch:
    """The output-driven pad kernel; ``src`` is (data_ptr, shape, strides)."""
    pmap = pad_map(out_shape, low, interior, src[1], src[2])
    unit = UNIT_OF_SIZE[itemsize]
    vcode = "X16" if itemsize == 16 else f"S{itemsize}"
    cols = out_shape[-1] if out_shape else 1
    rows = math.prod(out_shape[:-1]) if out_shape else 1
    if cols >= ROW_MIN_UNITS:
        return Launch("slicing", f"tf::pad_rows<{unit}>", f"PP{PAD_CODE}q{vcode}",
                      (out_ptr, src[0], pmap, rows, value),
                      _rows_grid(rows, cols, itemsize, sms))
    n = rows * cols
    itype, icode = index_code(n)
    return Launch("slicing", f"tf::pad_elems<{unit}, {itype}>", f"PP{PAD_CODE}{icode}{vcode}",
                  (out_ptr, src[0], pmap, n, value), grid_1d(n, BLOCK, sms, 16))
