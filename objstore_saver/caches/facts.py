"""Bounded, thread-safe in-process memories of immutable facts (spec §6).

Invariant: every fact about a stored object carries the time (``clock``) it was
last confirmed, and a writer trusts it only within the reuse window (spec §6.9):
another process's prune may remove an object no manifest references.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from objstore_saver.caches.message_keys import StateKey
from objstore_saver.format.bounded_fifo import BoundedFifo
from objstore_saver.format.codec import Entry, Manifest, StoredObject, object_size
from objstore_saver.format.list_encoding import (
    ElementKey,
    EncodedElement,
    SealedKey,
    SealedObject,
)

_KNOWN_ONLY_COST = 120

K = TypeVar("K")
V = TypeVar("V")


class ObjectCache:
    """Objects known to exist per thread, with decoded bodies when cheap to keep."""

    def __init__(
        self, max_bytes: int = 64 * 1024 * 1024, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_bytes = max_bytes
        self.clock = clock
        self._items: OrderedDict[tuple[str, bytes], StoredObject | None] = OrderedDict()
        self._cost: dict[tuple[str, bytes], int] = {}
        self._seen: dict[tuple[str, bytes], float] = {}
        # Objects held only embedded in a manifest: their bodies serve reads,
        # but ``objects/<H>`` is not known to exist (spec §4.4).
        self._embedded: set[tuple[str, bytes]] = set()
        self._bytes = 0
        self._lock = threading.Lock()

    def _set(self, key: tuple[str, bytes], obj: StoredObject | None) -> None:
        self._embedded.discard(key)
        self._seen[key] = self.clock()
        cost = _KNOWN_ONLY_COST if obj is None else object_size(obj)
        if cost > self.max_bytes // 4:
            obj, cost = None, _KNOWN_ONLY_COST
        old = self._cost.get(key)
        if old is not None:
            if obj is None and self._items[key] is not None:
                self._items.move_to_end(key)
                return
            self._bytes -= old
        self._items[key] = obj
        self._items.move_to_end(key)
        self._cost[key] = cost
        self._bytes += cost
        while self._bytes > self.max_bytes and self._items:
            self._drop(next(iter(self._items)))

    def _drop(self, key: tuple[str, bytes]) -> None:
        del self._items[key]
        self._bytes -= self._cost.pop(key)
        self._seen.pop(key, None)
        self._embedded.discard(key)

    def add_known(self, thread_pfx: str, digests: Iterable[bytes]) -> None:
        """Record objects as stored without keeping their bodies."""
        with self._lock:
            for d in digests:
                self._set((thread_pfx, d), None)

    def add(self, thread_pfx: str, digest: bytes, obj: StoredObject) -> None:
        """Record a stored object with its decoded body."""
        with self._lock:
            self._set((thread_pfx, digest), obj)

    def add_embedded(self, thread_pfx: str, digest: bytes, obj: StoredObject) -> None:
        """Remember an object embedded in a manifest: not known stored alone, unless it was."""
        with self._lock:
            key = (thread_pfx, digest)
            if key in self._items and key not in self._embedded:
                if self._items[key] is None:
                    seen = self._seen[key]  # when it was last known stored alone
                    self._set(key, obj)
                    self._seen[key] = seen
                return
            self._set(key, obj)
            self._embedded.add(key)

    def known(self, thread_pfx: str, digest: bytes, max_age: float | None = None) -> bool:
        """Whether the object is known to be stored, confirmed within ``max_age`` seconds."""
        with self._lock:
            key = (thread_pfx, digest)
            if key not in self._items or key in self._embedded:
                return False
            if max_age is not None and self.clock() - self._seen[key] > max_age:
                return False
            self._items.move_to_end(key)
            return True

    def confirm(self, thread_pfx: str, digests: Iterable[bytes], at: float) -> None:
        """Record that remembered objects were known to be stored at time ``at``."""
        with self._lock:
            for d in digests:
                key = (thread_pfx, d)
                if key in self._items and self._seen[key] < at:
                    self._seen[key] = at

    def get(self, thread_pfx: str, digest: bytes) -> StoredObject | None:
        """The decoded object, or None when unknown or known without its body."""
        with self._lock:
            key = (thread_pfx, digest)
            obj = self._items.get(key)
            if obj is not None:
                self._items.move_to_end(key)
            return obj

    def forget_thread(self, thread_pfx: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == thread_pfx]:
                self._drop(key)

    def forget(self, thread_pfx: str, digests: Iterable[bytes]) -> None:
        with self._lock:
            for d in digests:
                key = (thread_pfx, d)
                if key in self._items:
                    self._drop(key)


@dataclass(frozen=True, slots=True)
class CheckpointEntries:
    """What one checkpoint stores per channel: its version and entry; and its epoch (§4.11)."""

    versions: dict[str, str | int | float]
    entries: dict[str, Entry]
    epoch: int
    manifest: Manifest | None = None
    """The manifest, decoded, when this process wrote it (small manifests only)."""


def _touched(items: OrderedDict[Any, Any], key: Any, max_items: int) -> None:
    """Make ``key`` the most recent entry; drop the least recent past ``max_items``."""
    items.move_to_end(key)
    while len(items) > max_items:
        items.popitem(last=False)


class EntryCache:
    """Channel entries of recent checkpoints, keyed by manifest key."""

    def __init__(
        self, max_items: int = 4096, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_items = max_items
        self.clock = clock
        self._items: OrderedDict[str, tuple[CheckpointEntries, float]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, manifest_key: str, value: CheckpointEntries) -> None:
        """Remember a checkpoint's entries, confirmed now (its manifest was read or written)."""
        with self._lock:
            self._items[manifest_key] = (value, self.clock())
            _touched(self._items, manifest_key, self.max_items)

    def get(self, manifest_key: str, max_age: float | None = None) -> CheckpointEntries | None:
        """The entries, if remembered and confirmed within ``max_age`` seconds."""
        with self._lock:
            item = self._items.get(manifest_key)
            if item is None:
                return None
            value, seen = item
            if max_age is not None and self.clock() - seen > max_age:
                return None
            self._items.move_to_end(manifest_key)
            return value

    def forget(self, keys: Iterable[str]) -> None:
        with self._lock:
            for k in keys:
                self._items.pop(k, None)

    def forget_prefix(self, prefix: str) -> None:
        with self._lock:
            for k in [k for k in self._items if k.startswith(prefix)]:
                del self._items[k]


class HeadCache:
    """The newest checkpoint id this process knows per (thread, namespace): a guess.

    A latest lookup checks it with its LIST (spec §6.2); a stale guess costs CPU only.
    """

    def __init__(self, max_items: int = 4096) -> None:
        self.max_items = max_items
        self._items: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: str, checkpoint_ns: str) -> str | None:
        return self._items.get((thread_id, checkpoint_ns))

    def saw(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> None:
        """Record a checkpoint seen newest or written (the greater id is kept)."""
        key = (thread_id, checkpoint_ns)
        with self._lock:
            self._items[key] = max(checkpoint_id, self._items.get(key, checkpoint_id))
            _touched(self._items, key, self.max_items)

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == thread_id]:
                del self._items[key]


class EpochCache:
    """The epochs this process has seen (spec §4.11): per thread, and per checkpoint.

    A thread's epoch only grows, so the greatest seen is kept, with when a
    listing last confirmed it; a checkpoint's never changes, so it never ages.
    """

    def __init__(
        self, max_items: int = 65536, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_items = max_items
        self.clock = clock
        self._threads: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._checkpoints: OrderedDict[tuple[str, str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def of_thread(self, thread_id: str, max_age: float | None = None) -> int | None:
        """The thread's epoch, if known and confirmed within ``max_age`` seconds."""
        with self._lock:
            item = self._threads.get(thread_id)
        if item is None or (max_age is not None and self.clock() - item[1] > max_age):
            return None
        return item[0]

    def saw_thread(self, thread_id: str, epoch: int, *, confirmed: bool = True) -> bool:
        """Record the thread's epoch; True if it is newer than known.

        ``confirmed``: a listing showed the newest tombstone, so it is current;
        otherwise (a manifest's epoch) it only raises the floor.
        """
        with self._lock:
            known = self._threads.get(thread_id, (epoch, -float("inf")))
            seen = self.clock() if confirmed else known[1]
            self._threads[thread_id] = (max(epoch, known[0]), seen)
            _touched(self._threads, thread_id, self.max_items)
            return epoch > known[0]

    def of_checkpoint(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> int | None:
        with self._lock:
            return self._checkpoints.get((thread_id, checkpoint_ns, checkpoint_id))

    def saw_checkpoint(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, epoch: int
    ) -> None:
        key = (thread_id, checkpoint_ns, checkpoint_id)
        with self._lock:
            self._checkpoints[key] = epoch
            _touched(self._checkpoints, key, self.max_items)


class BoundedSet:
    """A thread-safe set of strings that forgets its oldest members past a bound."""

    def __init__(self, max_items: int = 8192) -> None:
        self.max_items = max_items
        self._items: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, item: str) -> None:
        with self._lock:
            self._items[item] = None
            _touched(self._items, item, self.max_items)

    def __contains__(self, item: object) -> bool:
        with self._lock:
            return item in self._items

    def discard_where(self, predicate: Callable[[str], bool]) -> None:
        with self._lock:
            for item in [i for i in self._items if predicate(i)]:
                del self._items[item]


class _PureCache(Generic[K, V]):
    """A pure function cache, bounded by :meth:`_cost` bytes: no value goes stale, so FIFO."""

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._fifo: BoundedFifo[K, V] = BoundedFifo(max_bytes)

    @property
    def held_bytes(self) -> int:
        """The estimated bytes the remembered entries hold."""
        return self._fifo.held_bytes

    def get(self, key: K) -> V | None:
        return self._fifo.get(key)

    def put(self, key: K, value: V) -> None:
        self._fifo.put(key, value, self._cost(key, value))

    def _cost(self, key: K, value: V) -> int:
        raise NotImplementedError


class ElementCache(_PureCache[ElementKey, EncodedElement]):
    """Encoded list elements by (type, serialized bytes)."""

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        super().__init__(max_bytes)
        self.sealed = SealedCache(max_bytes)
        """Segments of the lists encoded, with a budget of its own."""
        self.serialized = SerializedCache(max_bytes)
        """Serialized messages by state key, with a budget of its own."""

    def _cost(self, key: ElementKey, value: EncodedElement) -> int:
        return len(key[1]) + sum(len(b) for b in value.objects.values()) + 200


class SealedCache(_PureCache[SealedKey, SealedObject]):
    """List segments by what they hold (:data:`~objstore_saver.format.list_encoding.SealedKey`)."""

    def _cost(self, key: SealedKey, value: SealedObject) -> int:
        # The key holds the elements' serialized bytes (type, bytes): they count too.
        held = sum(len(k[1]) for k in key if isinstance(k, tuple) and len(k) == 2)
        held += len(value.body) + sum(len(b) for b in value.element_objects.values())
        return held + 64 * len(key) + 200


class SerializedCache(_PureCache[StateKey, tuple[str, bytes]]):
    """Serialized messages (serializer type, bytes) by state key (default serializer only)."""

    def _cost(self, key: StateKey, value: tuple[str, bytes]) -> int:
        return len(key[1]) + len(value[1]) + 150
