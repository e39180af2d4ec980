"""A wrapper counting the requests and bytes a store is asked for, as an S3 bill would:
one request per ``put``, ``get`` and ``list`` and one per 1,000 keys of a ``delete``."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from objstore_saver.storage.base import MAX_DELETE_BATCH, ObjectExistsError, ObjectStore
from objstore_saver.storage.layer import Answer, Layer
from objstore_saver.storage.requests import Delete, Get, ListKeys, Put, StorageRequest
from objstore_saver.storage.versions import (
    NO_RETENTION,
    ObjectVersion,
    RefusedVersion,
    Retention,
    pages_of,
    versioned_layer,
)

_OPS = ("put", "get", "list", "delete")


@dataclass(frozen=True, slots=True)
class Meter:
    """Counters of a :class:`MeteredStore` at one moment."""

    put_requests: int = 0
    get_requests: int = 0
    list_requests: int = 0
    delete_requests: int = 0
    bytes_sent: int = 0
    """Bytes of ``put`` bodies."""
    bytes_received: int = 0
    """Bytes of ``get`` results."""
    objects_put: int = 0
    """Successful puts."""
    largest_request_body: int = 0
    largest_response_body: int = 0
    create_conflicts: int = 0
    """Create-only puts that found the key taken."""

    @property
    def requests(self) -> dict[str, int]:
        """Requests by operation: ``put``, ``get``, ``list``, ``delete``."""
        return {op: getattr(self, f"{op}_requests") for op in _OPS}

    @property
    def total_requests(self) -> int:
        """Requests of every operation."""
        return self.put_requests + self.get_requests + self.list_requests + self.delete_requests


class LogEntry(NamedTuple):
    """One recorded call: for ``list`` the key is the prefix, for ``delete`` one entry per key."""

    op: str
    key: str
    nbytes: int


class MeteredStore(Layer):
    """An :class:`~objstore_saver.storage.base.ObjectStore` that meters another one.

    Thread-safe. Failed calls count as requests too; bytes received count only
    returned data. ``log=True`` also records every call in :attr:`log`, for tests.
    """

    def __init__(self, inner: ObjectStore, *, log: bool = False) -> None:
        super().__init__(inner)
        self._logging = log
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self.log: list[LogEntry] = []
        """Recorded calls, oldest first (empty unless ``log=True``)."""

    def snapshot(self) -> Meter:
        """Return the counters as they are now."""
        with self._lock:
            return Meter(**self._counts)

    def reset(self) -> None:
        """Zero every counter and clear the log."""
        with self._lock:
            self._counts.clear()
            self.log.clear()

    def _add(self, entries: Sequence[LogEntry], **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                if name.startswith("largest_"):
                    self._counts[name] = max(self._counts.get(name, 0), delta)
                else:
                    self._counts[name] = self._counts.get(name, 0) + delta
            if self._logging:
                self.log.extend(entries)

    @contextlib.contextmanager
    def around(self, request: StorageRequest) -> Iterator[Answer]:
        """Count ``request`` whatever its outcome: one request, its body, what it returned."""
        answer = Answer()
        conflict = False
        try:
            yield answer
        except ObjectExistsError:
            conflict = True
            raise
        finally:
            self._count(request, answer, conflict)

    def _count(self, request: StorageRequest, answer: Answer, conflict: bool = False) -> None:
        match request:
            case Put(key, data):
                n = len(data)
                self._add(
                    [LogEntry("put", key, n)],
                    put_requests=1,
                    bytes_sent=n,
                    largest_request_body=n,
                    objects_put=int(answer.answered),
                    create_conflicts=int(conflict),
                )
            case Get(key):
                n = len(answer.value) if answer.answered else 0
                self._add(
                    [LogEntry("get", key, n)],
                    get_requests=1,
                    bytes_received=n,
                    largest_response_body=n,
                )
            case ListKeys(prefix):
                self._add([LogEntry("list", prefix, 0)], list_requests=1)
            case Delete(keys):
                requests = -(-len(keys) // MAX_DELETE_BATCH)
                self._add([LogEntry("delete", k, 0) for k in keys], delete_requests=requests)

    # Object versions: forwarded and counted where the inner store keeps them.

    def retention(self) -> Retention:
        """The inner store's versioning state: one GET, two when versioning is on."""
        layer = versioned_layer(self._inner)
        if layer is None:
            return NO_RETENTION
        retention = layer.retention()
        self._add([], get_requests=1 + bool(retention.versioning))
        return retention

    def versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version under ``prefix``: a request per page of versions."""
        layer = versioned_layer(self._inner)
        if layer is None:
            return []
        found = layer.versions(prefix)
        self._add([LogEntry("list", prefix, 0)], list_requests=pages_of(len(found)))
        return found

    def delete_versions(self, versions: Sequence[ObjectVersion]) -> list[RefusedVersion]:
        """Delete versions for good: a request per 1,000, as :meth:`delete`."""
        layer = versioned_layer(self._inner)
        if layer is None or not versions:
            return []
        try:
            return layer.delete_versions(versions)
        finally:
            self._count(Delete(tuple(v.key for v in versions)), Answer())
