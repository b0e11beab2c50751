"""Factories for the session methods of the elementwise-shaped families.

A unary or binary method first tries the **fast path**: compact ``Tensor`` operands of
one shape and dtype, resident on this session (the checks of ``OpsBase._resident``), a
kernel already prepared for this (kind, method, dtype) by an earlier call, and for
``_into`` an owned output of the right shape and dtype that overlaps no input. Then it
allocates, writes the varying head of the prepared parameter block (one
``struct.pack_into``) and launches: no validation loops, no layout work, no new objects
but the output. Anything
else (first call, views, rank-0 broadcast, mixed dtypes, errors) takes the general path
``ElementwiseEngine._ew_run``, which validates everything and raises the typed errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..kernels import device
from ..shapes.elementwise import Kind
from ..tensor import Tensor
from ._base import BLOCK
from .elementwise_layout import CHUNK

_raw_launch = device.raw_launch
_launch_failed = device.launch_failed
_new = object.__new__
_prod = math.prod
Impl = Callable[..., Any]


def unary_impl(kind: Kind, name: str, into: bool) -> Impl:
    """The method ``(self, x)`` (``(self, x, out)`` when ``into``) of a one-input kind."""
    kkey = kind.key

    def owned(self, x):
        state = self._begin(name)
        if type(x) is Tensor:
            prep = state.prepared.get((kkey, name, x.dtype._value_))
            if prep is not None:
                bx = x.buffer
                st = prep.stream
                if bx is not None and not bx.freed and bx.domain == prep.dom and bx.stream is st:
                    shape = x.shape
                    n = _prod(shape)
                    if 0 < n < CHUNK:
                        buf = prep.pool.alloc(n * prep.out_item, st, name)
                        out = _new(Tensor)
                        out.dtype, out.shape, out.strides = prep.out_dtype, shape, x.strides
                        out.offset, out.buffer, out.host = 0, buf, None
                        po, pa = buf.ptr, bx.ptr
                        blocks = (n + prep.per_block - 1) // prep.per_block
                        prep.head.pack_into(prep.block, 0, po, pa, 0, 0, n,
                                            0 if (po | pa) & 15 else 8)
                        status = _raw_launch(prep.fn, blocks if blocks < prep.cap else prep.cap,
                                             1, 1, BLOCK, 1, 1, 0, st, prep.address, 0)[0]
                        if status:
                            _launch_failed(status, name)
                        return out
        return self._ew_run(kind, name, (x,))

    def write(self, x, out):
        state = self._begin(name)
        if type(x) is Tensor and type(out) is Tensor:
            prep = state.prepared.get((kkey, name, x.dtype._value_))
            if prep is not None and out.dtype is prep.out_dtype and out.shape == x.shape:
                bx, bo = x.buffer, out.buffer
                st, dom = prep.stream, prep.dom
                if bx is not None and bo is not None and not bx.freed and not bo.freed \
                        and bx.domain == dom and bo.domain == dom and bx.stream is st \
                        and bo.stream is st:
                    n = _prod(x.shape)
                    po, pa = bo.ptr, bx.ptr
                    if 0 < n < CHUNK and (po + n * prep.out_item <= pa
                                          or pa + n * prep.items[0] <= po):
                        blocks = (n + prep.per_block - 1) // prep.per_block
                        prep.head.pack_into(prep.block, 0, po, pa, 0, 0, n,
                                            0 if (po | pa) & 15 else 8)
                        status = _raw_launch(prep.fn, blocks if blocks < prep.cap else prep.cap,
                                             1, 1, BLOCK, 1, 1, 0, st, prep.address, 0)[0]
                        if status:
                            _launch_failed(status, name)
                        return None
        self._ew_run(kind, name, (x,), out, into=True)
        return None

    return write if into else owned


def binary_impl(kind: Kind, name: str, into: bool) -> Impl:
    """The method ``(self, lhs, rhs)`` (``(..., out)`` when ``into``) of a two-input kind."""
    kkey = kind.key

    def owned(self, lhs, rhs):
        state = self._begin(name)
        if type(lhs) is Tensor and type(rhs) is Tensor:
            prep = state.prepared.get((kkey, name, lhs.dtype._value_))
            shape = lhs.shape
            if prep is not None and rhs.dtype is prep.dtype and rhs.shape == shape:
                ba, bb = lhs.buffer, rhs.buffer
                st, dom = prep.stream, prep.dom
                if ba is not None and bb is not None and not ba.freed and not bb.freed \
                        and ba.domain == dom and bb.domain == dom and ba.stream is st \
                        and bb.stream is st:
                    n = _prod(shape)
                    if 0 < n < CHUNK:
                        buf = prep.pool.alloc(n * prep.out_item, st, name)
                        out = _new(Tensor)
                        out.dtype, out.shape, out.strides = prep.out_dtype, shape, lhs.strides
                        out.offset, out.buffer, out.host = 0, buf, None
                        po, pa, pb = buf.ptr, ba.ptr, bb.ptr
                        blocks = (n + prep.per_block - 1) // prep.per_block
                        prep.head.pack_into(prep.block, 0, po, pa, pb, 0, n,
                                            0 if (po | pa | pb) & 15 else 8)
                        status = _raw_launch(prep.fn, blocks if blocks < prep.cap else prep.cap,
                                             1, 1, BLOCK, 1, 1, 0, st, prep.address, 0)[0]
                        if status:
                            _launch_failed(status, name)
                        return out
        return self._ew_run(kind, name, (lhs, rhs))

    def write(self, lhs, rhs, out):
        state = self._begin(name)
        if type(lhs) is Tensor and type(rhs) is Tensor and type(out) is Tensor:
            prep = state.prepared.get((kkey, name, lhs.dtype._value_))
            shape = lhs.shape
            if prep is not None and rhs.dtype is prep.dtype and out.dtype is prep.out_dtype \
                    and rhs.shape == shape and out.shape == shape:
                ba, bb, bo = lhs.buffer, rhs.buffer, out.buffer
                st, dom = prep.stream, prep.dom
                if ba is not None and bb is not None and bo is not None and not ba.freed \
                        and not bb.freed and not bo.freed and ba.domain == dom \
                        and bb.domain == dom and bo.domain == dom and ba.stream is st \
                        and bb.stream is st and bo.stream is st:
                    n = _prod(shape)
                    po, pa, pb = bo.ptr, ba.ptr, bb.ptr
                    no, ni = po + n * prep.out_item, n * prep.items[0]
                    if 0 < n < CHUNK and (no <= pa or pa + ni <= po) \
                            and (no <= pb or pb + ni <= po):
                        blocks = (n + prep.per_block - 1) // prep.per_block
                        prep.head.pack_into(prep.block, 0, po, pa, pb, 0, n,
                                            0 if (po | pa | pb) & 15 else 8)
                        status = _raw_launch(prep.fn, blocks if blocks < prep.cap else prep.cap,
                                             1, 1, BLOCK, 1, 1, 0, st, prep.address, 0)[0]
                        if status:
                            _launch_failed(status, name)
                        return None
        self._ew_run(kind, name, (lhs, rhs), out, into=True)
        return None

    return write if into else owned


def general_impl(kind: Kind, name: str, into: bool) -> Impl:
    """The method ``(self, *inputs)`` (``(self, *inputs, out)``) through the general path."""

    def owned(self, *inputs):
        self._begin(name)
        return self._ew_run(kind, name, inputs)

    def write(self, *args):
        self._begin(name)
        self._ew_run(kind, name, args[:-1], args[-1], into=True)
        return None

    return write if into else owned


def impl_for(kind: Kind, name: str, into: bool) -> Impl:
    if kind.arity == 1:
        return unary_impl(kind, name, into)
    if kind.arity == 2:
        return binary_impl(kind, name, into)
    return general_impl(kind, name, into)


# --- public methods -----------------------------------------------------------------------
SUFFIX = {"owned": "", "read": "_read", "into": "_into", "read_into": "_read_into"}
_PARAMS = {
    1: "x : Tensor or TensorView\n    The input: a device tensor or view of this session.",
    2: "lhs, rhs : Tensor or TensorView\n    Device operands of this session with one dtype "
       "and one shape; a rank-0\n    operand broadcasts.",
    3: "{0}, {1}, {2} : Tensor or TensorView\n    Device operands of this session with one "
       "shape (a rank-0 operand\n    broadcasts).",
}
_OUT = ("out : Tensor or TensorView\n    Caller-owned output of exactly the result's shape "
        "and dtype; every\n    element is overwritten. It must not overlap an input.")
_RAISES = ("Raises\n------\nValidationError\n    Dtype or shape mismatch, a bad ``out`` "
           "(shape, dtype, overlap).\nUnsupportedDTypeError\n    The operation is not "
           "defined for the dtype.\nRuntimeStateError\n    An operand is not resident on this "
           "session, or the session is closed.")


def docstring(summary: str, arity: int, form: str, names: tuple[str, ...] = (),
              extra: str = "") -> str:
    """The numpy-style docstring of one generated method."""
    params = _PARAMS[arity].format(*names)
    if extra:
        params += "\n" + extra
    into = form in ("into", "read_into")
    if into:
        params += "\n" + _OUT
    returns = ("Returns\n-------\nNone\n    The result is enqueued into ``out``." if into else
               "Returns\n-------\nTensor\n    A new compact device tensor (the work is "
               "enqueued, not finished).")
    return f"{summary}\n\nParameters\n----------\n{params}\n\n{returns}\n\n{_RAISES}\n"


def _named(fn, name: str, doc: str):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def make_method(kind: Kind, op: str, form: str, summary: str):
    """The session method ``op + SUFFIX[form]`` computing ``kind``."""
    name = op + SUFFIX[form]
    into = form in ("into", "read_into")
    doc = docstring(summary, kind.arity, form, kind.roles)
    if kind.arity < 3:
        return _named(impl_for(kind, name, into), name, doc)
    impl = general_impl(kind, name, into)
    if kind.name == "select":
        if into:
            def si(self, pred, on_true, on_false, out) -> None:
                impl(self, pred, on_true, on_false, out)
            return _named(si, name, doc)

        def s(self, pred, on_true, on_false) -> Tensor:
            return impl(self, pred, on_true, on_false)
        return _named(s, name, doc)
    if into:
        def ci(self, x, lower, upper, out) -> None:
            impl(self, x, lower, upper, out)
        return _named(ci, name, doc)

    def c(self, x, lower, upper) -> Tensor:
        return impl(self, x, lower, upper)
    return _named(c, name, doc)
