"""The kernel registry, ptx/ and the public API agree with each other and with the docs."""

from __future__ import annotations

import importlib
import inspect
import re
import types
from pathlib import Path

import pytest
from reference import nvrtc_builds

import tenferro_cuda as tc
from tenferro_cuda.kernels import registry
from tenferro_cuda.kernels.registry import PTX_DIR, families, family, family_names, global_names

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = families()
FAMILY_DIR = ROOT / "tenferro_cuda" / "kernels" / "families"


def test_every_family_module_is_named_after_its_family():
    """``family(name)`` imports ``kernels/families/<name>.py`` alone: the names must agree."""
    modules = sorted(p.stem for p in FAMILY_DIR.glob("*.py") if p.stem != "__init__")
    assert list(family_names()) == modules
    assert list(FAMILIES) == modules
    for name in modules:
        mod = importlib.import_module(f"tenferro_cuda.kernels.families.{name}")
        assert mod.FAMILY.name == name
        assert family(name) is mod.FAMILY is FAMILIES[name]


@pytest.mark.parametrize("name", ["nope", "", "_private", "copy.sub", "..", "__init__", 3])
def test_an_unknown_family_is_a_key_error(name):
    with pytest.raises(KeyError, match="no kernel family"):
        family(name)


def test_a_family_module_with_a_missing_import_is_not_hidden(monkeypatch):
    def broken(module):
        raise ModuleNotFoundError("No module named 'scipyx'", name="scipyx")

    monkeypatch.setattr(registry, "_FAMILIES", {})
    monkeypatch.setattr(registry, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="scipyx"):
        family("copy")


def test_a_module_declaring_another_name_is_refused(monkeypatch):
    fake = types.SimpleNamespace(FAMILY=FAMILIES["gather"])
    monkeypatch.setattr(registry, "_FAMILIES", {})
    monkeypatch.setattr(registry, "import_module", lambda module: fake)
    with pytest.raises(KeyError, match="declares family 'gather', not 'copy'"):
        family("copy")


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


def copy_program(arch: int) -> nvrtc_builds.Build:
    return nvrtc_builds.check_build("copy", arch)


@nvrtc_builds.ahead(copy_program)
@pytest.mark.parametrize("arch", [80, 90])
def test_copy_family_compiles(arch):
    prog = nvrtc_builds.get(copy_program(arch))
    assert prog.image.startswith(b"\x7fELF")
    assert set(prog.lowered) == set(FAMILIES["copy"].all_expressions())


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
