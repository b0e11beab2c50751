"""Every registered instantiation of ptx/permute.cu and ptx/structural.cu compiles with
NVRTC for sm_80 and sm_90 (one program per family and arch), and the registry table
agrees with the ``__global__`` templates in the sources."""

from __future__ import annotations

import pytest
from reference import nvrtc_builds

from tenferro_cuda.kernels.families import permute
from tenferro_cuda.kernels.registry import family, global_names

FAMILIES = ["permute", "structural"]


def program(name: str, arch: int) -> nvrtc_builds.Build:
    return nvrtc_builds.check_build(name, arch)


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_instantiation_compiles(name, arch):
    fam = family(name)
    exprs = tuple(fam.all_expressions())
    prog = nvrtc_builds.get(program(name, arch))
    assert set(prog.lowered) == set(exprs)
    assert all(prog.lowered[e] for e in exprs)
    assert prog.image


@pytest.mark.parametrize("name", FAMILIES)
def test_registry_matches_source(name):
    fam = family(name)
    assert {e.name for e in fam.entries} == global_names(fam.read_source())


def test_every_element_size_and_index_type_is_instantiated():
    exprs = set(family("permute").all_expressions())
    for size in permute.STORAGE:
        for index in permute.INDEX:
            assert permute.tiled_expression(size, index) in exprs
            for v in permute.ROW_VECTORS[size]:
                assert permute.row_expression(size, v, index) in exprs
