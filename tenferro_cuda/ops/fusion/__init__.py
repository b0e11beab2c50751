"""``execute_elementwise_fusion``: one generated kernel for an ``ElementwiseFusionPlan``.

The call validates everything first (residency of every input, the dtype and shape rules
of every instruction: ``shapes/fusion.py``), then either declines (returns None: outputs
of different shapes, too many inputs/outputs/instructions, a walk of more than 8 axes) or
compiles the plan once per (plan, input dtypes, layout class) through the kernel cache
(memory and disk: ``ExecContext.source_function``), allocates one compact tensor per
output and launches one kernel that reads each input once and writes each output once.

Per (plan, input dtypes, layout classes) and execution context the general path keeps a
``FusionPrep``: the typed plan, the loaded function, its ``PreparedLaunch`` (the error
word and codes are its constant tail) and the constants a repeated call needs, in a
``FusionEntry`` under ``("fusion", plan)`` in ``ctx.memo``.

The **hot path** (``fast.py``) is the general path with that preparation cached: a
repeated plan over compact ``Tensor`` operands of one shape (rank-0 operands broadcast)
whose dtypes match the last contiguous launch of this plan on this context calls that
prep's closure, kept under the plan itself in ``ctx.memo``: one dict lookup, then no
typing, no layout work, no code generation; only residency, dtype and shape checks, the
output allocations and the prep's prepared launch -- the launch the general path's
contiguous case uses. Anything else takes the general path, which also raises the typed
errors. Integer division by zero (and a negative integer exponent) in a fused kernel is a
deferred error raised by ``synchronize()`` like the unfused ops'.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ...configs.fusion import ElementwiseFusionPlan
from ...dtypes import DType
from ...errors import ValidationError
from ...exec.context import BLOCK, ExecContext
from ...exec.residency import resident
from ...fusion_codegen import OPTIONS, UNROLL, arg_codes, generate, spec_for
from ...kernels.args import layout_bytes
from ...memo import BoundedCache
from ...shapes.fusion import TypedPlan, output_shape, type_plan
from ...tensor import Tensor, TensorView, _Strided
from ..elementwise.engine import MAX_GRID, base_ptr, resident_blocks
from ..elementwise.layout import CHUNK, bcast_vectors, chunks, pad3
from .fast import Hot, hot_path
from .walk import Walk, walk

__all__ = ["METHODS", "execute_elementwise_fusion", "general", "FusionPrep", "FusionEntry"]

OP = "execute_elementwise_fusion"
ENTRY_LIMIT = 256  # typed plans and preps kept per plan and context


class FusionPrep:
    """A compiled plan for one (input dtypes, layout classes), on one execution context."""

    __slots__ = ("fn", "launch", "contig", "nin", "dtypes", "classes", "outs", "per_block",
                 "vec", "cap", "err", "cdiv", "cpow", "home", "hot", "hot_unused")
    fn: Any
    launch: Any  # the PreparedLaunch of the kernel (tail: err, cdiv, cpow)
    contig: bool
    nin: int
    dtypes: tuple[DType, ...]  # per input
    classes: str  # per input: c, s, l, u
    outs: tuple[tuple[DType, int], ...]  # (dtype, itemsize) per output
    per_block: int  # elements per block and grid-stride step
    vec: int  # elements per 16-byte vector (contiguous and broadcast-rows paths)
    cap: int  # blocks in one full wave
    err: int  # the error word (0: no live op can raise)
    cdiv: int
    cpow: int
    hot_unused: tuple[bool, ...]  # rank 0 or not, per unused input, of ``hot``'s calls
    home: Any  # the context's arena: residency identity and allocator
    hot: Hot | None  # the hot-path closure (contiguous preps, made on first use)


class FusionEntry:
    """Per plan and context: typed plans and preps by their keys."""

    __slots__ = ("typed", "preps")

    def __init__(self) -> None:
        self.typed: BoundedCache = BoundedCache(ENTRY_LIMIT)
        self.preps: BoundedCache = BoundedCache(ENTRY_LIMIT)


def execute_elementwise_fusion(ctx: ExecContext, inputs: Sequence[Tensor | TensorView],
                               plan: ElementwiseFusionPlan) -> list[Tensor] | None:
    """Run ``plan`` over ``inputs`` in one kernel.

    Parameters
    ----------
    inputs : sequence of Tensor or TensorView
        ``plan.num_inputs`` device operands of this session: tensors, strided views
        (any strides, including 0 from ``fusion_views.broadcast_view``) or rank-0
        tensors (broadcast).
    plan : ElementwiseFusionPlan
        The SSA list of operations.

    Returns
    -------
    list of Tensor or None
        One new compact tensor per ``plan.outputs`` entry (the work is enqueued), or
        None when the plan cannot run as one kernel (docs/fusion.md: outputs of
        different shapes, more than 16 inputs or 8 outputs or 256 instructions, a
        walk of more than 8 strided axes).

    Raises
    ------
    ValidationError
        Wrong number of inputs, a dtype or shape mismatch in an instruction, not a plan.
    UnsupportedDTypeError
        An instruction's operation is not defined for its dtype.
    UnsupportedDTypeConversionError
        A ``convert`` the promotion lattice does not allow.
    RuntimeStateError
        An input is not resident on this session, or the session is closed.
    """
    if type(plan) is ElementwiseFusionPlan:
        hot = ctx.memo.get(plan)
        if hot is not None:
            outs = hot(inputs)  # None: not a hot call, take the general path
            if outs is not None:
                return outs
    return general(ctx, inputs, plan)


# --- the general path --------------------------------------------------------------------
def general(ctx: ExecContext, inputs: Any, plan: Any) -> list[Tensor] | None:
    """``execute_elementwise_fusion`` without the hot path: validate, type, walk, prepare
    (compiling on first use), allocate and launch; arms the hot path after a contiguous
    launch over compact tensors."""
    if not isinstance(plan, ElementwiseFusionPlan):
        raise ValidationError(f"plan must be an ElementwiseFusionPlan (got "
                              f"{type(plan).__name__})", op=OP)
    if isinstance(inputs, _Strided) or not isinstance(inputs, Sequence):
        raise ValidationError(f"inputs must be a sequence of tensors (got "
                              f"{type(inputs).__name__})", op=OP)
    inputs = tuple(inputs)
    if len(inputs) != plan.num_inputs:
        raise ValidationError(f"the plan takes {plan.num_inputs} input(s) (got "
                              f"{len(inputs)})", op=OP)
    for k, x in enumerate(inputs):
        resident(ctx, x, OP, f"inputs[{k}]")
    entry = ctx.memo.get(("fusion", plan))
    if entry is None:
        entry = ctx.memo.put(("fusion", plan), FusionEntry())
    dtypes = tuple(x.dtype for x in inputs)
    scalars = tuple(x.ndim == 0 for x in inputs)
    typed = entry.typed.get((dtypes, scalars))
    if typed is None:  # raises for an invalid plan (never cached then)
        typed = entry.typed.put((dtypes, scalars), type_plan(plan, dtypes, scalars, OP))
    shape = output_shape(plan, typed, [x.shape for x in inputs], OP)
    if shape is None or typed.declined:
        return None
    w = walk(shape, inputs, typed.live[:plan.num_inputs])
    if w is None:
        return None
    if w.size == 0:  # validated: nothing to compile or launch
        return [ctx.alloc(d, shape, OP) for d in typed.out_dtypes]
    prep = _prepare(ctx, entry, plan, typed, dtypes, w)
    outs = [ctx.alloc(d, shape, OP) for d in typed.out_dtypes]
    if w.contig:
        _contig(prep, w, inputs, outs)
        if all(type(x) is Tensor for x in inputs):  # the hot path serves such calls
            unused = tuple(x.ndim == 0 for x, c in zip(inputs, prep.classes) if c == "u")
            if prep.hot is None or prep.hot_unused != unused:
                prep.hot, prep.hot_unused = hot_path(prep, unused), unused
            ctx.memo.put(plan, prep.hot)
    elif w.path == "bcast":
        _bcast(prep, w, inputs, outs)
    else:
        _strided(prep, w, inputs, outs)
    return outs


def _prepare(ctx: ExecContext, entry: FusionEntry, plan: ElementwiseFusionPlan,
             typed: TypedPlan, dtypes: tuple[DType, ...], w: Walk) -> FusionPrep:
    """The compiled kernel and prepared launch of (plan, dtypes, layout classes)."""
    key = (dtypes, w.classes)
    prep = entry.preps.get(key)
    if prep is not None:
        return prep
    spec = spec_for(typed, w.classes, w.path)
    gen = generate(spec)
    fn = ctx.source_function(gen.source, gen.name, gen.expression, OPTIONS, op=OP,
                             waits=True)
    prep = FusionPrep()
    prep.fn, prep.contig, prep.nin, prep.hot = fn, w.contig, len(dtypes), None
    prep.hot_unused = ()
    prep.dtypes, prep.classes = dtypes, w.classes
    prep.outs = tuple((d, d.itemsize) for d in typed.out_dtypes)
    prep.per_block = BLOCK if w.path == "strided" else BLOCK * UNROLL * spec.vec
    prep.vec = spec.vec
    # The vector paths' grids cover the walk in one step, as the unfused kernels' do: on an
    # H100, exp(a) * b + a on 2^28 float32 moved 3,046 GB/s against 2,860 with one wave
    # of blocks striding, a plan over a broadcast scalar 2,901 against 2,713.
    prep.cap = MAX_GRID if w.path != "strided" else ctx.sm_count * resident_blocks(ctx, fn)
    prep.err = ctx.err_word.ptr if typed.reasons else 0
    prep.cdiv = ctx.error_code(OP, "integer division by zero") if typed.reasons else 0
    prep.cpow = ctx.error_code(OP, "negative integer exponent") if typed.reasons else 0
    prep.home = ctx.home
    prep.launch = ctx.prepare(("fusion", plan, key), fn, arg_codes(spec),
                              tail=(prep.err, prep.cdiv, prep.cpow), op=OP)
    return entry.preps.put(key, prep)


def _contig(prep: FusionPrep, w: Walk, inputs: Sequence[_Strided],
            outs: list[Tensor]) -> None:
    optrs = [base_ptr(t) for t in outs]
    osteps = [item for _, item in prep.outs]
    iptrs, isteps = [], []
    for x, c in zip(inputs, prep.classes):
        if c != "u":
            iptrs.append(base_ptr(x) + x.offset * x.dtype.itemsize)
            isteps.append(x.dtype.itemsize if c == "c" else 0)
    acc = 0
    for p, s in zip(optrs + iptrs, osteps + isteps):
        acc |= p if s else 0
    flags = 0 if acc & 15 else 1
    n = w.size
    run = prep.launch.run
    for start in range(0, n, CHUNK):  # CHUNK keeps every vector 16-byte aligned
        count = min(CHUNK, n - start)
        blocks = min(-(-count // prep.per_block), prep.cap)
        run(blocks, *[p + start * s for p, s in zip(optrs, osteps)],
            *[p + start * s for p, s in zip(iptrs, isteps)], count, flags)


def _bcast(prep: FusionPrep, w: Walk, inputs: Sequence[_Strided], outs: list[Tensor]) -> None:
    """The broadcast-rows launches: rank-3 layouts, vectors when ``bcast_vectors`` allows."""
    optrs = [base_ptr(t) for t in outs]
    oitems = [item for _, item in prep.outs]
    slot = {k: i for i, k in enumerate(w.arrays, start=1)}  # index in w.strides
    run = prep.launch.run
    for piece, piece_strides, offsets in chunks(w.shape, w.strides, w.offsets, CHUNK):
        shape, strides = pad3(piece, piece_strides)
        args: list = [p + offsets[0] * item for p, item in zip(optrs, oitems)]
        addresses, items = list(args), list(oitems)
        vstrides = [strides[0]] * len(optrs)
        for k, (x, c) in enumerate(zip(inputs, prep.classes)):
            if c == "r":
                i = slot[k]
                base, item = base_ptr(x), x.dtype.itemsize
                args += [base, layout_bytes(shape, strides[i], offsets[i])]
                addresses.append(base + offsets[i] * item)
                items.append(item)
                vstrides.append(strides[i])
            elif c == "s":
                args.append(base_ptr(x) + x.offset * x.dtype.itemsize)
        flags = int(bcast_vectors(shape, vstrides, addresses, items, prep.vec))
        n = math.prod(shape)
        run(min(-(-n // prep.per_block), prep.cap), *args, n, flags)


def _strided(prep: FusionPrep, w: Walk, inputs: Sequence[_Strided],
             outs: list[Tensor]) -> None:
    optrs = [base_ptr(t) for t in outs]
    slot = {k: i for i, k in enumerate(w.arrays, start=1)}  # index in w.strides
    run = prep.launch.run
    for shape, strides, offsets in chunks(w.shape, w.strides, w.offsets, CHUNK):
        args: list = [p + offsets[0] * item for p, (_, item) in zip(optrs, prep.outs)]
        for k, (x, c) in enumerate(zip(inputs, prep.classes)):
            if c == "l":
                args += [base_ptr(x), layout_bytes(shape, strides[slot[k]],
                                                   offsets[slot[k]])]
            elif c == "s":
                args.append(base_ptr(x) + x.offset * x.dtype.itemsize)
        n = math.prod(shape)
        run(min(-(-n // BLOCK), prep.cap), *args, n, 0)


METHODS: tuple[tuple[str, Callable], ...] = (
    ("execute_elementwise_fusion", execute_elementwise_fusion),
)
