"""Storage backends: the :class:`ObjectStore` protocol and its implementations.

* :mod:`.base`: the protocol, its errors and wrappers;
* :mod:`.local`: a local directory; :mod:`.s3`: S3-compatible buckets, over
  the lean transport (:mod:`.http`) or boto3;
* :mod:`.versions`: object versions and Object Lock, where a bucket keeps them;
* :mod:`.requests`: the four requests as values, and the runners of a layer's
  requests written as generators of steps;
* :mod:`.layer`: a store layer as one hook around request values;
* :mod:`.metered`: a layer counting requests and bytes;
* :mod:`.urls`: a store from ``s3://`` or ``file://``, or a bucket on a transport;
* :mod:`.worker_pool`: worker threads for blocking calls of coroutines.
"""

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
from objstore_saver.storage.s3.boto3_store import (
    Boto3S3Store,
    EncryptionNotConfirmedError,
    S3Encryption,
    S3Store,
)
from objstore_saver.storage.s3.lean import LeanS3Store

__all__ = [
    "MAX_DELETE_BATCH",
    "Boto3S3Store",
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
