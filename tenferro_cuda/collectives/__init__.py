"""Collectives over sessions of several devices, through NCCL (docs/multi-gpu.md).

``Communicator`` (``communicator.py``) is the public object; ``calls.py`` holds each
collective, ``ranks.py`` what every call checks and how it is issued, ``wire.py`` how a
dtype travels. NCCL is reached only through ``tenferro_cuda._nccl`` (nccl4py, loaded on
first use).
"""

from __future__ import annotations

from .communicator import Communicator, unique_id

__all__ = ["Communicator", "unique_id"]
