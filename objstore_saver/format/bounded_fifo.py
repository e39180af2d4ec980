"""A thread-safe map with a byte budget, oldest entries out first.

It holds pure-function caches (encoded elements, list segments, serialized
messages, decompressed payloads): an entry never goes stale, so first in,
first out is enough and a read takes no lock.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedFifo(Generic[K, V]):
    """A map whose entries together cost at most ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: dict[K, tuple[V, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        # A dict read is atomic; eviction order does not need the read.
        hit = self._items.get(key)
        return None if hit is None else hit[0]

    @property
    def held_bytes(self) -> int:
        """The estimated bytes the entries hold."""
        return self._bytes

    def put(self, key: K, value: V, cost: int) -> None:
        """Keep ``value`` unless it alone would take over an eighth of the budget."""
        if cost > self.max_bytes // 8:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, cost)
            self._bytes += cost
            while self._bytes > self.max_bytes:
                oldest = next(iter(self._items))
                self._bytes -= self._items.pop(oldest)[1]
