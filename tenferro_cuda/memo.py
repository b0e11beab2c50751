"""``BoundedCache``: the one memo utility of the package.

Every memo (prepared launches, plans, validated calls, strides, extension resources) is a
``BoundedCache``: a dict whose lookups are plain ``dict.get`` (C speed on the hot paths)
and whose insertions go through ``put``, which evicts the oldest entries once ``limit``
is reached. Entries are values derived from their key, so an eviction only costs a
recomputation. Memos shared between threads rely on the GIL for the single-step dict
operations; ``put`` may evict an entry another thread inserted, which is harmless for the
same reason.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["BoundedCache"]

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict, Generic[K, V]):  # type: ignore[type-arg]
    """A dict of at most ``limit`` entries; insert with ``put`` (oldest evicted first)."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1 (got {limit})")
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Store ``value`` under ``key`` (evicting the oldest entries when full); return it."""
        if key not in self:
            while len(self) >= self.limit:
                try:
                    del self[next(iter(self))]
                except (StopIteration, KeyError, RuntimeError):  # another thread raced us
                    break
        self[key] = value
        return value

    def setdefault_with(self, key: K, make: Any) -> V:
        """The entry for ``key``, made with ``make()`` and stored when missing."""
        value = self.get(key)
        if value is None:
            value = self.put(key, make())
        return value

    def __repr__(self) -> str:
        return f"BoundedCache({len(self)}/{self.limit})"
