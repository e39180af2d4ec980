"""Storage backends: the :class:`ObjectStore` protocol and its implementations."""

from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    InvalidKeyError,
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.metered import Meter, MeteredStore
from objstore_saver.storage.s3.boto3_store import EncryptionNotConfirmedError, S3Encryption, S3Store
from objstore_saver.storage.s3.lean import LeanS3Store

__all__ = [
    "MAX_DELETE_BATCH",
    "EncryptionNotConfirmedError",
    "InvalidKeyError",
    "LeanS3Store",
    "ListPage",
    "LocalStore",
    "Meter",
    "MeteredStore",
    "ObjectExistsError",
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStore",
    "PutMode",
    "S3Encryption",
    "S3Store",
    "StorageError",
    "StoreUnavailableError",
]
