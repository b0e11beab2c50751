"""The op families, combined into the session's method set.

Each family is a mixin class in its own module; ``SessionOps`` lists them all. A family
module that is not present yet is simply not part of the set.
"""

from __future__ import annotations

import importlib

from ._base import OpsBase
from .transfer import TransferOps

_FAMILY_MODULES = (
    ("elementwise", "ElementwiseOps"),
    ("analytic", "AnalyticOps"),
    ("cast", "CastOps"),
    ("structural", "StructuralOps"),
    ("reduction", "ReductionOps"),
    ("blas1", "Blas1Ops"),
    ("indexing", "IndexingOps"),
    ("dot", "DotOps"),
    ("fusion", "FusionOps"),
    ("interop", "InteropOps"),
)


def _mixins() -> tuple[type, ...]:
    found: list[type] = []
    for module, cls in _FAMILY_MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise
            continue
        found.append(getattr(mod, cls))
    return tuple(found)


SessionOps = type("SessionOps", (*_mixins(), TransferOps, OpsBase), {})
