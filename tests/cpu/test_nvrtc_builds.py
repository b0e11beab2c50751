"""The compile tests' build service (tests/reference/nvrtc_builds.py): a prefetched build
is the program the test's own process would compile, each build is compiled once, and a
worker that died falls back to compiling in the test's process."""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest
from reference import nvrtc_builds

from tenferro_cuda.errors import CompileError
from tenferro_cuda.kernels.compiler import options_for
from tenferro_cuda.kernels.registry import INCLUDE_DIR, family

EXPRS = tuple(family("structural").all_expressions()[:2])


def _prefetched() -> nvrtc_builds.Build:
    return nvrtc_builds.family_build("structural", EXPRS, 80)


@nvrtc_builds.ahead(_prefetched)  # started at collection, in test order, not behind the rest
def test_a_prefetched_build_is_the_program_compiled_here():
    build = _prefetched()
    assert nvrtc_builds.prefetch([build, build]) in (0, 1)  # once, if not done already
    prog = nvrtc_builds.get(build)
    here = nvrtc_builds.compile_build(build)
    assert prog.lowered == here.lowered and set(prog.lowered) == set(EXPRS)
    assert prog.image == here.image and prog.image[:4] == b"\x7fELF"  # NVRTC is deterministic
    assert nvrtc_builds.get(build) is prog  # compiled once
    assert nvrtc_builds.prefetch([build]) == 0


def test_source_and_family_builds_compile_what_they_name():
    src = 'extern "C" __global__ void probe(float* p) { p[0] = 1.0f; }\n'
    prog = nvrtc_builds.get(nvrtc_builds.source_build("probe.cu", src, (),
                                                      options_for(90), ptx=True, arch=90))
    assert b".entry probe" in prog.image
    options = options_for(90) + (f"-I{INCLUDE_DIR}",)
    prog = nvrtc_builds.get(nvrtc_builds.nvrtc_build("structural", EXPRS[:1], options,
                                                     ptx=True, arch=90))
    assert b".target sm_90" in prog.image and set(prog.lowered) == set(EXPRS[:1])
    bad = nvrtc_builds.source_build("bad.cu", "this is not C++", (), options_for(90))
    with pytest.raises(CompileError, match="bad.cu"):
        nvrtc_builds.get(bad)


def test_a_dead_worker_means_a_compile_here(monkeypatch):
    build = nvrtc_builds.family_build("structural", EXPRS[1:], 90)
    dead: Future = Future()
    dead.set_exception(BrokenProcessPool("a worker was killed"))
    monkeypatch.setitem(nvrtc_builds._futures, build, dead)
    monkeypatch.delitem(nvrtc_builds._done, build, raising=False)
    prog = nvrtc_builds.get(build)
    assert set(prog.lowered) == set(EXPRS[1:])
