"""Fusion plans for the tests of both tiers (defines no tests): a table of named plans,
a hypothesis strategy of random valid plans over the op table and the dtypes, random
inputs, and ``unfused``: the same plan executed op by op with the session's methods."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from test_cast_ref import cast_ref
from test_elementwise_ref import BF16, REF, mismatch, random_array, tolerance

from tenferro_cuda.configs.elementwise import CompareDir
from tenferro_cuda.configs.fusion import FUSION_OP_ARITY, ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import ALL_DTYPES, DType, lattice_allows
from tenferro_cuda.errors import TenferroError
from tenferro_cuda.shapes.elementwise import KINDS
from tenferro_cuda.shapes.fusion import type_plan

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction
ANALYTIC = ("exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1", "log1p")

# name -> plan; every plan is run for each dtype that types with all inputs of that dtype.
PLANS: dict[str, ElementwiseFusionPlan] = {
    "exp_mul_add": P(2, [Ins("exp", (0,)), Ins("mul", (2, 1)), Ins("add", (3, 0))], (4,)),
    "chain8": P(3, [Ins(op, args) for op, args in (
        ("mul", (0, 1)), ("add", (3, 2)), ("sub", (4, 0)), ("maximum", (5, 1)),
        ("mul", (6, 2)), ("minimum", (7, 0)), ("add", (8, 1)), ("neg", (9,)))], (10,)),
    "mul_add_fma_trap": P(3, [Ins("mul", (0, 1)), Ins("add", (3, 2))], (4,)),
    "four_outputs": P(2, [Ins("add", (0, 1)), Ins("sub", (0, 1)), Ins("mul", (0, 1)),
                          Ins("compare", (0, 1), direction=CompareDir.LT)], (2, 3, 4, 5)),
    "select_clamp": P(3, [Ins("compare", (0, 1), direction="GT"), Ins("clamp", (0, 1, 2)),
                          Ins("neg", (1,)), Ins("select", (3, 4, 5))], (6,)),
    "abs_sign_conj": P(1, [Ins("abs", (0,)), Ins("sign", (0,)), Ins("conj", (0,))], (1, 2, 3)),
    "unary_analytic_a": P(1, [Ins(op, (0,)) for op in ANALYTIC[:5]], (1, 2, 3, 4, 5)),
    "unary_analytic_b": P(1, [Ins(op, (0,)) for op in ANALYTIC[5:]], (1, 2, 3, 4)),
    "analytic_chain": P(2, [Ins(op, args) for op, args in (
        ("exp", (0,)), ("log1p", (2,)), ("mul", (3, 1)), ("tanh", (4,)), ("sqrt", (2,)),
        ("div", (5, 6)))], (7,)),
    "pow": P(2, [Ins("pow", (0, 1))], (2,)),
    "div_rem": P(2, [Ins("div", (0, 1)), Ins("rem", (0, 1))], (2, 3)),
    "cast_chain": P(2, [Ins("cast", (0,), to="float32"), Ins("cast", (1,), to="float32"),
                        Ins("mul", (2, 3)), Ins("cast", (4,), to="bfloat16"),
                        Ins("convert", (5,), to="float64")], (4, 6)),
    "compare_all": P(2, [Ins("compare", (0, 1), direction=d) for d in CompareDir],
                     (2, 3, 4, 5, 6, 7)),
    "input_passthrough": P(2, [Ins("maximum", (0, 1))], (0, 2, 2)),
}


def plan_dtypes(plan: ElementwiseFusionPlan) -> list[DType]:
    """Dtypes D for which ``plan`` types with every input of dtype D."""
    out = []
    for d in ALL_DTYPES:
        try:
            type_plan(plan, (d,) * plan.num_inputs, (False,) * plan.num_inputs, "test")
        except TenferroError:
            continue
        out.append(d)
    return out


PLAN_CASES = [(name, d) for name, plan in PLANS.items() for d in plan_dtypes(plan)]
PLAN_IDS = [f"{name}-{d.value}" for name, d in PLAN_CASES]


# --- random plans ---------------------------------------------------------------------
def _fallible(name: str, d: DType) -> bool:
    return name in ("div", "rem", "pow") and d.is_integer


@st.composite
def instruction(draw, values: list[DType], fallible: bool = False):
    """(FusionInstruction, result dtype) valid over ``values`` (the dtype of each id)."""
    present = sorted(set(values), key=lambda d: d.code)
    options = ["cast", "convert"]
    if D.BOOL in present:
        options.append("select")
    for name in FUSION_OP_ARITY:
        if name in ("cast", "convert", "select"):
            continue
        kind = KINDS["compare_eq" if name == "compare" else name]
        if any(kind.instantiable(d) and (fallible or not _fallible(name, d)) for d in present):
            options.append(name)
    name = draw(st.sampled_from(options))

    def ids(dtype):
        return st.sampled_from([i for i, d in enumerate(values) if d is dtype])
    if name in ("cast", "convert"):
        src = draw(st.sampled_from(present))
        targets = [d for d in ALL_DTYPES if name == "cast" or lattice_allows(src, d)]
        to = draw(st.sampled_from(targets))
        return Ins(name, (draw(ids(src)),), to=to), to
    if name == "select":
        d = draw(st.sampled_from(present))
        return Ins("select", (draw(ids(D.BOOL)), draw(ids(d)), draw(ids(d)))), d
    kind = KINDS["compare_eq" if name == "compare" else name]
    d = draw(st.sampled_from([d for d in present if kind.instantiable(d)
                              and (fallible or not _fallible(name, d))]))
    args = tuple(draw(ids(d)) for _ in range(kind.arity))
    if name == "compare":
        dirs = [CompareDir.EQ, CompareDir.NE] if d.is_complex else list(CompareDir)
        return Ins("compare", args, direction=draw(st.sampled_from(dirs))), D.BOOL
    return Ins(name, args), kind.out_dtype(d)


@st.composite
def random_plans(draw, dtypes=ALL_DTYPES, max_inputs: int = 3, max_ops: int = 6,
                 fallible: bool = False):
    """(plan, input dtypes) of a random valid plan."""
    nin = draw(st.integers(1, max_inputs))
    values = [draw(st.sampled_from(list(dtypes))) for _ in range(nin)]
    instrs = []
    for _ in range(draw(st.integers(1, max_ops))):
        ins, dtype = draw(instruction(values, fallible))
        instrs.append(ins)
        values.append(dtype)
    extra = draw(st.lists(st.integers(0, len(values) - 1), max_size=2))
    return P(nin, instrs, (len(values) - 1, *extra)), tuple(values[:nin])


def make_inputs(seed: int, dtypes, shape, scalar=()) -> list[np.ndarray]:
    """Random arrays of ``dtypes``; those listed in ``scalar`` are rank 0."""
    rng = np.random.default_rng(seed)
    return [np.asarray(random_array(rng, d.numpy, () if k in scalar else shape))
            for k, d in enumerate(dtypes)]


def unfused(s, plan: ElementwiseFusionPlan, inputs) -> list:
    """The plan's outputs computed op by op with the session's methods."""
    vals = list(inputs)
    for ins in plan.instructions:
        args = [vals[a] for a in ins.args]
        if ins.op == "compare":
            vals.append(s.compare(*args, ins.direction))
        elif ins.op in ("cast", "convert"):
            vals.append(getattr(s, ins.op)(args[0], ins.to))
        else:
            vals.append(getattr(s, ins.op)(*args))
    return [vals[o] for o in plan.outputs]


def reference(plan: ElementwiseFusionPlan, arrays) -> list[np.ndarray]:
    """numpy op by op (each result rounded to its dtype, as the unfused ops do)."""
    vals = [np.asarray(a) for a in arrays]
    for ins in plan.instructions:
        args = [vals[a] for a in ins.args]
        if ins.op in ("cast", "convert"):
            vals.append(np.asarray(cast_ref(args[0], ins.to.numpy)))
            continue
        key = f"compare_{ins.direction.value}" if ins.op == "compare" else ins.op
        if len({a.shape for a in args}) > 1:  # rank-0 operands broadcast
            shape = np.broadcast_shapes(*[a.shape for a in args])
            args = [np.broadcast_to(a, shape).copy() for a in args]
        vals.append(np.asarray(REF[key](*args)[0]))
    return [vals[o] for o in plan.outputs]


def is_exact(plan: ElementwiseFusionPlan, dtypes) -> bool:
    """Whether every live instruction is bit-exact by contract (docs/dtypes.md)."""
    typed = type_plan(plan, tuple(dtypes), (False,) * len(dtypes), "test")
    return all(t.kind.family == "cast" or tolerance(t.kind.key, t.primary.numpy) is None
               for t in typed.ops if t.live)


def close(got: np.ndarray, want: np.ndarray, exact: bool) -> str | None:
    """None when ``got`` matches: bit for bit, or (inexact plans) within the transcendental
    tolerance of the dtype with an absolute floor scaled by the largest result."""
    if exact or got.dtype.kind not in "fc" and got.dtype != BF16:
        return mismatch(got, want, None)
    rtol, atol = tolerance("exp", got.dtype)
    mags = np.abs(want.astype(np.complex128 if want.dtype.kind == "c" else np.float64))
    finite = mags[np.isfinite(mags)]
    floor = rtol * float(finite.max()) if finite.size else 0.0
    return mismatch(got, want, (rtol, max(atol, floor)))
