"""A backend on an S3-compatible bucket, optionally under a key prefix.

Create-only puts use ``If-None-Match: *`` (conditional writes), so the bucket
must be on AWS S3 or a server that implements them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import boto3
import botocore.config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    MAX_KEY_BYTES,
    MAX_LIST_PAGE,
    InvalidKeyError,
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    PutMode,
    StorageError,
    StoreUnavailableError,
    validate_byte_range,
    validate_key,
)

#: Error codes meaning the bucket as a whole cannot be used with this client.
_UNAVAILABLE_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidBucketName",
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
    }
)
_UNAVAILABLE_STATUS = frozenset({301, 403})
#: botocore errors raised before any response arrives: nothing could be reached or signed.
_UNREACHABLE = (
    BotoConnectionError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
)
#: Retries of a create-only put that lost a race to another conditional write (HTTP 409).
_CONFLICT_RETRIES = 5


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _status(exc: ClientError) -> int | None:
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _public_url(url: str) -> str:
    """``url`` without any user info, so errors never carry credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class S3Store:
    """An :class:`~objstore_saver.storage.base.ObjectStore` on an S3 bucket.

    Keys given to the store are relative to ``prefix``; listings return them
    relative again. Credentials come from boto3's usual chain (environment,
    shared files, instance roles) unless a ready client is passed.

    Args:
        bucket: Bucket name.
        prefix: Key prefix of every object; normalized to ``""`` or a string
            ending with ``/``.
        client: A boto3 S3 client to use instead of building one; the other
            client options are then ignored.
        endpoint_url: S3-compatible endpoint (MinIO, Ceph...); path-style
            addressing is used with it.
        region_name: Region of the bucket.
        max_attempts: Attempts per request, the first one included.
        retry_mode: botocore retry mode (``standard`` or ``adaptive``).
        max_pool_connections: Size of the HTTP connection pool; at least the
            number of threads using the store at once.
        extra_put_args: Extra ``put_object`` arguments, e.g. ``StorageClass``
            or ``ServerSideEncryption``.
        extra_get_args: Extra ``get_object`` arguments, e.g. SSE-C keys.

    Raises:
        InvalidKeyError: the prefix is not made of valid key segments.
        ValueError: ``bucket`` is empty or ``max_attempts`` below 1.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        max_attempts: int = 5,
        retry_mode: str = "standard",
        max_pool_connections: int = 64,
        extra_put_args: dict[str, Any] | None = None,
        extra_get_args: dict[str, Any] | None = None,
    ) -> None:
        if not bucket:
            raise ValueError("bucket must not be empty")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        prefix = prefix.lstrip("/")
        if prefix:
            validate_key(prefix.rstrip("/"))
            prefix = prefix.rstrip("/") + "/"
        if client is None:
            options: dict[str, Any] = {
                "retries": {"mode": retry_mode, "total_max_attempts": max_attempts},
                "max_pool_connections": max_pool_connections,
            }
            if endpoint_url is not None:
                options["s3"] = {"addressing_style": "path"}
            client = boto3.session.Session().client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region_name,
                config=botocore.config.Config(**options),
            )
        self._client = client
        self._bucket = bucket
        self._prefix = prefix
        self._extra_put_args = dict(extra_put_args or {})
        self._extra_get_args = dict(extra_get_args or {})
        self._endpoint = _public_url(client.meta.endpoint_url)
        location = f"s3://{bucket}/{prefix}"
        if endpoint_url is not None or not urlsplit(self._endpoint).netloc.endswith(
            ".amazonaws.com"
        ):
            location += f" at {self._endpoint}"
        self._location = location

    @classmethod
    def from_client(cls, client: Any, bucket: str, prefix: str = "") -> S3Store:
        """Build a store on an existing boto3 S3 client."""
        return cls(bucket, prefix, client=client)

    @property
    def client(self) -> Any:
        """The boto3 S3 client."""
        return self._client

    @property
    def bucket(self) -> str:
        """Bucket name."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """Normalized key prefix, ``""`` or ending with ``/``."""
        return self._prefix

    @property
    def location(self) -> str:
        """``s3://bucket/prefix``, plus `` at <endpoint>`` for a custom endpoint."""
        return self._location

    def __repr__(self) -> str:
        return f"S3Store({self._location!r})"

    def _full_key(self, key: str) -> str:
        validate_key(key)
        full = self._prefix + key
        if len(full) > MAX_KEY_BYTES:
            raise InvalidKeyError(
                f"invalid key {key!r}: with prefix {self._prefix!r} it is {len(full)} bytes, "
                f"at most {MAX_KEY_BYTES} are allowed"
            )
        return full

    def _error(self, exc: Exception, operation: str, key: str | None = None) -> StorageError:
        """Map a boto error to the storage error to raise (never with credentials)."""
        where = f"S3 bucket {self._bucket!r} at {self._endpoint}"
        if isinstance(exc, ClientError):
            code, status = _code(exc), _status(exc)
            if code in _UNAVAILABLE_CODES or status in _UNAVAILABLE_STATUS or operation == "check":
                return StoreUnavailableError(
                    f"{where} is unavailable ({operation}): {code} (HTTP {status})"
                )
            message = exc.response.get("Error", {}).get("Message", "")
            subject = f" of key {key!r}" if key is not None else ""
            return StorageError(
                f"S3 {operation}{subject} in {self._location} failed: {code} (HTTP {status})"
                + (f": {message}" if message else "")
            )
        if isinstance(exc, _UNREACHABLE):
            return StoreUnavailableError(
                f"{where} is unavailable ({operation}): {type(exc).__name__}: {exc}"
            )
        subject = f" of key {key!r}" if key is not None else ""
        return StorageError(
            f"S3 {operation}{subject} in {self._location} failed: {type(exc).__name__}: {exc}"
        )

    def check(self) -> None:
        """Check that the bucket exists and the credentials may use it.

        Raises:
            StoreUnavailableError: the bucket is missing, access is denied or
                the endpoint cannot be reached.
        """
        try:
            self._client.head_bucket(Bucket=self._bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "check") from exc

    def _holds(self, key: str, data: bytes) -> bool:
        try:
            return self.get(key) == data
        except ObjectNotFoundError:
            return False

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key`` with one ``PutObject``.

        Args:
            key: Key of the object, relative to the prefix.
            data: The whole object.
            mode: ``CREATE`` sends ``If-None-Match: *``; ``OVERWRITE`` does not.

        Raises:
            ObjectExistsError: ``mode`` is ``CREATE`` and the key holds an object.
            InvalidKeyError: the key is invalid or too long with the prefix.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        args = {**self._extra_put_args, "Bucket": self._bucket, "Key": self._full_key(key)}
        args["Body"] = data
        if mode is PutMode.CREATE:
            args["IfNoneMatch"] = "*"
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self._client.put_object(**args)
                return
            except ClientError as exc:
                code = _code(exc)
                if mode is PutMode.CREATE and (code == "PreconditionFailed" or _status(exc) == 412):
                    retried = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
                    # botocore resent a request whose first attempt may have
                    # been stored (response lost): the 412 may be our own object.
                    if retried and self._holds(key, data):
                        return
                    raise ObjectExistsError(self._location, key) from None
                if (
                    mode is PutMode.CREATE
                    and code == "ConditionalRequestConflict"
                    and attempt < _CONFLICT_RETRIES
                ):
                    # Another conditional write to the key was in flight; once it
                    # settles a retry gets 412 (it won) or succeeds (it failed).
                    time.sleep(random.uniform(0, 0.05 * 2**attempt))
                    continue
                raise self._error(exc, "put", key) from exc
            except BotoCoreError as exc:
                raise self._error(exc, "put", key) from exc

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it.

        ``end`` past the object's size is clamped to it; a range starting at or
        past the end returns ``b""`` (S3 answers 416 there).

        Raises:
            ObjectNotFoundError: nothing is stored at ``key``.
            InvalidKeyError: the key is invalid.
            ValueError: the byte range is not ``0 <= start <= end``.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        args = {**self._extra_get_args, "Bucket": self._bucket, "Key": self._full_key(key)}
        if byte_range is not None:
            start, end = validate_byte_range(byte_range)
            # An empty range cannot be expressed in HTTP; ask for one byte so
            # the object's existence is still checked, then drop it.
            args["Range"] = f"bytes={start}-{max(start, end - 1)}"
        try:
            response = self._client.get_object(**args)
            body = response["Body"].read()
        except ClientError as exc:
            code = _code(exc)
            if code == "NoSuchKey" or (_status(exc) == 404 and code != "NoSuchBucket"):
                raise ObjectNotFoundError(self._location, key) from None
            if byte_range is not None and (code == "InvalidRange" or _status(exc) == 416):
                return b""
            raise self._error(exc, "get", key) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "get", key) from exc
        if byte_range is None:
            return body
        if "ContentRange" not in response:  # the server ignored the range
            return body[start:end]
        return body[: end - start]

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` keys that start with ``prefix``, ascending.

        One ``ListObjectsV2`` request.

        Args:
            prefix: Only keys starting with it are listed (``""`` for all).
            start_after: Only keys strictly greater than it are listed.
            limit: Page size, 1 to 1,000.

        Raises:
            ValueError: ``limit`` is out of range.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        if not 1 <= limit <= MAX_LIST_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_LIST_PAGE}, got {limit}")
        args: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": self._prefix + prefix,
            "MaxKeys": limit,
        }
        if start_after:
            args["StartAfter"] = self._prefix + start_after
        try:
            response = self._client.list_objects_v2(**args)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "list", prefix) from exc
        skip = len(self._prefix)
        objects = [
            ObjectInfo(
                key=item["Key"][skip:],
                size=item["Size"],
                last_modified=item["LastModified"].astimezone(UTC),
            )
            for item in response.get("Contents", [])
        ]
        return ListPage(objects=objects, truncated=bool(response.get("IsTruncated")))

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the given keys with ``DeleteObjects``, 1,000 keys per request.

        A key that holds nothing is not an error.

        Raises:
            InvalidKeyError: a key is invalid; nothing is deleted.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: S3 reported an error for a key (named with its code).
        """
        full_keys = [self._full_key(key) for key in keys]
        for i in range(0, len(full_keys), MAX_DELETE_BATCH):
            batch = full_keys[i : i + MAX_DELETE_BATCH]
            try:
                response = self._client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, "delete", keys[i]) from exc
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                key = first.get("Key", "")
                if key.startswith(self._prefix):
                    key = key[len(self._prefix) :]
                more = f" (and {len(errors) - 1} more keys)" if len(errors) > 1 else ""
                raise StorageError(
                    f"S3 delete of key {key!r} in {self._location} failed: "
                    f"{first.get('Code', 'Unknown')}: {first.get('Message', '')}{more}"
                )
