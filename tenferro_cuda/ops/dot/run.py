"""Running a ``GemmPlan``: staging copies, the cuBLAS call or the integer kernel, and the
copy back of a staged output.

- cuBLAS is the context's (``ctx.blas(op)``, ``exec/blas.py``): one handle per execution
  context, bound to its stream, made on first use. float16/bfloat16 compute in float32,
  float32 in exact float32 unless the config asks for ``precision="tf32"``,
  float64/complex128 in float64, complex64 in float32.
- Staging (a permutation the strides do not allow) copies ``view.permute(perm)`` into a
  compact temporary with ``storage.copy_into`` (row copies with 16-byte vectors or a tiled
  transpose); a staged output is read into its temporary first when ``beta != 0`` and
  copied back after the product, so bytes outside ``out`` are never written. Temporaries
  may be kept by a cache slot and reused (same stream, in order); during a capture they
  are graph-owned, never a slot's (the graph would hold memory the slot frees).
- ``k == 0`` gives ``beta * out``: a fill with 0 when beta is 0 (out is not read), a
  scale otherwise, nothing when beta is 1.
- ``resident_buffers`` is the residency rule (``exec/residency.py``) for the two or three
  operands of a product in one pass, with ``resident``'s errors when one is not resident.
"""

from __future__ import annotations

from typing import Any

from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...tensor import Tensor, _Strided
from .. import storage
from .plan import GemmPlan

__all__ = ["execute", "operands", "bound_call", "resident_buffers", "k_zero", "INT_CODES",
           "INTEGER", "COMPLEX"]

_INT_TILE = 64
_GRID_YZ = 65535
_GRID_X = (1 << 31) - 1
# tf::dot_int parameters: out, lhs, rhs; batch, m, n, k; 9 strides; alpha, beta in the
# accumulator type (u32, or u64 for int64/uint64); beta_zero.
INT_CODES = {False: "PPP" + "q" * 13 + "II" + "i", True: "PPP" + "q" * 13 + "QQ" + "i"}
INTEGER = frozenset(d for d in DType if d.is_integer)
COMPLEX = frozenset(d for d in DType if d.is_complex)


def _ptr(t: _Strided, item: int) -> int:
    """Device address of element (0, ..., 0) (``data_ptr`` without the property chain)."""
    return t.base.buffer.ptr + t.offset * item  # type: ignore[union-attr]


def resident_buffers(ctx: ExecContext, op: str, lhs: Any, rhs: Any,
                     out: Any = None) -> tuple[Any, Any, Any]:
    """The device buffers under ``lhs``, ``rhs`` and ``out`` (``rhs``'s again when no
    ``out``) when all are resident on ``ctx`` (``buffer.home is ctx.home``); otherwise
    ``resident``'s error for the first that is not (lhs, rhs, out in that order)."""
    if isinstance(lhs, _Strided) and isinstance(rhs, _Strided) and (
            out is None or isinstance(out, _Strided)):
        home = ctx.home
        a, b = lhs.base.buffer, rhs.base.buffer
        c = b if out is None else out.base.buffer
        if a is not None and b is not None and c is not None and a.home is home and \
                b.home is home and c.home is home:
            return a, b, c
    a = resident(ctx, lhs, op, "lhs")
    b = resident(ctx, rhs, op, "rhs")
    return a, b, b if out is None else resident(ctx, out, op, "out")


def _temp(ctx: ExecContext, shape: tuple[int, ...], dtype: DType, temps: list | None, i: int,
          op: str) -> Tensor:
    if temps is not None and ctx.capture is None:  # (a capture's are its own: graph-owned)
        t = temps[i]
        if t is None or t.buffer.home is not ctx.home:
            t = temps[i] = ctx.alloc(dtype, shape, op)
        return t
    return ctx.alloc(dtype, shape, op)


def _stage(ctx: ExecContext, view: _Strided, perm: tuple[int, ...], temps: list | None, i: int,
           op: str) -> Tensor:
    src = view.permute(perm)
    tmp = _temp(ctx, src.shape, view.dtype, temps, i, op)
    storage.copy_into(ctx, src, tmp, op)
    return tmp


def k_zero(ctx: ExecContext, out: _Strided, beta: Any, op: str) -> None:
    """``out = beta * out`` for a contraction of length 0 (``out`` is not read when beta
    is 0)."""
    if beta == 0:
        storage.fill(ctx, out, 0, op)
    elif beta != 1:
        storage.scale(ctx, out, beta, op)


def execute(ctx: ExecContext, plan: GemmPlan, lhs: _Strided, rhs: _Strided, out: _Strided,
            dtype: DType, alpha: Any, beta: Any, precision: str, op: str,
            temps: list | None = None) -> None:
    """Enqueue ``out = alpha * lhs . rhs + beta * out`` as planned."""
    if plan.empty:
        return
    if plan.kzero:
        k_zero(ctx, out, beta, op)
        return
    if plan.lhs_perm is None and plan.rhs_perm is None and plan.out_perm is None:
        a, b, target, back = lhs, rhs, out, None
    else:
        a, b, target, back = operands(ctx, plan, lhs, rhs, out, dtype, beta, op, temps)
    item = dtype.itemsize
    if dtype in INTEGER:
        _int_product(ctx, plan, _ptr(a, item), _ptr(b, item), _ptr(target, item), dtype,
                     alpha, beta, op)
    else:
        ctx.blas(op).gemm(plan, _ptr(a, item), _ptr(b, item), _ptr(target, item), dtype, alpha,
                          beta, precision, op)
    if back is not None:
        storage.copy_into(ctx, target, back, op)


def operands(ctx: ExecContext, plan: GemmPlan, lhs: _Strided, rhs: _Strided, out: _Strided,
             dtype: DType, beta: Any, op: str, temps: list | None = None
             ) -> tuple[_Strided, _Strided, _Strided, _Strided | None]:
    """(lhs side, rhs side, output target, view to copy the target back to or None),
    staging what the plan says (the output's old values only when beta != 0)."""
    a = lhs if plan.lhs_perm is None else _stage(ctx, lhs, plan.lhs_perm, temps, 0, op)
    b = rhs if plan.rhs_perm is None else _stage(ctx, rhs, plan.rhs_perm, temps, 1, op)
    if plan.out_perm is None:
        return a, b, out, None
    back = out.permute(plan.out_perm)
    target = _temp(ctx, back.shape, dtype, temps, 2, op)
    if beta != 0:
        storage.copy_into(ctx, back, target, op)
    return a, b, target, back


def bound_call(ctx: ExecContext, plan: GemmPlan, dtype: DType, precision: str,
               op: str) -> Any:
    """The bound cuBLAS call of a plan that runs without staging, else None."""
    if (plan.empty or plan.kzero or dtype in INTEGER or plan.lhs_perm is not None
            or plan.rhs_perm is not None or plan.out_perm is not None):
        return None
    return ctx.blas(op).bind(plan, dtype, precision)


def _int_product(ctx: ExecContext, plan: GemmPlan, pa: int, pb: int, pc: int, dtype: DType,
                 alpha: int, beta: int, op: str) -> None:
    """``ptx/dot_int.cu``: wrapping integer arithmetic, any strides."""
    fn = ctx.function("dot_int", f"tf::dot_int<{dtype.ctype}>")
    wide = dtype.itemsize == 8
    mask = (1 << (64 if wide else 32)) - 1
    launch = ctx.prepare(("dot_int", dtype), fn, INT_CODES[wide], block=(256, 1, 1), op=op)
    grid = (min(-(-plan.n // _INT_TILE), _GRID_X), min(-(-plan.m // _INT_TILE), _GRID_YZ),
            min(plan.batch, _GRID_YZ))
    launch.run3(grid, pc, pa, pb, plan.batch, plan.m, plan.n, plan.k, *plan.int_strides,
                alpha & mask, beta & mask, int(beta == 0))
