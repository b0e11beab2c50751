"""The indexing family (StableHLO semantics, docs/indexing.md): ``gather``, ``scatter``
(add / replace / max / min), ``slice``, ``dynamic_slice``, ``dynamic_update_slice``,
``pad``, ``concatenate`` and ``reverse``.

Every op validates its arguments (residency, config, shapes, dtypes) before anything is
allocated or launched, returns a new compact tensor, accepts tensors and strided views,
and only enqueues work: start indices are read and clamped on the device.

Modules: ``gather`` (gather, scatter), ``slicing`` (the rest), ``base`` (running a planned
launch, view copies), and the pure planning of ``plan`` (gather/scatter launches),
``plan_copy`` (view copies, pad) and ``partition`` (the three-pass scalar gather).
"""

from __future__ import annotations

from collections.abc import Callable

from .gather import gather, scatter
from .slicing import concatenate, dynamic_slice, dynamic_update_slice, pad, reverse, slice_

__all__ = ["METHODS"]

METHODS: tuple[tuple[str, Callable], ...] = (
    ("gather", gather), ("scatter", scatter), ("slice", slice_), ("reverse", reverse),
    ("concatenate", concatenate), ("dynamic_slice", dynamic_slice),
    ("dynamic_update_slice", dynamic_update_slice), ("pad", pad),
)
