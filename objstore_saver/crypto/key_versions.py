"""Shredding that holds on a key store that keeps versions (docs/encryption.md, "Shredding").

Data versions go first, then the delete markers: a marker removed before the
version under it would make that version current again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from objstore_saver.crypto.names import KEY_PREFIX, scope_of_key_object
from objstore_saver.storage.requests import Delete, Get, ListKeys
from objstore_saver.storage.versions import (
    NO_RETENTION,
    ObjectVersion,
    RefusedVersion,
    Retention,
    destruction_order,
    markers_to_delete,
    pages_of,
    versioned_layer,
)
from objstore_saver.telemetry import Counters

logger = logging.getLogger("objstore_saver.encryption")

#: Refused versions a process remembers (then it forgets them all and asks again).
_REFUSALS_KEPT = 10_000


class KeyVersions:
    """Deletes the versions of destroyed key objects in the key store, when it keeps them."""

    def __init__(self, key_store: object, counters: Counters) -> None:
        self._layer = versioned_layer(key_store)
        self._location = getattr(key_store, "location", "the key store")
        self._counters = counters
        self._retention: Retention | None = None
        self._lock = threading.Lock()
        #: Versions the bucket refused in this process: a delete's second shred
        #: does not ask again (Object Lock's retention lasts days, not seconds).
        self._refused: set[tuple[str, str]] = set()

    def retention(self) -> Retention:
        """The key store's versioning and Object Lock state, read once per process."""
        with self._lock:
            if self._retention is not None:
                return self._retention
            if self._layer is None:
                self._retention = NO_RETENTION
                return NO_RETENTION
            retention = self._layer.retention()
            asked = [Get("?versioning")] + ([Get("?object-lock")] if retention.versioning else [])
            self._counters.record(asked, [b""] * len(asked))
            self._retention = retention
        if retention.keeps_versions:
            lock = (
                "; Object Lock is on: a key version under retention cannot be deleted until "
                "its retention ends, and its thread stays readable from it and from backups "
                "until then (objstore-saver verify counts such versions)"
                if retention.object_lock
                else ""
            )
            logger.warning(
                "the key objects in %s are kept in versions (%s): shredding a thread "
                "deletes every version of its key objects, at one ListObjectVersions and "
                "up to two DeleteObjects a delete%s",
                self._location,
                retention.describe(),
                lock,
            )
        return retention

    def destroy(
        self, prefix: str, doomed: Callable[[str], bool], owner: str
    ) -> list[RefusedVersion]:
        """Delete every version of the key objects under ``prefix`` whose scope is ``doomed``;
        the versions the bucket refused (each logged, naming ``owner``)."""
        if not self.retention().keeps_versions:
            return []
        assert self._layer is not None
        found = self._layer.versions(prefix)
        self._count_listing(prefix, found)
        condemned = [v for v in found if (s := scope_of_key_object(v.key)) and doomed(s)]
        with self._lock:
            known = {v for v in condemned if (v.key, v.version_id) in self._refused}
        refused = self._destroy(condemned, known)
        with self._lock:
            if len(self._refused) > _REFUSALS_KEPT:
                self._refused.clear()
            self._refused.update((r.version.key, r.version.version_id) for r in refused)
        for r in refused:
            logger.warning(
                "%s: the bucket refused to delete version %s of key object %r in %s (%s: %s); "
                "that version still opens the data it sealed",
                owner,
                r.version.version_id,
                r.version.key,
                self._location,
                r.code,
                r.message,
            )
        return refused

    def sweep_retained(self, apply: bool) -> dict[str, object]:
        """Find (and with ``apply`` delete) the versions left of destroyed key objects
        (latest version a delete marker); the report's fields."""
        retention = self.retention()
        report: dict[str, object] = {"key_store": retention.describe()}
        if not retention.keeps_versions:
            return report
        assert self._layer is not None
        found = self._layer.versions(KEY_PREFIX)
        self._count_listing(KEY_PREFIX, found)
        destroyed = {v.key for v in found if v.latest and v.delete_marker}
        left = [v for v in found if v.key in destroyed]
        report["retained_key_versions"] = sum(not v.delete_marker for v in left)
        if apply and left:
            refused = self._destroy(left)
            report["key_versions_deleted"] = report["retained_key_versions"] - len(refused)
            report["key_versions_refused"] = len(refused)
        return report

    def _count_listing(self, prefix: str, found: list[ObjectVersion]) -> None:
        pages = pages_of(len(found))
        self._counters.record([ListKeys(prefix)] * pages, [None] * pages)

    def _destroy(
        self, versions: list[ObjectVersion], refused_before: Collection[ObjectVersion] = ()
    ) -> list[RefusedVersion]:
        """Delete the data versions (but those refused before), then the markers of the
        keys that lost all of theirs; the versions refused now."""
        data, markers = destruction_order(versions)
        refused = self._delete([v for v in data if v not in refused_before])
        held = refused + [RefusedVersion(v, "", "") for v in refused_before]
        self._delete(markers_to_delete(markers, held))
        return refused

    def _delete(self, versions: list[ObjectVersion]) -> list[RefusedVersion]:
        if not versions:
            return []
        assert self._layer is not None
        refused = self._layer.delete_versions(versions)
        self._counters.record([Delete(tuple(v.key for v in versions))], [None])
        return refused
