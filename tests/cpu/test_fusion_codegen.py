"""The fusion code generator (fusion_codegen.py): the op table covers every elementwise,
analytic and cast operation; generated sources compile with NVRTC for sm_80 and sm_90
(the named plans x their dtypes x both paths, every op x dtype, every cast pair, random
plans); ArgPack codes match the kernels' PTX parameters; the contiguous path moves 16-byte
vectors; the fences stop FMA contraction across instructions; sources are deterministic
and depend on nothing but the spec."""

from __future__ import annotations

import re
from string import Template

import pytest
from hypothesis import given, settings
from reference import nvrtc_builds
from test_fusion_plans import PLAN_CASES, PLANS, random_plans

from tenferro_cuda import _nvrtc
from tenferro_cuda import fusion_codegen as fc
from tenferro_cuda.configs.elementwise import CompareDir
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.kernels.args import LAYOUT_SIZE
from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.kernels.registry import INCLUDE_DIR
from tenferro_cuda.shapes.elementwise import CAST_KINDS, KINDS
from tenferro_cuda.shapes.fusion import TypedPlan, type_plan

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction
ARCHS = (80, 90)


def typed(plan: ElementwiseFusionPlan, dtypes, scalar=()) -> TypedPlan:
    return type_plan(plan, tuple(dtypes), [k in scalar for k in range(len(dtypes))], "t")


def variants(t: TypedPlan, n: int, rows: bool = False) -> list[fc.KernelSpec]:
    """Contiguous, strided, and (n > 1) strided with a scalar first input; with ``rows``
    also broadcast-rows, and (n > 1) broadcast-rows with a scalar first input."""
    live = t.live[:n]

    def classes(text: str) -> str:
        return "".join(c if used else "u" for c, used in zip(text, live))
    out = [fc.spec_for(t, classes("c" * n), "contig"), fc.spec_for(t, classes("l" * n),
                                                                   "strided")]
    if n > 1 and live[0] and any(live[1:]):
        out.append(fc.spec_for(t, classes("s" + "l" * (n - 1)), "strided"))
    if rows:
        out.append(fc.spec_for(t, classes("r" * n), "bcast"))
        if n > 1 and live[0] and any(live[1:]):
            out.append(fc.spec_for(t, classes("s" + "r" * (n - 1)), "bcast"))
    return out


def all_ops_plan(d: DType) -> ElementwiseFusionPlan:
    """Every operation defined for ``d``, over three inputs of ``d`` and a bool one."""
    ops = []
    for kind in KINDS.values():
        if not kind.instantiable(d) or kind.name == "select":
            continue
        extra = {"direction": kind.direction} if kind.direction else {}
        name = "compare" if kind.direction else kind.name
        ops.append(Ins(name, (0, 1, 2)[: kind.arity], **extra))
    ops.append(Ins("select", (3, 0, 1)))
    return P(4, ops, tuple(range(4, 4 + len(ops))))


def _specs() -> list[fc.KernelSpec]:
    specs = []
    seen = set()
    for name, d in PLAN_CASES:  # every dtype contiguous, the first one on every path
        plan = PLANS[name]
        every = variants(typed(plan, [d] * plan.num_inputs), plan.num_inputs,
                         rows=name not in seen)
        specs += every if name not in seen else every[:1]
        seen.add(name)
    for d in ALL_DTYPES:
        specs += variants(typed(all_ops_plan(d), (d, d, d, D.BOOL)), 4)
        casts = P(1, [Ins("cast", (0,), to=t) for t in ALL_DTYPES],
                  tuple(range(1, 1 + len(ALL_DTYPES))))
        specs += variants(typed(casts, (d,)), 1)
    return specs


SPECS = _specs()
PARTS = 6


def compile_specs(specs, arch: int, ptx: bool = False, extra: tuple[str, ...] = ()):
    gens = [fc.generate(s) for s in specs]
    source = "\n".join(g.source for g in gens)
    prog = _nvrtc.compile_program(source, "fusion_batch.cu",
                                  options_for(arch, extra) + (f"-I{INCLUDE_DIR}",),
                                  tuple(g.expression for g in gens), ptx=ptx)
    return gens, prog


def program(arch: int, part: int) -> nvrtc_builds.Build:
    """What ``compile_specs(SPECS[part::PARTS], arch, extra=CHECK)`` compiles."""
    gens = [fc.generate(s) for s in SPECS[part::PARTS]]
    return nvrtc_builds.source_build(
        "fusion_batch.cu", "\n".join(g.source for g in gens), [g.expression for g in gens],
        options_for(arch, nvrtc_builds.CHECK) + (f"-I{INCLUDE_DIR}",), arch=arch)


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("arch", ARCHS, ids=[f"sm_{a}" for a in ARCHS])
@pytest.mark.parametrize("part", range(PARTS))
def test_generated_sources_compile(arch, part):
    specs = SPECS[part::PARTS]
    gens = [fc.generate(s) for s in specs]
    prog = nvrtc_builds.get(program(arch, part))
    assert set(prog.lowered) == {g.expression for g in gens}
    assert prog.image[:4] == b"\x7fELF"


@settings(max_examples=12, deadline=None, derandomize=True)
@given(case=random_plans(max_ops=8, fallible=True))
def test_random_plans_compile(case):
    plan, dtypes = case
    specs = variants(typed(plan, dtypes), plan.num_inputs, rows=True)
    gens, prog = compile_specs(specs, ARCHS[len(plan.instructions) % 2],
                               extra=nvrtc_builds.CHECK)
    assert set(prog.lowered) == {g.expression for g in gens}


def test_op_table_covers_every_operation():
    kinds = {**{k.key: k for k in KINDS.values()}, **{k.key: k for k in CAST_KINDS.values()}}
    assert set(fc.OP_EXPR) == set(kinds)
    for key, template in fc.OP_EXPR.items():
        assert template == f"{kinds[key].functor}::apply<$T>($args, $err)"
    assert fc.OPTIONS == ("-fmad=false",)
    reasons = {k.error_reason(d) for k in KINDS.values() for d in ALL_DTYPES} - {None}
    assert reasons == set(fc.ERR_VAR)


def test_fill_is_string_template_substitution():
    for text in [*fc.SNIPPET.values(), *fc.OP_EXPR.values()]:
        fields = {name: f"<{name}>" for name in re.findall(r"\$(\w+)", text)}
        assert fc._substitute(text, fields) == Template(text).substitute(fields)
        if fields:
            with pytest.raises(KeyError):
                fc._substitute(text, {})


def test_sources_are_deterministic_and_specific():
    t = typed(PLANS["exp_mul_add"], (D.FLOAT32, D.FLOAT32))
    a, b = fc.spec_for(t, "cc", "contig"), fc.spec_for(t, "cc", "contig")
    assert fc.generate(a) == fc.generate(b) and a.digest == b.digest
    others = [fc.spec_for(t, "cs", "contig"), fc.spec_for(t, "ll", "strided"),
              fc.spec_for(t, "rr", "bcast"),
              fc.spec_for(typed(PLANS["exp_mul_add"], (D.FLOAT64, D.FLOAT64)), "cc", "contig")]
    assert len({s.digest for s in [a, *others]}) == 5
    src = fc.generate(a).source
    assert '#include "tenferro/ops.cuh"' in src and f"tf_fusion_{a.digest}" in src
    assert "tf::ExpOp::apply<float>(v0, ed)" in src


def test_spec_rejects_classes_off_its_path():
    t = typed(PLANS["exp_mul_add"], (D.FLOAT32, D.FLOAT32))
    for classes, path in (("cl", "contig"), ("cc", "strided"), ("ss", "strided"),
                          ("rl", "bcast"), ("cr", "bcast"), ("ss", "bcast"), ("rr", "strided"),
                          ("rs", "contig")):
        with pytest.raises(ValueError):
            fc.spec_for(t, classes, path)


def test_vector_width_follows_the_widest_compact_operand():
    t = typed(P(2, [Ins("cast", (0,), to="complex128"), Ins("select", (1, 2, 2))], (3,)),
              (D.FLOAT16, D.BOOL))
    assert fc.spec_for(t, "cc", "contig").vec == 1
    t = typed(P(1, [Ins("cast", (0,), to="float16")], (1,)), (D.INT8,))
    assert fc.spec_for(t, "c", "contig").vec == 8
    t = typed(P(2, [Ins("compare", (0, 1), direction=CompareDir.EQ)], (2,)),
              (D.UINT8, D.UINT8))
    assert fc.spec_for(t, "cs", "contig").vec == 16
    t = typed(P(2, [Ins("cast", (0,), to="float64"), Ins("add", (2, 1))], (3,)),
              (D.INT8, D.FLOAT64))
    assert fc.spec_for(t, "rs", "bcast").vec == 2  # the float64 output
    t = typed(P(2, [Ins("cast", (0,), to="int8"), Ins("add", (2, 1))], (3,)),
              (D.FLOAT64, D.INT8))
    assert fc.spec_for(t, "sr", "bcast").vec == 16  # a scalar float64 is not in vectors
    assert fc.spec_for(t, "rr", "bcast").vec == 2


# --- PTX: parameters, vector accesses, contraction -------------------------------------
_SCALAR = {"8": 1, "16": 2, "32": 4, "64": 8}
_SIZES = {"P": 8, "I": 4, "i": 4, "L": LAYOUT_SIZE}


def _ptx_params(ptx: str, symbol: str) -> list[int]:
    body = re.search(re.escape(symbol) + r"\((.*?)\)", ptx, re.S).group(1)
    sizes = []
    for line in body.split(","):
        arr = re.search(r"\[(\d+)\]", line)
        sizes.append(int(arr.group(1)) if arr else
                     _SCALAR[re.search(r"\.[usbf](\d+)\s", line).group(1)])
    return sizes


def _entry(text: str, symbol: str) -> str:
    start = text.index(f".entry {symbol}(")
    end = text.find(".entry ", start + 1)
    return text[start:end if end > 0 else len(text)]


PTX_SPECS = {
    "contig 2 float32": (PLANS["exp_mul_add"], (D.FLOAT32,) * 2, "cc", "contig"),
    "contig scalar": (PLANS["exp_mul_add"], (D.FLOAT32,) * 2, "sc", "contig"),
    "strided mixed": (PLANS["select_clamp"], (D.FLOAT16,) * 3, "lsl", "strided"),
    "strided unused": (P(3, [Ins("neg", (2,))], (3, 0)), (D.COMPLEX128,) * 3, "lul", "strided"),
    "four outputs": (PLANS["four_outputs"], (D.INT8,) * 2, "cc", "contig"),
    "bcast mixed": (PLANS["select_clamp"], (D.FLOAT16,) * 3, "rsr", "bcast"),
    "bcast 2 float32": (PLANS["exp_mul_add"], (D.FLOAT32,) * 2, "rr", "bcast"),
}
_PTX_CACHE: dict = {}


def _ptx(name: str):
    if name not in _PTX_CACHE:
        plan, dtypes, classes, path = PTX_SPECS[name]
        spec = fc.spec_for(typed(plan, dtypes), classes, path)
        (gen,), prog = compile_specs([spec], 90, ptx=True)
        _PTX_CACHE[name] = (spec, prog.image.decode(errors="replace"), prog.lowered[gen.expression])
    return _PTX_CACHE[name]


@pytest.mark.parametrize("name", list(PTX_SPECS))
def test_argument_codes_match_kernel_parameters(name):
    spec, text, symbol = _ptx(name)
    codes = re.findall(r"[PLIi]", fc.arg_codes(spec))
    assert _ptx_params(text, symbol) == [_SIZES[c] for c in codes]


def test_contiguous_path_moves_16_byte_vectors():
    spec, text, symbol = _ptx("contig 2 float32")
    body = _entry(text, symbol)
    assert re.search(r"ld\.global(\.nc)?\.v(2\.u64|4\.[uf]32)", body)
    assert re.search(r"st\.global\.v(2\.u64|4\.[uf]32)", body)


def test_broadcast_rows_path_moves_16_byte_vectors():
    spec, text, symbol = _ptx("bcast 2 float32")
    body = _entry(text, symbol)
    assert re.search(r"ld\.global(\.nc)?\.v(2\.u64|4\.[uf]32)", body)
    assert re.search(r"st\.global\.v(2\.u64|4\.[uf]32)", body)


def test_no_contraction_across_instructions():
    """With the fusion options a multiply and the next instruction's add stay separate;
    without them the compiler contracts them into an FMA (which op-by-op cannot)."""
    plan = PLANS["mul_add_fma_trap"]
    spec = fc.spec_for(typed(plan, (D.FLOAT32,) * 3), "ccc", "contig")
    (gen,), prog = compile_specs([spec], 90, ptx=True, extra=fc.OPTIONS)
    body = _entry(prog.image.decode(), prog.lowered[gen.expression])
    assert "fma.rn.f32" not in body and "mul.rn.f32" in body and "add.rn.f32" in body
    (gen,), prog = compile_specs([spec], 90, ptx=True)
    assert "fma.rn.f32" in _entry(prog.image.decode(), prog.lowered[gen.expression])
