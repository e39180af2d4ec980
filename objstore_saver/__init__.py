"""objstore-saver: durable LangGraph checkpoints on S3-compatible object storage.

Checkpoints are stored as increments: create-only manifests over immutable,
content-addressed values scoped to their thread. See ``docs/spec.md``.
"""

from objstore_saver.config import ConfigurationError, create_checkpointer, create_store
from objstore_saver.errors import (
    CheckpointConflictError,
    CorruptObjectError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjstoreSaverError,
    UnsupportedFormatError,
)
from objstore_saver.longterm import InvalidStoreValueError, ObjectStoreStore
from objstore_saver.saver import AsyncObjectStoreSaver, ObjectStoreSaver
from objstore_saver.storage import (
    InvalidKeyError,
    LocalStore,
    MeteredStore,
    ObjectStore,
    PutMode,
    S3Encryption,
    S3Store,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.verify import Problem, VerifyReport

__all__ = [
    "AsyncObjectStoreSaver",
    "CheckpointConflictError",
    "ConfigurationError",
    "CorruptObjectError",
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
    "create_checkpointer",
    "create_store",
]
__version__ = "0.1.0"
