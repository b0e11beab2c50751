"""``KernelSession``: the library's own kernel client, lent to extension authors.

Exposes the exact client of this runtime: the registered ``ptx/`` kernels, compilation
through the library's cache, allocation on the runtime's pool, and launches on the
session stream. Pending work is flushed on entry and exit (also after an error); nothing
here synchronizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .dtypes import DType
from .errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from .kernels.registry import family as family_of
from .raw import Function, KernelArg, LaunchConfig, Module, RawSession
from .tensor import Tensor, _Strided

__all__ = ["KernelSession"]


class KernelSession:
    """The library kernel client of one session, for one ``with_kernels`` scope."""

    _session: Any
    _scope: Any
    _raw: RawSession
    op: str

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("KernelSession is lent by CudaExecSession.with_kernels / kernels")

    @classmethod
    def _make(cls, session, scope, op: str) -> KernelSession:
        self = object.__new__(cls)
        self._session, self._scope, self.op = session, scope, op
        self._raw = RawSession._make(session, session._state.stream, scope, op)
        return self

    def _check(self) -> None:
        if not self._scope.alive:
            raise RuntimeStateError("the kernel session's scope has ended", op=self.op)
        self._session._begin(self.op)

    def function(self, family: str, entry: str, *targs: DType | str) -> Function:
        """A library kernel: ``function("copy", "fill", "tf::u32")``; dtypes may be given
        as DType (mapped to their C++ type)."""
        self._check()
        try:
            ent = family_of(family).entry(entry)
        except KeyError as exc:
            raise ValidationError(str(exc.args[0]), op=self.op) from None
        args = tuple(a.ctype if isinstance(a, DType) else str(a) for a in targs)
        if args not in {tuple(i) for i in ent.instances()}:
            raise ValidationError(f"{family}.{entry} has no instantiation {args}", op=self.op)
        fn = self._session._fn(family, ent.expression(*args))
        return Function(fn, Module(None, self._scope), ent.expression(*args))

    def compile(self, source: str, name_expressions: Sequence[str],
                options: Sequence[str] = (), *, name: str = "kernel.cu") -> dict[str, Function]:
        """Compile through the library cache; return a Function per name expression."""
        self._check()
        rt = self._session._rt
        out = {}
        for expr in name_expressions:
            fn = rt.function_from_source(source, name, expr, tuple(options), op=self.op)
            out[expr] = Function(fn, Module(None, self._scope), expr)
        return out

    def alloc_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        return self._raw.alloc_output(dtype, shape)

    def alloc_zero_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        """A new tensor filled with zeros on the device (no host upload)."""
        out = self.alloc_output(dtype, shape)
        self._session._fill(out, 0, self.op)
        return out

    def scale_tensor_write(self, out: _Strided, factor) -> None:
        """out[...] *= factor in place (numeric dtypes; factor of out's dtype)."""
        self._check()
        self._session._resident(out, self.op, "out")
        dtype = out.dtype
        if not dtype.is_numeric:
            raise UnsupportedDTypeError("scale_tensor_write needs a numeric dtype", op=self.op)
        self._session._scale(out, factor, self.op)

    def grid_1d(self, n: int, block: int = 256) -> LaunchConfig:
        """A launch config covering ``n`` threads (grid-stride kernels may use fewer)."""
        if n < 0:
            raise ValidationError(f"n must be >= 0 (got {n})", op=self.op)
        return LaunchConfig(max(1, -(-n // block)), block)

    def launch(self, fn: Function, config: LaunchConfig, args: Sequence[KernelArg]) -> None:
        self._raw.launch(fn, config, args)

    def stream(self):
        return self._raw.stream()
