"""ptx/reduce.cu, blas1.cu, argreduce.cu, scan.cu and sort.cu: every registered
instantiation compiles with NVRTC for sm_80 and sm_90 (one program per family and arch);
the registry agrees with the sources; the argument codes the ops pack match each kernel's
parameter list (sizes, in order, read from the PTX); the bandwidth-bound kernels use
16-byte loads and stores."""

from __future__ import annotations

import re

import pytest
from reference import nvrtc_builds

from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels.args import LAYOUT_SIZE
from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.kernels.families import argreduce, blas1, reduce, scan, sort
from tenferro_cuda.kernels.registry import INCLUDE_DIR, family, global_names
from tenferro_cuda.ops.blas1 import (
    FLAT_FINISH_CODES,
    FLAT_PARTIALS_CODES,
    axpby_contig_codes,
    axpby_strided_codes,
)
from tenferro_cuda.ops.reduction import col_codes, row_codes
from tenferro_cuda.ops.reduction import scan as scan_ops
from tenferro_cuda.ops.reduction import sort as sort_ops
from tenferro_cuda.ops.reduction.argreduce import arg_codes

FAMILIES = ["reduce", "blas1", "argreduce", "scan", "sort"]
F16, F32, F64 = DType.FLOAT16, DType.FLOAT32, DType.FLOAT64
I8, C64, C128 = DType.INT8, DType.COMPLEX64, DType.COMPLEX128


def program(name: str, arch: int) -> nvrtc_builds.Build:
    return nvrtc_builds.check_build(name, arch)


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_instantiation_compiles(name, arch):
    exprs = tuple(family(name).all_expressions())
    prog = nvrtc_builds.get(program(name, arch))
    assert set(prog.lowered) == set(exprs)
    assert all(prog.lowered[e] for e in exprs)
    assert prog.image


@pytest.mark.parametrize("name", FAMILIES)
def test_registry_matches_source(name):
    fam = family(name)
    assert {e.name for e in fam.entries} == global_names(fam.read_source())


def test_instantiations_cover_every_op_and_dtype():
    exprs = set(family("reduce").all_expressions())
    for kind in reduce.OPS:
        for d in DType:
            ok = d.is_numeric and not (kind in ("max", "min") and d.is_complex)
            if kind in ("and", "or"):
                ok = d.is_bool or d.is_integer
            assert (d in reduce.op_dtypes(kind)) == ok
            if not ok:
                continue
            p = reduce.partial_dtype(kind, d)
            for entry in ("reduce_rows", "reduce_cols"):
                e = reduce.FAMILY.entry(entry)
                for index in reduce.INDEX:
                    assert e.expression(*reduce.targs(kind, d, d, d, index)) in exprs
                    assert e.expression(*reduce.targs(kind, d, d, p, index)) in exprs
                assert e.expression(*reduce.targs(kind, d, p, d, "tf::u32")) in exprs
                pp = F32 if p is not d else d  # partials -> partials: the float32 operator
                assert e.expression(*reduce.targs(kind, pp, p, p, "tf::u32")) in exprs


def _code_sizes(codes: str) -> list[int]:
    out = []
    for tok in re.findall(r"[PqQiIfdL]|[SX]\d+", codes):
        out.append({"P": 8, "q": 8, "Q": 8, "d": 8, "i": 4, "I": 4, "f": 4,
                    "L": LAYOUT_SIZE}.get(tok) or int(tok[1:]))
    return out


_SCALAR = {"8": 1, "16": 2, "32": 4, "64": 8}


def _ptx_params(ptx: str, symbol: str) -> list[int]:
    body = re.search(re.escape(symbol) + r"\((.*?)\)", ptx, re.S).group(1)
    sizes = []
    for line in body.split(","):
        arr = re.search(r"\[(\d+)\]", line)
        sizes.append(int(arr.group(1)) if arr else _SCALAR[re.search(r"\.[usbf](\d+)\s",
                                                                    line).group(1)])
    return sizes


def _rows(kind, d, src, dst, index):
    return reduce.FAMILY.entry("reduce_rows").expression(*reduce.targs(kind, d, src, dst, index))


def _cols(kind, d, src, dst, index):
    return reduce.FAMILY.entry("reduce_cols").expression(*reduce.targs(kind, d, src, dst, index))


def _blas(entry, *targs):
    return blas1.FAMILY.entry(entry).expression(*targs)


def _arg(kind, d, partial, index):
    return argreduce.FAMILY.entry("arg_reduce").expression(
        *argreduce.targs(kind, d, partial, index))


def _scan(entry, kind, d, index):
    return scan.FAMILY.entry(entry).expression(*scan.targs(kind, d, index))


def _sort(entry, d, *index):
    return sort.FAMILY.entry(entry).expression(sort.policy(d), *index)


CASES = {
    "reduce": [(_rows("sum", F32, F32, F32, i), row_codes(i)) for i in reduce.INDEX]
    + [(_cols("sum", F32, F32, F32, i), col_codes(i)) for i in reduce.INDEX]
    + [(_rows("prod", F16, F16, F32, "tf::u64"), row_codes("tf::u64")),
       (_cols("max", I8, I8, I8, "tf::u32"), col_codes("tf::u32")),
       (_rows("and", DType.BOOL, DType.BOOL, DType.BOOL, "tf::u32"), row_codes("tf::u32")),
       (_cols("or", DType.INT64, DType.INT64, DType.INT64, "tf::u64"), col_codes("tf::u64")),
       (_rows("sum", C128, C128, C128, "tf::u32"), row_codes("tf::u32"))],
    "blas1": [(_blas("flat_partials", blas1.map_arg(m, d.ctype)), FLAT_PARTIALS_CODES)
              for m in blas1.MAPS for d in (F16, C128)]
    + [(_blas("flat_finish", blas1.map_arg(m, d.ctype)), FLAT_FINISH_CODES)
       for m in blas1.MAPS for d in (I8, C64)]
    + [(_blas("axpby_contig", d.ctype), axpby_contig_codes(d)) for d in (F16, I8, F64, C128)]
    + [(_blas("axpby_strided", d.ctype, i), axpby_strided_codes(d, i))
       for d in (F16, C64, C128) for i in blas1.INDEX],
    "argreduce": [(_arg(k, d, p, i), arg_codes(i)) for k, d, p in
                  (("argmax", F32, False), ("argmin", F16, True), ("argmax", DType.BOOL, True))
                  for i in argreduce.INDEX],
    "scan": [(_scan("scan_rows", k, d, i), scan_ops.row_codes(i)) for k, d in
             (("sum", F16), ("max", I8), ("prod", C128)) for i in scan.INDEX]
    + [(_scan("scan_cols", k, d, i), scan_ops.col_codes(i)) for k, d in
       (("sum", DType.INT64), ("min", F64)) for i in scan.INDEX],
    "sort": [(_sort("sort_small", d, i), sort_ops.small_codes(i)) for d in (F32, DType.BOOL)
             for i in sort.INDEX]
    + [(_sort("radix_hist", d), sort_ops.HIST_CODES) for d in (F16, F64)]
    + [(_sort("radix_scatter", d), sort_ops.SCATTER_CODES) for d in (I8, F32)],
}


def ptx_programs() -> list[nvrtc_builds.Build]:
    """The PTX (sm_90) of the instantiations that CASES and VECTOR check, per family."""
    return [nvrtc_builds.nvrtc_build(
        name, dict.fromkeys(e for e, _ in CASES[name] + VECTOR[name]),
        options_for(90) + (f"-I{INCLUDE_DIR}",), ptx=True, arch=90) for name in CASES]


@pytest.fixture(scope="module")
def ptx():
    out = {}
    for build in ptx_programs():
        prog = nvrtc_builds.get(build)
        text = prog.image.decode(errors="replace")
        out.update({e: (text, prog.lowered[e]) for e in build.expressions})
    return out


@nvrtc_builds.ahead(ptx_programs)
@pytest.mark.parametrize("expr,codes", [c for v in CASES.values() for c in v],
                         ids=[e for v in CASES.values() for e, _ in v])
def test_argument_codes_match_kernel_parameters(ptx, expr, codes):
    text, symbol = ptx[expr]
    assert _ptx_params(text, symbol) == _code_sizes(codes)


def _entry_body(text: str, symbol: str) -> str:
    start = text.index(f".entry {symbol}(")
    end = text.find(".entry ", start + 1)
    return text[start:end if end > 0 else len(text)]


# 16-byte loads: through the read-only path (.nc) where the kernel asks for it (__ldg);
# where it was only inferred from const __restrict__ operands (the row reduction), the
# kernel's first statement (tf::grid_wait, an asm barrier) ends the inference: a plain
# 16-byte load, the same bandwidth measured on an H100 (docs/graphs.md).
LOAD16 = r"ld\.global(\.nc)?\.v4"
VECTOR = {
    "argreduce": [],
    "scan": [],
    "sort": [],
    "reduce": [(_rows("sum", F32, F32, F32, "tf::u32"), LOAD16),
               (_cols("sum", F32, F32, F32, "tf::u32"), r"ld\.global\.nc\.v4"),
               (_rows("max", F16, F16, F16, "tf::u32"), LOAD16)],
    "blas1": [(_blas("flat_partials", "tf::bl::Vdot<float>"), r"ld\.global\.nc\.v4"),
              (_blas("axpby_contig", "float"), r"st\.global\.v4")],
}


@nvrtc_builds.ahead(ptx_programs)
@pytest.mark.parametrize("expr,pattern", [c for v in VECTOR.values() for c in v],
                         ids=[e for v in VECTOR.values() for e, _ in v])
def test_bandwidth_kernels_use_16_byte_accesses(ptx, expr, pattern):
    text, symbol = ptx[expr]
    assert re.search(pattern, _entry_body(text, symbol))
