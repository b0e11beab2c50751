"""The fast path of the elementwise methods: the general path (``engine.run``) with its
planning skipped for the one plan this covers, through the same ``Prep`` and the same
prepared launches (``Prep.small`` for runs of at most ``Prep.small_limit`` elements, else
``Prep.contig``; a launch not prepared yet sends the call to the general path, which
prepares it).

It covers compact ``Tensor`` operands of one shape and the primary dtype, resident on the
context (``buffer.home is prep.home``: the residency rule), fewer than ``CHUNK``
elements, and -- for an ``_into`` form -- a compact ``Tensor`` output of the result's shape
and dtype, writable (``aliasing.read_only``), that shares no byte with an input or is
exactly one of them (in place, same dtype: the alias rule for compact runs,
``aliasing.disjoint_or_same``). For such a call
the general path plans one contiguous launch over the whole run; this writes that launch's
head and launches it. Anything else takes the general path, which validates everything
and raises the typed errors. The plan of a shape (element count, launch, grid, output
bytes: ``_plan``) is kept in the ``Prep`` for the next call of the same shape.

``binary_function(kind, name)`` is the function of a binary method, both forms: its fast
path written out in it -- the hot call (``add(x, y)``) makes no Python call but the
allocation and the launch -- then the general path. ``unary`` is the fast path of a
unary method, and ``scalar`` of a binary op with one operand a scalar
(``shapes/scalars.py``) and the other such a ``Tensor``: the general path's plan is then
the same contiguous launch with the scalar by value (its bits in its pointer slot, its
flag bit ``VALUE << k``); the scalar is converted by the converter the general path uses
(``Prep.bits``), and one that does not fit takes the general path, which raises the
error. A binary function takes a scalar second operand itself (the common ``x + 1.0``)
the same way, and remembers the last Python ``bool``/``int``/``float`` it converted with
its bits (``Prep.scalar``): the same object again -- a constant in a loop -- is not
converted again. Only immutable scalars are remembered, and complex128 ones (which also
rewrite a tail word) never.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

from ...exec.context import BLOCK as _BLOCK
from ...exec.context import ExecContext
from ...shapes.aliasing import disjoint_or_same, read_only
from ...shapes.elementwise import Kind
from ...shapes.scalars import Scalar
from ...tensor import Tensor, TensorView
from . import engine
from .engine import VALUE, WORD, Prep
from .layout import CHUNK

__all__ = ["unary", "binary_function", "scalar"]

_new = object.__new__
_prod = math.prod
# scalars whose bits a Prep may remember by identity (immutable builtins: the object fixes
# the value; numpy scalars are converted every time)
_IMMUTABLE = frozenset((bool, int, float))
Plan = tuple  # (elements, prepared launch, its bound launch of the grid, output bytes)


def _plan(p: Prep, shape: tuple[int, ...]) -> Plan | None:
    """The one contiguous launch over a compact run of ``shape`` (kept in ``p`` for the
    next call of that shape), or None when the fast path does not cover it."""
    n = _prod(shape)
    if not 0 < n < CHUNK:
        return None
    if n <= p.small_limit:
        launch, blocks = p.small, (n + _BLOCK - 1) // _BLOCK
    else:
        launch, blocks = p.contig, (n + p.per_block - 1) // p.per_block
    if launch is None:
        return None  # not prepared yet: the general path prepares it
    plan = (n, launch, launch.bound(min(blocks, p.cap)), n * p.out_item)
    p.shape, p.plan = shape, plan
    return plan


def _target(p: Prep, out: object, shape: tuple[int, ...]) -> int:
    """The address of a caller's output the fast path may write, else 0."""
    if type(out) is not Tensor or out.dtype is not p.out_dtype or out.shape != shape:
        return 0
    b = out.buffer
    if b is None or b.home is not p.home or (b.owner is not None and read_only(b)):
        return 0  # the general path raises the precise error
    return b.ptr


def unary(p: Prep, x: Tensor, out: object = None, value: int = 0, k: int = 1,
          flag: int = 0, high: int | None = None) -> Tensor | None:
    """``x`` through the kernel of ``p`` (``x.dtype`` is ``p.dtype``), or None. With
    ``flag`` (``VALUE << k``) it is the binary op whose operand ``k`` is the scalar of bits
    ``value`` (``scalar``; ``high``: bytes 8-15 of a complex128 one): one contiguous
    launch over ``x`` either way."""
    bx = x.buffer
    if bx is None or bx.home is not p.home:
        return None
    shape = x.shape
    plan = p.plan if shape == p.shape else _plan(p, shape)
    if plan is None:
        return None
    n, launch, go, size = plan
    if high is not None:
        launch.put_tail(2 + k, high)
    pa = bx.ptr
    if out is None:
        buf = p.home.alloc(size, p.name)
        res = _new(Tensor)
        res.dtype = p.out_dtype
        res.shape = shape
        res.strides = x.strides
        res.offset = 0
        res.buffer = buf
        res.host = None
        res._kit = None
        po = buf.ptr
    else:
        po = _target(p, out, shape)
        if not po or not (disjoint_or_same(po, size, pa, n * p.item)
                          and (po != pa or p.out_dtype is p.dtype)):
            return None
        res = out  # type: ignore[assignment]
    flags = flag | (0 if (po | pa) & 15 else 8)
    if k:
        launch.pack(po, pa, value, 0, n, flags)
    else:
        launch.pack(po, value, pa, 0, n, flags)
    try:
        go()
    except Exception as exc:  # noqa: BLE001 - launch.failed raises it, typed
        launch.failed(exc)
    return res


def binary_function(kind: Kind, name: str, into: bool) -> Callable:
    """The function of the binary method ``name``: ``fn(ctx, lhs, rhs)`` returning the
    result, or with ``into`` ``fn(ctx, lhs, rhs, out)`` returning None. One body serves
    both forms (``out`` None: allocate); ``__signature__`` gives the form's own
    parameters, which the session method takes."""
    key = (kind.key, name)

    def general(ctx: ExecContext, lhs: object, rhs: object, out: object) -> Tensor | None:
        res = engine.run(ctx, kind, name, (lhs, rhs), out)
        return None if into else res

    def binary(ctx: ExecContext, lhs: Tensor | TensorView | Scalar,
               rhs: Tensor | TensorView | Scalar,
               out: Tensor | TensorView | None = None) -> Tensor | None:
        preps = ctx.memo.get(key)
        if preps is None:
            return general(ctx, lhs, rhs, out)
        if type(lhs) is not Tensor:  # a scalar lhs (``2.0 - x``) by value, as operand 0;
            if type(rhs) is not Tensor:  # views and the rest: the general path
                return general(ctx, lhs, rhs, out)
            p = preps.get(rhs.dtype)
            res = None if p is None else scalar(p, rhs, lhs, 0, out)
            if res is None:
                return general(ctx, lhs, rhs, out)
            return None if into else res
        p = preps.get(lhs.dtype)
        if p is None:
            return general(ctx, lhs, rhs, out)
        bx = lhs.buffer
        home = p.home
        if bx is None or bx.home is not home:
            return general(ctx, lhs, rhs, out)
        shape = lhs.shape
        plan = p.plan if shape == p.shape else _plan(p, shape)
        if plan is None:
            return general(ctx, lhs, rhs, out)
        n, launch, go, size = plan
        if type(rhs) is Tensor:
            by = rhs.buffer
            if rhs.dtype is not p.dtype or rhs.shape != shape or by is None \
                    or by.home is not home:
                return general(ctx, lhs, rhs, out)
            pb, flag = by.ptr, 0
        elif rhs is p.scalar:  # the scalar of the last call (a constant in a loop): same bits
            pb, flag = p.scalar_bits, VALUE << 1
        else:
            pb = p.bits(rhs)
            if type(pb) is not int:  # not a scalar, or one that does not fit: raised there
                return general(ctx, lhs, rhs, out)
            if p.item == 16:  # complex128: bytes 8-15 in the tail word of slot 1
                launch.put_tail(3, pb >> 64)
                pb &= WORD
            elif type(rhs) in _IMMUTABLE:
                p.scalar, p.scalar_bits = rhs, pb
            flag = VALUE << 1
        pa = bx.ptr
        if out is None:
            buf = home.alloc(size, name)  # type: ignore[union-attr]  # mypy: by.home is home widens it
            res = _new(Tensor)
            res.dtype = p.out_dtype
            res.shape = shape
            res.strides = lhs.strides
            res.offset = 0
            res.buffer = buf
            res.host = None
            res._kit = None
            po = buf.ptr
        else:
            po = _target(p, out, shape)
            nbytes = n * p.item
            if not po or not disjoint_or_same(po, size, pa, nbytes) \
                    or not (flag or disjoint_or_same(po, size, pb, nbytes)) \
                    or ((po == pa or not flag and po == pb) and p.out_dtype is not p.dtype):
                return general(ctx, lhs, rhs, out)
            res = None
        launch.pack(po, pa, pb, 0, n, flag | (0 if (po | pa | (0 if flag else pb)) & 15 else 8))
        try:
            go()
        except Exception as exc:  # noqa: BLE001 - launch.failed raises it, typed
            launch.failed(exc)
        return res

    params = list(inspect.signature(binary).parameters.values())
    if into:  # ``out`` required, nothing returned
        params[3] = params[3].replace(default=inspect.Parameter.empty,
                                      annotation="Tensor | TensorView")
        public = inspect.Signature(params, return_annotation="None")
    else:  # no ``out``
        public = inspect.Signature(params[:3], return_annotation="Tensor")
    binary.__signature__ = public  # type: ignore[attr-defined]
    return binary


def scalar(p: Prep, x: Tensor, value: object, k: int, out: object = None) -> Tensor | None:
    """The binary op of ``p`` with operand ``k`` (0 or 1) the scalar ``value`` and the other
    ``x`` (``x.dtype`` is ``p.dtype``), or None."""
    b = p.bits(value)
    if type(b) is not int:
        return None  # not a scalar, or one that does not fit: the general path raises
    if p.item == 16:  # complex128: bytes 8-15 in the tail word of slot k
        return unary(p, x, out, b & WORD, k, VALUE << k, b >> 64)
    return unary(p, x, out, b, k, VALUE << k)
