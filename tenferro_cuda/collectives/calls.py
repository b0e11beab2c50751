"""The collectives and point-to-point transfers of a ``Communicator``: validation, outputs
and the NCCL calls, one function each (the communicator's methods call them).

Each function checks everything first (the communicator, its sessions, the residency of
every tensor, shapes and dtypes across this process's ranks, the reduction for the
dtype, outputs and their aliasing), then compacts strided inputs and allocates outputs on
each rank's own session, then enqueues the NCCL calls on each rank's session stream (one
NCCL group when this process drives several ranks). Nothing blocks the host. Tensors of
size 0 are validated and allocated, and no NCCL call is made for them.
"""

from __future__ import annotations

import math
from typing import Any

from .. import _nccl
from ..errors import ValidationError
from . import ranks, wire

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv"]


def _result(results: list, single: bool, given: object) -> Any:
    """What a call returns: the caller's own ``out`` for the ``_into`` forms, else the new
    tensors shaped like ``x`` (one tensor, or a list in the order of ``x``)."""
    if given is not None:
        return given
    return results[0] if single else results


def _each_rank(comm: Any, ctxs: list, xs: list, outs: list | None, shape: tuple,
               dtype: Any, op: str, call: Any, *params: Any) -> list:
    """For each ``(local rank, x)``: compact ``x``, take its output (a new tensor of
    ``shape``, or the caller's), and enqueue ``call(x, out, *params, comm, stream)`` on
    the rank's session stream -- none when the size ``params[0]`` is 0. The outputs."""
    results, calls = [], []
    for j, (i, t) in enumerate(xs):
        ctx = ctxs[i]
        src = ranks.contiguous(ctx, t, op)
        dst = ranks.alloc(ctx, dtype, shape, op) if outs is None else outs[j]
        results.append(dst)
        if params[0]:
            calls.append((call, (src.data_ptr(), dst.data_ptr(), *params, comm._handles[i],
                                 int(ctx.stream))))
    ranks.issue(calls, op)
    return results


def all_reduce(comm: Any, x: object, red: str, out: object, op: str) -> Any:
    """``out`` (new when None) holds the reduction of every rank's ``x``."""
    ctxs = comm._contexts(op)
    xs, single = ranks.per_rank(x, ctxs, op, "x")
    shape, dtype = ranks.same_layout(xs, op, "x")
    code, per, red_code = wire.reduction(dtype, red, op)
    outs = None if out is None else ranks.outputs(out, xs, ctxs, op, shape, dtype, True)
    results = _each_rank(comm, ctxs, xs, outs, shape, dtype, op, _nccl.all_reduce,
                         math.prod(shape) * per, code, red_code)
    return _result(results, single, out)


def all_gather(comm: Any, x: object, out: object, op: str) -> Any:
    """``out`` (new when None) of shape ``(nranks, *x.shape)``: row r is rank r's ``x``."""
    ctxs = comm._contexts(op)
    xs, single = ranks.per_rank(x, ctxs, op, "x")
    shape, dtype = ranks.same_layout(xs, op, "x")
    full = (comm._nranks, *shape)
    outs = None if out is None else ranks.outputs(out, xs, ctxs, op, full, dtype, False)
    results = _each_rank(comm, ctxs, xs, outs, full, dtype, op, _nccl.all_gather,
                         math.prod(shape) * dtype.itemsize, wire.BYTES)
    return _result(results, single, out)


def reduce_scatter(comm: Any, x: object, red: str, out: object, op: str) -> Any:
    """``out`` (new when None) of shape ``x.shape[1:]``: on rank r, the reduction over
    every rank of ``x[r]`` (``x`` has one row per rank)."""
    ctxs = comm._contexts(op)
    xs, single = ranks.per_rank(x, ctxs, op, "x")
    shape, dtype = ranks.same_layout(xs, op, "x")
    if not shape or shape[0] != comm._nranks:
        raise ValidationError(f"x must have one row per rank: shape ({comm._nranks}, ...) "
                              f"(got {shape})", op=op, kind="shape_mismatch")
    code, per, red_code = wire.reduction(dtype, red, op)
    part = tuple(shape[1:])
    outs = None if out is None else ranks.outputs(out, xs, ctxs, op, part, dtype, False)
    results = _each_rank(comm, ctxs, xs, outs, part, dtype, op, _nccl.reduce_scatter,
                         math.prod(part) * per, code, red_code)
    return _result(results, single, out)


def _check_rank(comm: Any, value: object, op: str, what: str) -> int:
    if type(value) is not int or not 0 <= value < comm._nranks:
        raise ValidationError(f"{what} must be a rank in [0, {comm._nranks}) (got "
                              f"{value!r})", op=op)
    return value


def broadcast(comm: Any, x: object, root: object, in_place: bool, op: str) -> Any:
    """Every rank gets rank ``root``'s ``x``: in a new tensor, or written into ``x``
    (``in_place``). On other ranks ``x`` gives the shape and dtype (and is the output
    when ``in_place``)."""
    ctxs = comm._contexts(op)
    root = _check_rank(comm, root, op, "root")
    xs, single = ranks.per_rank(x, ctxs, op, "x")
    shape, dtype = ranks.same_layout(xs, op, "x")
    if in_place:  # every rank's x is its output; the root's is also the input
        for _, t in xs:
            if not t.is_contiguous:
                raise ValidationError("x must be contiguous to be broadcast in place",
                                      op=op)
        named = [(i, t, f"x on device {ctxs[i].ordinal}") for i, t in xs]
        ranks.disjoint(named, [n for n in named if comm._ranks[n[0]] == root], op, True)
    results, calls = [], []
    nbytes = math.prod(shape) * dtype.itemsize
    for i, t in xs:
        ctx = ctxs[i]
        src = ranks.contiguous(ctx, t, op) if comm._ranks[i] == root else t
        dst = t if in_place else ranks.alloc(ctx, dtype, shape, op)
        results.append(dst)
        if nbytes:
            send = src.data_ptr() if comm._ranks[i] == root else dst.data_ptr()
            calls.append((_nccl.broadcast, (send, dst.data_ptr(), nbytes, wire.BYTES, root,
                                            comm._handles[i], int(ctx.stream))))
    ranks.issue(calls, op)
    return _result(results, single, x if in_place else None)


def _pairs(comm: Any, ctxs: list, pairs: object, op: str, what: str) -> list:
    """``[(local rank, tensor, peer)]`` for ``pairs`` of ``(tensor, peer rank)``."""
    if not isinstance(pairs, (list, tuple)):
        raise ValidationError(f"{what} must be a list of (tensor, peer) pairs (got "
                              f"{type(pairs).__name__})", op=op)
    out = []
    for j, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValidationError(f"{what}[{j}] must be a (tensor, peer) pair (got "
                                  f"{pair!r})", op=op)
        t, peer = pair
        i = ranks.locate(ctxs, t, op, f"{what}[{j}]")
        out.append((i, t, _check_rank(comm, peer, op, f"{what}[{j}] peer")))
    return out


def _match(comm: Any, sends: list, recvs: list, op: str) -> None:
    """Every send between two ranks of this process has its recv, in the same order, with
    the same dtype and element count (else NCCL would wait for ever)."""
    local = set(comm._ranks)
    want: dict[tuple[int, int], list] = {}
    got: dict[tuple[int, int], list] = {}
    for i, t, peer in sends:
        if peer in local:
            want.setdefault((comm._ranks[i], peer), []).append((t.dtype, t.size))
    for i, t, peer in recvs:
        if peer in local:
            got.setdefault((peer, comm._ranks[i]), []).append((t.dtype, t.size))
    for key in sorted(set(want) | set(got)):
        if want.get(key, []) != got.get(key, []):
            a, b = key
            raise ValidationError(
                f"the sends from rank {a} to rank {b} ({_describe(want.get(key, []))}) "
                f"do not match rank {b}'s receives from rank {a} "
                f"({_describe(got.get(key, []))}); both ranks are in this process, so "
                "each send needs its recv in the same send_recv call", op=op)


def _describe(items: list) -> str:
    return ", ".join(f"{d.value}[{n}]" for d, n in items) or "none"


def send_recv(comm: Any, sends: object, recvs: object, op: str) -> None:
    """Enqueue every ``(tensor, peer)`` send and every ``(out, peer)`` receive in one NCCL
    group (NCCL pairs the k-th send from a to b with the k-th receive of b from a)."""
    ctxs = comm._contexts(op)
    out_sends = _pairs(comm, ctxs, sends, op, "sends")
    out_recvs = _pairs(comm, ctxs, recvs, op, "recvs")
    _match(comm, out_sends, out_recvs, op)
    for j, (_, o, _) in enumerate(out_recvs):
        if not o.is_contiguous:
            raise ValidationError(f"recvs[{j}] must be contiguous (NCCL writes one dense "
                                  "run)", op=op)
    ranks.disjoint([(i, o, f"recvs[{j}]") for j, (i, o, _) in enumerate(out_recvs)],
                   [(i, t, f"sends[{k}]") for k, (i, t, _) in enumerate(out_sends)], op)
    calls = []
    for i, t, peer in out_sends:
        ctx = ctxs[i]
        src = ranks.contiguous(ctx, t, op)
        if t.nbytes:
            calls.append((_nccl.send, (src.data_ptr(), t.nbytes, wire.BYTES, peer,
                                       comm._handles[i], int(ctx.stream))))
    for i, o, peer in out_recvs:
        if o.nbytes:
            calls.append((_nccl.recv, (o.data_ptr(), o.nbytes, wire.BYTES, peer,
                                       comm._handles[i], int(ctxs[i].stream))))
    ranks.issue(calls, op)
