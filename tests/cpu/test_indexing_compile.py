"""The gather, scatter and slicing kernel families: the registry matches ptx/, and every
registered instantiation compiles for sm_80 and sm_90 (one NVRTC program per family and
arch) without a stack frame (kernel parameters stay in parameter space, nothing spills)."""

from __future__ import annotations

import re

import pytest

from tenferro_cuda import _nvrtc
from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.kernels.registry import INCLUDE_DIR, family, global_names

FAMILIES = ("gather", "scatter", "slicing")


@pytest.mark.parametrize("name", FAMILIES)
def test_registry_matches_source(name):
    fam = family(name)
    assert {e.name for e in fam.entries} == global_names(fam.read_source())
    exprs = fam.all_expressions()
    assert len(exprs) == len(set(exprs))


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_instantiation_compiles(name, arch):
    fam = family(name)
    exprs = tuple(fam.all_expressions())
    options = options_for(arch) + (f"-I{INCLUDE_DIR}", "--ptxas-options=-v")
    prog = _nvrtc.compile_program(fam.read_source(), fam.source, options, exprs,
                                  op=f"compile:{name}")
    assert set(prog.lowered) == set(exprs)
    assert prog.image
    frames = re.findall(r"(\d+) bytes stack frame", prog.log)
    assert len(frames) == len(exprs)
    symbols = {v: k for k, v in prog.lowered.items()}
    heavy = [symbols.get(m, m) for m, f in zip(
        re.findall(r"Compiling entry function '(\w+)'", prog.log), frames) if f != "0"]
    assert heavy == [], f"kernels with a stack frame on sm_{arch}: {heavy}"
