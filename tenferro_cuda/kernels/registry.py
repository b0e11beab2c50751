"""The kernel registry: which ``ptx/`` file and template entry serve each op, and which
instantiations exist.

Each kernel family (one ``.cu`` file in ``ptx/``) is declared by one module in
``tenferro_cuda/kernels/families/`` that defines ``FAMILY``; the module is named after the
family, so that ``family(name)`` imports that one module only (the first kernel of a
process pays for its own family, not for all of them). An instantiation is named by an
NVRTC name expression ``tf::<entry><<template args>>``; the C++ is never generated here.
``tests/cpu/test_registry.py`` keeps the family modules, their names and ``ptx/`` in
step; the compile tests compile every instantiation for sm_80 and sm_90.
"""

from __future__ import annotations

import os
import pkgutil
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

from ..dtypes import ALL_DTYPES, DType

PTX_DIR = Path(__file__).resolve().parent.parent.parent / "ptx"
if not (PTX_DIR / "include" / "tenferro" / "types.cuh").is_file():  # installed wheel
    PTX_DIR = Path(__file__).resolve().parent.parent / "ptx"
INCLUDE_DIR = PTX_DIR / "include"
_SOURCES: dict[str, str] = {}  # path -> text (Family.read_source)


@dataclass(frozen=True)
class Entry:
    """A ``__global__`` template in a family's source and its instantiations."""

    name: str
    instances: Callable[[], Iterable[tuple[str, ...]]]

    def expression(self, *targs: str) -> str:
        return f"tf::{self.name}<{', '.join(targs)}>" if targs else f"tf::{self.name}"


@dataclass(frozen=True)
class Family:
    name: str
    source: str  # file name under ptx/
    entries: tuple[Entry, ...]
    _by_name: dict[str, Entry] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({e.name: e for e in self.entries})

    def entry(self, name: str) -> Entry:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"kernel family {self.name!r} has no entry {name!r}") from None

    def source_path(self) -> Path:
        return PTX_DIR / self.source

    def read_source(self) -> str:
        """The family's CUDA source, read once per process (as ``ptx/include`` is digested
        once: the sources of a running installation do not change under it). Every
        kernel's cache key includes it, so the first kernel of a family would otherwise
        read it; the warm-up reads them all (``kernels/warmup.py``)."""
        path = os.path.join(PTX_DIR, self.source)
        text = _SOURCES.get(path)
        if text is None:
            text = _SOURCES.setdefault(path, Path(path).read_text())
        return text

    def all_expressions(self) -> list[str]:
        return [e.expression(*t) for e in self.entries for t in e.instances()]


def ctypes_of(dtypes: Iterable[DType]) -> list[tuple[str]]:
    """Single-parameter instantiations, one per dtype."""
    return [(d.ctype,) for d in dtypes]


ALL_CTYPES = [(d.ctype,) for d in ALL_DTYPES]

_PACKAGE = __name__.rpartition(".")[0] + ".families"
_FAMILIES: dict[str, Family] = {}


def family_names() -> tuple[str, ...]:
    """The name of every registered family, sorted: the modules of ``kernels/families/``
    (listed, not imported)."""
    from . import families as pkg

    return tuple(sorted(i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.ispkg))


def families() -> dict[str, Family]:
    """Every registered family, in name order (imports each family module once)."""
    return {name: family(name) for name in family_names()}


def family(name: str) -> Family:
    """The family ``name``, from the module ``kernels/families/<name>.py``: that module,
    and no other family's, is imported on first use."""
    fam = _FAMILIES.get(name)
    if fam is not None:
        return fam
    if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")):
        raise KeyError(f"no kernel family {name!r}")
    module = f"{_PACKAGE}.{name}"
    try:
        fam = import_module(module).FAMILY
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # the family module exists and lacks one of its own imports
        raise KeyError(f"no kernel family {name!r}") from None
    if fam.name != name:
        raise KeyError(f"kernels/families/{name}.py declares family {fam.name!r}, not {name!r}")
    _FAMILIES[name] = fam
    return fam


_GLOBAL_RE = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(")


def global_names(source: str) -> set[str]:
    """Names of the ``__global__`` functions defined in ``source``."""
    return set(_GLOBAL_RE.findall(source))
