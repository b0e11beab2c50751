"""BLAS-1: ``vdot_read``, ``norm_squared_read`` and ``axpby_read_into_accum``.

``vdot_read`` and ``norm_squared_read`` return rank-0 device tensors without waiting for the
device: one pass of blocks writes per-chunk partials (a pool buffer, freed stream-ordered
when the call returns) and one small block reduces them in a fixed order (no atomics: the
same input gives the same bits every run). Views that are not compact are compacted first
(one extra copy). ``axpby_read_into_accum`` updates ``y`` in place in one pass; ``y`` must
share no device memory with ``x`` (judged by addresses: another tensor object over the
same memory is the same memory) and must not address an element twice.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...kernels.families import blas1 as fam
from ...memo import BoundedCache
from ...shapes import reduction as shp
from ...shapes.aliasing import check_distinct_elements, check_output
from ...shapes.reduction_plan import BLOCK
from ...tensor import Tensor, TensorView, _Strided
from .. import storage
from .._layout import index_type, layouts_for
from ..reduction import resident_blocks

__all__ = ["METHODS", "FLAT_PARTIALS_CODES", "FLAT_FINISH_CODES", "axpby_contig_codes",
           "axpby_strided_codes"]

MIN_FLAT_CHUNK = 16384  # fewest elements one block of the flat reduction takes
# Storage of the flat partials (the kernels' accumulator types, by size): 32-bit words for
# the integers of up to 32 bits, float32 for float16/bfloat16; the dtype itself otherwise.
_ACC = {DType.INT8: DType.INT32, DType.UINT8: DType.INT32, DType.INT16: DType.INT32,
        DType.UINT16: DType.INT32, DType.INT32: DType.INT32, DType.UINT32: DType.INT32,
        DType.FLOAT16: DType.FLOAT32, DType.BFLOAT16: DType.FLOAT32}

_exprs: BoundedCache = BoundedCache(1024)


def _expr(entry: str, *targs: str) -> str:
    """The name expression of a blas1 instantiation (memoized: no formatting per call)."""
    key = (entry, targs)
    e = _exprs.get(key)
    if e is None:
        e = _exprs.put(key, fam.FAMILY.entry(entry).expression(*targs))
    return e


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


FLAT_PARTIALS_CODES = "PPQQP"
FLAT_FINISH_CODES = "PIP"


def _scalar_code(dtype: DType) -> str:
    return "X16" if dtype.itemsize == 16 else f"S{dtype.itemsize}"


def axpby_contig_codes(dtype: DType) -> str:
    """Argument codes of ``axpby_contig`` (see ptx/blas1.cu)."""
    c = _scalar_code(dtype)
    return f"PP{c}{c}iQ"


def axpby_strided_codes(dtype: DType, index: str) -> str:
    """Argument codes of ``axpby_strided``."""
    c = _scalar_code(dtype)
    return f"PLPL{c}{c}i" + ("I" if index == "tf::u32" else "Q")


def _aligned(t: _Strided) -> bool:
    """Compact and 16-byte aligned (the flat kernels' vector loads need both; pool buffers
    are aligned, adopted foreign buffers may not be)."""
    return t.is_contiguous and t.data_ptr() % 16 == 0


def vdot_read(ctx: ExecContext, lhs: Tensor | TensorView, rhs: Tensor | TensorView) -> Tensor:
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
    resident(ctx, lhs, op, "lhs")
    resident(ctx, rhs, op, "rhs")
    dtype = shp.infer_vdot(lhs.dtype, lhs.shape, rhs.dtype, rhs.shape, op)
    return _flat_reduce(ctx, "tf::bl::Vdot", dtype, dtype, lhs, rhs, op)


def norm_squared_read(ctx: ExecContext, input: Tensor | TensorView) -> Tensor:
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
    resident(ctx, input, op)
    real = shp.infer_norm_squared(input.dtype, input.shape, op)
    return _flat_reduce(ctx, "tf::bl::NormSq", input.dtype, real, input, None, op)


def axpby_read_into_accum(ctx: ExecContext, alpha: complex, x: Tensor | TensorView,
                          beta: complex, y: Tensor | TensorView) -> None:
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
    xbuf = resident(ctx, x, op, "x")
    ybuf = resident(ctx, y, op, "y")
    dtype = shp.infer_axpby(x.dtype, x.shape, y.dtype, y.shape, op)
    a = shp.scalar_bytes(alpha, dtype, op, "alpha")
    b = shp.scalar_bytes(beta, dtype, op, "beta")
    check_output(y, (x,), ("x",), op, what="y")  # any shared byte, even the same view
    check_distinct_elements(y, op, "y")
    n = y.size
    if n == 0:
        return
    beta_zero = int(np.frombuffer(b, dtype.numpy)[0] == 0)
    if x.is_contiguous and y.is_contiguous and (x.data_ptr() | y.data_ptr()) % 16 == 0:
        expr = _expr("axpby_contig", dtype.ctype)
        launch = ctx.prepare(("blas1", expr), ctx.function("blas1", expr),
                             axpby_contig_codes(dtype), op=op)
        launch.run(ctx.grid(n, per_thread=16 // dtype.itemsize), y.data_ptr(), x.data_ptr(),
                   a, b, beta_zero, n)
        return
    _, (yl, xl) = layouts_for(y.shape, y, x)
    itype = index_type(n)
    expr = _expr("axpby_strided", dtype.ctype, itype)
    launch = ctx.prepare(("blas1", expr), ctx.function("blas1", expr),
                         axpby_strided_codes(dtype, itype), op=op)
    launch.run(ctx.grid(n), ybuf.ptr, yl, xbuf.ptr, xl, a, b, beta_zero, n)


# --- implementation -------------------------------------------------------------------
def _flat_reduce(ctx: ExecContext, map_name: str, dtype: DType, out_dtype: DType,
                 a: _Strided, b: _Strided | None, op: str) -> Tensor:
    out = ctx.alloc(out_dtype, (), op)
    n = a.size
    if n == 0:
        storage.fill(ctx, out, 0, op)
        return out
    a = a if _aligned(a) else storage.materialize(ctx, a, op)
    b = a if b is None else (b if _aligned(b) else storage.materialize(ctx, b, op))
    targ = fam.map_arg(map_name, dtype.ctype)
    first = _expr("flat_partials", targ)
    nchunks = max(1, min(resident_blocks(ctx, "blas1", first), _cdiv(n, MIN_FLAT_CHUNK)))
    chunk = _cdiv(_cdiv(n, nchunks), 64) * 64  # a multiple of every vector width
    nchunks = _cdiv(n, chunk)
    acc = _ACC.get(dtype, out_dtype if map_name.endswith("NormSq") else dtype)
    partials = ctx.alloc(acc, (nchunks,), op)
    ctx.prepare(("blas1", first), ctx.function("blas1", first), FLAT_PARTIALS_CODES,
                block=(BLOCK, 1, 1), op=op).run(nchunks, a.data_ptr(), b.data_ptr(), n, chunk,
                                                partials.data_ptr())
    finish = _expr("flat_finish", targ)
    ctx.prepare(("blas1", finish), ctx.function("blas1", finish), FLAT_FINISH_CODES,
                block=(BLOCK, 1, 1), op=op).run(1, partials.data_ptr(), nchunks,
                                                out.data_ptr())
    return out


METHODS: tuple[tuple[str, Callable], ...] = (
    ("vdot_read", vdot_read), ("norm_squared_read", norm_squared_read),
    ("axpby_read_into_accum", axpby_read_into_accum),
)
