"""The dot_general layout planner: pure Python, no device (tested on the CPU).

Given the operands' shapes and element strides, a ``DotGeneralConfig`` and the
conjugation flags, ``plan_dot`` decides how the product runs as one strided-batched GEMM
``C[b] = A[b] . B[b]`` without copying whenever the strides allow:

- The axes fall in four groups: batch (B: lhs, rhs, out), lhs free (M: lhs, out), rhs
  free (N: rhs, out), contracting (K: lhs, rhs). Extent-1 axes are dropped. A group's
  axes may be taken in any order, as long as the order is the same for every operand of
  the group; the planner looks for an order in which each operand's axes merge into one
  (extent, stride). An operand that cannot merge (or, for cuBLAS, has a negative stride)
  is materialised first into a compact temporary: ``lhs_perm``/``rhs_perm`` name the
  axis order of that copy (``view.permute(perm)`` compacted). An output that cannot be
  written directly gets a compact temporary (``out_perm``) that is copied back.
- cuBLAS is column-major and we are row-major. Orientation "row" computes
  ``C^T = rhs^T . lhs^T`` (cuBLAS A is rhs, requires out's N axis contiguous);
  orientation "col" computes ``C = lhs . rhs`` on out's column-major view (requires out's
  M axis contiguous). Each operand maps to op N or T with its leading dimension; a
  conjugated complex operand must use op C (conjugate transpose), so its layout must
  allow T (else it is copied into one that does). The orientation with the fewest bytes
  copied wins.
- Integer products run on our own kernel, which takes any strides: only non-mergeable
  groups cause copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...memo import BoundedCache

__all__ = ["GemmPlan", "plan_dot", "plan_cached", "OP_N", "OP_T", "OP_C", "INT32_MAX"]

OP_N, OP_T, OP_C = 0, 1, 2  # cublasOperation_t
INT32_MAX = (1 << 31) - 1
_L, _R, _O = 0, 1, 2
MEMO_SIZE = 512
_memo: BoundedCache = BoundedCache(MEMO_SIZE)  # plans by everything they depend on


class GemmPlan:
    """The decisions for one (shapes, strides, config, conj) combination."""

    __slots__ = ("out_shape", "empty", "kzero", "lhs_perm", "rhs_perm", "out_perm",
                 "batch", "m", "n", "k", "swap", "transa", "transb", "lda", "ldb", "ldc",
                 "stride_a", "stride_b", "stride_c", "use64", "int_strides", "copy_bytes")

    def __init__(self, out_shape: tuple[int, ...]) -> None:
        self.out_shape = out_shape
        self.empty = self.kzero = self.swap = self.use64 = False
        self.lhs_perm: tuple[int, ...] | None = None
        self.rhs_perm: tuple[int, ...] | None = None
        self.out_perm: tuple[int, ...] | None = None
        self.batch = self.m = self.n = self.k = 0
        self.transa = self.transb = OP_N
        self.lda = self.ldb = self.ldc = 1
        self.stride_a = self.stride_b = self.stride_c = 0
        self.int_strides: tuple[int, ...] = (0,) * 9
        self.copy_bytes = 0  # elements copied (inputs) or staged (output), for tests/tuning

    def describe(self) -> dict:
        """The decisions as a dict (tests and debugging)."""
        return {name: getattr(self, name) for name in self.__slots__}


def _mergeable(order, ext, axes, strides, o) -> bool:
    for x, y in zip(order, order[1:]):
        if strides[axes[x][o]] != strides[axes[y][o]] * ext[y]:
            return False
    return True


def _group(entries, strides, ops):
    """Merge one axis group. ``entries``: [(extent, axes-per-operand)] with extent > 1;
    ``strides``: the full stride tuples of all three operands; ``ops``: the operand
    indices in this group. Returns (order, merged stride per operand or None, bad ops)."""
    n = len(entries)
    if n == 0:
        return (), {o: 0 for o in ops}, ()
    axes = [e[1] for e in entries]
    if n == 1:
        return (0,), {o: strides[o][axes[0][o]] for o in ops}, ()
    ext = [e[0] for e in entries]
    best = None
    for lead in ops:
        order = sorted(range(n), key=lambda i: -abs(strides[lead][axes[i][lead]]))
        bad = tuple(o for o in ops if not _mergeable(order, ext, axes, strides[o], o))
        if best is None or len(bad) < len(best[1]) or (
                len(bad) == len(best[1]) and _O in best[1] and _O not in bad):
            best = (order, bad)
        if not bad:
            break
    order, bad = best
    inner = axes[order[-1]]
    return tuple(order), {o: (None if o in bad else strides[o][inner[o]]) for o in ops}, bad


def _mat(rows: int, rs: int, cols: int, cs: int) -> dict[int, int]:
    """Feasible cuBLAS ops for the logical rows x cols matrix with element (i, j) at
    ``i*rs + j*cs``: {OP_N: ld} (column-major as stored) and/or {OP_T: ld}."""
    opts = {}
    if rows == 1 or rs == 1:
        ld = cs if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            opts[OP_N] = ld
    if cols == 1 or cs == 1:
        ld = rs if rows > 1 else max(1, cols)
        if ld >= max(1, cols):
            opts[OP_T] = ld
    return opts


class _Problem:
    """Grouped axes of one request (internal to ``plan_dot``)."""

    def __init__(self, shapes, strides, config) -> None:
        lshape, rshape, _ = shapes
        lb, rb = config.lhs_batch_dims, config.rhs_batch_dims
        lc, rc = config.lhs_contracting_dims, config.rhs_contracting_dims
        used_l, used_r = set(lb) | set(lc), set(rb) | set(rc)
        lfree = [a for a in range(len(lshape)) if a not in used_l]
        rfree = [a for a in range(len(rshape)) if a not in used_r]
        nb, nm = len(lb), len(lfree)
        raw: dict[str, list[tuple[int, tuple[Any, Any, Any]]]] = {
            "B": [(lshape[a], (a, b, i)) for i, (a, b) in enumerate(zip(lb, rb))],
            "M": [(lshape[a], (a, None, nb + j)) for j, a in enumerate(lfree)],
            "N": [(rshape[a], (None, a, nb + nm + j)) for j, a in enumerate(rfree)],
            "K": [(lshape[a], (a, b, None)) for a, b in zip(lc, rc)],
        }
        self.ext = {g: _prod(e for e, _ in v) for g, v in raw.items()}
        self.entries = {g: [x for x in v if x[0] != 1] for g, v in raw.items()}
        self.ranks = (len(lshape), len(rshape), nb + nm + len(rfree))
        self.strides = strides
        self.order: dict[str, tuple] = {}
        self.merged: dict[str, dict] = {}
        self.bad: set[int] = set()

    def merge(self, blas: bool) -> None:
        for g, ops in (("B", (_L, _R, _O)), ("M", (_L, _O)), ("N", (_R, _O)),
                       ("K", (_L, _R))):
            order, st, bad = _group(self.entries[g], self.strides, ops)
            self.order[g] = order
            self.merged[g] = st
            self.bad.update(bad)
            if blas:
                self.bad.update(o for o, s in st.items() if s is not None and s < 0)

    def perm(self, o: int, groups: str) -> tuple[int, ...]:
        """Axis order of operand ``o`` laid out as ``groups`` (e.g. "BMK")."""
        picked = []
        for g in groups:
            entries = self.entries[g]
            picked += [entries[i][1][o] for i in self.order[g]]
        rest = [a for a in range(self.ranks[o]) if a not in set(picked)]
        return tuple(rest + picked)

    def compact(self, groups: str) -> dict[str, int]:
        """Merged strides of a compact copy laid out as ``groups`` (e.g. "BMK")."""
        out, acc = {}, 1
        for g in reversed(groups):
            out[g] = acc
            acc *= self.ext[g]
        return out


def _prod(values) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def plan_dot(shapes: Sequence[Sequence[int]], strides: Sequence[Sequence[int]], config,
             lhs_conj: bool = False, rhs_conj: bool = False, blas: bool = True) -> GemmPlan:
    """Plan ``out = op(lhs) . op(rhs)``; ``shapes``/``strides`` are (lhs, rhs, out).

    The request must already be validated (``shapes.dot.infer``). ``lhs_conj`` and
    ``rhs_conj`` are only meaningful for complex dtypes (pass False otherwise); ``blas``
    selects the cuBLAS constraints (else the integer kernel's).
    """
    p = _Problem(shapes, strides, config)
    plan = GemmPlan(tuple(shapes[2]))
    ext = p.ext
    if ext["B"] * ext["M"] * ext["N"] == 0:
        plan.empty = True
        return plan
    if ext["K"] == 0:
        plan.kzero = True
        return plan
    p.merge(blas)
    plan.batch, plan.k = ext["B"], ext["K"]
    if blas:
        _plan_blas(p, plan, lhs_conj, rhs_conj)
    else:
        _plan_int(p, plan)
    return plan


def plan_cached(shapes: tuple, strides: tuple, config, lhs_conj: bool, rhs_conj: bool,
                blas: bool) -> GemmPlan:
    """``plan_dot`` through a bounded process-wide memo (plans are immutable; the key is
    everything a plan depends on). Validation is not memoised: callers validate first."""
    key = (shapes, strides, config, lhs_conj, rhs_conj, blas)
    plan = _memo.get(key)
    if plan is None:
        plan = _memo.put(key, plan_dot(shapes, strides, config, lhs_conj, rhs_conj, blas))
    return plan


def _plan_int(p: _Problem, plan: GemmPlan) -> None:
    plan.m, plan.n = p.ext["M"], p.ext["N"]
    st: dict[int, dict[str, Any]] = {o: {g: p.merged[g].get(o) for g in "BMNK"}
                                     for o in (_L, _R, _O)}
    if _L in p.bad:
        plan.lhs_perm = p.perm(_L, "BMK")
        st[_L].update(p.compact("BMK"))
        plan.copy_bytes += p.ext["B"] * p.ext["M"] * p.ext["K"]
    if _R in p.bad:
        plan.rhs_perm = p.perm(_R, "BKN")
        st[_R].update(p.compact("BKN"))
        plan.copy_bytes += p.ext["B"] * p.ext["K"] * p.ext["N"]
    if _O in p.bad:
        plan.out_perm = p.perm(_O, "BMN")
        st[_O].update(p.compact("BMN"))
        plan.copy_bytes += p.ext["B"] * p.ext["M"] * p.ext["N"]
    sl, sr, so = st[_L], st[_R], st[_O]
    plan.int_strides = (sl["B"], sl["M"], sl["K"], sr["B"], sr["K"], sr["N"],
                        so["B"], so["M"], so["N"])


# --- cuBLAS ------------------------------------------------------------------------------
# (A operand, B operand) and their (rows group, cols group) in each orientation.
_ROLES = {
    "row": ((_R, "N", "K"), (_L, "K", "M")),
    "col": ((_L, "M", "K"), (_R, "K", "N")),
}


def _inner_group(p: _Problem, o: int) -> str | None:
    """The group holding operand ``o``'s smallest-|stride| axis (copy-friendly order)."""
    best, found = None, None
    for g in "BMNK":
        for _, axes in p.entries[g]:
            a = axes[o]
            if a is not None:
                s = abs(p.strides[o][a])
                if best is None or s < best:
                    best, found = s, g
    return found


def _operand(p: _Problem, base: dict, o: int, rg: str, cg: str, conj: bool):
    """(op, ld, strides, copy layout or None) for operand ``o`` as a rows x cols matrix."""
    ext = p.ext
    if o not in p.bad:
        s = base[o]
        opts = _mat(ext[rg], s[rg], ext[cg], s[cg])
        if conj:
            opts = {OP_T: opts[OP_T]} if OP_T in opts else {}
        if opts:
            op = OP_N if OP_N in opts else OP_T
            return (OP_C if conj and op == OP_T else op), opts[op], s, None
    if conj or _inner_group(p, o) != rg:
        layout = "B" + rg + cg  # cols innermost: op T (C when conjugated)
    else:
        layout = "B" + cg + rg  # rows innermost: op N
    s = p.compact(layout)
    opts = _mat(ext[rg], s[rg], ext[cg], s[cg])
    op = OP_T if layout[-1] == cg and OP_T in opts else OP_N
    return (OP_C if conj and op == OP_T else op), opts[op], s, layout


def _orient(p: _Problem, base: dict, orient: str, out_tmp: bool, conj: dict):
    ext = p.ext
    so = p.compact("BMN") if out_tmp else base[_O]
    if orient == "row":
        c = _mat(ext["N"], so["N"], ext["M"], so["M"])
    else:
        c = _mat(ext["M"], so["M"], ext["N"], so["N"])
    if OP_N not in c:
        return None
    cost = ext["B"] * ext["M"] * ext["N"] if out_tmp else 0
    roles = []
    for o, rg, cg in _ROLES[orient]:
        op, ld, s, layout = _operand(p, base, o, rg, cg, conj[o])
        if layout is not None:
            cost += ext["B"] * ext[rg] * ext[cg]
        roles.append((o, op, ld, s, layout))
    return cost, orient, out_tmp, so, c[OP_N], roles


def _plan_blas(p: _Problem, plan: GemmPlan, lhs_conj: bool, rhs_conj: bool) -> None:
    base = {o: {g: p.merged[g].get(o) for g in "BMNK"} for o in (_L, _R, _O)}
    conj = {_L: lhs_conj, _R: rhs_conj}
    out_tmp = _O in p.bad
    best = None
    for orient in ("row", "col"):
        cand = _orient(p, base, orient, out_tmp, conj)
        if cand is not None and (best is None or cand[0] < best[0]):
            best = cand
    if best is None:  # out has no contiguous axis: stage it in a compact temporary
        best = _orient(p, base, "row", True, conj)
    cost, orient, out_tmp, so, ldc, ((oa, ta, lda, sa, lay_a), (ob, tb, ldb, sb, lay_b)) = best
    ext = p.ext
    plan.swap = orient == "row"
    plan.m, plan.n = (ext["N"], ext["M"]) if plan.swap else (ext["M"], ext["N"])
    plan.transa, plan.lda, plan.transb, plan.ldb, plan.ldc = ta, lda, tb, ldb, ldc
    batched = ext["B"] > 1
    plan.stride_a = sa["B"] if batched else 0
    plan.stride_b = sb["B"] if batched else 0
    plan.stride_c = so["B"] if batched else 0
    for o, layout in ((oa, lay_a), (ob, lay_b)):
        if layout is not None:
            if o == _L:
                plan.lhs_perm = p.perm(_L, layout)
            else:
                plan.rhs_perm = p.perm(_R, layout)
    if out_tmp:
        plan.out_perm = p.perm(_O, "BMN")
    plan.copy_bytes = cost
    plan.use64 = max(plan.m, plan.n, plan.k, lda, ldb, ldc, plan.batch) > INT32_MAX
