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
head and launches it. Anything else returns None and the caller takes the general path,
which validates everything and raises the typed errors. One function per arity, because
the hot call must not loop over its operands.

``scalar`` is the binary op with one operand a scalar (``shapes/scalars.py``) and the
other such a ``Tensor``: the general path's plan is then the same contiguous launch with
the scalar by value (its bits in its pointer slot, its flag bit ``VALUE << k``); the
scalar is converted by the converter the general path uses (``Prep.bits``), and one that
does not fit returns None, so that the general path raises the error. ``binary`` takes a
scalar second operand itself (the common ``x + 1.0``) the same way, and remembers the last
Python ``bool``/``int``/``float`` it converted with its bits (``Prep.scalar``): the same
object again -- a constant in a loop -- is not converted again. Only immutable scalars
are remembered, and complex128 ones (which also rewrite a tail word) never.
"""

from __future__ import annotations

import math

from ...exec.aliasing import disjoint_or_same, read_only
from ...exec.context import BLOCK as _BLOCK
from ...tensor import Tensor
from .engine import VALUE, WORD, Prep
from .layout import CHUNK

__all__ = ["unary", "binary", "scalar"]

_new = object.__new__
_prod = math.prod
# scalars whose bits a Prep may remember by identity (immutable builtins: the object fixes
# the value; numpy scalars are converted every time)
_IMMUTABLE = frozenset((bool, int, float))


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
    n = _prod(shape)
    if not 0 < n < CHUNK:
        return None
    if n <= p.small_limit:
        launch, blocks = p.small, (n + _BLOCK - 1) // _BLOCK
    else:
        launch, blocks = p.contig, (n + p.per_block - 1) // p.per_block
    if launch is None:
        return None  # not prepared yet: the general path prepares it
    if high is not None:
        launch.put_tail(2 + k, high)
    pa = bx.ptr
    if out is None:
        buf = p.home.alloc(n * p.out_item, p.name)
        res = _new(Tensor)
        res.dtype, res.shape, res.strides, res.offset, res.buffer, res.host = \
            p.out_dtype, shape, x.strides, 0, buf, None
        po = buf.ptr
    else:
        po = _target(p, out, shape)
        if not po or not (disjoint_or_same(po, n * p.out_item, pa, n * p.item)
                          and (po != pa or p.out_dtype is p.dtype)):
            return None
        res = out  # type: ignore[assignment]
    flags = flag | (0 if (po | pa) & 15 else 8)
    if k:
        launch.run(blocks if blocks < p.cap else p.cap, po, pa, value, 0, n, flags)
    else:
        launch.run(blocks if blocks < p.cap else p.cap, po, value, pa, 0, n, flags)
    return res


def binary(p: Prep, x: Tensor, y: object, out: object = None) -> Tensor | None:
    """``x (op) y`` through the kernel of ``p`` (``x.dtype`` is ``p.dtype``), or None.
    ``y`` is a Tensor or the scalar operand 1 (by value, as in ``scalar``: converted here,
    so that ``add(x, 1.0)`` costs what ``add(x, y)`` does, not two more calls)."""
    shape = x.shape
    bx = x.buffer
    home = p.home
    if bx is None or bx.home is not home:
        return None
    n = _prod(shape)
    if not 0 < n < CHUNK:
        return None
    # unary's launch choice, written again: a helper would add a call to every op
    if n <= p.small_limit:
        launch, blocks = p.small, (n + _BLOCK - 1) // _BLOCK
    else:
        launch, blocks = p.contig, (n + p.per_block - 1) // p.per_block
    if launch is None:
        return None  # not prepared yet: the general path prepares it
    if type(y) is Tensor:
        by = y.buffer
        if y.dtype is not p.dtype or y.shape != shape or by is None or by.home is not home:
            return None
        pb, flag = by.ptr, 0
    elif y is p.scalar:  # the scalar of the last call (a constant in a loop): same bits
        pb, flag = p.scalar_bits, VALUE << 1
    else:
        pb = p.bits(y)
        if type(pb) is not int:
            return None  # not a scalar, or one that does not fit: the general path raises
        if p.item == 16:  # complex128: bytes 8-15 in the tail word of slot 1
            launch.put_tail(3, pb >> 64)
            pb &= WORD
        elif type(y) in _IMMUTABLE:
            p.scalar, p.scalar_bits = y, pb
        flag = VALUE << 1
    pa = bx.ptr
    if out is None:
        buf = home.alloc(n * p.out_item, p.name)
        res = _new(Tensor)
        res.dtype, res.shape, res.strides, res.offset, res.buffer, res.host = \
            p.out_dtype, shape, x.strides, 0, buf, None
        po = buf.ptr
    else:
        po = _target(p, out, shape)
        size, nbytes = n * p.out_item, n * p.item
        if not po or not disjoint_or_same(po, size, pa, nbytes) \
                or not (flag or disjoint_or_same(po, size, pb, nbytes)) \
                or ((po == pa or not flag and po == pb) and p.out_dtype is not p.dtype):
            return None
        res = out  # type: ignore[assignment]
    launch.run(blocks if blocks < p.cap else p.cap, po, pa, pb, 0, n,
               flag | (0 if (po | pa | (0 if flag else pb)) & 15 else 8))
    return res


def scalar(p: Prep, x: Tensor, value: object, k: int, out: object = None) -> Tensor | None:
    """The binary op of ``p`` with operand ``k`` (0 or 1) the scalar ``value`` and the other
    ``x`` (``x.dtype`` is ``p.dtype``), or None."""
    b = p.bits(value)
    if type(b) is not int:
        return None  # not a scalar, or one that does not fit: the general path raises
    if p.item == 16:  # complex128: bytes 8-15 in the tail word of slot k
        return unary(p, x, out, b & WORD, k, VALUE << k, b >> 64)
    return unary(p, x, out, b, k, VALUE << k)
