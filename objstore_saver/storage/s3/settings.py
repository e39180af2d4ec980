"""What both S3 transports are configured with: encryption, defaults, the endpoint.

:class:`~objstore_saver.storage.s3.boto3_store.Boto3S3Store` (boto3) and
:class:`~objstore_saver.storage.s3.lean.LeanS3Store` (its own signing and
connection pools) speak the same S3 to the same servers; the settings a user
gives are checked here, once (what answers mean is in :mod:`.rules`).
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
from typing import Any, Literal
from urllib.parse import SplitResult, urlsplit, urlunsplit

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.base import StorageError, validate_key

#: Defaults of the client options (see ``docs/s3-compatibility.md``).
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_POOL_CONNECTIONS = 64


class EncryptionNotConfirmedError(StorageError):
    """The server stored an object without confirming the requested encryption.

    The object may be stored unencrypted: the server ignored the SSE headers
    (Ceph 16 does so for SSE-S3) or does not support the mode.
    """


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

    def confirmed_by(self, response: dict[str, Any]) -> bool:
        """Whether a ``put_object`` response reports this encryption."""
        if self._kind == "SSE-C":
            return (
                response.get("SSECustomerAlgorithm") == "AES256"
                and response.get("SSECustomerKeyMD5") == self._key_md5
            )
        expected = "AES256" if self._kind == "SSE-S3" else "aws:kms"
        return response.get("ServerSideEncryption") == expected


def public_url(url: str) -> str:
    """``url`` without any user info, so errors never carry credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def bucket_prefix(prefix: str) -> str:
    """A key prefix normalized to ``""`` or a valid key followed by ``/``.

    Raises:
        InvalidKeyError: the prefix is not in the key alphabet.
    """
    prefix = prefix.lstrip("/")
    if not prefix:
        return ""
    validate_key(prefix.rstrip("/"))
    return prefix.rstrip("/") + "/"


def checked_encryption(encryption: Any) -> S3Encryption | None:
    """``encryption`` if it is ``None`` or an :class:`S3Encryption`.

    Raises:
        ValueError: anything else, naming its type.
    """
    if encryption is not None and not isinstance(encryption, S3Encryption):
        raise ValueError(f"encryption must be an S3Encryption, not {type(encryption).__name__}")
    return encryption


def positive_seconds(name: str, value: Any) -> float:
    """``value`` as seconds if it is a finite positive number.

    Raises:
        ValueError: naming the option ``name`` and the value.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def at_least_one(name: str, value: Any) -> int:
    """``value`` if it is an integer of at least 1.

    Raises:
        ValueError: naming the option ``name`` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
    return value


#: Environment variables naming the endpoint, most specific first (as boto3 reads them).
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def botocore_session(session: Any) -> Any:
    """The botocore session of a boto3 one, or ``session`` itself."""
    return getattr(session, "_session", session)


def configured_endpoint(endpoint_url: str | None, session: Any) -> tuple[str | None, str]:
    """The endpoint an S3 store talks to and the name of where it came from.

    The one place both transports resolve it, in boto3's order: the argument,
    then ``AWS_ENDPOINT_URL_S3``, then ``AWS_ENDPOINT_URL``, then the config
    file's services section (``s3 = endpoint_url = ...`` in the section the
    profile's ``services`` names), then the profile's own ``endpoint_url``,
    then none (AWS itself). All but the argument are ignored when
    ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` (or the profile's
    ``ignore_configured_endpoint_urls``) is true, as in boto3.

    Raises:
        ConfigurationError: the profile names a services section the config
            file does not have.
    """
    if endpoint_url is not None:
        return endpoint_url, "endpoint_url"
    core = botocore_session(session)
    if core.get_config_variable("ignore_configured_endpoint_urls"):
        return None, ""
    for name in ENDPOINT_ENV:
        value = os.environ.get(name)
        if value:
            return value, name
    profile = core.get_scoped_config()
    section = profile.get("services")
    if section:
        services = core.full_config.get("services", {}).get(section)
        if not services:
            raise ConfigurationError(
                f"the AWS profile names the services section {section!r}, which the "
                "config file does not have"
            )
        value = services.get("s3", {}).get("endpoint_url")
        if value:
            return value, f"endpoint_url of [services {section}] s3 in the AWS config file"
    value = profile.get("endpoint_url")
    if value:
        return value, "endpoint_url of the AWS profile"
    return None, ""


def checked_endpoint(endpoint_url: str, source: str = "endpoint_url") -> SplitResult:
    """The parts of an endpoint URL both transports can use.

    Raises:
        ValueError: the URL carries user info or is not an http(s) URL; the
            message names ``source`` (the option or variable it came from)
            and the URL without credentials.
    """
    parts = urlsplit(endpoint_url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{source} {public_url(endpoint_url)!r} carries user info: give "
            "credentials through boto3's chain (environment, profile, role) instead"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{source} {public_url(endpoint_url)!r} is not an http:// or https:// URL")
    return parts
