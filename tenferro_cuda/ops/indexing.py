"""The indexing family (StableHLO semantics, docs/indexing.md): ``gather``, ``scatter``
(add / replace / max / min), ``slice``, ``dynamic_slice``, ``dynamic_update_slice``,
``pad``, ``concatenate`` and ``reverse``.

Every method validates its arguments (residency, config, shapes, dtypes) before anything is
allocated or launched, returns a new compact tensor, accepts tensors and strided views,
and only enqueues work: start indices are read and clamped on the device.
"""

from __future__ import annotations

from .indexing_gather import GatherScatterOps
from .indexing_slicing import SlicingOps


class IndexingOps(GatherScatterOps, SlicingOps):
    """Session methods of the indexing family."""
