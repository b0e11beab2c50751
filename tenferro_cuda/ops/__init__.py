"""The op families, combined into the session's method set.

Each family is a mixin class in its own module; ``SessionOps`` lists them all. A family
module that is not present yet is simply not part of the set.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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


if TYPE_CHECKING:  # the same bases, spelled out for the type checker
    from .analytic import AnalyticOps
    from .blas1 import Blas1Ops
    from .cast import CastOps
    from .dot import DotOps
    from .elementwise import ElementwiseOps
    from .fusion import FusionOps
    from .indexing import IndexingOps
    from .interop import InteropOps
    from .reduction import ReductionOps
    from .structural import StructuralOps

    class SessionOps(ElementwiseOps, AnalyticOps, CastOps, StructuralOps, ReductionOps,
                     Blas1Ops, IndexingOps, DotOps, FusionOps, InteropOps, TransferOps,
                     OpsBase):
        pass
else:
    SessionOps = type("SessionOps", (*_mixins(), TransferOps, OpsBase), {})
