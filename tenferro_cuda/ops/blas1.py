"""BLAS-1: ``vdot_read``, ``norm_squared_read`` and ``axpby_read_into_accum``.

``vdot_read`` and ``norm_squared_read`` return rank-0 device tensors without waiting for the
device: one pass of blocks writes per-chunk partials (a pool buffer, freed stream-ordered
when the call returns) and one small block reduces them in a fixed order (no atomics: the
same input gives the same bits every run). Views that are not compact are compacted first
(one extra copy). ``axpby_read_into_accum`` updates ``y`` in place in one pass.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from ..errors import ValidationError
from ..kernels.families import blas1 as fam
from ..shapes import reduction as shp
from ..tensor import Tensor, TensorView, _Strided
from ._base import OpsBase, _buf
from ._layout import index_type, layouts_for, may_overlap
from .reduction import BLOCK, resident_blocks

MIN_FLAT_CHUNK = 16384  # fewest elements one block of the flat reduction takes
# Storage of the flat partials (the kernels' accumulator types, by size).
_ACC = {DType.INT8: DType.INT32, DType.UINT8: DType.INT32, DType.INT32: DType.INT32,
        DType.FLOAT16: DType.FLOAT32, DType.BFLOAT16: DType.FLOAT32}


_exprs: dict = {}


def _expr(entry: str, *targs: str) -> str:
    """The name expression of a blas1 instantiation (memoized: no formatting per call)."""
    key = (entry, targs)
    e = _exprs.get(key)
    if e is None:
        e = _exprs[key] = fam.FAMILY.entry(entry).expression(*targs)
    return e


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


FLAT_PARTIALS_CODES = "PPQQP"
FLAT_FINISH_CODES = "PIP"


def _scalar_code(dtype: DType) -> str:
    return "X16" if dtype.itemsize == 16 else f"S{dtype.itemsize}"


def axpby_contig_codes(dtype: DType) -> str:
    """ArgPack codes of ``axpby_contig`` (see ptx/blas1.cu)."""
    c = _scalar_code(dtype)
    return f"PP{c}{c}iQ"


def axpby_strided_codes(dtype: DType, index: str) -> str:
    c = _scalar_code(dtype)
    return f"PLPL{c}{c}i" + ("I" if index == "tf::u32" else "Q")


def _aligned(t: _Strided) -> bool:
    """Compact and 16-byte aligned (the flat kernels' vector loads need both; pool buffers
    are aligned, adopted foreign buffers may not be)."""
    return t.is_contiguous and t.data_ptr() % 16 == 0


def self_overlapping(shape, strides) -> bool:
    """True unless every index of the view addresses a distinct element (a sufficient test:
    each axis must step past everything the axes with smaller strides reach)."""
    if 0 in shape:
        return False
    span = 0
    for n, st in sorted(((n, abs(st)) for n, st in zip(shape, strides) if n > 1),
                        key=lambda t: t[1]):
        if st <= span:
            return True
        span += (n - 1) * st
    return False


class Blas1Ops(OpsBase):
    def vdot_read(self, lhs: Tensor | TensorView, rhs: Tensor | TensorView) -> Tensor:
        """Sum of ``conj(lhs) * rhs`` over all elements, as a rank-0 device tensor.

        Parameters
        ----------
        lhs, rhs : Tensor or TensorView
            Device tensors or views of one shape and one numeric dtype, rank <= 8.

        Returns
        -------
        Tensor
            Rank 0, the inputs' dtype: integers wrap, float16/bfloat16 accumulate in
            float32; zero elements give 0. Enqueued only: nothing waits for the device.

        Raises
        ------
        ValidationError
            Shape or dtype mismatch; rank > 8.
        UnsupportedDTypeError
            bool inputs.
        RuntimeStateError
            An input is not resident on this session's device; closed session.
        """
        op = "vdot_read"
        self._begin(op)
        self._resident(lhs, op, "lhs")
        self._resident(rhs, op, "rhs")
        dtype = shp.infer_vdot(lhs.dtype, lhs.shape, rhs.dtype, rhs.shape, op)
        return self._flat_reduce("tf::bl::Vdot", dtype, dtype, lhs, rhs, op)

    def norm_squared_read(self, input: Tensor | TensorView) -> Tensor:
        """Sum of ``|x|^2`` over all elements (no square root), as a rank-0 device tensor.

        Parameters
        ----------
        input : Tensor or TensorView
            A device tensor or view of a numeric dtype, rank <= 8.

        Returns
        -------
        Tensor
            Rank 0, the real dtype of ``input`` (complex64 -> float32): integers wrap,
            float16/bfloat16 accumulate in float32; zero elements give 0. Enqueued only.

        Raises
        ------
        ValidationError
            rank > 8.
        UnsupportedDTypeError
            bool input.
        RuntimeStateError
            ``input`` is not resident on this session's device; closed session.
        """
        op = "norm_squared_read"
        self._begin(op)
        self._resident(input, op)
        real = shp.infer_norm_squared(input.dtype, input.shape, op)
        return self._flat_reduce("tf::bl::NormSq", input.dtype, real, input, None, op)

    def axpby_read_into_accum(self, alpha: complex, x: Tensor | TensorView, beta: complex,
                              y: Tensor | TensorView) -> None:
        """``y <- alpha * x + beta * y`` in place, in one pass.

        Parameters
        ----------
        alpha, beta : int, float or complex
            Python or numpy numbers representable in the dtype (converted to it): ints
            in range for integer dtypes (integral floats too), real numbers that do not
            overflow float dtypes, complex numbers for complex dtypes only. Otherwise
            ``ValidationError``. When ``beta == 0``, ``y`` is not read (BLAS convention).
        x : Tensor or TensorView
            Same shape and numeric dtype as ``y``; must not overlap ``y``.
        y : Tensor or TensorView
            Caller-owned output, updated in place; must not address an element twice.

        Arithmetic runs in float32 for float16/bfloat16 and wraps for integers.
        """
        op = "axpby_read_into_accum"
        self._begin(op)
        self._resident(x, op, "x")
        self._resident(y, op, "y")
        dtype = shp.infer_axpby(x.dtype, x.shape, y.dtype, y.shape, op)
        a = shp.scalar_bytes(alpha, dtype, op, "alpha")
        b = shp.scalar_bytes(beta, dtype, op, "beta")
        if may_overlap(x, y):
            raise ValidationError("y overlaps x; axpby needs separate storage", op=op)
        if self_overlapping(y.shape, y.strides):
            raise ValidationError(f"y (shape {y.shape}, strides {y.strides}) addresses some "
                                  "elements more than once", op=op)
        n = y.size
        if n == 0:
            return
        beta_zero = int(np.frombuffer(b, dtype.numpy)[0] == 0)
        if x.is_contiguous and y.is_contiguous and (x.data_ptr() | y.data_ptr()) % 16 == 0:
            fn = self._fn("blas1", _expr("axpby_contig", dtype.ctype))
            pack = self._pack(("axpby_contig", dtype.itemsize), axpby_contig_codes(dtype))
            params = pack.pack(y.data_ptr(), x.data_ptr(), a, b, beta_zero, n)
            self._launch1d(fn, self._grid(n, per_thread=16 // dtype.itemsize), params, op)
            return
        _, (yl, xl) = layouts_for(y.shape, y, x)
        itype = index_type(n)
        fn = self._fn("blas1", _expr("axpby_strided", dtype.ctype, itype))
        pack = self._pack(("axpby_strided", dtype.itemsize, itype),
                          axpby_strided_codes(dtype, itype))
        params = pack.pack(_buf(y).ptr, yl, _buf(x).ptr, xl, a, b, beta_zero, n)
        self._launch1d(fn, self._grid(n), params, op)

    # --- implementation ---------------------------------------------------------------
    def _flat_reduce(self, map_name: str, dtype: DType, out_dtype: DType, a: _Strided,
                     b: _Strided | None, op: str) -> Tensor:
        out = self._alloc(out_dtype, (), op)
        n = a.size
        if n == 0:
            self._fill(out, 0, op)
            return out
        a = a if _aligned(a) else self._compact(a, op)
        b = a if b is None else (b if _aligned(b) else self._compact(b, op))
        targ = fam.map_arg(map_name, dtype.ctype)
        first = _expr("flat_partials", targ)
        nchunks = max(1, min(resident_blocks(self, "blas1", first), _cdiv(n, MIN_FLAT_CHUNK)))
        chunk = _cdiv(_cdiv(n, nchunks), 64) * 64  # a multiple of every vector width
        nchunks = _cdiv(n, chunk)
        acc = _ACC.get(dtype, out_dtype if map_name.endswith("NormSq") else dtype)
        partials = self._alloc(acc, (nchunks,), op)
        pack = self._pack(("flat_partials",), FLAT_PARTIALS_CODES)
        params = pack.pack(a.data_ptr(), b.data_ptr(), n, chunk, partials.data_ptr())
        self._launch(self._fn("blas1", first), (nchunks, 1, 1), (BLOCK, 1, 1), params, op)
        fn = self._fn("blas1", _expr("flat_finish", targ))
        pack = self._pack(("flat_finish",), FLAT_FINISH_CODES)
        self._launch(fn, (1, 1, 1), (BLOCK, 1, 1),
                     pack.pack(partials.data_ptr(), nchunks, out.data_ptr()), op)
        return out
