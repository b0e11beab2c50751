"""The kernel registry, ptx/ and the public API agree with each other and with the docs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tenferro_cuda as tc
from tenferro_cuda.kernels.compiler import compile_family
from tenferro_cuda.kernels.registry import PTX_DIR, families, global_names

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = families()


def test_every_source_belongs_to_one_family():
    sources = sorted(p.name for p in PTX_DIR.glob("*.cu"))
    claimed = sorted(f.source for f in FAMILIES.values())
    assert sources == claimed


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_entries_match_the_source(name):
    fam = FAMILIES[name]
    defined = global_names(fam.read_source())
    registered = {e.name for e in fam.entries}
    assert registered == defined, f"{fam.source}: registry {registered} vs source {defined}"
    for entry in fam.entries:
        assert list(entry.instances()), f"{name}.{entry.name} has no instantiation"


@pytest.mark.parametrize("arch", [80, 90])
def test_copy_family_compiles(arch, tmp_path):
    from tenferro_cuda.kernels.cache import KernelCache

    fam = FAMILIES["copy"]
    prog = compile_family("copy", tuple(fam.all_expressions()), arch,
                          cache=KernelCache(tmp_path))
    assert prog.image.startswith(b"\x7fELF")
    assert set(prog.lowered) == set(fam.all_expressions())


def _public_methods() -> set[str]:
    from tenferro_cuda.session import CudaExecSession

    return {n for n, v in inspect.getmembers(CudaExecSession) if not n.startswith("_")
            and callable(v)}


def test_every_public_method_is_documented():
    text = (ROOT / "docs" / "api.md").read_text()
    documented = set(re.findall(r"`(\w+)\(", text))
    missing = sorted(_public_methods() - documented)
    assert not missing, f"docs/api.md does not mention: {missing}"


def test_exports_resolve():
    for name in tc.__all__:
        assert getattr(tc, name) is not None, name
