"""S3-compatible buckets: two transports, one set of rules.

:class:`LeanS3Store` signs its own requests and sends them through
:mod:`objstore_saver.storage.http`; :class:`Boto3S3Store` uses boto3's client. What
both share is written once here: settings, every one resolved in
:mod:`.settings` (server-side encryption is :mod:`.sse`), what answers
mean (:mod:`.rules`) and when to try again (:mod:`.retry`). The lean
transport's requests are pure plans in
:mod:`.protocol` (objects) and :mod:`.version_requests` (versions), run by
:mod:`.lean`, which signs them (:mod:`.sigv4`) with botocore's credential
chain (:mod:`.credentials`), addresses the bucket (:mod:`.endpoints`) and
reaches it through a proxy and TLS trust of its choosing (:mod:`.network`);
boto3's are :mod:`.boto3_store` (its client built by :mod:`.boto3_client`)
and :mod:`.boto3_versions`.
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
