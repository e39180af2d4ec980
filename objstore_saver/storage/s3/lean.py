"""A lean S3 backend: SigV4 signed here, HTTP/1.1 sent by the standard library, sync and async.

The requests, retries and error mapping are the pure plans of
``protocol.py``; this module only sends what they yield, one way blocking
(a thread-safe keep-alive pool of plain sockets, ``sync_pool.py``)
and one way on the event loop (asyncio streams, ``async_pool.py``, no thread
hop). Credentials come from botocore's standard chain. Why this design won
over boto3, aiobotocore and obstore is in ``docs/transport.md``.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import botocore.session

from objstore_saver.storage.base import (
    MAX_LIST_PAGE,
    ListPage,
    PutMode,
    StoreUnavailableError,
)
from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpRequest, Reply
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.s3.protocol import (
    Addressing,
    Exchange,
    S3Protocol,
    Sleep,
    T,
)
from objstore_saver.storage.s3.retry import DEFAULT_BACKOFF_BASE, RetryPolicy
from objstore_saver.storage.s3.rules import check_bucket
from objstore_saver.storage.s3.settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_POOL_CONNECTIONS,
    DEFAULT_READ_TIMEOUT,
    S3Encryption,
    at_least_one,
    botocore_session,
    bucket_prefix,
    checked_encryption,
    configured_endpoint,
    positive_seconds,
    public_url,
)
from objstore_saver.storage.s3.sigv4 import Credentials, Signer

#: Default of ``max_connections``: open connections per pool.
DEFAULT_MAX_CONNECTIONS = 64
_USER_AGENT = "objstore-saver-lean-s3"

#: The exchange of each blocking store method, called with that method's arguments.
_EXCHANGES: dict[str, Callable[..., Exchange[Any]]] = {
    "put": lambda p, key, data, mode=PutMode.OVERWRITE: p.put(key, data, mode),
    "get": lambda p, key, byte_range=None: p.get(key, byte_range),
    "list": lambda p, prefix, *, start_after=None, limit=MAX_LIST_PAGE: p.list(
        prefix, start_after, limit
    ),
    "delete": lambda p, keys: p.delete(keys),
}


#: Environment variables naming the region, most specific first.
REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")


def _configured_region(region_name: str | None, session: Any) -> str:
    """The region requests are signed for.

    Precedence: the argument, then a region set on the session object itself,
    then ``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the profile's
    ``region``, then ``us-east-1``.
    """
    if region_name is not None:
        return region_name
    core = botocore_session(session)
    candidates = [core.get_config_variable("region", methods=("instance",))]
    candidates += [os.environ.get(name) for name in REGION_ENV]
    candidates.append(core.get_config_variable("region"))
    return next((str(region) for region in candidates if region), "us-east-1")


def _addressing(
    bucket: str, endpoint_url: str | None, region: str, source: str = "endpoint_url"
) -> Addressing:
    if endpoint_url is None:
        if "." in bucket:  # a dotted name breaks the TLS wildcard of virtual hosts
            host = f"s3.{region}.amazonaws.com"
            return Addressing("https", host, f"/{bucket}", f"https://{host}")
        host = f"{bucket}.s3.{region}.amazonaws.com"
        return Addressing("https", host, "", f"https://{host}")
    parts = urlsplit(endpoint_url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{source} {public_url(endpoint_url)!r} carries user info: give "
            "credentials through boto3's chain (environment, profile, role) instead"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{source} {public_url(endpoint_url)!r} is not an http:// or https:// URL")
    host = parts.netloc
    base = parts.path.rstrip("/") + "/" + bucket  # path style, as S3Store uses with endpoints
    return Addressing(parts.scheme, host, base, public_url(endpoint_url))


class _CredentialChain:
    """Frozen credentials from a botocore/boto3 session, resolved at first use.

    botocore refreshes temporary credentials (roles, SSO) itself; each request
    takes the current frozen copy.
    """

    def __init__(self, session: Any, where: str) -> None:
        self._session = session
        self._where = where
        self._source: Any = None
        self._frozen: Credentials | None = None

    def __call__(self) -> Credentials:
        if self._source is None:
            self._source = self._session.get_credentials()
            if self._source is None:
                raise StoreUnavailableError(
                    f"{self._where} is unavailable: no credentials found in boto3's chain "
                    "(environment, shared files, instance or container role)"
                )
        current = self._source.get_frozen_credentials()
        frozen = self._frozen
        if (
            frozen is None
            or frozen.access_key != current.access_key
            or frozen.secret_key != current.secret_key
            or frozen.token != current.token
        ):
            frozen = self._frozen = Credentials(
                current.access_key, current.secret_key, current.token
            )
        return frozen


class LeanS3Store:
    """An :class:`~objstore_saver.storage.base.ObjectStore` on an S3 bucket, sync and async.

    Same behaviour, errors and messages as :class:`S3Store`, at a fraction of
    its client CPU per request; the coroutines ``aput``/``aget``/``alist``/
    ``adelete`` run on the event loop without a thread. Needs nothing beyond
    the standard library and botocore (for credentials).

    Args:
        bucket: Bucket name.
        prefix: Key prefix of every object; normalized to ``""`` or a string
            ending with ``/``.
        endpoint_url: S3-compatible endpoint (MinIO, Ceph...); path-style
            addressing is used with it. User info in the URL is refused.
            Default: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL`` (unless
            ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true), else AWS.
        region_name: Region of the bucket. Default: a region set on
            ``session``, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else
            the profile's, else ``us-east-1``.
        session: A ``boto3.Session`` or ``botocore.session.Session`` whose
            credential chain signs the requests; default a new botocore session
            (environment, shared files, roles).
        max_attempts: Attempts per request, the first included; default 5.
        backoff_base: Largest wait in seconds before the second attempt,
            doubling per attempt (full jitter, capped at 20 s); default 1
            (botocore's). Retries also draw on the store's retry quota
            (``retry.py``).
        connect_timeout: Seconds to wait for a connection; default 5.
        read_timeout: Seconds to wait for data on a connection; default 30.
        max_pool_connections: Idle connections kept per pool (one pool for
            blocking calls, one per event loop); default 64.
        max_connections: Connections open at once per pool (the blocking
            one and each event loop's; busy and idle together); a request
            beyond it waits up to ``read_timeout`` for one to be free, then
            fails as not sent (and is retried); default 64.
        encryption: Server-side encryption of every object; every PUT answer
            must confirm it.
        extra_put_headers: Extra HTTP headers of every PUT, e.g.
            ``{"x-amz-storage-class": "STANDARD_IA"}``.
        extra_get_headers: Extra HTTP headers of every GET.

    Raises:
        InvalidKeyError: the prefix is not made of valid key segments.
        ValueError: ``bucket`` is empty or a directory bucket (``--x-s3``,
            a ``ConfigurationError``), an option is out of range, or the
            extra headers set what ``encryption`` sets.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        session: Any = None,
        max_attempts: int | None = None,
        backoff_base: float | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_pool_connections: int | None = None,
        max_connections: int | None = None,
        encryption: S3Encryption | None = None,
        extra_put_headers: dict[str, str] | None = None,
        extra_get_headers: dict[str, str] | None = None,
    ) -> None:
        check_bucket(bucket)
        prefix = bucket_prefix(prefix)
        encryption = checked_encryption(encryption)
        attempts = at_least_one(
            "max_attempts", DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts
        )
        base = DEFAULT_BACKOFF_BASE if backoff_base is None else backoff_base
        if isinstance(base, bool) or not isinstance(base, int | float) or not 0 <= base <= 20:
            raise ValueError(f"backoff_base must be between 0 and 20 seconds, got {base!r}")
        self._connect_timeout = positive_seconds(
            "connect_timeout",
            DEFAULT_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout,
        )
        self._read_timeout = positive_seconds(
            "read_timeout", DEFAULT_READ_TIMEOUT if read_timeout is None else read_timeout
        )
        self._pool_size = at_least_one(
            "max_pool_connections",
            DEFAULT_MAX_POOL_CONNECTIONS if max_pool_connections is None else max_pool_connections,
        )
        self._max_connections = at_least_one(
            "max_connections",
            DEFAULT_MAX_CONNECTIONS if max_connections is None else max_connections,
        )
        put_headers = {k.lower(): v for k, v in (extra_put_headers or {}).items()}
        get_headers = {k.lower(): v for k, v in (extra_get_headers or {}).items()}
        clash = sorted(
            name
            for name in (*put_headers, *get_headers)
            if name.startswith("x-amz-server-side-encryption")
            or name in ("if-none-match", "range", "authorization", "host")
            or (name.startswith("x-amz-") and name[6:] in ("date", "content-sha256"))
        )
        if clash:
            raise ValueError(
                f"extra headers {', '.join(clash)} are set by the store itself; "
                "use encryption= for server-side encryption"
            )
        session = botocore.session.Session() if session is None else session
        region_name = _configured_region(region_name, session)
        endpoint_url, endpoint_source = configured_endpoint(endpoint_url, session)
        addressing = _addressing(bucket, endpoint_url, region_name, endpoint_source)
        location = f"s3://{bucket}/{prefix}"
        if endpoint_url is not None:
            location += f" at {addressing.public_url}"
        self._protocol = S3Protocol(
            bucket=bucket,
            prefix=prefix,
            addressing=addressing,
            signer=Signer(region_name),
            credentials=_CredentialChain(
                session, f"S3 bucket {bucket!r} at {addressing.public_url}"
            ),
            location=location,
            encryption=encryption,
            extra_put_headers=put_headers,
            extra_get_headers=get_headers,
            retry=RetryPolicy(max_attempts=attempts, backoff_base=float(base)),
        )
        self._region = region_name
        self._pool = ConnectionPool(
            addressing.scheme,
            addressing.host,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_idle=self._pool_size,
            max_connections=self._max_connections,
            extra_headers={"user-agent": _USER_AGENT},
        )
        # One pool per event loop (stream connections are bound to their loop);
        # a loop that is garbage-collected takes its pool along.
        self._aio: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncConnectionPool] = (
            weakref.WeakKeyDictionary()
        )

    # --- description -----------------------------------------------------------------

    @property
    def bucket(self) -> str:
        """Bucket name."""
        return self._protocol.bucket

    @property
    def prefix(self) -> str:
        """Normalized key prefix, ``""`` or ending with ``/``."""
        return self._protocol.prefix

    @property
    def region(self) -> str:
        """Region the requests are signed for."""
        return self._region

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to, without user info."""
        return self._protocol.addressing.public_url

    @property
    def encryption(self) -> S3Encryption | None:
        """The server-side encryption of every object, ``None`` for the bucket's default."""
        return self._protocol.encryption

    @property
    def retry(self) -> RetryPolicy:
        """Attempts and backoff of every request."""
        return self._protocol.retry

    @property
    def timeouts(self) -> tuple[float, float]:
        """``(connect_timeout, read_timeout)`` in seconds."""
        return self._connect_timeout, self._read_timeout

    @property
    def location(self) -> str:
        """``s3://bucket/prefix``, plus `` at <endpoint>`` for a custom endpoint."""
        return self._protocol.location

    def __repr__(self) -> str:
        if self.encryption is None:
            return f"LeanS3Store({self.location!r})"
        return f"LeanS3Store({self.location!r}, encryption={self.encryption!r})"

    # --- transports --------------------------------------------------------------------

    def _send(self, request: HttpRequest) -> Reply:
        """Send one request on the blocking pool."""
        return self._pool.send(request)

    def _aio_pool(self) -> AsyncConnectionPool:
        """The connection pool of the running loop (connections are loop-bound)."""
        loop = asyncio.get_running_loop()
        pool = self._aio.get(loop)
        if pool is not None:
            return pool
        pool = AsyncConnectionPool(
            self._protocol.addressing.scheme,
            self._protocol.addressing.host,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            max_idle=self._pool_size,
            max_connections=self._max_connections,
            extra_headers={"user-agent": _USER_AGENT},
        )
        self._aio[loop] = pool
        return pool

    async def _asend(self, request: HttpRequest) -> Reply:
        """Send one request on the running loop's pool."""
        return await self._aio_pool().send(request)

    def _run(
        self, plan: Exchange[T], reply: Reply | None = None, step: HttpRequest | Sleep | None = None
    ) -> T:
        """Carry out an exchange: ``reply`` answers its last step, or ``step`` is its next."""
        while True:
            if step is None:
                try:
                    step = plan.send(reply)
                except StopIteration as stop:
                    return stop.value
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                reply = None
            else:
                reply = self._send(step)
            step = None

    def send_ahead(self, method: str, *args: Any, **kwargs: Any) -> Callable[[], Any]:
        """Send the first request of ``getattr(self, method)(*args, **kwargs)`` now.

        Returns the function that waits for its answer and returns (or
        raises) what the blocking call would; it must be called once. The
        blocking driver sends a batch's requests this way from one thread and
        reads the answers after its ``meanwhile`` work: no thread hop. Retries,
        and a request that finds no free connection slot at once, run inside
        that function, as the blocking call would run them.
        """
        plan = _EXCHANGES[method](self._protocol, *args, **kwargs)
        try:
            step = plan.send(None)
        except StopIteration as stop:
            value = stop.value
            return lambda: value
        except Exception as exc:  # noqa: BLE001  # raised where the call's outcome is read
            error = exc

            def fail() -> Any:
                raise error

            return fail
        if isinstance(step, HttpRequest):
            answer = self._pool.send_ahead(step)
            if answer is not None:
                return lambda: self._run(plan, reply=answer())
        return lambda: self._run(plan, step=step)

    async def _arun(self, plan: Exchange[T]) -> T:
        reply: Reply | None = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                reply = None
            else:
                reply = await self._asend(step)

    def close(self) -> None:
        """Close the blocking pool's idle connections (the store stays usable)."""
        self._pool.close()

    async def aclose(self) -> None:
        """Close the idle connections of the running loop's pool (the store stays usable)."""
        pool = self._aio.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()

    # --- the protocol, blocking ---------------------------------------------------------

    def check(self) -> None:
        """Check that the bucket exists and the credentials may use it (``HeadBucket``).

        Raises:
            StoreUnavailableError: the bucket is missing, access is denied or
                the endpoint cannot be reached.
        """
        self._run(self._protocol.check())

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key`` with one ``PutObject`` (see :meth:`S3Store.put`).

        Raises:
            ObjectExistsError: ``mode`` is ``CREATE`` and the key holds an object.
            InvalidKeyError: the key is invalid or too long with the prefix.
            EncryptionNotConfirmedError: the answer does not confirm ``encryption``.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        self._run(self._protocol.put(key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it.

        Raises:
            ObjectNotFoundError: nothing is stored at ``key``.
            InvalidKeyError: the key is invalid.
            ValueError: the byte range is not ``0 <= start <= end``.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        return self._run(self._protocol.get(key, byte_range))

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` keys after ``start_after`` under ``prefix`` (one request).

        Raises:
            ValueError: ``limit`` is out of range.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: any other failure.
        """
        return self._run(self._protocol.list(prefix, start_after, limit))

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the keys with quiet ``DeleteObjects``, 1,000 keys per request.

        Raises:
            InvalidKeyError: a key is invalid; nothing is deleted.
            StoreUnavailableError: the bucket cannot be used.
            StorageError: S3 reported an error for a key (named with its code).
        """
        self._run(self._protocol.delete(keys))

    # --- the protocol, on the event loop ---------------------------------------------------

    async def acheck(self) -> None:
        """Coroutine of :meth:`check`."""
        await self._arun(self._protocol.check())

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Coroutine of :meth:`put`."""
        await self._arun(self._protocol.put(key, data, mode))

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Coroutine of :meth:`get`."""
        return await self._arun(self._protocol.get(key, byte_range))

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """Coroutine of :meth:`list`."""
        return await self._arun(self._protocol.list(prefix, start_after, limit))

    async def adelete(self, keys: Sequence[str]) -> None:
        """Coroutine of :meth:`delete`."""
        await self._arun(self._protocol.delete(keys))
