"""``grouped_gemm(GroupedGemmConfig)``: many independent products in one call.

Each job is a full ``dot_general_read_into_accum`` request (operands, output, dimension
numbers, alpha/beta/conjugation). Everything is validated before anything runs: every
job on its own, one dtype for all jobs, one precision, and no output overlapping another
output or any job's input (jobs run concurrently; judged by device byte ranges, so
different tensor objects over the same memory count as the same memory). Each job is
planned like a single product; staging copies run first. Then:

- float16, bfloat16, float32, float64 (cuBLAS 12.5+): one ``cublasGemmGroupedBatchedEx``
  call. Jobs with equal (transposes, m, n, k, leading dimensions, alpha, beta) form one
  group; a job's strided batch contributes one problem per batch entry. The A/B/C
  pointer arrays are uploaded to device memory, the per-group parameters and scalars
  are host arrays.
- complex dtypes (cuBLAS has no grouped complex GEMM) and integer dtypes: one strided
  batched product per job, in job order, all enqueued by this one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...configs.dot import GemmJob, GroupedGemmConfig
from ...dtypes import DType
from ...errors import UnsupportedDTypeError, ValidationError
from ...exec.aliasing import byte_range
from ...exec.blas import GROUPED_DTYPES, grouped_pointers
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...shapes import dot as shapes_dot
from .. import storage
from .plan import plan_cached
from .run import execute, k_zero, operands

__all__ = ["grouped_gemm", "check_disjoint"]


def _in_job(i: int, exc: Exception, op: str) -> Exception:
    """``exc`` re-raised with the job index in its message and ``op`` set."""
    text = f"jobs[{i}]: {exc.args[0] if exc.args else exc}"
    if isinstance(exc, ValidationError):
        return ValidationError(text, op=op, kind=exc.kind)
    return UnsupportedDTypeError(text, op=op)


def check_disjoint(jobs: Sequence[GemmJob], op: str) -> None:
    """Raise unless no job's output overlaps another output or any job's input.

    One sweep over the device byte ranges (``aliasing.byte_range``) of every operand,
    sorted by start: tensors over the same memory are compared whatever objects they are
    (conservative: ranges that interleave without sharing an element count as
    overlapping). Inputs may overlap each other.
    """
    items = []
    for i, job in enumerate(jobs):
        for what, t, is_out in (("lhs", job.lhs, False), ("rhs", job.rhs, False),
                                ("out", job.out, True)):
            if t.size:
                lo, hi = byte_range(t)
                items.append((lo, hi, is_out, f"jobs[{i}].{what}"))
    items.sort(key=lambda x: x[0])
    any_hi, any_label, out_hi, out_label = -1, "", -1, ""
    for lo, hi, is_out, label in items:
        if is_out and lo < any_hi:
            raise ValidationError(f"{label} overlaps {any_label}; grouped outputs must not "
                                  "overlap each other or any input", op=op)
        if not is_out and lo < out_hi:
            raise ValidationError(f"{label} overlaps {out_label}; grouped outputs must not "
                                  "overlap each other or any input", op=op)
        if hi > any_hi:
            any_hi, any_label = hi, label
        if is_out and hi > out_hi:
            out_hi, out_label = hi, label


def grouped_gemm(ctx: ExecContext, config: GroupedGemmConfig) -> None:
    """Run every job of ``config`` (``out = alpha * op(lhs) . op(rhs) + beta * out``).

    Parameters
    ----------
    config : GroupedGemmConfig
        The jobs (one dtype), and optionally a precision for all of them.

    Notes
    -----
    Real float jobs run as one cuBLAS grouped batched GEMM; complex and integer jobs
    run one product per job. Validation covers every job before anything runs.
    """
    op = "grouped_gemm"
    if not isinstance(config, GroupedGemmConfig):
        raise ValidationError(f"config must be a GroupedGemmConfig "
                              f"(got {type(config).__name__})", op=op)
    checked, dtype, precision = _validate(ctx, config, op)
    if not checked or dtype is None:
        return
    blas = not dtype.is_integer
    grouped = False
    if blas:
        cublas = ctx.blas(op)  # a missing cuBLAS is reported before anything runs
        grouped = dtype in GROUPED_DTYPES and cublas.has_grouped()
    conj = dtype.is_complex
    items = []
    for job, shape, alpha, beta in checked:
        plan = plan_cached((job.lhs.shape, job.rhs.shape, shape),
                           (job.lhs.strides, job.rhs.strides, job.out.strides), job.config,
                           conj and job.accumulation.lhs_conj,
                           conj and job.accumulation.rhs_conj, blas)
        items.append((plan, job, alpha, beta))
    if grouped:
        _grouped_blas(ctx, items, dtype, precision, op)
        return
    for plan, job, alpha, beta in items:
        execute(ctx, plan, job.lhs, job.rhs, job.out, dtype, alpha, beta, precision, op)


def _validate(ctx: ExecContext, config: GroupedGemmConfig,
              op: str) -> tuple[list, DType | None, Any]:
    jobs = config.jobs
    for i, job in enumerate(jobs):
        resident(ctx, job.lhs, op, f"jobs[{i}].lhs")
        resident(ctx, job.rhs, op, f"jobs[{i}].rhs")
        resident(ctx, job.out, op, f"jobs[{i}].out")
    checked: list = []
    dtype: DType | None = None
    precision = config.precision
    for i, job in enumerate(jobs):
        d = job.lhs.dtype
        if dtype is None:
            dtype = d
        p = config.precision or job.config.precision
        precision = p if precision is None else precision
        try:
            if d is not dtype:
                raise ValidationError(f"dtype {d.value} differs from jobs[0]'s "
                                      f"{dtype.value} (one dtype per grouped call)",
                                      kind="dtype_mismatch")
            if p != precision:
                raise ValidationError(f"precision {p!r} differs from the other jobs' "
                                      f"{precision!r}; set GroupedGemmConfig.precision")
            shape = shapes_dot.infer(job.lhs.shape, job.rhs.shape, d, job.rhs.dtype,
                                     job.config, op, precision=p)
            alpha, beta = shapes_dot.scalars(job.accumulation, d, op)
            shapes_dot.check_out(job.out, shape, d, op)
        except (ValidationError, UnsupportedDTypeError) as exc:
            raise _in_job(i, exc, op) from None
        checked.append((job, shape, alpha, beta))
    check_disjoint(jobs, op)
    return checked, dtype, precision


def _grouped_blas(ctx: ExecContext, items: list, dtype: DType, precision: str,
                  op: str) -> None:
    item = dtype.itemsize
    groups: dict[tuple, list] = {}
    keep, backs = [], []
    for plan, job, alpha, beta in items:
        if plan.empty:
            continue
        if plan.kzero:
            k_zero(ctx, job.out, beta, op)
            continue
        if plan.use64:  # beyond the int32 grouped API: run this job on its own
            execute(ctx, plan, job.lhs, job.rhs, job.out, dtype, alpha, beta, precision, op)
            continue
        a, b, target, back = operands(ctx, plan, job.lhs, job.rhs, job.out, dtype, beta, op)
        keep.append((a, b, target))
        if back is not None:
            backs.append((target, back))
        pa, pb = (b.data_ptr(), a.data_ptr()) if plan.swap else (a.data_ptr(), b.data_ptr())
        steps = np.arange(plan.batch, dtype=np.int64) * item
        key = (plan.transa, plan.transb, plan.m, plan.n, plan.k, plan.lda, plan.ldb,
               plan.ldc, alpha, beta)
        groups.setdefault(key, []).append(
            (pa + steps * plan.stride_a, pb + steps * plan.stride_b,
             target.data_ptr() + steps * plan.stride_c))
    if groups:
        flat = grouped_pointers(groups)  # all A pointers, then all B, then all C
        dev = ctx.alloc(DType.INT64, flat.shape, op)
        ctx.upload(dev.data_ptr(), flat.ctypes.data, flat.nbytes, op)
        ctx.blas(op).grouped(groups, dtype, precision, dev.data_ptr(), op)
    for target, back in backs:
        storage.copy_into(ctx, target, back, op)
