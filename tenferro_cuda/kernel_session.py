"""``KernelSession``: the library's own kernel client, lent to extension authors.

Exposes the exact client of this runtime: the registered ``ptx/`` kernels, compilation
through the library's cache, allocation on the runtime's pool, and launches on the
session stream through the library's launcher. Pending work is flushed on entry and exit
(also after an error); nothing here synchronizes. Like everything a session lends, a
kernel session and its functions check their thread and scope on every use and cannot be
copied or pickled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .authority import Authority, Scope
from .dtypes import DType
from .errors import UnsupportedDTypeError, ValidationError
from .exec.context import ExecContext
from .exec.residency import resident
from .kernels.registry import family as family_of
from .ops import storage
from .raw import Function, KernelArg, LaunchConfig, Module, RawSession, StreamHandle
from .raw_args import _texts
from .shapes.aliasing import check_distinct_elements, check_writable
from .tensor import Tensor, _Strided

__all__ = ["KernelSession"]


class KernelSession(Authority):
    """The library kernel client of one session, for one ``with_kernels`` scope."""

    __slots__ = ("_raw", "_ctx", "_scope", "op")
    _raw: RawSession
    _ctx: ExecContext
    _scope: Scope
    op: str

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("KernelSession is lent by CudaExecSession.with_kernels / kernels")

    @classmethod
    def _make(cls, session, ctx: ExecContext, scope: Scope, op: str) -> KernelSession:
        self = object.__new__(cls)
        self._ctx, self._scope, self.op = ctx, scope, op
        self._raw = RawSession._make(session, ctx, scope, op)
        return self

    def _check(self) -> ExecContext:
        return self._raw._check()

    def function(self, family: str, entry: str, *targs: DType | str) -> Function:
        """A library kernel: ``function("copy", "fill", "tf::u32")``; dtypes may be given
        as DType (mapped to their C++ type)."""
        ctx = self._check()
        if not isinstance(family, str) or not isinstance(entry, str):
            raise ValidationError(f"family and entry are names (str; got "
                                  f"{type(family).__name__}, {type(entry).__name__})",
                                  op=self.op)
        try:
            ent = family_of(family).entry(entry)
        except KeyError as exc:
            raise ValidationError(str(exc.args[0]), op=self.op) from None
        args = tuple(a.ctype if isinstance(a, DType) else str(a) for a in targs)
        if args not in {tuple(i) for i in ent.instances()}:
            raise ValidationError(f"{family}.{entry} has no instantiation {args}", op=self.op)
        expression = ent.expression(*args)
        fn = ctx.function(family, expression)
        return Function(fn, Module(None, ctx, self._scope), expression)

    def compile(self, source: str, name_expressions: Sequence[str],
                options: Sequence[str] = (), *, name: str = "kernel.cu") -> dict[str, Function]:
        """Compile through the library cache; return a Function per name expression.
        ``name_expressions`` and ``options`` are sequences of str (a list or tuple, never
        one string: ``compile(src, ["scale"])``)."""
        ctx = self._check()
        exprs = _texts(name_expressions, "compile name_expressions", self.op)
        opts = _texts(options, "compile options", self.op)
        if not isinstance(source, str) or not isinstance(name, str):
            raise ValidationError(f"compile takes the source and its name as str (got "
                                  f"{type(source).__name__}, {type(name).__name__})",
                                  op=self.op)
        out = {}
        for expr in exprs:
            fn = ctx.source_function(source, name, expr, opts, op=self.op)
            out[expr] = Function(fn, Module(None, ctx, self._scope), expr)
        return out

    def alloc_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        """A new compact device tensor (contents undefined)."""
        return self._raw.alloc_output(dtype, shape)

    def alloc_zero_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        """A new tensor filled with zeros on the device (no host upload)."""
        out = self.alloc_output(dtype, shape)
        self._raw._device(storage.fill, self._ctx, out, 0, self.op)
        return out

    def scale_tensor_write(self, out: _Strided, factor: Any) -> None:
        """out[...] *= factor in place (numeric dtypes; factor of out's dtype)."""
        ctx = self._check()
        resident(ctx, out, self.op, "out")
        check_writable(out, self.op)
        check_distinct_elements(out, self.op)  # a stride-0 view would race with itself
        if not out.dtype.is_numeric:
            raise UnsupportedDTypeError("scale_tensor_write needs a numeric dtype", op=self.op)
        if ctx.capture is not None:  # the graph keeps it, lists it, may rebind it
            ctx.capture.note(out, written=True)
        self._raw._device(storage.scale, ctx, out, factor, self.op)

    def grid_1d(self, n: int, block: int = 256) -> LaunchConfig:
        """A launch config covering ``n`` threads (grid-stride kernels may use fewer): a
        block the device can run, and a grid of at most the device's largest x extent
        (a grid-stride kernel covers the rest)."""
        ctx = self._check()
        if type(n) is not int or n < 0:
            raise ValidationError(f"n must be an int >= 0 (got {n!r})", op=self.op)
        info = ctx.info
        limit = min(info.max_threads_per_block, info.max_block_dims[0])
        if type(block) is not int or not 1 <= block <= limit:
            raise ValidationError(f"block must be an int in [1, {limit}] on this device (got "
                                  f"{block!r})", op=self.op)
        return LaunchConfig(min(max(1, -(-n // block)), info.max_grid_dims[0]), block)

    def launch(self, fn: Function, config: LaunchConfig, args: Sequence[KernelArg]) -> None:
        """Enqueue ``fn`` on the session stream (geometry validated first)."""
        self._raw.launch(fn, config, args)

    def stream(self) -> StreamHandle:
        """The session stream (borrowed for this scope)."""
        return self._raw.stream()

    def __repr__(self) -> str:
        state = "open" if self._scope.alive else "closed"
        return f"<KernelSession op={self.op!r} {state}>"
