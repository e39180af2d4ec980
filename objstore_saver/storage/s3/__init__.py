"""S3-compatible buckets: two transports, one set of rules.

Shared: :mod:`.settings` (server-side encryption: :mod:`.sse`), :mod:`.rules`
(what answers mean), :mod:`.endpoints` (where requests go). :class:`LeanS3Store`
(:mod:`.lean`) runs the plans of :mod:`.protocol` and :mod:`.version_requests`,
retried by :mod:`.retry`, signed by :mod:`.sigv4` with :mod:`.credentials`,
reaching the bucket as :mod:`.network` says; :class:`Boto3S3Store`:
:mod:`.boto3_store` and :mod:`.boto3_client`.
"""

from objstore_saver.storage.s3.boto3_store import Boto3S3Store, S3Store
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.settings import EncryptionNotConfirmedError, S3Encryption

__all__ = [
    "Boto3S3Store",
    "EncryptionNotConfirmedError",
    "LeanS3Store",
    "S3Encryption",
    "S3Store",
]
