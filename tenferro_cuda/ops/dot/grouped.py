"""``grouped_gemm(GroupedGemmConfig)``: many independent products in one call.

Each job is a full ``dot_general_read_into_accum`` request (operands, output, dimension
numbers, alpha/beta/conjugation). Everything is validated before anything runs: every
job on its own, one dtype for all jobs, one precision, and no output overlapping another
output or any job's input (jobs run concurrently; judged by device byte ranges, so
different tensor objects over the same memory count as the same memory). Each job is
planned like a single product; then (``grouped_run.py``):

- float and complex dtypes: jobs with equal (transposes, m, n, k, leading dimensions,
  alpha, beta) form one uniform group, a job's strided batch giving one problem per batch
  entry; each group runs as one ``cublasGemmBatchedEx`` over device arrays of the
  problems' A/B/C addresses, or all groups of a real dtype as one
  ``cublasGemmGroupedBatchedEx`` (cuBLAS 12.5+). The address arrays are uploaded from
  pinned host memory, asynchronously.
- integer dtypes: one strided batched product per job (``ptx/dot_int.cu``), all
  enqueued by this one call.

A repeated call with the same ``GroupedGemmConfig`` object reuses the plan of its first
call (kept per execution context in ``ctx.memo`` until the config is collected): it
checks that every operand is still resident and enqueues, with the address array of
unstaged jobs already on the device. A config whose operands are no longer resident takes
the full path again, which raises the precise error. So does every call during a graph
capture, whose plan is not kept: its address array is graph memory, uploaded once as a
constant of the graph (``exec/capture.CaptureState.upload_constant``), which a later
eager call must not reuse.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from ...configs.dot import GemmJob, GroupedGemmConfig
from ...dtypes import DType
from ...errors import UnsupportedDTypeError, ValidationError
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...shapes import dot as shapes_dot
from ...shapes.aliasing import byte_range
from .grouped_run import GroupedRun, plan_run

__all__ = ["grouped_gemm", "check_disjoint"]

_MEMO_KEY = "grouped_gemm"


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
    Float and complex jobs run as cuBLAS batched products over uniform groups (one
    grouped GEMM for several groups of a real dtype); integer jobs run one product per
    job. Validation covers every job before anything runs. Calling again with the same
    config object reuses the first call's plan and uploaded address arrays.
    """
    op = "grouped_gemm"
    if not isinstance(config, GroupedGemmConfig):
        raise ValidationError(f"config must be a GroupedGemmConfig "
                              f"(got {type(config).__name__})", op=op)
    key = (_MEMO_KEY, id(config))
    run = ctx.memo.get(key) if ctx.capture is None else None
    if run is None or run.config() is not config or not run.resident(ctx.home):
        run = _plan(ctx, config, key, op)
        if run is None:
            return
    run.run(ctx, op)


def _plan(ctx: ExecContext, config: GroupedGemmConfig, key: tuple,
          op: str) -> GroupedRun | None:
    """Validate every job (raising before anything runs), plan the call and remember it
    until ``config`` is collected; None when there is no job."""
    checked, dtype, precision = _validate(ctx, config, op)
    if not checked or dtype is None:
        return None
    if not dtype.is_integer:
        ctx.blas(op)  # a missing cuBLAS is reported before anything runs
    run = plan_run(ctx, config, checked, dtype, precision, op)
    if ctx.capture is not None:  # its address array is graph memory: not for later calls
        return run
    ctx.memo.put(key, run)
    forget = weakref.finalize(config, ctx.memo.pop, key, None)
    forget.atexit = False
    return run


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
