"""Object versions of a bucket that keeps them (S3 versioning, Object Lock), which
shredding deletes (docs/encryption.md, "Shredding"); a local directory keeps none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from objstore_saver.storage.base import MAX_LIST_PAGE, ObjectStore, StorageError, layers

#: Versions one ``ListObjectVersions`` page holds at most (read at each request).
PAGE_SIZE = MAX_LIST_PAGE


def pages_of(versions: int) -> int:
    """The ``ListObjectVersions`` requests that listed this many versions (at least one)."""
    return max(1, -(-versions // PAGE_SIZE))


@dataclass(frozen=True, slots=True)
class Retention:
    """What a bucket keeps: ``versioning`` (``Enabled``, ``Suspended`` or ``""``, never
    enabled) and ``object_lock`` (versions may be undeletable until retention ends)."""

    versioning: str
    object_lock: bool

    @property
    def keeps_versions(self) -> bool:
        """A DELETE leaves the object's earlier versions (versioning on, or suspended)."""
        return bool(self.versioning)

    def describe(self) -> str:
        """``versioning Enabled, Object Lock on`` and the like."""
        versioning = f"versioning {self.versioning}" if self.versioning else "versioning off"
        return f"{versioning}, Object Lock {'on' if self.object_lock else 'off'}"


#: A bucket that keeps nothing a DELETE removed (and the local directory store).
NO_RETENTION = Retention(versioning="", object_lock=False)


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One version of a key (relative to the store's prefix), or a delete marker."""

    key: str
    version_id: str
    delete_marker: bool
    latest: bool


@dataclass(frozen=True, slots=True)
class RefusedVersion:
    """A version the bucket would not delete: its code and message (Object Lock: AccessDenied)."""

    version: ObjectVersion
    code: str
    message: str


@runtime_checkable
class VersionedStore(Protocol):
    """The requests on object versions an S3 store offers (blocking only)."""

    def retention(self) -> Retention:
        """The bucket's versioning and Object Lock state (one or two GETs)."""
        ...

    def versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker of the keys under ``prefix`` (every page)."""
        ...

    def delete_versions(self, versions: Sequence[ObjectVersion]) -> list[RefusedVersion]:
        """Delete these versions for good; return those the bucket refused."""
        ...


def versioned_layer(store: ObjectStore) -> VersionedStore | None:
    """The outermost layer of ``store`` offering object versions when the store at the
    bottom keeps them (a wrapper only forwards them); None over a local directory."""
    stack = list(layers(store))
    if not isinstance(stack[-1], VersionedStore):
        return None
    return next(layer for layer in stack if isinstance(layer, VersionedStore))


def destruction_order(
    versions: Sequence[ObjectVersion],
) -> tuple[list[ObjectVersion], list[ObjectVersion]]:
    """The versions of destroyed keys to delete: data versions first, then delete markers.

    A key's marker hides its older versions: deleted before them, it would make the
    newest current again, so markers go in a second request, once every data version
    of their key is gone (the caller drops those of keys with versions refused).
    """
    data = [v for v in versions if not v.delete_marker]
    markers = [v for v in versions if v.delete_marker]
    return data, markers


def markers_to_delete(
    markers: Sequence[ObjectVersion], refused: Sequence[RefusedVersion]
) -> list[ObjectVersion]:
    """The delete markers whose keys lost every data version (none was refused)."""
    kept = {r.version.key for r in refused}
    return [m for m in markers if m.key not in kept]


def refused_of(
    batch: Sequence[ObjectVersion], full_key: Callable[[str], str], errors: Sequence[Any]
) -> list[RefusedVersion]:
    """The versions of ``batch`` the ``(full key, version id, code, message)`` errors of
    a ``DeleteObjects`` answer refused; an error without a version id (moto leaves it
    out) stands for the key's next version of the batch not yet matched."""
    unmatched = {(full_key(v.key), v.version_id): v for v in batch}
    refused: list[RefusedVersion] = []
    for key, version_id, code, message in errors:
        version = unmatched.pop((key, version_id), None)
        if version is None and not version_id:
            same_key = [k for k in unmatched if k[0] == key]
            version = unmatched.pop(same_key[0]) if same_key else None
        if version is None:
            raise StorageError(
                f"S3 delete of versions: the answer names key {key!r} version "
                f"{version_id!r}, which the request did not hold ({code}: {message})"
            )
        refused.append(RefusedVersion(version, code, message))
    return refused
