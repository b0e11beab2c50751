"""The bookkeeping of a collective call: which rank each tensor belongs to, the checks
every call makes before anything is allocated or enqueued, and issuing the NCCL calls.

A communicator holds one session per rank of this process (``local`` ranks, in the order
of its sessions). A tensor belongs to the rank whose session it is resident on
(``exec/residency``'s rule: this runtime, this thread's stream); there is no other way to
name a rank's data, and no implicit transfer. A call takes one tensor per local rank (a
sequence in the order of the caller's choosing, or a single tensor when this process
holds one rank) and validates all of them together, so mismatched shapes or dtypes
between the ranks of this process are refused before NCCL sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import _nccl
from ..errors import RuntimeStateError, ValidationError
from ..exec import entry, guard
from ..exec.residency import not_resident
from ..ops import storage
from ..shapes import aliasing
from ..tensor import Tensor, _Strided

__all__ = ["contexts", "locate", "per_rank", "outputs", "disjoint", "same_layout",
           "contiguous", "alloc", "issue"]


def contexts(sessions: Sequence[Any], op: str) -> list[Any]:
    """The execution contexts of ``sessions`` after the session entry checks (thread,
    scope, runtime); RuntimeStateError while one of them is capturing a graph."""
    ctxs = [entry.check(s, op) for s in sessions]
    for ctx in ctxs:
        if ctx.capture is not None:
            raise RuntimeStateError(f"device {ctx.ordinal}'s session is capturing a graph; "
                                    "collectives are not recorded into graphs", op=op)
    return ctxs


def locate(ctxs: Sequence[Any], t: object, op: str, what: str) -> int:
    """The local rank (index into ``ctxs``) whose session ``t`` is resident on."""
    if isinstance(t, _Strided) and t.base.buffer is not None:
        home = t.base.buffer.home
        for i, ctx in enumerate(ctxs):
            if home is ctx.home:
                return i
    if len(ctxs) == 1:
        raise not_resident(ctxs[0], t, op, what)
    devices = ", ".join(str(c.ordinal) for c in ctxs)
    same = [c for c in ctxs if isinstance(t, _Strided) and t.base.buffer is not None
            and t.base.buffer.ordinal == c.ordinal]
    err = not_resident(same[0] if same else ctxs[0], t, op, what)
    if not isinstance(err, RuntimeStateError):
        raise err  # not a tensor at all
    found = str(err.args[0]).split("; found ", 1)[-1]
    raise RuntimeStateError(f"{what}: expected a device tensor of one of this "
                            f"communicator's sessions (devices {devices}); found {found}",
                            op=op)


def per_rank(tensors: object, ctxs: Sequence[Any], op: str,
             what: str) -> tuple[list[tuple[int, Any]], bool]:
    """``[(local rank, tensor)]`` for one tensor per local rank, in the order given, and
    whether a single tensor (not a sequence) was passed."""
    single = isinstance(tensors, _Strided)
    if single:
        items = [tensors]
    elif isinstance(tensors, (list, tuple)):
        items = list(tensors)
    else:
        raise ValidationError(f"{what} must be a tensor or a list of tensors, one per rank "
                              f"of this process (got {type(tensors).__name__})", op=op)
    if len(items) != len(ctxs):
        raise ValidationError(
            f"{what}: this communicator has {len(ctxs)} rank(s) in this process (devices "
            f"{[c.ordinal for c in ctxs]}); pass one tensor per rank (got {len(items)})",
            op=op)
    seen: dict[int, int] = {}
    out = []
    for j, t in enumerate(items):
        name = what if single else f"{what}[{j}]"
        i = locate(ctxs, t, op, name)
        if i in seen:
            raise ValidationError(f"{what}[{seen[i]}] and {what}[{j}] are both on device "
                                  f"{ctxs[i].ordinal}: one tensor per rank", op=op)
        seen[i] = j
        out.append((i, t))
    return out, single


def same_layout(items: Sequence[tuple[int, Any]], op: str, what: str) -> tuple:
    """The (shape, dtype) shared by every rank's tensor; ValidationError otherwise."""
    _, first = items[0]
    for _, t in items[1:]:
        if t.dtype is not first.dtype:
            raise ValidationError(f"{what}: every rank must pass the same dtype (got "
                                  f"{first.dtype.value} and {t.dtype.value})", op=op,
                                  kind="dtype_mismatch")
        if t.shape != first.shape:
            raise ValidationError(f"{what}: every rank must pass the same shape (got "
                                  f"{first.shape} and {t.shape})", op=op,
                                  kind="shape_mismatch")
    return first.shape, first.dtype


def outputs(out: object, items: Sequence[tuple[int, Any]], ctxs: Sequence[Any], op: str,
            shape: tuple[int, ...], dtype: Any, in_place: bool) -> list:
    """The caller's outputs, one per rank and on the rank of the matching input: the exact
    ``shape`` and ``dtype``, contiguous, writable, overlapping no input and no other output
    of any rank (``disjoint``; except as exactly the same view as its own rank's input
    when ``in_place``)."""
    outs, _ = per_rank(out, ctxs, op, "out")
    by_rank = dict(outs)
    result = []
    for i, _ in items:
        o = by_rank[i]
        if o.shape != tuple(shape) or o.dtype is not dtype:
            raise ValidationError(f"out for device {ctxs[i].ordinal} must have shape "
                                  f"{tuple(shape)} and dtype {dtype.value} (got {o.shape} "
                                  f"{o.dtype.value})", op=op, kind="shape_mismatch")
        if not o.is_contiguous:
            raise ValidationError("out must be contiguous (NCCL writes one dense run); "
                                  "use a compact tensor", op=op)
        result.append(o)
    disjoint([(i, o, f"out on device {ctxs[i].ordinal}") for (i, _), o in zip(items, result)],
             [(i, x, f"x on device {ctxs[i].ordinal}") for i, x in items], op, in_place)
    return result


def disjoint(outs: Sequence[tuple[int, Any, str]], ins: Sequence[tuple[int, Any, str]],
             op: str, in_place: bool = False) -> None:
    """The alias rule across the ranks of this process: ``(local rank, tensor, name)``
    outputs, each writable, judged by device byte ranges (global under UVA: one managed
    buffer can be a tensor of several ranks' sessions) against every input and every
    other output of the call, whatever their rank. The only overlap allowed is an output
    that is exactly the same view as an input of its own rank, when ``in_place``."""
    spans = []
    for i, t, name in ins:
        if t.size:
            spans.append((*aliasing.byte_range(t), i, t, name, True))
    for i, o, name in outs:
        aliasing.check_writable(o, op, name)
        if not o.size:
            continue
        lo, hi = aliasing.byte_range(o)
        for xlo, xhi, k, x, xname, is_input in spans:
            if lo < xhi and xlo < hi and not (
                    in_place and is_input and k == i and aliasing.same_view(o, x)):
                what = "inputs" if is_input else "each other"
                raise ValidationError(f"{name} overlaps {xname} in device memory; outputs "
                                      f"must not alias {what}", op=op)
        spans.append((lo, hi, i, o, name, False))


def contiguous(ctx: Any, t: Any, op: str) -> Any:
    """``t`` itself when it is one dense run, else a compact copy made on ``ctx``."""
    if t.is_contiguous:
        return t
    with guard.within(ctx.context, ctx.context_id):
        return storage.materialize(ctx, t, op)


def alloc(ctx: Any, dtype: Any, shape: tuple[int, ...], op: str) -> Tensor:
    """A new compact tensor of ``ctx``'s session (its context current for the call)."""
    with guard.within(ctx.context, ctx.context_id):
        return ctx.alloc(dtype, shape, op)


def issue(calls: Sequence[tuple[Callable, tuple]], op: str) -> None:
    """Run the NCCL ``calls`` (``fn(*args, op=op)``), several in one NCCL group (the way
    one thread drives several devices); the caller's context is current afterwards."""
    if calls:
        guard.foreign_call(_run, calls, op)


def _run(calls: Sequence[tuple[Callable, tuple]], op: str) -> None:
    if len(calls) == 1:
        fn, args = calls[0]
        fn(*args, op=op)
        return
    _nccl.group_start(op)
    try:
        for fn, args in calls:
            fn(*args, op=op)
    except BaseException:
        try:
            _nccl.group_end(op)  # NCCL asks for the group to be ended after an error too
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass
        raise
    _nccl.group_end(op)
