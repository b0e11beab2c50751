"""Configurations of the dot family: ``DotGeneralConfig``, ``DotGeneralAccumulation``,
``GemmJob`` and ``GroupedGemmConfig``.

All are frozen dataclasses validated in ``__post_init__``: what can be checked without the
operands (types, duplicate axes, an axis used in two roles on one side, paired list
lengths, the precision name, scalar types) raises ``ValidationError`` here, quoting the bad
value. Checks that need the operands (axes in range, paired extents, dtypes, scalars of the
operands' dtype) live in ``tenferro_cuda.shapes.dot``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["DotGeneralConfig", "DotGeneralAccumulation", "GemmJob", "GroupedGemmConfig",
           "PRECISIONS"]

PRECISIONS = ("default", "tf32")
"""``default``: exact arithmetic of the dtype (float32 never uses TF32; float16/bfloat16
accumulate in float32). ``tf32``: float32/complex64 products may use TF32 tensor cores."""


def _axes(value, what: str, op: str) -> tuple[int, ...]:
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValidationError(f"{what} must be a sequence of ints (got {value!r})", op=op)
    out = []
    for a in value:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ValidationError(f"{what} must be a sequence of ints (got {value!r})", op=op)
        if a < 0:
            raise ValidationError(f"{what}: axis {int(a)} is negative (axes count from 0)",
                                  op=op, kind="axis_out_of_bounds")
        out.append(int(a))
    if len(set(out)) != len(out):
        raise ValidationError(f"{what}: duplicate axes in {tuple(out)}", op=op,
                              kind="duplicate_axis")
    return tuple(out)


@dataclass(frozen=True)
class DotGeneralConfig:
    """Dimension numbers of ``dot_general`` (as ``jax.lax.dot_general``).

    The result has shape ``[batch..., lhs free..., rhs free...]``: the batch axes in the
    order given, then the remaining axes of ``lhs`` and of ``rhs`` in their own order.
    Contracting axes are summed pairwise (``lhs_contracting_dims[i]`` with
    ``rhs_contracting_dims[i]``).

    Parameters
    ----------
    lhs_contracting_dims, rhs_contracting_dims : sequence of int
        Axes summed over, paired by position (equal lengths, no duplicates).
    lhs_batch_dims, rhs_batch_dims : sequence of int
        Axes kept as leading batch axes, paired by position.
    precision : {"default", "tf32"}
        ``"tf32"`` lets float32 and complex64 products use TF32 tensor cores; other
        dtypes reject it. ``"default"`` is exact arithmetic in the dtype.
    """

    lhs_contracting_dims: tuple[int, ...]
    rhs_contracting_dims: tuple[int, ...]
    lhs_batch_dims: tuple[int, ...] = ()
    rhs_batch_dims: tuple[int, ...] = ()
    precision: str = "default"
    # Derived once: the hash, and per (lhs rank, rhs rank) the free axes once validated
    # (filled by shapes.dot.infer; the operands' ranks are all it depends on).
    _hash: int = field(default=0, init=False, repr=False, compare=False)
    _free: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        op = "DotGeneralConfig"
        lc = _axes(self.lhs_contracting_dims, "lhs_contracting_dims", op)
        rc = _axes(self.rhs_contracting_dims, "rhs_contracting_dims", op)
        lb = _axes(self.lhs_batch_dims, "lhs_batch_dims", op)
        rb = _axes(self.rhs_batch_dims, "rhs_batch_dims", op)
        if len(lc) != len(rc):
            raise ValidationError(
                f"lhs_contracting_dims {lc} and rhs_contracting_dims {rc} must pair up "
                "(equal lengths)", op=op, kind="rank_mismatch")
        if len(lb) != len(rb):
            raise ValidationError(
                f"lhs_batch_dims {lb} and rhs_batch_dims {rb} must pair up (equal lengths)",
                op=op, kind="rank_mismatch")
        for side, batch, contract in (("lhs", lb, lc), ("rhs", rb, rc)):
            both = sorted(set(batch) & set(contract))
            if both:
                raise ValidationError(
                    f"{side} axes {tuple(both)} are both batch and contracting axes",
                    op=op, kind="duplicate_axis")
        if not isinstance(self.precision, str) or self.precision not in PRECISIONS:
            raise ValidationError(f"precision must be one of {PRECISIONS} "
                                  f"(got {self.precision!r})", op=op)
        object.__setattr__(self, "lhs_contracting_dims", lc)
        object.__setattr__(self, "rhs_contracting_dims", rc)
        object.__setattr__(self, "lhs_batch_dims", lb)
        object.__setattr__(self, "rhs_batch_dims", rb)
        object.__setattr__(self, "_hash", hash((lc, rc, lb, rb, self.precision)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def matmul(cls, rank: int = 2, precision: str = "default") -> DotGeneralConfig:
        """``x @ y`` for two operands of equal ``rank >= 2`` (leading axes are batch)."""
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 2:
            raise ValidationError(f"rank must be an int >= 2 (got {rank!r})",
                                  op="DotGeneralConfig.matmul")
        batch = tuple(range(rank - 2))
        return cls((rank - 1,), (rank - 2,), batch, batch, precision)


def _scalar(value, what: str, op: str):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number):
        raise ValidationError(f"{what} must be a number (got {value!r})", op=op)
    if isinstance(value, np.generic):
        value = value.item()
    return value


_PLAIN = (int, float, complex)


def _scalar_kind(value) -> int:
    """0 integral, 1 real, 2 complex (the narrowest operand dtype class it fits)."""
    if isinstance(value, numbers.Integral):
        return 0
    if isinstance(value, numbers.Real):
        return 1
    return 2


@dataclass(frozen=True)
class DotGeneralAccumulation:
    """``out = alpha * op(lhs) . op(rhs) + beta * out``; ``op`` conjugates when asked.

    Parameters
    ----------
    alpha, beta : number
        Python or numpy scalars. They must be values of the operands' dtype: integral
        (Python/numpy ints) and in range for integer dtypes, real for float dtypes, any
        number for complex dtypes (checked at the call, ``ValidationError`` otherwise).
        ``beta == 0`` overwrites ``out`` without reading it (NaN in ``out`` does not
        propagate).
    lhs_conj, rhs_conj : bool
        Conjugate that operand (complex dtypes; a no-op for real and integer dtypes).
    """

    alpha: complex | float | int = 1
    beta: complex | float | int = 0
    lhs_conj: bool = False
    rhs_conj: bool = False
    _kind: int = field(default=0, init=False, repr=False, compare=False)
    # Whether alpha and beta are exactly Python ints, floats or complexes (the cached
    # dot path converts those directly; anything else goes through shapes.dot.scalars).
    _plain: bool = field(default=True, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        op = "DotGeneralAccumulation"
        alpha = _scalar(self.alpha, "alpha", op)
        beta = _scalar(self.beta, "beta", op)
        for name in ("lhs_conj", "rhs_conj"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValidationError(f"{name} must be a bool (got {getattr(self, name)!r})",
                                      op=op)
            object.__setattr__(self, name, bool(getattr(self, name)))
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "_kind", max(_scalar_kind(alpha), _scalar_kind(beta)))
        object.__setattr__(self, "_plain", type(alpha) in _PLAIN and type(beta) in _PLAIN)


OVERWRITE = DotGeneralAccumulation()


@dataclass(frozen=True)
class GemmJob:
    """One product of a grouped call: ``out = alpha * op(lhs) . op(rhs) + beta * out``.

    ``lhs``, ``rhs`` (read) and ``out`` (written) are device tensors or views; ``config``
    gives the dimension numbers (default: a plain ``(m, k) x (k, n)`` matrix product).
    """

    lhs: Any
    rhs: Any
    out: Any
    config: DotGeneralConfig = field(
        default_factory=lambda: DotGeneralConfig((1,), (0,)))
    accumulation: DotGeneralAccumulation = OVERWRITE

    def __post_init__(self) -> None:
        op = "GemmJob"
        if not isinstance(self.config, DotGeneralConfig):
            raise ValidationError(f"config must be a DotGeneralConfig "
                                  f"(got {type(self.config).__name__})", op=op)
        if not isinstance(self.accumulation, DotGeneralAccumulation):
            raise ValidationError(f"accumulation must be a DotGeneralAccumulation "
                                  f"(got {type(self.accumulation).__name__})", op=op)


@dataclass(frozen=True)
class GroupedGemmConfig:
    """Many independent products run by one ``grouped_gemm`` call.

    Every job must have the same dtype. Outputs must not overlap each other nor any
    job's input (``ValidationError`` before anything runs). ``precision`` overrides the
    jobs' own ``config.precision`` when not ``None``.
    """

    jobs: tuple[GemmJob, ...]
    precision: str | None = None

    def __post_init__(self) -> None:
        op = "GroupedGemmConfig"
        jobs = self.jobs
        if isinstance(jobs, GemmJob) or not isinstance(jobs, Sequence):
            raise ValidationError(f"jobs must be a sequence of GemmJob (got {jobs!r})", op=op)
        for i, job in enumerate(jobs):
            if not isinstance(job, GemmJob):
                raise ValidationError(f"jobs[{i}] must be a GemmJob "
                                      f"(got {type(job).__name__})", op=op)
        if self.precision is not None and (not isinstance(self.precision, str)
                                           or self.precision not in PRECISIONS):
            raise ValidationError(f"precision must be None or one of {PRECISIONS} "
                                  f"(got {self.precision!r})", op=op)
        object.__setattr__(self, "jobs", tuple(jobs))
