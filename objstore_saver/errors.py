"""Errors the saver raises on purpose. Each names the thing at fault."""

from __future__ import annotations

from objstore_saver.storage.base import (
    InvalidKeyError,
    ObjectExistsError,
    ObjectNotFoundError,
    StorageError,
    StoreUnavailableError,
)

__all__ = [
    "CheckpointConflictError",
    "CorruptObjectError",
    "InvalidIdentifierError",
    "InvalidKeyError",
    "MissingObjectError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "ObjstoreSaverError",
    "StorageError",
    "StoreUnavailableError",
    "UnsupportedFormatError",
]


class ObjstoreSaverError(Exception):
    """Base class of the saver's own errors (storage errors have their own base)."""


class CheckpointConflictError(ObjstoreSaverError):
    """A different manifest is already stored under the same checkpoint id."""

    def __init__(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, key: str) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id
        self.key = key
        super().__init__(
            f"checkpoint {checkpoint_id!r} of thread {thread_id!r} "
            f"(namespace {checkpoint_ns!r}) is already stored with different content "
            f"at key {key!r}; checkpoints are immutable"
        )


class CorruptObjectError(ObjstoreSaverError):
    """A stored object does not decode as the format says it must."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"corrupt object at key {key!r}: {reason}")


class MissingObjectError(CorruptObjectError):
    """A stored object references an object that is not in the store."""

    def __init__(self, key: str, referenced_by: str) -> None:
        self.referenced_by = referenced_by
        super().__init__(key, f"missing, but referenced by {referenced_by!r}")


class UnsupportedFormatError(ObjstoreSaverError):
    """An object was written by a newer format version than this reader knows."""

    def __init__(self, key: str, version: object) -> None:
        self.key = key
        self.version = version
        super().__init__(
            f"object at key {key!r} has format version {version!r}; this objstore-saver "
            "reads version 1 only: upgrade objstore-saver to read it"
        )


class InvalidIdentifierError(ObjstoreSaverError, ValueError):
    """A thread id, namespace, checkpoint id or task id that cannot be stored."""
