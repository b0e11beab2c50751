"""Debug switches.

``forbid_host_sync()`` (a context manager) and the environment variable
``TENFERRO_CUDA_FORBID_HOST_SYNC=1`` (the whole process, read by ``_driver`` at import)
make every host-blocking CUDA call
raise ``RuntimeStateError`` unless it is one of the explicit barriers
(``synchronize()``, ``download_to_host``, ``release_cached_memory``). Under it, a passing
op has proved that it only enqueues work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import _driver

__all__ = ["forbid_host_sync", "allow_host_sync"]


@contextlib.contextmanager
def forbid_host_sync() -> Iterator[None]:
    """Within this block (on this thread), an op that blocks the host raises."""
    policy = _driver.sync_policy
    policy.forbid = getattr(policy, "forbid", 0) + 1
    try:
        yield
    finally:
        policy.forbid -= 1


@contextlib.contextmanager
def allow_host_sync() -> Iterator[None]:
    """Mark an explicit barrier (used by the session's barrier methods)."""
    policy = _driver.sync_policy
    policy.allow = getattr(policy, "allow", 0) + 1
    try:
        yield
    finally:
        policy.allow -= 1
