"""The op families, combined into the session's method set.

Each family is a mixin class in its own module; ``SessionOps`` lists them all (the session
class derives from it). Storage helpers live in ``TransferOps``, entry/residency/launch
plumbing in ``OpsBase``.
"""

from __future__ import annotations

from ._base import OpsBase
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
from .transfer import TransferOps


class SessionOps(ElementwiseOps, AnalyticOps, CastOps, StructuralOps, ReductionOps, Blas1Ops,
                 IndexingOps, DotOps, FusionOps, InteropOps, TransferOps, OpsBase):
    """Every op family's methods."""
