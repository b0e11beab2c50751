"""Build hook: ship the top-level ``ptx/`` directory inside the wheel as
``tenferro_cuda/ptx/``.

All metadata lives in pyproject.toml. The kernel sources stay at the repository root
(``<repo>/ptx``), which is where an editable install or a source checkout finds them;
``tenferro_cuda.kernels.registry`` falls back to ``tenferro_cuda/ptx`` in an installed
wheel. Editable builds therefore skip the copy.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PTX_SRC = ROOT / "ptx"


def _shipped(rel: Path) -> bool:
    """Everything under ptx/ except hidden files and bytecode caches."""
    return not any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


class build_py_with_ptx(build_py):
    """``build_py`` that also copies ``ptx/`` into ``<build_lib>/tenferro_cuda/ptx``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # editable installs read <repo>/ptx directly
        if not PTX_SRC.is_dir():
            raise FileNotFoundError(f"kernel sources not found: {PTX_SRC}")
        dest = Path(self.build_lib) / "tenferro_cuda" / "ptx"
        if dest.exists():
            shutil.rmtree(dest)
        for src in sorted(PTX_SRC.rglob("*")):
            rel = src.relative_to(PTX_SRC)
            if src.is_file() and _shipped(rel):
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)


setup(cmdclass={"build_py": build_py_with_ptx})
