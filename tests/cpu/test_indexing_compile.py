"""The gather, scatter and slicing kernel families: the registry matches ptx/, and every
registered instantiation compiles for sm_80 and sm_90 (one NVRTC program per family and
arch) without a stack frame (kernel parameters stay in parameter space, nothing spills)."""

from __future__ import annotations

import re

import pytest
from reference import nvrtc_builds

from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.kernels.registry import INCLUDE_DIR, family, global_names

FAMILIES = ("gather", "scatter", "slicing")


def program(name: str, arch: int) -> nvrtc_builds.Build:
    """Every instantiation of ``name`` in one program, with ptxas' resource report."""
    options = options_for(arch) + (f"-I{INCLUDE_DIR}", "--ptxas-options=-v")
    return nvrtc_builds.nvrtc_build(name, family(name).all_expressions(), options, arch=arch)


@pytest.mark.parametrize("name", FAMILIES)
def test_registry_matches_source(name):
    fam = family(name)
    assert {e.name for e in fam.entries} == global_names(fam.read_source())
    exprs = fam.all_expressions()
    assert len(exprs) == len(set(exprs))


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_instantiation_compiles(name, arch):
    fam = family(name)
    exprs = tuple(fam.all_expressions())
    prog = nvrtc_builds.get(program(name, arch))
    assert set(prog.lowered) == set(exprs)
    assert prog.image
    frames = re.findall(r"(\d+) bytes stack frame", prog.log)
    assert len(frames) == len(exprs)
    symbols = {v: k for k, v in prog.lowered.items()}
    heavy = [symbols.get(m, m) for m, f in zip(
        re.findall(r"Compiling entry function '(\w+)'", prog.log), frames) if f != "0"]
    assert heavy == [], f"kernels with a stack frame on sm_{arch}: {heavy}"
