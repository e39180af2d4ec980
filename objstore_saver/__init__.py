"""objstore-saver: durable LangGraph checkpoints on S3-compatible object storage.

Checkpoints are stored as increments: create-only manifests over immutable,
content-addressed values scoped to their thread. See ``docs/spec.md``.

The layers, from the bottom: :mod:`~objstore_saver.errors`;
:mod:`~objstore_saver.storage` (the object store protocol and its backends,
free of LangGraph); :mod:`~objstore_saver.format` (the pure encodings of the
spec); :mod:`~objstore_saver.caches`; :mod:`~objstore_saver.plans` (pure plans
of the spec's algorithms) run by :mod:`~objstore_saver.driver`; the saver
(:mod:`~objstore_saver.saver`) and the long-term store
(:mod:`~objstore_saver.longterm`); :mod:`~objstore_saver.config`; the operator
jobs (:mod:`~objstore_saver.ops`), the CLI and the viewer on top.

The names below are loaded on first use, so importing a lower layer (e.g.
``objstore_saver.storage``) does not import LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from objstore_saver._version import __version__
from objstore_saver.errors import (
    CheckpointConflictError,
    ConfigurationError,
    CorruptObjectError,
    InvalidIdentifierError,
    InvalidKeyError,
    MissingObjectError,
    ObjstoreSaverError,
    StorageError,
    StoreUnavailableError,
    UnsupportedFormatError,
)

if TYPE_CHECKING:
    from objstore_saver.config import create_checkpointer, create_store
    from objstore_saver.fallback import FallbackSaver
    from objstore_saver.longterm import InvalidStoreValueError, ObjectStoreStore
    from objstore_saver.plans.verify_report import Problem, VerifyReport
    from objstore_saver.saver import AsyncObjectStoreSaver, ObjectStoreSaver
    from objstore_saver.storage import (
        Boto3S3Store,
        LocalStore,
        MeteredStore,
        ObjectStore,
        PutMode,
        S3Encryption,
        S3Store,
    )

#: Public names loaded on first access, by the module that defines them.
_LAZY = {
    "AsyncObjectStoreSaver": "objstore_saver.saver",
    "FallbackSaver": "objstore_saver.fallback",
    "ObjectStoreSaver": "objstore_saver.saver",
    "ObjectStoreStore": "objstore_saver.longterm",
    "InvalidStoreValueError": "objstore_saver.longterm",
    "create_checkpointer": "objstore_saver.config",
    "create_store": "objstore_saver.config",
    "LocalStore": "objstore_saver.storage",
    "MeteredStore": "objstore_saver.storage",
    "ObjectStore": "objstore_saver.storage",
    "PutMode": "objstore_saver.storage",
    "S3Encryption": "objstore_saver.storage",
    "Boto3S3Store": "objstore_saver.storage",
    "S3Store": "objstore_saver.storage",
    "Problem": "objstore_saver.plans.verify_report",
    "VerifyReport": "objstore_saver.plans.verify_report",
}

__all__ = [
    "AsyncObjectStoreSaver",
    "Boto3S3Store",
    "CheckpointConflictError",
    "ConfigurationError",
    "CorruptObjectError",
    "FallbackSaver",
    "InvalidIdentifierError",
    "InvalidKeyError",
    "InvalidStoreValueError",
    "LocalStore",
    "MeteredStore",
    "MissingObjectError",
    "ObjectStore",
    "ObjectStoreSaver",
    "ObjectStoreStore",
    "ObjstoreSaverError",
    "Problem",
    "PutMode",
    "S3Encryption",
    "S3Store",
    "StorageError",
    "StoreUnavailableError",
    "UnsupportedFormatError",
    "VerifyReport",
    "__version__",
    "create_checkpointer",
    "create_store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'objstore_saver' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
