"""The S3 requests of the lean transport as pure plans: no sockets, no sleeping.

Each operation yields signed :class:`HttpRequest` or :class:`Sleep` steps and
receives a :class:`Reply` for each; ``lean.py`` performs them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import quote
from xml.sax.saxutils import escape

from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    MAX_LIST_PAGE,
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
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, Reply, TransportFailure
from objstore_saver.storage.s3.retry import NO_RETRY_REFUND, RetryPolicy, is_retryable, retry_cost
from objstore_saver.storage.s3.rules import (
    CONFLICT_RETRIES,
    answer_error,
    conflict_wait,
    create_raced,
    create_refused,
    delete_refused,
    error_code,
    is_wrong_region,
    key_missing,
    range_past_end,
    redirect_region,
    unreachable_error,
    unreached_note,
)
from objstore_saver.storage.s3.settings import S3Encryption
from objstore_saver.storage.s3.sigv4 import EMPTY_SHA256, Credentials, Signer, canonical_query

T = TypeVar("T")

#: A key ``quote(key, safe="/~")`` leaves as it is (most keys): not quoted again.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.~/-]*")


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait this many seconds before the next step."""

    seconds: float


Exchange = Generator[HttpRequest | Sleep, Reply | None, T]


class BucketRegionError(StoreUnavailableError):
    """The bucket is in another region, whose requests go to another host: the store's
    runner reconnects to ``addressing`` (for ``bucket_region``; ``region`` was signed
    for) and starts the operation again (the refused request did nothing)."""

    def __init__(
        self, message: str, *, region: str, bucket_region: str, addressing: Addressing
    ) -> None:
        super().__init__(message)
        self.region = region
        self.bucket_region = bucket_region
        self.addressing = addressing


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def parse_list(body: bytes, skip: int) -> ListPage:
    """A ``ListObjectsV2`` answer as a page, keys without the first ``skip`` characters."""
    root = ET.fromstring(body)
    objects: list[ObjectInfo] = []
    truncated = False
    for child in root:
        tag = _local(child.tag)
        if tag == "Contents":
            fields = {e.tag.rpartition("}")[2]: e.text or "" for e in child}
            objects.append(
                ObjectInfo(
                    key=fields["Key"][skip:],
                    size=int(fields["Size"]),
                    last_modified=datetime.fromisoformat(fields["LastModified"]).astimezone(UTC),
                )
            )
        elif tag == "IsTruncated":
            truncated = (child.text or "").strip().lower() == "true"
    return ListPage(objects=objects, truncated=truncated)


def parse_delete_errors(body: bytes) -> list[tuple[str, str, str, str]]:
    """``(key, version id, code, message)`` of each per-key error of a ``DeleteObjects``
    answer (the version id ``""`` when the request named none, or the server left it out)."""
    if not body:
        return []
    root = ET.fromstring(body)
    errors = []
    for child in root:
        if _local(child.tag) == "Error":
            fields = {_local(e.tag): e.text or "" for e in child}
            errors.append(tuple(fields.get(f, "") for f in ("Key", "VersionId", "Code", "Message")))
    return errors


def delete_body(full_keys: Sequence[str], version_ids: Sequence[str] = ()) -> bytes:
    """The XML body of a quiet ``DeleteObjects`` request (of these versions, if given)."""
    ids = [f"<VersionId>{escape(v)}</VersionId>" for v in version_ids] or [""] * len(full_keys)
    objects = "".join(
        f"<Object><Key>{escape(k)}</Key>{i}</Object>" for k, i in zip(full_keys, ids, strict=True)
    )
    return f"<Delete><Quiet>true</Quiet>{objects}</Delete>".encode()


#: The HTTP header of each server-side encryption field of boto3's requests and answers.
_SSE_HEADERS = {
    "ServerSideEncryption": "x-amz-server-side-encryption",
    "SSEKMSKeyId": "x-amz-server-side-encryption-aws-kms-key-id",
    "SSECustomerAlgorithm": "x-amz-server-side-encryption-customer-algorithm",
    "SSECustomerKey": "x-amz-server-side-encryption-customer-key",
    "SSECustomerKeyMD5": "x-amz-server-side-encryption-customer-key-md5",
}


def encryption_headers(encryption: S3Encryption | None, *, put: bool) -> dict[str, str]:
    """The SSE request headers of a PUT (``put=True``) or a GET."""
    if encryption is None:
        return {}
    args = encryption.put_args() if put else encryption.get_args()
    if "SSECustomerKey" in args:
        args["SSECustomerKey"] = base64.b64encode(args["SSECustomerKey"]).decode()
        args["SSECustomerKeyMD5"] = str(encryption.customer_key_md5)
    return {_SSE_HEADERS[name]: value for name, value in args.items()}


@dataclass(frozen=True, slots=True)
class Addressing:
    """Where requests for one bucket go: ``host`` (the ``Host`` header, with a
    non-default port), ``base_path`` (``/bucket`` path style, ``""`` virtual-hosted)
    and ``public_url`` (the endpoint as errors show it, never with user info)."""

    scheme: str
    host: str
    base_path: str
    public_url: str

    @property
    def origin(self) -> str:
        """``scheme://host``, what the HTTP clients connect to."""
        return f"{self.scheme}://{self.host}"


def signed_region(request: HttpRequest) -> str:
    """The region of a signed request's credential scope (``""`` when unsigned)."""
    credential = request.headers.get("authorization", "").partition("Credential=")[2]
    parts = credential.split("/")
    return parts[2] if len(parts) > 2 else ""


class S3Protocol:
    """Builds, signs and interprets the requests of one bucket and prefix.

    ``relocate``: where the bucket's requests go in another region (an AWS host
    names its region); ``None`` for a custom endpoint, where a wrong-region
    answer only changes the signature. ``clock``: tests pin it.
    """

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str,
        addressing: Addressing,
        signer: Signer,
        credentials: Callable[[], Credentials],
        location: str,
        encryption: S3Encryption | None,
        extra_put_headers: dict[str, str],
        extra_get_headers: dict[str, str],
        retry: RetryPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        relocate: Callable[[str], Addressing] | None = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.addressing = addressing
        self.signer = signer
        self.credentials = credentials
        self.location = location
        self.encryption = encryption
        self.retry = retry
        self.clock = clock
        self._relocate = relocate
        self._put_headers = {**extra_put_headers, **encryption_headers(encryption, put=True)}
        self._get_headers = {**extra_get_headers, **encryption_headers(encryption, put=False)}

    def full_key(self, key: str) -> str:
        """``prefix + key`` after checking both fit the key rules."""
        return validate_key(key, self.prefix)

    def request(
        self,
        method: str,
        full_key: str | None,
        *,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> HttpRequest:
        """A signed request on the bucket (``full_key=None``) or on one object."""
        path = self.addressing.base_path
        if full_key is not None:
            plain = _PLAIN_PATH.fullmatch(full_key) is not None
            path += "/" + (full_key if plain else quote(full_key, safe="/~"))
        elif not path:
            path = "/"
        qs = canonical_query(query) if query else ""
        hdrs = dict(headers) if headers else {}
        hdrs["host"] = self.addressing.host
        digest = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        self.signer.sign(
            method, self.addressing.host, path, qs, hdrs, digest, self.credentials(), self.clock()
        )
        return HttpRequest(method, f"{path}?{qs}" if qs else path, hdrs, body)

    def error(
        self, reply: Reply, operation: str, key: str | None = None, note: str = ""
    ) -> StorageError:
        """The storage error of a failed exchange (no credentials in it), ``note`` after ``; ``."""
        endpoint = self.addressing.public_url
        if isinstance(reply, TransportFailure):
            return unreachable_error(
                bucket=self.bucket,
                endpoint=endpoint,
                operation=operation,
                key=key,
                error=reply.error,
                note=note,
            )
        code, message = error_code(reply)
        return answer_error(
            bucket=self.bucket,
            endpoint=endpoint,
            location=self.location,
            operation=operation,
            key=key,
            status=reply.status,
            code=code,
            message=message,
            note=note,
        )

    @property
    def region(self) -> str:
        """The region requests are signed for now."""
        return self.signer.region

    def use_region(self, region: str, addressing: Addressing | None = None) -> None:
        """Sign later requests for ``region`` (and send them to ``addressing`` if given)."""
        self.signer = Signer(region)
        if addressing is not None:
            self.addressing = addressing

    def _redirect(self, request: HttpRequest, reply: Reply, operation: str) -> str | None:
        """The region to re-sign ``request`` for after a wrong-region ``reply`` (kept for
        later requests), or ``None``; :class:`BucketRegionError` when the host changes."""
        if not isinstance(reply, HttpResponse):
            return None
        region = redirect_region(reply)
        signed = signed_region(request)
        if region is None or region == signed:
            return None  # not a redirect, or none this request can follow
        if region == self.signer.region:
            return region  # another request of the store followed it meanwhile
        moved = self._moved_to(region, reply, operation)
        if moved is not None and moved != self.addressing:
            raise BucketRegionError(
                f"S3 bucket {self.bucket!r} is in region {region!r}, not {signed!r} "
                f"(the region requests are signed for) at {self.addressing.public_url} "
                f"({operation}: {error_code(reply)[0]}, HTTP {reply.status}): set "
                f"region_name={region!r} (or AWS_REGION={region})",
                region=signed,
                bucket_region=region,
                addressing=moved,
            )
        self.use_region(region)
        return region

    def _moved_to(self, region: str, reply: HttpResponse, operation: str) -> Addressing | None:
        """Where requests go in the bucket's ``region``; None when only the signature changes."""
        if self._relocate is None:
            return None
        try:
            return self._relocate(region)
        except ValueError as exc:
            raise StoreUnavailableError(
                f"S3 bucket {self.bucket!r} at {self.addressing.public_url} answered that it is "
                f"in region {region!r} ({operation}: {error_code(reply)[0]}, HTTP "
                f"{reply.status}), which has no AWS endpoint here: {exc}"
            ) from None

    def _redirected_again(
        self, first: str, second: str, reply: HttpResponse, operation: str
    ) -> StoreUnavailableError:
        third = redirect_region(reply)
        where = f"to region {third!r}" if third else "naming no region"
        return StoreUnavailableError(
            f"S3 bucket {self.bucket!r} at {self.addressing.public_url} is unavailable "
            f"({operation}): a request signed for region {first!r} was redirected to region "
            f"{second!r}, and re-signed for {second!r} it was redirected again ({where}: "
            f"{error_code(reply)[0]}, HTTP {reply.status}); set region_name to the bucket's region"
        )

    def exchange(
        self,
        build: Callable[[], HttpRequest],
        operation: str,
        key: str | None = None,
        *,
        retry_unreached: bool = True,
    ) -> Exchange[tuple[Reply, int]]:
        """Send ``build()`` until it gets a final answer or attempts run out; the last
        reply (retryable or not) and the number of attempts.

        A retry waits its backoff and takes its cost from the store's retry
        quota (a StorageError when it is empty); a 2xx answer gives back what
        the last retry took (1 when there was none). One wrong-region answer is
        followed: the request is signed again, at once, for the region the
        answer names (not an attempt); a second is a StoreUnavailableError.
        ``retry_unreached=False``: a connection that could not be opened ends it.
        """
        attempt = 0
        taken = 0
        redirected: tuple[str, str] | None = None
        while True:
            attempt += 1
            request = build()  # signed anew: x-amz-date moves on
            reply = yield request
            assert reply is not None
            if isinstance(reply, HttpResponse) and 200 <= reply.status < 300:
                # The everyday answer: never a redirect, never retried. A full
                # quota is read without the lock: an acquire racing with this
                # read is ordered after this (no-op) release, as if a moment later.
                quota = self.retry.quota
                if quota.available < quota.capacity:
                    quota.release(taken or NO_RETRY_REFUND)
                return reply, attempt
            if redirected is None:
                region = self._redirect(request, reply, operation)
                if region is not None:
                    redirected = (signed_region(request), region)
                    attempt -= 1
                    continue
            elif isinstance(reply, HttpResponse) and is_wrong_region(reply):
                raise self._redirected_again(*redirected, reply, operation)
            if (
                not is_retryable(reply)
                or attempt >= self.retry.max_attempts
                or (not retry_unreached and isinstance(reply, TransportFailure) and not reply.sent)
            ):
                return reply, attempt
            taken = retry_cost(reply)
            if not self.retry.quota.acquire(taken):
                raise self.error(
                    reply,
                    operation,
                    key,
                    f"not retried: the retry budget of S3 bucket {self.bucket!r} at "
                    f"{self.addressing.public_url} is exhausted (too many retries lately; "
                    "successful requests refill it)",
                )
            yield Sleep(self.retry.delay(attempt))

    def check(self) -> Exchange[None]:
        """``HeadBucket``; a connection that cannot be opened fails at once, not retried."""
        reply, _ = yield from self.exchange(
            lambda: self.request("HEAD", None), "check", retry_unreached=False
        )
        if isinstance(reply, TransportFailure) or reply.status != 200:
            raise self.error(reply, "check", note=unreached_note(reply))

    def put(self, key: str, data: bytes, mode: PutMode) -> Exchange[None]:
        """``PutObject``; create-only sends ``If-None-Match: *``."""
        full = self.full_key(key)
        headers = dict(self._put_headers)
        if mode is PutMode.CREATE:
            headers["if-none-match"] = "*"
        data = bytes(data)
        for conflict in range(CONFLICT_RETRIES + 1):
            reply, attempts = yield from self.exchange(
                lambda: self.request("PUT", full, headers=headers, body=data), "put", key
            )
            if isinstance(reply, HttpResponse) and reply.status == 200:
                if self.encryption is not None and not self.encryption.confirmed_by(
                    {field: reply.headers.get(name) for field, name in _SSE_HEADERS.items()}
                ):
                    raise self.encryption.not_confirmed(key, self.location)
                return
            if mode is PutMode.CREATE and isinstance(reply, HttpResponse):
                code = error_code(reply)[0] if reply.status != 412 else ""
                if create_refused(reply.status, code):
                    # An earlier attempt of ours may have been stored with its
                    # answer lost: the 412 may be our own object.
                    if attempts > 1 and (yield from self._holds(key, data)):
                        return
                    raise ObjectExistsError(self.location, key)
                if create_raced(reply.status, code) and conflict < CONFLICT_RETRIES:
                    yield Sleep(conflict_wait(conflict, self.retry.rng))
                    continue
            raise self.error(reply, "put", key)

    def _holds(self, key: str, data: bytes) -> Exchange[bool]:
        try:
            stored = yield from self.get(key, None)
        except ObjectNotFoundError:
            return False
        return stored == data

    def get(self, key: str, byte_range: tuple[int, int] | None) -> Exchange[bytes]:
        """``GetObject`` of the whole object or ``[start, end)``."""
        full = self.full_key(key)
        headers = dict(self._get_headers)
        if byte_range is not None:
            start, end = validate_byte_range(byte_range)
            # An empty range cannot be expressed in HTTP; ask for one byte so
            # the object's existence is still checked, then drop it.
            headers["range"] = f"bytes={start}-{max(start, end - 1)}"
        reply, _ = yield from self.exchange(
            lambda: self.request("GET", full, headers=headers), "get", key
        )
        if isinstance(reply, HttpResponse):
            if reply.status == 200:  # with a range: the server ignored it
                return reply.body if byte_range is None else reply.body[start:end]
            if reply.status == 206 and byte_range is not None:
                return reply.body[: end - start]
            code = error_code(reply)[0] if reply.status >= 400 else ""
            if key_missing(reply.status, code):
                raise ObjectNotFoundError(self.location, key)
            if byte_range is not None and range_past_end(reply.status, code):
                return b""
        raise self.error(reply, "get", key)

    def list(self, prefix: str, start_after: str | None, limit: int) -> Exchange[ListPage]:
        """One ``ListObjectsV2`` page with ``max-keys`` and ``start-after``."""
        if not 1 <= limit <= MAX_LIST_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_LIST_PAGE}, got {limit}")
        query = {"list-type": "2", "prefix": self.prefix + prefix, "max-keys": str(limit)}
        if start_after:
            query["start-after"] = self.prefix + start_after
        reply, _ = yield from self.exchange(
            lambda: self.request("GET", None, query=query), "list", prefix
        )
        if isinstance(reply, HttpResponse) and reply.status == 200:
            try:
                return parse_list(reply.body, len(self.prefix))
            except (ET.ParseError, KeyError, ValueError) as exc:
                raise StorageError(
                    f"S3 list of prefix {prefix!r} in {self.location} failed: "
                    f"unreadable answer ({type(exc).__name__}: {exc})"
                ) from None
        raise self.error(reply, "list", prefix)

    def post_delete(self, body: bytes, operation: str, key: str) -> Exchange[Reply]:
        """One ``DeleteObjects`` request of an XML ``body``, with its Content-MD5."""
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        headers = {"content-md5": md5, "content-type": "application/xml"}
        reply, _ = yield from self.exchange(
            lambda: self.request("POST", None, query={"delete": ""}, headers=headers, body=body),
            operation,
            key,
        )
        return reply

    def delete(self, keys: Sequence[str]) -> Exchange[None]:
        """``DeleteObjects`` in quiet mode, 1,000 keys per request."""
        full_keys = [self.full_key(key) for key in keys]  # all checked before any request
        for i in range(0, len(full_keys), MAX_DELETE_BATCH):
            body = delete_body(full_keys[i : i + MAX_DELETE_BATCH])
            reply = yield from self.post_delete(body, "delete", keys[i])
            if not isinstance(reply, HttpResponse) or reply.status != 200:
                raise self.error(reply, "delete", keys[i])
            errors = parse_delete_errors(reply.body)
            if errors:
                raise delete_refused(
                    self.location, self.prefix, [(k, c, m) for k, _, c, m in errors]
                )
