"""``grouped_gemm(GroupedGemmConfig)``: many independent products in one call.

Each job is a full ``dot_general_read_into_accum`` request (operands, output, dimension
numbers, alpha/beta/conjugation). Everything is validated before anything runs: every
job on its own, one dtype for all jobs, one precision, and no output overlapping another
output or any job's input (jobs run concurrently). Each job is planned like a single
product; staging copies run first. Then:

- float16, bfloat16, float32, float64 (cuBLAS 12.5+): one ``cublasGemmGroupedBatchedEx``
  call. Jobs with equal (transposes, m, n, k, leading dimensions, alpha, beta) form one
  group; a job's strided batch contributes one problem per batch entry. The A/B/C
  pointer arrays are uploaded to device memory, the per-group parameters and scalars
  are host arrays.
- complex dtypes (cuBLAS has no grouped complex GEMM) and integer dtypes: one strided
  batched product per job, in job order, all enqueued by this one call.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _cublas
from ..configs.dot import GroupedGemmConfig
from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError
from ..shapes import dot as shapes_dot
from .dot_exec import BLAS_TYPES, DotExecOps
from .dot_plan import plan_cached

__all__ = ["GroupedGemmOps", "GROUPED_DTYPES"]

GROUPED_DTYPES = {DType.FLOAT16: ctypes.c_float, DType.BFLOAT16: ctypes.c_float,
                  DType.FLOAT32: ctypes.c_float, DType.FLOAT64: ctypes.c_double}


def _in_job(i: int, exc: Exception, op: str) -> Exception:
    """``exc`` re-raised with the job index in its message and ``op`` set."""
    text = f"jobs[{i}]: {exc.args[0] if exc.args else exc}"
    if isinstance(exc, ValidationError):
        return ValidationError(text, op=op, kind=exc.kind)
    return UnsupportedDTypeError(text, op=op)


def check_disjoint(jobs, op: str) -> None:
    """Raise unless no job's output overlaps another output or any job's input.

    One sweep per buffer over the element ranges sorted by start (conservative: ranges
    that interleave without sharing an element count as overlapping).
    """
    by_base: dict[int, list] = {}
    for i, job in enumerate(jobs):
        for what, is_out in (("lhs", False), ("rhs", False), ("out", True)):
            t = getattr(job, what)
            if t.size:
                lo, hi = t.span()
                by_base.setdefault(id(t.base), []).append((lo, hi, is_out, f"jobs[{i}].{what}"))
    for items in by_base.values():
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


class GroupedGemmOps(DotExecOps):
    """``grouped_gemm`` (mixed into DotOps)."""

    def grouped_gemm(self, config: GroupedGemmConfig) -> None:
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
        self._begin(op)
        if not isinstance(config, GroupedGemmConfig):
            raise ValidationError(f"config must be a GroupedGemmConfig "
                                  f"(got {type(config).__name__})", op=op)
        checked, dtype, precision = self._grouped_validate(config, op)
        if not checked:
            return
        blas = not dtype.is_integer
        if blas:
            self._dot_handle(op)
        conj = dtype.is_complex
        items = []
        for job, shape, alpha, beta in checked:
            plan = plan_cached((job.lhs.shape, job.rhs.shape, shape),
                            (job.lhs.strides, job.rhs.strides, job.out.strides), job.config,
                            conj and job.accumulation.lhs_conj,
                            conj and job.accumulation.rhs_conj, blas)
            items.append((plan, job, alpha, beta))
        if dtype in GROUPED_DTYPES and _cublas.has_grouped():
            self._grouped_blas(items, dtype, precision, op)
            return
        for plan, job, alpha, beta in items:
            self._dot_run(plan, job.lhs, job.rhs, job.out, dtype, alpha, beta, precision, op)

    def _grouped_validate(self, config: GroupedGemmConfig, op: str):
        jobs = config.jobs
        for i, job in enumerate(jobs):
            for what in ("lhs", "rhs", "out"):
                self._resident(getattr(job, what), op, f"jobs[{i}].{what}")
        checked, dtype, precision = [], None, config.precision
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

    def _grouped_blas(self, items, dtype: DType, precision: str, op: str) -> None:
        h = self._dot_handle(op)
        cuda_type, compute, compute_tf32 = BLAS_TYPES[dtype][:3]
        if precision == "tf32":
            compute = compute_tf32
        item = dtype.itemsize
        groups: dict[tuple, list] = {}
        keep, backs = [], []
        for plan, job, alpha, beta in items:
            if plan.empty:
                continue
            if plan.kzero:
                self._dot_kzero(job.out, beta, op)
                continue
            if plan.use64:  # beyond the int32 grouped API: run this job on its own
                self._dot_run(plan, job.lhs, job.rhs, job.out, dtype, alpha, beta, precision,
                              op)
                continue
            a, b, target, back = self._dot_operands(plan, job.lhs, job.rhs, job.out, dtype,
                                                    beta, op)
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
            self._grouped_call(h, groups, cuda_type, compute, GROUPED_DTYPES[dtype], op)
        for target, back in backs:
            self._dot_copy(target, back, op)

    def _grouped_call(self, h, groups: dict, cuda_type: int, compute: int, scale, op: str):
        keys = list(groups)
        ptrs = [np.concatenate([p[i] for p in groups[key]]) for i in range(3) for key in keys]
        sizes = [sum(len(p[0]) for p in groups[key]) for key in keys]
        total = sum(sizes)
        flat = np.concatenate(ptrs)  # all A pointers, then all B, then all C
        dev = self.upload_host_tensor(flat)
        base = dev.data_ptr()
        alphas = (scale * len(keys))(*[k[8] for k in keys])
        betas = (scale * len(keys))(*[k[9] for k in keys])
        cols = list(zip(*[k[:8] for k in keys]))
        _cublas.gemm_grouped(h, list(cols[0]), list(cols[1]), list(cols[2]), list(cols[3]),
                             list(cols[4]), ctypes.addressof(alphas), base, cuda_type,
                             list(cols[5]), base + 8 * total, list(cols[6]),
                             ctypes.addressof(betas), base + 16 * total, list(cols[7]), sizes,
                             compute, op)
