"""Server-side encryption of an S3 store's objects: SSE-S3, SSE-KMS or SSE-C."""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Literal

from objstore_saver.storage.base import StorageError


class EncryptionNotConfirmedError(StorageError):
    """The server stored an object without confirming the requested encryption: it may be
    stored unencrypted (the server ignored the headers, as Ceph 16 does for SSE-S3)."""


class S3Encryption:
    """Server-side encryption of every object an :class:`Boto3S3Store` writes.

    Build one with :meth:`sse_s3`, :meth:`sse_kms` or :meth:`sse_c`. The
    store sends the settings with every ``PutObject``, checks that the
    server's answer confirms them, and, for SSE-C, sends the key with every
    ``GetObject`` too. The customer key never appears in ``repr`` or errors.
    """

    __slots__ = ("_customer_key", "_key_md5", "_kind", "_kms_key_id")

    def __init__(
        self,
        kind: Literal["SSE-S3", "SSE-KMS", "SSE-C"],
        *,
        kms_key_id: str | None = None,
        customer_key: bytes | None = None,
    ) -> None:
        if kind not in ("SSE-S3", "SSE-KMS", "SSE-C"):
            raise ValueError(f"unknown encryption kind {kind!r}: SSE-S3, SSE-KMS or SSE-C")
        if kind == "SSE-C":
            if not isinstance(customer_key, bytes) or len(customer_key) != 32:
                size = len(customer_key) if isinstance(customer_key, bytes) else None
                raise ValueError(
                    "an SSE-C customer key is 32 bytes (AES-256), "
                    + (f"got {size} bytes" if size is not None else "got no bytes object")
                )
        elif customer_key is not None:
            raise ValueError(f"a customer key is for SSE-C only, not {kind}")
        if kms_key_id is not None and (kind != "SSE-KMS" or not kms_key_id):
            raise ValueError("kms_key_id is a non-empty key id, alias or ARN, for SSE-KMS only")
        self._kind = kind
        self._kms_key_id = kms_key_id
        self._customer_key = customer_key
        self._key_md5 = (
            base64.b64encode(hashlib.md5(customer_key).digest()).decode()
            if customer_key is not None
            else None
        )

    @classmethod
    def sse_s3(cls) -> S3Encryption:
        """Keys managed by S3 (``ServerSideEncryption='AES256'``)."""
        return cls("SSE-S3")

    @classmethod
    def sse_kms(cls, key_id: str | None = None) -> S3Encryption:
        """Keys managed by KMS (``aws:kms``), with ``key_id`` or the bucket's default key."""
        return cls("SSE-KMS", kms_key_id=key_id)

    @classmethod
    def sse_c(cls, key: bytes) -> S3Encryption:
        """A 32-byte key of the caller's, sent with every PUT and GET and never stored."""
        return cls("SSE-C", customer_key=key)

    @property
    def kind(self) -> str:
        """``"SSE-S3"``, ``"SSE-KMS"`` or ``"SSE-C"``."""
        return self._kind

    @property
    def kms_key_id(self) -> str | None:
        """The KMS key of SSE-KMS, ``None`` for the bucket's default."""
        return self._kms_key_id

    @property
    def customer_key_md5(self) -> str | None:
        """Base64 MD5 of the SSE-C key, as servers report it; ``None`` otherwise."""
        return self._key_md5

    def __repr__(self) -> str:
        if self._kind == "SSE-S3":
            return "S3Encryption.sse_s3()"
        if self._kind == "SSE-KMS":
            return f"S3Encryption.sse_kms({self._kms_key_id!r})"
        return "S3Encryption.sse_c(<customer key hidden>)"

    def put_args(self) -> dict[str, Any]:
        """The ``put_object`` arguments."""
        if self._kind == "SSE-S3":
            return {"ServerSideEncryption": "AES256"}
        if self._kind == "SSE-KMS":
            args: dict[str, Any] = {"ServerSideEncryption": "aws:kms"}
            if self._kms_key_id is not None:
                args["SSEKMSKeyId"] = self._kms_key_id
            return args
        return self.get_args()

    def get_args(self) -> dict[str, Any]:
        """The ``get_object`` / ``head_object`` arguments (SSE-C only)."""
        if self._kind != "SSE-C":
            return {}
        # botocore adds the key's base64 form and its MD5 (SSECustomerKeyMD5).
        return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": self._customer_key}

    def not_confirmed(self, key: str, location: str) -> EncryptionNotConfirmedError:
        """The error of a put of ``key`` whose answer did not confirm this encryption."""
        return EncryptionNotConfirmedError(
            f"S3 put of key {key!r} in {location}: the server did not confirm {self._kind} "
            "encryption (it may not support it); the object may be stored unencrypted"
        )

    def confirmed_by(self, response: dict[str, Any]) -> bool:
        """Whether a ``put_object`` response reports this encryption."""
        if self._kind == "SSE-C":
            return (
                response.get("SSECustomerAlgorithm") == "AES256"
                and response.get("SSECustomerKeyMD5") == self._key_md5
            )
        expected = "AES256" if self._kind == "SSE-S3" else "aws:kms"
        return response.get("ServerSideEncryption") == expected
