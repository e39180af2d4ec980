"""A backend on an S3-compatible bucket through boto3's client: objects and their versions.

Create-only puts need conditional writes (``If-None-Match: *``); servers: docs/s3-compatibility.md.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError as BotoConnectionError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ProxyConnectionError,
)

from objstore_saver.storage import versions as versions_module
from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    MAX_LIST_PAGE,
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    PutMode,
    RequestFacts,
    StorageError,
    ThreadedAsync,
    validate_byte_range,
    validate_key,
)
from objstore_saver.storage.s3.boto3_client import build_client, send_puts_without_waiting
from objstore_saver.storage.s3.endpoints import S3StoreFacts, request_facts
from objstore_saver.storage.s3.rules import (
    CONFLICT_RETRIES,
    NO_OBJECT_LOCK_CODES,
    UNREACHED_NOTE,
    answer_error,
    conflict_wait,
    create_raced,
    create_refused,
    delete_refused,
    key_missing,
    range_past_end,
    unreachable_error,
)
from objstore_saver.storage.s3.settings import (
    BUILT_INTO_THE_CLIENT,
    EncryptionNotConfirmedError as EncryptionNotConfirmedError,
    S3Encryption,
    S3Settings,
    public_url,
    store_settings,
)
from objstore_saver.storage.versions import ObjectVersion, RefusedVersion, Retention, refused_of

#: botocore errors raised before any response arrives: nothing could be reached or signed.
_UNREACHABLE = (
    BotoConnectionError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
)

#: botocore errors of a connection that could not be opened: a check does not retry them.
_NOT_CONNECTED = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError)
_CHECK_HOOK_ID = "objstore_saver.s3.check-fails-fast"
#: ``active`` is True in a thread while it runs :meth:`Boto3S3Store.check`.
_CHECKING = threading.local()


def _check_fails_fast(caught_exception: Exception | None = None, **_: Any) -> bool | None:
    """``needs-retry`` hook of HeadBucket: False (no retry) when a check could not connect.

    The most specific handler answers first, so this False outranks the retry mode's
    delay; a HeadBucket outside :meth:`Boto3S3Store.check` is left to the retry mode.
    """
    if getattr(_CHECKING, "active", False) and isinstance(caught_exception, _NOT_CONNECTED):
        return False
    return None


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _status(exc: ClientError) -> int | None:
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


class Boto3S3Store(S3StoreFacts, ThreadedAsync):
    """An :class:`~objstore_saver.storage.base.ObjectStore` on an S3 bucket.

    Keys given to the store are relative to ``prefix``; listings return them
    relative again. Credentials come from boto3's usual chain (environment,
    shared files, instance roles) unless a ready ``client`` is passed, which
    the client options (endpoint, region, addressing, connections, retries)
    cannot be combined with. ``settings``: everything as one
    :class:`~objstore_saver.storage.s3.settings.S3Settings` (bucket and prefix
    included; then no other option); ``**options``: the settings by name, as
    :meth:`S3Settings.from_options` takes them. Defaults and advice:
    ``docs/s3-compatibility.md``.

    Building raises InvalidKeyError (a prefix not made of valid key segments),
    TypeError (an option this store does not take) or ValueError (an empty or
    directory bucket, an option out of range, client options with ``client``,
    extra arguments setting what ``encryption`` sets). Every request raises
    InvalidKeyError for an invalid key (before anything is sent),
    StoreUnavailableError when the bucket cannot be used, StorageError for any
    other failure.
    """

    def __init__(
        self,
        bucket: str | None = None,
        prefix: str = "",
        *,
        client: Any = None,
        settings: S3Settings | None = None,
        **options: Any,
    ) -> None:
        if client is not None:
            given = options if settings is None else settings.changed()
            built = sorted(n for n in BUILT_INTO_THE_CLIENT if given.get(n) is not None)
            if built:
                raise ValueError(
                    f"Boto3S3Store for bucket {settings.bucket if settings else bucket!r}: "
                    f"{', '.join(built)} cannot be combined "
                    "with client=; configure the client instead"
                )
        settings = store_settings("Boto3S3Store", "boto3", bucket, prefix, settings, options)
        self._settings = settings
        if client is None:
            client = build_client(settings)
        self._extra_put_args = dict(settings.extra_put_args)
        self._extra_get_args = dict(settings.extra_get_args)
        send_puts_without_waiting(client)
        client.meta.events.register(
            "needs-retry.s3.HeadBucket", _check_fails_fast, unique_id=_CHECK_HOOK_ID
        )
        self._client = client
        self._endpoint = public_url(client.meta.endpoint_url)
        self._location = f"s3://{settings.bucket}/{settings.prefix}"
        if settings.endpoint_url is not None or not urlsplit(self._endpoint).netloc.endswith(
            ".amazonaws.com"
        ):
            self._location += f" at {self._endpoint}"

    @classmethod
    def from_client(
        cls,
        client: Any,
        bucket: str,
        prefix: str = "",
        *,
        encryption: S3Encryption | None = None,
    ) -> Boto3S3Store:
        """Build a store on an existing boto3 S3 client."""
        return cls(bucket, prefix, client=client, encryption=encryption)

    @property
    def client(self) -> Any:
        """The boto3 S3 client."""
        return self._client

    def request_facts(self) -> RequestFacts:
        """Requests named ``S3.PutObject``..., with the AWS SDK's attributes."""
        meta = self.client.meta
        return request_facts(self.prefix, self.bucket, meta.endpoint_url, meta.region_name)

    def _full_key(self, key: str) -> str:
        return validate_key(key, self.prefix)

    def _error(
        self, exc: Exception, operation: str, key: str | None = None, note: str = ""
    ) -> StorageError:
        """The storage error of a boto error (never with credentials), ``note`` after ``; ``."""
        subject = f" of key {key!r}" if key is not None else ""
        if isinstance(exc, ClientError):
            return answer_error(
                bucket=self.bucket,
                endpoint=self._endpoint,
                location=self._location,
                operation=operation,
                key=key,
                status=_status(exc),
                code=_code(exc),
                message=exc.response.get("Error", {}).get("Message", ""),
                note=note,
            )
        if isinstance(exc, ParamValidationError):
            # botocore's message quotes the values, SSE-C keys included.
            names = sorted(set(re.findall(r"parameter (\w+)", str(exc))))
            return StorageError(
                f"S3 {operation}{subject} in {self._location} failed: invalid request "
                f"parameters {', '.join(names) or '(unnamed)'} (values not shown)"
            )
        if isinstance(exc, _UNREACHABLE):
            return unreachable_error(
                bucket=self.bucket,
                endpoint=self._endpoint,
                operation=operation,
                key=key,
                error=f"{type(exc).__name__}: {exc}",
                note=note,
            )
        return StorageError(
            f"S3 {operation}{subject} in {self._location} failed: {type(exc).__name__}: {exc}"
        )

    def _invoke(
        self, method: Any, operation: str, key: str | None, handled: Any = (), **args: Any
    ) -> Any:
        """Call a client method; a botocore error not in ``handled`` raises its StorageError.

        botocore's ParamValidationError quotes the values (an SSE-C key among them):
        ours is raised outside the handler, so it neither chains nor holds the original.
        """
        try:
            return method(**args)
        except ParamValidationError as exc:
            error = self._error(exc, operation, key)
        except handled:
            raise
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, operation, key) from exc
        raise error

    def check(self) -> None:
        """Check that the bucket exists and the credentials may use it (``HeadBucket``).

        StoreUnavailableError if not; a connection that cannot be opened fails
        at once, not retried.
        """
        _CHECKING.active = True
        try:
            self._invoke(
                self._client.head_bucket,
                "check",
                None,
                (ClientError, BotoCoreError),
                Bucket=self.bucket,
            )
        except (ClientError, BotoCoreError) as exc:
            note = ""
            if isinstance(exc, _NOT_CONNECTED):
                note = "not retried" if isinstance(exc, ProxyConnectionError) else UNREACHED_NOTE
            raise self._error(exc, "check", note=note) from exc
        finally:
            _CHECKING.active = False

    def _holds(self, key: str, data: bytes) -> bool:
        try:
            return self.get(key) == data
        except ObjectNotFoundError:
            return False

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key`` with one ``PutObject`` (``CREATE``: ``If-None-Match: *``).

        ObjectExistsError: ``CREATE`` found an object; EncryptionNotConfirmedError:
        ``encryption`` is set and the server's answer does not report it.
        """
        args = {**self._extra_put_args, "Bucket": self.bucket, "Key": self._full_key(key)}
        if self.encryption is not None:
            args.update(self.encryption.put_args())
        args["Body"] = data
        if mode is PutMode.CREATE:
            args["IfNoneMatch"] = "*"
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                response = self._invoke(self._client.put_object, "put", key, ClientError, **args)
            except ClientError as exc:
                code, status = _code(exc), _status(exc)
                if mode is PutMode.CREATE and create_refused(status, code):
                    retried = exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
                    # botocore resent a request whose first attempt may have
                    # been stored (response lost): the 412 may be our own object.
                    if retried and self._holds(key, data):
                        return
                    raise ObjectExistsError(self._location, key) from None
                if (
                    mode is PutMode.CREATE
                    and create_raced(status, code)
                    and attempt < CONFLICT_RETRIES
                ):
                    time.sleep(conflict_wait(attempt))
                    continue
                raise self._error(exc, "put", key) from exc
            if self.encryption is not None and not self.encryption.confirmed_by(response):
                raise self.encryption.not_confirmed(key, self._location)
            return

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it.

        ``end`` past the object's size is clamped to it; a range starting at or
        past the end returns ``b""`` (S3 answers 416 there). ObjectNotFoundError:
        nothing is stored at ``key``; ValueError: not ``0 <= start <= end``.
        """
        args = {**self._extra_get_args, "Bucket": self.bucket, "Key": self._full_key(key)}
        if self.encryption is not None:
            args.update(self.encryption.get_args())
        if byte_range is not None:
            start, end = validate_byte_range(byte_range)
            # An empty range cannot be expressed in HTTP; ask for one byte so
            # the object's existence is still checked, then drop it.
            args["Range"] = f"bytes={start}-{max(start, end - 1)}"
        try:
            response = self._invoke(self._client.get_object, "get", key, ClientError, **args)
            body = response["Body"].read()
        except ClientError as exc:
            code, status = _code(exc), _status(exc)
            if key_missing(status, code):
                raise ObjectNotFoundError(self._location, key) from None
            if byte_range is not None and range_past_end(status, code):
                return b""
            raise self._error(exc, "get", key) from exc
        if byte_range is None:
            return body
        if "ContentRange" not in response:  # the server ignored the range
            return body[start:end]
        return body[: end - start]

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` (1 to 1,000, else ValueError) keys after ``start_after``
        under ``prefix`` (``ListObjectsV2``)."""
        if not 1 <= limit <= MAX_LIST_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_LIST_PAGE}, got {limit}")
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": limit,
        }
        if start_after:
            args["StartAfter"] = self.prefix + start_after
        response = self._invoke(self._client.list_objects_v2, "list", prefix, **args)
        skip = len(self.prefix)
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
        """Delete the given keys with ``DeleteObjects``, 1,000 keys per request (a key S3
        reported an error for is named, with its code, in a StorageError)."""
        full_keys = [self._full_key(key) for key in keys]
        for i in range(0, len(full_keys), MAX_DELETE_BATCH):
            batch = full_keys[i : i + MAX_DELETE_BATCH]
            response = self._invoke(
                self._client.delete_objects,
                "delete",
                keys[i],
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
            )
            errors = [
                (e.get("Key", ""), e.get("Code", "Unknown"), e.get("Message", ""))
                for e in response.get("Errors") or []
            ]
            if errors:
                raise delete_refused(self._location, self.prefix, errors)

    def retention(self) -> Retention:
        """The bucket's versioning and Object Lock state (``GetBucketVersioning``, and
        ``GetObjectLockConfiguration`` when versioning was ever on)."""
        c = self._client
        answer = self._invoke(c.get_bucket_versioning, "get versioning", None, Bucket=self.bucket)
        status = answer.get("Status") or ""
        if not status:
            return Retention(versioning="", object_lock=False)
        try:
            lock = self._invoke(
                c.get_object_lock_configuration,
                "get object lock",
                None,
                ClientError,
                Bucket=self.bucket,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in NO_OBJECT_LOCK_CODES:
                return Retention(versioning=status, object_lock=False)
            raise self._error(exc, "get object lock") from exc
        enabled = lock.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
        return Retention(versioning=status, object_lock=enabled)

    def versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under ``prefix`` (``ListObjectVersions``, every page)."""
        skip = len(self.prefix)
        found: list[ObjectVersion] = []
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": versions_module.PAGE_SIZE,
        }
        while True:
            page = self._invoke(self._client.list_object_versions, "list versions", prefix, **args)
            for field, marker in (("Versions", False), ("DeleteMarkers", True)):
                found.extend(
                    ObjectVersion(
                        key=item["Key"][skip:],
                        version_id=item.get("VersionId") or "null",
                        delete_marker=marker,
                        latest=bool(item.get("IsLatest")),
                    )
                    for item in page.get(field, [])
                )
            if not page.get("IsTruncated") or not page.get("NextKeyMarker"):
                return found
            args["KeyMarker"] = page["NextKeyMarker"]
            if page.get("NextVersionIdMarker"):
                args["VersionIdMarker"] = page["NextVersionIdMarker"]
            else:
                args.pop("VersionIdMarker", None)

    def delete_versions(self, versions: Sequence[ObjectVersion]) -> list[RefusedVersion]:
        """Delete these versions for good (``DeleteObjects``, 1,000 a request);
        return those the bucket refused (Object Lock)."""
        refused: list[RefusedVersion] = []
        for i in range(0, len(versions), MAX_DELETE_BATCH):
            batch = versions[i : i + MAX_DELETE_BATCH]
            objects = [{"Key": self._full_key(v.key), "VersionId": v.version_id} for v in batch]
            answer = self._invoke(
                self._client.delete_objects,
                "delete versions",
                batch[0].key,
                Bucket=self.bucket,
                Delete={"Objects": objects, "Quiet": True},
            )
            errors = [
                (e.get("Key", ""), e.get("VersionId", ""), e.get("Code", ""), e.get("Message", ""))
                for e in answer.get("Errors") or []
            ]
            refused += refused_of(batch, self._full_key, errors)
        return refused


#: The name this transport had while it was the only one, kept for code written against it.
S3Store = Boto3S3Store
