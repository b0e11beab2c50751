"""A planned ``grouped_gemm`` call (``GroupedRun``): what the call decided once its jobs
were validated, kept so that a repeated call with the same ``GroupedGemmConfig`` object
only checks residency and enqueues.

The jobs fall in three parts, run in this order:

- ``k == 0`` jobs: ``beta * out`` (``run.k_zero``);
- jobs run on their own (``run.execute``): integer dtypes (``ptx/dot_int.cu``) and
  products beyond cuBLAS's 32-bit grouped API;
- every other job joins a uniform group -- equal (transposes, m, n, k, leading dimensions,
  alpha, beta) -- and a job's strided batch gives one problem per batch entry. The groups
  run as one bound ``PointerGemm`` (``exec/blas_groups.py``) over a device array of the
  problems' A, B and C addresses. When no job of a group needs staging, the addresses
  never change: the array is uploaded once, when the run is planned, and kept. Otherwise
  the staged jobs' temporaries are made on every call, the array is filled from a host
  template and uploaded through the handle's pinned staging (an asynchronous copy), and
  staged outputs are copied back afterwards.

Residency is the one thing a repeated call checks: every device buffer under the jobs'
operands must still be resident on the context (``exec/residency.py``'s rule). Shapes,
strides, dtypes, configs and accumulations of a config's jobs cannot change, nor can the
overlaps judged between them.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ...dtypes import DType
from ...exec.context import ExecContext
from .. import storage
from .plan import plan_cached
from .run import INTEGER, execute, k_zero, operands

__all__ = ["GroupedRun", "plan_run"]


def _ptr(t: Any, item: int) -> int:
    """Device address of element (0, ..., 0) (residency was checked)."""
    return t.base.buffer.ptr + t.offset * item


def _fill(flat: np.ndarray, at: int, plan: Any, a: Any, b: Any, c: Any, item: int,
          total: int) -> None:
    """The A, B and C addresses of one job's ``plan.batch`` problems, from problem ``at``
    of the array laid out as every A, then every B, then every C."""
    pa, pb, pc = _ptr(a, item), _ptr(b, item), _ptr(c, item)
    if plan.swap:
        pa, pb = pb, pa
    n = plan.batch
    steps = np.arange(n, dtype=np.int64) * item
    flat[at:at + n] = pa + steps * plan.stride_a
    flat[total + at:total + at + n] = pb + steps * plan.stride_b
    flat[2 * total + at:2 * total + at + n] = pc + steps * plan.stride_c


class GroupedRun:
    """The planned call of one ``GroupedGemmConfig`` on one execution context (see the
    module docstring). ``config`` is a weak reference: the run never keeps its config,
    and is forgotten when the config goes."""

    __slots__ = ("config", "buffers", "dtype", "precision", "zero", "solo", "staged",
                 "template", "total", "call", "pointers")

    def __init__(self, config: Any, dtype: DType, precision: str) -> None:
        self.config = weakref.ref(config)
        self.dtype, self.precision = dtype, precision
        buffers = {id(t.base.buffer): t.base.buffer for job in config.jobs
                   for t in (job.lhs, job.rhs, job.out)}
        self.buffers = tuple(buffers.values())
        self.zero: list[tuple] = []  # (out, beta)
        self.solo: list[tuple] = []  # (plan, job, alpha, beta)
        self.staged: list[tuple] = []  # (plan, job, beta, first problem)
        self.template = np.zeros(0, np.int64)
        self.total = 0
        self.call: Any = None
        self.pointers: Any = None  # the uploaded address array (no staged job)

    def resident(self, home: Any) -> bool:
        """Whether every buffer under the jobs is still resident on ``home``'s context."""
        for buf in self.buffers:
            if buf.home is not home:
                return False
        return True

    def run(self, ctx: ExecContext, op: str) -> None:
        """Enqueue every job (see the module docstring for the order)."""
        dtype, precision = self.dtype, self.precision
        for out, beta in self.zero:
            k_zero(ctx, out, beta, op)
        for plan, job, alpha, beta in self.solo:
            execute(ctx, plan, job.lhs, job.rhs, job.out, dtype, alpha, beta, precision, op)
        call = self.call
        if call is None:
            return
        if not self.staged:
            call.run(self.pointers.buffer.ptr, op)
            return
        flat = self.template.copy()
        keep, backs = [], []
        for plan, job, beta, at in self.staged:
            a, b, target, back = operands(ctx, plan, job.lhs, job.rhs, job.out, dtype, beta,
                                          op)
            keep.append((a, b, target))
            if back is not None:
                backs.append((target, back))
            _fill(flat, at, plan, a, b, target, dtype.itemsize, self.total)
        dev = ctx.alloc(DType.INT64, flat.shape, op)
        ctx.blas(op).upload_pointers(ctx, dev.buffer.ptr, flat, op)  # type: ignore[union-attr]
        call.run(dev.buffer.ptr, op)  # type: ignore[union-attr]
        for target, back in backs:
            storage.copy_into(ctx, target, back, op)


def plan_run(ctx: ExecContext, config: Any, checked: list, dtype: DType, precision: str,
             op: str) -> GroupedRun:
    """The ``GroupedRun`` of validated jobs (``checked``: (job, out shape, alpha, beta));
    uploads the address array when no job needs staging."""
    run = GroupedRun(config, dtype, precision)
    blas = dtype not in INTEGER
    conj = dtype.is_complex
    item = dtype.itemsize
    groups: dict[tuple, list] = {}
    for job, shape, alpha, beta in checked:
        plan = plan_cached((job.lhs.shape, job.rhs.shape, shape),
                           (job.lhs.strides, job.rhs.strides, job.out.strides), job.config,
                           conj and job.accumulation.lhs_conj,
                           conj and job.accumulation.rhs_conj, blas)
        if plan.empty:
            continue
        if plan.kzero:
            run.zero.append((job.out, beta))
        elif not blas or plan.use64:
            run.solo.append((plan, job, alpha, beta))
        else:
            key = (plan.transa, plan.transb, plan.m, plan.n, plan.k, plan.lda, plan.ldb,
                   plan.ldc, alpha, beta)
            groups.setdefault(key, []).append((plan, job, beta))
    if not groups:
        return run
    keys = list(groups)
    sizes = [sum(plan.batch for plan, _, _ in groups[key]) for key in keys]
    run.total = total = sum(sizes)
    flat = run.template = np.zeros(3 * total, np.int64)
    at = 0
    for key in keys:
        for plan, job, beta in groups[key]:
            if plan.lhs_perm is None and plan.rhs_perm is None and plan.out_perm is None:
                _fill(flat, at, plan, job.lhs, job.rhs, job.out, item, total)
            else:
                run.staged.append((plan, job, beta, at))
            at += plan.batch
    cublas = ctx.blas(op)
    run.call = cublas.pointer_call(keys, sizes, dtype, precision)
    if not run.staged:
        run.pointers = ctx.alloc(DType.INT64, flat.shape, op)
        cublas.upload_pointers(ctx, run.pointers.buffer.ptr, flat, op)
    return run
