"""ptx/dot_int.cu on the CPU: the registry entry matches the source, every instantiation
compiles for sm_80 and sm_90 (one NVRTC program per arch), and the argument codes the op
packs match the kernel's parameter list."""

from __future__ import annotations

import re

import pytest
from reference import nvrtc_builds

from tenferro_cuda.kernels.registry import family, global_names
from tenferro_cuda.ops.dot.run import INT_CODES

FAM = family("dot_int")


def test_registry_matches_source():
    assert {e.name for e in FAM.entries} == global_names(FAM.read_source()) == {"dot_int"}
    assert FAM.all_expressions() == [
        "tf::dot_int<signed char>", "tf::dot_int<unsigned char>", "tf::dot_int<short>",
        "tf::dot_int<unsigned short>", "tf::dot_int<int>", "tf::dot_int<unsigned int>",
        "tf::dot_int<long long>", "tf::dot_int<unsigned long long>"]


def program(arch: int) -> nvrtc_builds.Build:
    return nvrtc_builds.check_build("dot_int", arch)


@nvrtc_builds.ahead(program)
@pytest.mark.parametrize("arch", [80, 90], ids=["sm_80", "sm_90"])
def test_every_instantiation_compiles(arch):
    exprs = tuple(FAM.all_expressions())
    prog = nvrtc_builds.get(program(arch))
    assert set(prog.lowered) == set(exprs)
    assert all(prog.lowered[e] for e in exprs)
    assert prog.image


def _param_codes(source: str) -> str:
    sig = re.search(r"dot_int\((.*?)\)\s*\{", source, re.S).group(1)
    codes = []
    for param in (p.strip() for p in sig.split(",")):
        if "*" in param:
            codes.append("P")
        elif param.startswith("i64 "):
            codes.append("q")
        elif param.startswith("typename dot_acc<T>::type"):
            codes.append("A")
        elif param.startswith("int "):
            codes.append("i")
        else:
            raise AssertionError(f"unexpected parameter {param!r}")
    return "".join(codes)


@pytest.mark.parametrize("wide", [False, True], ids=["u32_acc", "u64_acc"])
def test_pack_codes_match_kernel_parameters(wide):
    want = _param_codes(FAM.read_source()).replace("A", "Q" if wide else "I")
    assert INT_CODES[wide] == want
