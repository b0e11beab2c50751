"""NVRTC compiles every registered instantiation of ptx/elementwise.cu and ptx/cast.cu for
sm_80 and sm_90 (a family's expressions in a few programs per arch), and the registry,
the op table and the sources agree."""

from __future__ import annotations

import re

import pytest
from reference import nvrtc_builds

from tenferro_cuda.dtypes import ALL_DTYPES
from tenferro_cuda.kernels.registry import INCLUDE_DIR, family, global_names
from tenferro_cuda.shapes.elementwise import CAST_KINDS, KINDS

PARTS = {"elementwise": 4, "cast": 2}
CASES = [(fam, arch, part) for fam, n in PARTS.items() for arch in (80, 90)
         for part in range(n)]


def program(fam: str, arch: int, part: int) -> nvrtc_builds.Build:
    """``compile_family`` of every ``PARTS[fam]``-th instantiation from ``part`` on."""
    exprs = tuple(family(fam).all_expressions())[part::PARTS[fam]]
    return nvrtc_builds.family_build(fam, exprs, arch, nvrtc_builds.CHECK)


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("fam,arch,part", CASES,
                         ids=[f"{f}-sm_{a}-part{p}" for f, a, p in CASES])
def test_compile_every_instantiation(fam, arch, part):
    exprs = tuple(family(fam).all_expressions())[part::PARTS[fam]]
    prog = nvrtc_builds.get(program(fam, arch, part))
    assert set(prog.lowered) == set(exprs)
    assert all(name.startswith("_Z") for name in prog.lowered.values())
    assert prog.image[:4] == b"\x7fELF"


@pytest.mark.parametrize("fam,entries", [("elementwise", {"ew_contig", "ew_strided", "ew_bcast",
                                                         "ew_small"}),
                                         ("cast", {"cast_contig", "cast_strided"})])
def test_registry_matches_sources(fam, entries):
    f = family(fam)
    assert {e.name for e in f.entries} == entries == global_names(f.read_source())


def test_instances_follow_the_op_table():
    exprs = set(family("elementwise").all_expressions())
    for kind in KINDS.values():
        for d in ALL_DTYPES:
            expr = f"tf::ew_contig<{kind.functor}, {d.ctype}>"
            assert (expr in exprs) == kind.instantiable(d), expr
    assert len(family("cast").all_expressions()) == 2 * len(ALL_DTYPES) ** 2
    assert {k.functor for k in CAST_KINDS.values()} == {
        f"tf::CastOp<{d.ctype}>" for d in ALL_DTYPES}


def test_functors_exist_in_ops_header():
    """Every functor is defined in ops.cuh or a header it includes."""
    head = INCLUDE_DIR / "tenferro" / "ops.cuh"
    text = head.read_text()
    text += "".join((head.parent / name).read_text()
                    for name in re.findall(r'#include "(\w+\.cuh)"', text))
    for kind in KINDS.values():
        name = re.match(r"tf::(\w+)", kind.functor).group(1)
        assert re.search(rf"struct {name}\b|TF_FUNCTOR\w*\({name},", text), name
