"""The engine behind every elementwise-shaped op (elementwise, analytic, cast).

``run`` is the general path: residency of every operand, ``shapes.elementwise.infer``,
the output checks (shape, dtype, no element addressed twice, the alias rule with in-place
allowed), the layout plan (which may still reject an unsupported layout) and only then
allocation and launches. ``prep`` compiles/loads the kernel once per (kind, method,
dtype) and keeps, in the execution context, a ``Prep``: the prepared launches and the
constants a repeated call needs. The fast path (``fast.py``) is this path with the
planning skipped for the one plan it covers (compact tensors of one shape), through the
same ``Prep`` and the same prepared launch.

Kernel signatures (ptx/elementwise.cu, ptx/cast.cu), three input slots each:
  *_contig (out, a, b, c, u32 n, int flags, int* err, int code, u64 ha, hb, hc)
                                                                       "PPPPIiPiQQQ"
  *_strided(out, Lo, a, La, b, Lb, c, Lc, u32 n, int mode, int* err, int code, ha, hb, hc)
                                                                       "PLPLPLPLIiPiQQQ"
  ew_bcast (out, Lo, a, La, b, Lb, c, Lc, u32 n, int flags, int* err, int code, ha, hb, hc),
  the broadcast-rows kernel (rank-3 layouts; flags bit 0: vectors)    "PLPLPLPLIiPiQQQ"
  ew_small (*_contig's parameters), one thread per element            "PPPPIiPiQQQ"
A contiguous run of at most ``SMALL`` elements takes the small kernel (elementwise family;
casts keep their contiguous kernel): a grid of one thread per element, no loop, no vector
path. Its duration is the launch's: as a CUDA graph node it cost 1.08 us where the
contiguous kernel cost 1.18-1.22 (H100, 20-node graphs of add, tanh and mul on 1,024
float32; PyTorch's 1.08). Every launch is prepared on first use, so a program's first
small ``add`` loads one kernel.
The error word and code are the launches' constant tail. Only the elementwise family
(elementwise and analytic kinds) has the broadcast-rows and small kernels; casts of such
layouts take the strided kernel.

Scalar operands (binary and ternary ops: ``shapes/scalars.py``) reach every kernel by
value, never uploaded: operand ``k``'s bit ``VALUE << k`` in ``flags``/``mode``, the
scalar's bytes 0-7 in its pointer slot (a ``Value``'s ``lo``), bytes 8-15 (a complex128:
``hi``) in tail word ``2 + k`` (``ha hb hc``, written by ``PreparedLaunch.put_tail`` before
the launch). The plan treats a scalar as a rank-0 operand (stride 0, read once).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from ...dtypes import DType
from ...errors import ValidationError
from ...exec.context import BLOCK, ExecContext
from ...exec.residency import resident
from ...kernels import warmup
from ...kernels.args import layout_bytes
from ...shapes import elementwise as ew_shapes
from ...shapes.aliasing import check_distinct_elements, check_output
from ...shapes.elementwise import CAST_KINDS, Kind
from ...shapes.scalars import bits, converter, is_scalar, not_an_operand
from ...tensor import Tensor, _Strided, compact_strides
from .layout import CHUNK, Plan, bcast_vectors, chunks, pad3, plan, tile_bytes, tiled_grid

if TYPE_CHECKING:
    from ...memory import _Arena

__all__ = ["Prep", "prep", "run", "resident_blocks", "operand_dtypes", "Value", "CONTIG_CODES",
           "STRIDED_CODES", "VALUE", "MAX_GRID"]

NOTHING = object()  # no scalar converted yet (``Prep.scalar``)
CONTIG_CODES = "PPPPIiPiQQQ"
STRIDED_CODES = "PLPLPLPLIiPiQQQ"
warmup.LAYOUTS.append((CONTIG_CODES, 5))  # the first kernel of most programs
VALUE = 16  # TF_EW_VALUE in ewkernel.cuh: flag bit of operand 0 passed by value
WORD = (1 << 64) - 1
UNROLL = 2  # TF_EW_UNROLL in ewkernel.cuh
MAX_GRID = (1 << 31) - 1
SM_THREADS, SM_REGISTERS = 2048, 65536  # per multiprocessor on sm_80 and sm_90
_EMPTY_LAYOUT = layout_bytes((), (), 0)
SMALL = 1 << 13  # most elements of a run the small kernel takes
_ENTRIES = {"elementwise": ("ew_contig", "ew_strided", "ew_bcast", "ew_small"),
            "cast": ("cast_contig", "cast_strided", None, None)}


def resident_blocks(ctx: ExecContext, fn: Any) -> int:
    """Blocks of BLOCK threads of ``fn`` that fit on one multiprocessor at once (registers
    are allocated per warp in units of 256, i.e. per thread in multiples of 8)."""
    regs = max(1, ctx.function_registers(fn))
    per_block = BLOCK * ((regs + 7) // 8 * 8)
    return max(1, min(SM_THREADS // BLOCK, SM_REGISTERS // per_block))


class Prep:
    """Per (kind, method, primary dtype) and execution context: the prepared launches and
    constants of the kernels (see the module docstring)."""

    __slots__ = ("kind", "name", "dtype", "out_dtype", "out_item", "item", "items",
                 "contig", "strided", "bcast", "small", "small_limit", "per_block", "cap",
                 "home", "err", "code", "tail", "bits", "scalar", "scalar_bits", "shape",
                 "plan")
    kind: Kind
    name: str
    dtype: DType  # the primary dtype
    out_dtype: DType
    out_item: int
    item: int  # itemsize of the first input slot
    items: tuple[int, ...]  # itemsize of each input slot
    contig: Any  # PreparedLaunch of *_contig (made on first use)
    strided: Any  # PreparedLaunch of *_strided (made on first use)
    bcast: Any  # PreparedLaunch of ew_bcast (made on first use)
    small: Any  # PreparedLaunch of ew_small (made on first use)
    small_limit: int  # runs of at most this many elements take ``small`` (0: never)
    per_block: int  # elements per block and grid-stride step on the contiguous path
    cap: int  # most blocks per launch
    home: _Arena  # the context's arena: residency identity and allocator
    err: int
    code: int
    tail: tuple[int, ...]  # the launches' initial tail: err, code and three by-value words
    bits: Any  # shapes.scalars.converter of the primary dtype (binary ops' scalar operands)
    scalar: object  # the last Python scalar the fast path converted (a bool, int or float)
    scalar_bits: int  # its bits: the same object again is not converted again
    shape: tuple[int, ...] | None  # the shape of the fast path's last plan (fast._plan)
    plan: tuple | None  # that plan: (elements, launch, blocks, output bytes)


class Value(NamedTuple):
    """A scalar operand on its way to the kernel: its bytes 0-7 and 8-15 as ints."""

    lo: int
    hi: int


def operand_dtypes(kind: Kind, primary: DType) -> tuple[DType, ...]:
    """Dtypes of the kernel's input slots for ``kind`` over ``primary``."""
    if kind.name == "select":
        return (DType.BOOL, primary, primary)
    return (primary,) * kind.arity


def prep(ctx: ExecContext, kind: Kind, name: str, primary: DType) -> Prep:
    """The ``Prep`` of (kind, method, dtype) on ``ctx``; its launches are prepared (their
    kernels compiled and loaded) on first use (``_launch_of``)."""
    preps = ctx.memo.get((kind.key, name))
    if preps is None:
        preps = ctx.memo.put((kind.key, name), {})
    p = preps.get(primary)
    if p is not None:
        return p
    p = Prep()
    p.kind, p.name, p.dtype = kind, name, primary
    p.out_dtype = kind.out_dtype(primary)
    p.out_item = p.out_dtype.itemsize
    p.items = tuple(d.itemsize for d in operand_dtypes(kind, primary))
    p.item = p.items[0]
    p.per_block = BLOCK * UNROLL * (16 // max(p.out_item, *p.items))
    # Measured on the H200: a grid that covers n in one step beats a one-wave grid-stride
    # grid (4,339 vs 3,987 GB/s for add, 4,115 vs 3,778 for exp on 2^28 float32), so the
    # grid is not capped below the hardware limit.
    p.cap = MAX_GRID
    p.home = ctx.home
    reason = kind.error_reason(primary)
    p.err = ctx.err_word.ptr if reason else 0
    p.code = ctx.error_code(name, reason) if reason else 0
    p.tail = (p.err, p.code, 0, 0, 0)
    p.bits = converter(primary)
    p.scalar, p.scalar_bits = NOTHING, 0
    p.shape = p.plan = None
    p.contig = p.strided = p.bcast = p.small = None
    p.small_limit = SMALL if _ENTRIES[kind.family][3] else 0
    preps[primary] = p
    return p


# the launch slots of a Prep: (attribute, index in _ENTRIES, argument codes)
_SLOTS = {"contig": (0, CONTIG_CODES), "strided": (1, STRIDED_CODES),
          "bcast": (2, STRIDED_CODES), "small": (3, CONTIG_CODES)}


def _launch_of(ctx: ExecContext, p: Prep, slot: str) -> Any:
    """The prepared launch of ``p``'s kernel ``slot`` (loaded and prepared on first use)."""
    launch = getattr(p, slot)
    if launch is None:
        kind = p.kind
        index, codes = _SLOTS[slot]
        entry = _ENTRIES[kind.family][index]
        fn = ctx.function(kind.family, f"tf::{entry}<{kind.functor}, {p.dtype.ctype}>")
        launch = ctx.prepare(("ew", kind.key, p.name, p.dtype, slot), fn, codes,
                             tail=p.tail, op=p.name)
        setattr(p, slot, launch)
    return launch


def _contig_launch(ctx: ExecContext, p: Prep, n: int) -> Any:
    """The launch of a contiguous run of ``n`` elements: small or contiguous."""
    return _launch_of(ctx, p, "small" if n <= p.small_limit else "contig")


def base_ptr(t: _Strided) -> int:
    """Device address of ``t``'s base buffer (residency was checked by the caller)."""
    return t.base.buffer.ptr  # type: ignore[union-attr]


# --- the general path --------------------------------------------------------------------
def run(ctx: ExecContext, kind: Kind, name: str, inputs, out=None) -> Tensor:
    """Validate, plan, allocate (unless ``out`` is given) and launch; the output."""
    roles = kind.roles
    if len(inputs) != kind.arity:
        raise ValidationError(f"{kind.name} takes {kind.arity} input(s) (got "
                              f"{len(inputs)})", op=name)
    tensor = _operands(ctx, kind, name, inputs)
    if out is not None:
        resident(ctx, out, name, "out")
    inf = ew_shapes.infer(kind, [x.dtype if t else None for x, t in zip(inputs, tensor)],
                          [x.shape if t else () for x, t in zip(inputs, tensor)], name)
    if not all(tensor):
        dts = operand_dtypes(kind, inf.primary)
        inputs = [x if t else _value(x, dt, name, role)
                  for x, t, dt, role in zip(inputs, tensor, dts, roles)]
    if out is not None:
        ew_shapes.check_out_view(out.shape, out.strides, out.dtype, inf.shape, inf.dtype, name)
        check_distinct_elements(out, name)
        check_output(out, [x for x, t in zip(inputs, tensor) if t],
                     [r for r, t in zip(roles, tensor) if t], name, in_place=True)
    ndim = len(inf.shape)
    target = (out.strides, out.offset) if out is not None else (compact_strides(inf.shape), 0)
    walk = plan(inf.shape, target, [
        (x.strides if t and len(x.shape) == ndim else None, x.offset if t and not pr else 0)
        for x, t, pr in zip(inputs, tensor, inf.promote)], name,
        _ENTRIES[kind.family][2] is not None)
    if math.prod(inf.shape) == 0:  # validated: nothing to compile or launch
        return out if out is not None else ctx.alloc(inf.dtype, inf.shape, name)
    p = prep(ctx, kind, name, inf.primary)
    if walk.bcast:  # each compiles and loads its kernel on first use
        launch = _launch_of(ctx, p, "bcast")
    elif walk.contiguous:
        launch = _contig_launch(ctx, p, walk.size)
    else:
        launch = _launch_of(ctx, p, "strided")
    if out is None:
        out = ctx.alloc(inf.dtype, inf.shape, name)
    if any(inf.promote):
        inputs = [_promote(ctx, x, inf.primary, name) if pr else x
                  for x, pr in zip(inputs, inf.promote)]
    if walk.contiguous:
        _contig(p, launch, walk, out, inputs)
    elif walk.bcast:
        _bcast(p, walk, out, inputs)
    else:
        _strided(ctx, p, walk, out, inputs)
    return out


def _operands(ctx: ExecContext, kind: Kind, name: str, inputs) -> list[bool]:
    """Per input: True for a tensor (its residency checked), False for a scalar (binary
    and ternary ops only); anything else raises."""
    tensor = []
    for x, role in zip(inputs, kind.roles):
        if isinstance(x, _Strided) or kind.arity == 1:
            resident(ctx, x, name, role)
            tensor.append(True)
        elif is_scalar(x):
            tensor.append(False)
        else:
            raise not_an_operand(x, name, role)
    return tensor


def _value(x: object, dtype: DType, name: str, role: str) -> Value:
    """The scalar ``x`` as one element of ``dtype`` (ValidationError unless it fits)."""
    b = bits(x, dtype, name, role)
    return Value(b & WORD, b >> 64)


def _slots(launch: Any, ptrs: list[int], inputs) -> int:
    """Put each by-value operand's bytes 0-7 in its pointer slot (``ptrs[k]``) and bytes
    8-15 in its tail word of ``launch``; the operands' flag bits."""
    flags = 0
    for k, x in enumerate(inputs):
        if type(x) is Value:
            ptrs[k] = x.lo
            launch.put_tail(2 + k, x.hi)
            flags |= VALUE << k
    return flags


def _promote(ctx: ExecContext, x: _Strided, target: DType, name: str) -> Tensor:
    """A rank-0 real operand as its complex counterpart (one-element cast kernel)."""
    p = prep(ctx, CAST_KINDS[target], name, x.dtype)
    launch = _contig_launch(ctx, p, 1)
    tmp = ctx.alloc(target, (), name)
    launch.run(1, base_ptr(tmp), x.data_ptr(), 0, 0, 1, 0)
    return tmp


def _pointers(inputs) -> list[int]:
    """The base address of each tensor input (0 for a scalar), three slots."""
    ptrs = [0 if type(x) is Value else base_ptr(x) for x in inputs]
    return ptrs + [0] * (3 - len(ptrs))


def _contig(p: Prep, launch: Any, walk: Plan, out: _Strided, inputs) -> None:
    """The contiguous run through ``launch`` (small: one launch of one thread per
    element; contiguous: chunks below CHUNK elements)."""
    po = base_ptr(out) + walk.offsets[0] * p.out_item
    ptrs = [0, 0, 0]
    steps = [0, 0, 0]  # bytes per element: 0 for a broadcast (or unused) slot
    flags = 0
    aligned = po
    for k, x in enumerate(inputs):
        if type(x) is Value:
            continue
        ptrs[k] = base_ptr(x) + walk.offsets[k + 1] * p.items[k]
        if walk.broadcast[k]:
            flags |= 1 << k
        else:
            steps[k] = p.items[k]
            aligned |= ptrs[k]
    if not aligned & 15:
        flags |= 8
    flags |= _slots(launch, ptrs, inputs)
    n = walk.size
    if launch is p.small:
        launch.run(-(-n // BLOCK), po, ptrs[0], ptrs[1], ptrs[2], n, flags)
        return
    for start in range(0, n, CHUNK):
        count = min(CHUNK, n - start)
        blocks = min(-(-count // p.per_block), p.cap)
        launch.run(blocks, po + start * p.out_item, ptrs[0] + start * steps[0],
                   ptrs[1] + start * steps[1], ptrs[2] + start * steps[2], count, flags)


def _at(bases: list[int], offsets, items, inputs) -> list[int]:
    """The address of element 0 of the output and of each tensor operand (``bases``:
    their buffers' addresses, the output's first; ``offsets`` in elements): a kernel holds
    each view by an address inside it, with a layout offset of 0, so that a graph
    rebinding finds it (``graph_rebind``). By-value operands keep their bits."""
    out = [bases[0] + offsets[0] * items[0]]
    for k in range(3):
        if k < len(inputs) and type(inputs[k]) is not Value:
            out.append(bases[k + 1] + offsets[k + 1] * items[k + 1])
        else:
            out.append(bases[k + 1])
    return out


def _strided(ctx: ExecContext, p: Prep, walk: Plan, out: _Strided, inputs) -> None:
    ptrs = _pointers(inputs)
    items = (p.out_item, *p.items)
    launch = p.strided
    if walk.tiled:
        lays = [layout_bytes(walk.shape, st, 0) for st in walk.strides]
        lays += [_EMPTY_LAYOUT] * (4 - len(lays))
        smem = sum(tile_bytes(item) for k, item in enumerate(p.items)
                   if walk.tiled & (2 << k))
        tiled = ctx.prepare(("ew", p.kind.key, p.name, p.dtype, "tiled", smem), launch.fn,
                            STRIDED_CODES, shared=smem, tail=p.tail, op=p.name)
        mode = walk.tiled | _slots(tiled, ptrs, inputs)
        po, a, b, c = _at([base_ptr(out), *ptrs], walk.offsets, items, inputs)
        tiled.run3(tiled_grid(walk), po, lays[0], a, lays[1], b, lays[2], c, lays[3], 0,
                   mode)
        return
    mode = _slots(launch, ptrs, inputs)
    bases = [base_ptr(out), *ptrs]
    for shape, strides, offsets in chunks(walk.shape, walk.strides, walk.offsets, CHUNK):
        lays = [layout_bytes(shape, st, 0) for st in strides]
        lays += [_EMPTY_LAYOUT] * (4 - len(lays))
        n = math.prod(shape)
        po, a, b, c = _at(bases, offsets, items, inputs)
        launch.run(ctx.grid(n), po, lays[0], a, lays[1], b, lays[2], c, lays[3], n, mode)


def _bcast(p: Prep, walk: Plan, out: _Strided, inputs) -> None:
    ptrs = _pointers(inputs)
    items = (p.out_item, *p.items)
    vec = 16 // max(items)
    launch = p.bcast
    values = _slots(launch, ptrs, inputs)
    bases = [base_ptr(out), *ptrs]
    for piece, piece_strides, offsets in chunks(walk.shape, walk.strides, walk.offsets,
                                                CHUNK):
        shape, strides = pad3(piece, piece_strides)
        addresses = _at(bases, offsets, items, inputs)
        # (a by-value operand's stride is 0: bcast_vectors skips its address)
        flags = int(bcast_vectors(shape, strides, addresses, items, vec)) | values
        lays = [layout_bytes(shape, st, 0) for st in strides]
        lays += [_EMPTY_LAYOUT] * (4 - len(lays))
        n = math.prod(shape)
        po, a, b, c = addresses
        launch.run(min(-(-n // p.per_block), p.cap), po, lays[0], a, lays[1], b, lays[2], c,
                   lays[3], n, flags)
