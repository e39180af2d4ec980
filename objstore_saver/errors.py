"""Errors raised on purpose, each naming the thing at fault (key, thread, bucket, setting).

:class:`StorageError` for what a backend reports, :class:`ObjstoreSaverError` for what
the saver refuses. Imports nothing of the package, so every layer can raise these.
"""

from __future__ import annotations

__all__ = [
    "CheckpointConflictError",
    "ConfigurationError",
    "CorruptObjectError",
    "InvalidIdentifierError",
    "InvalidKeyError",
    "MissingObjectError",
    "ObjectExistsError",
    "ObjectNotFoundError",
    "ObjstoreSaverError",
    "StorageError",
    "StoreUnavailableError",
    "ThreadKeyError",
    "ThreadKeyMissingError",
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


class EncryptedObjectError(CorruptObjectError):
    """An encrypted (sealed) object read without its thread's (or store namespace's) key."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.reason = (
            "it is encrypted; open the store with the master key that wraps its thread's (or "
            "store namespace's) key (OBJSTORE_SAVER_ENCRYPTION_KEY or "
            "OBJSTORE_SAVER_ENCRYPTION_KEYS)"
        )
        ObjstoreSaverError.__init__(self, f"object at key {key!r}: {self.reason}")


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


class ThreadKeyError(ObjstoreSaverError):
    """An encrypted thread's (or store namespace's: ``owner``) data key cannot be had."""

    def __init__(self, thread_id: str, key: str, reason: str, *, owner: str | None = None) -> None:
        super().__init__(f"{owner or f'thread {thread_id!r}'}: key object {key!r}: {reason}")
        self.thread_id = thread_id
        self.key = key
        self.reason = reason


class ThreadKeyMissingError(ThreadKeyError):
    """An encrypted thread's key object does not exist (deleted: the thread is shredded)."""

    def __init__(self, thread_id: str, key: str, *, owner: str | None = None) -> None:
        super().__init__(
            thread_id,
            key,
            "missing: deleted (its objects can no longer be read), or its objects were "
            "written without encryption",
            owner=owner,
        )


class InvalidIdentifierError(ObjstoreSaverError, ValueError):
    """A thread id, namespace, checkpoint id or task id that cannot be stored."""


class ConfigurationError(ObjstoreSaverError, ValueError):
    """A URL or environment setting that cannot configure a saver."""


class StorageError(Exception):
    """Base class of every error a backend raises on purpose, naming its location and key."""


class ObjectNotFoundError(StorageError, KeyError):
    """``get`` asked for a key that holds no object."""

    def __init__(self, location: str, key: str) -> None:
        self.location = location
        self.key = key
        super().__init__(f"no object at key {key!r} in {location}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class ObjectExistsError(StorageError):
    """A create-only ``put`` found an object already stored at the key."""

    def __init__(self, location: str, key: str) -> None:
        self.location = location
        self.key = key
        super().__init__(f"an object already exists at key {key!r} in {location}")


class InvalidKeyError(StorageError, ValueError):
    """A key the backend cannot store (empty, too long, unsafe characters)."""


class StoreUnavailableError(StorageError):
    """The store cannot be reached or used (missing bucket, denied, endpoint down)."""
