"""A lean S3 backend: sends what the pure plans of ``protocol.py`` yield, on the blocking
pool or the event loop's (no thread hop); the design: ``docs/transport.md``."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import botocore.session

from objstore_saver.storage.base import MAX_LIST_PAGE, ListPage, PutMode, RequestFacts
from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpRequest, Reply
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.requests import (
    StorageRequest,
    arun_steps,
    call,
    run_steps,
    send_steps_ahead,
)
from objstore_saver.storage.s3 import version_requests
from objstore_saver.storage.s3.credentials import CredentialChain
from objstore_saver.storage.s3.endpoints import S3StoreFacts, request_facts, resolve_addressing
from objstore_saver.storage.s3.network import network_for
from objstore_saver.storage.s3.protocol import BucketRegionError, Exchange, S3Protocol, Sleep, T
from objstore_saver.storage.s3.retry import RetryPolicy
from objstore_saver.storage.s3.settings import (
    DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS,
    S3Settings,
    configured_endpoint,
    configured_region,
    configured_style,
    store_settings,
)
from objstore_saver.storage.s3.sigv4 import Signer
from objstore_saver.storage.versions import ObjectVersion, RefusedVersion, Retention

_USER_AGENT = "objstore-saver-lean-s3"


class LeanS3Store(S3StoreFacts):
    """An :class:`~objstore_saver.storage.base.ObjectStore` on an S3 bucket, sync and async.

    Same behaviour, errors and messages as :class:`Boto3S3Store` (``bucket``,
    ``prefix``, ``settings`` and ``**options`` too), at a fraction of its client
    CPU per request; the coroutines run on the event loop without a thread.
    Needs nothing beyond the standard library and botocore. ``session``: a
    ``boto3.Session`` or ``botocore.session.Session`` whose credential chain
    signs the requests (and whose profile the settings not given are read
    from); default a new botocore session.

    Building raises InvalidKeyError (a prefix not made of valid key segments),
    TypeError (an option this store does not take), ValueError (an option out
    of range or contradicting another, an empty or directory bucket, an
    unusable endpoint or proxy URL, a region botocore's rules know no host
    for) or ConfigurationError (also a ValueError: a CA bundle file missing or
    unusable, naming the path).
    """

    def __init__(
        self,
        bucket: str | None = None,
        prefix: str = "",
        *,
        settings: S3Settings | None = None,
        session: Any = None,
        **options: Any,
    ) -> None:
        settings = store_settings("LeanS3Store", "lean", bucket, prefix, settings, options)
        self._settings = settings
        bucket = settings.bucket
        session = botocore.session.Session() if session is None else session
        region_name = configured_region(settings.region_name, session)
        endpoint_url, endpoint_source = configured_endpoint(settings.endpoint_url, session)
        style, _ = configured_style(settings.addressing_style, session)
        addressing = resolve_addressing(
            bucket, endpoint_url, endpoint_source, region_name, style, session
        )
        network = settings.client
        self._network_options = {
            "proxies": network.proxies,
            "verify": network.verify,
            "ca_bundle": network.ca_bundle,
            "session": session,
        }
        self._network = network_for(addressing.scheme, addressing.host, **self._network_options)
        self._move_lock = threading.Lock()
        self._location = f"s3://{bucket}/{settings.prefix}"
        if endpoint_url is not None:
            self._location += f" at {addressing.public_url}"
        self._credentials = CredentialChain(
            session, f"S3 bucket {bucket!r} at {addressing.public_url}"
        )
        self._protocol = S3Protocol(
            bucket=bucket,
            prefix=settings.prefix,
            addressing=addressing,
            signer=Signer(region_name),
            credentials=self._credentials,
            location=self._location,
            encryption=settings.encryption,
            extra_put_headers=dict(settings.extra_put_headers),
            extra_get_headers=dict(settings.extra_get_headers),
            retry=RetryPolicy(
                max_attempts=settings.retry.max_attempts, backoff_base=settings.retry.backoff_base
            ),
            relocate=None
            if endpoint_url is not None
            else lambda region: resolve_addressing(bucket, None, "", region, style, session),
        )
        self._pool = ConnectionPool(addressing.scheme, addressing.host, **self._pool_options())
        # One pool per event loop (its connections are bound to it), collected with it.
        self._aio: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncConnectionPool] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def region(self) -> str:
        """Region the requests are signed for (the bucket's, once an answer named it)."""
        return self._protocol.region

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to, without user info."""
        return self._protocol.addressing.public_url

    @property
    def retry(self) -> RetryPolicy:
        """Attempts and backoff of every request."""
        return self._protocol.retry

    @property
    def timeouts(self) -> tuple[float, float]:
        """``(connect_timeout, read_timeout)`` in seconds."""
        return self._settings.client.connect_timeout, self._settings.client.read_timeout

    def request_facts(self) -> RequestFacts:
        """Requests named ``S3.PutObject``..., with the AWS SDK's attributes."""
        return request_facts(self.prefix, self.bucket, self.endpoint, self.region)

    def _pool_options(self) -> dict[str, Any]:
        client = self._settings.client
        return {
            "connect_timeout": client.connect_timeout,
            "read_timeout": client.read_timeout,
            "max_idle": client.max_pool_connections,
            "max_connections": client.max_connections,
            "extra_headers": {"user-agent": _USER_AGENT},
            "tls": self._network.tls,
            "proxy": self._network.proxy,
        }

    def _send(self, request: HttpRequest) -> Reply:
        return self._pool.send(request)

    def _aio_pool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        pool = self._aio.get(loop)
        if pool is None:
            where = self._protocol.addressing
            pool = AsyncConnectionPool(where.scheme, where.host, **self._pool_options())
            self._aio[loop] = pool
        return pool

    async def _asend(self, request: HttpRequest) -> Reply:
        return await self._aio_pool().send(request)

    def _move(self, moved: BucketRegionError) -> None:
        """Follow the bucket to its region's host: new pools there, requests signed for it
        (the refused request did nothing: the caller starts its operation again)."""
        with self._move_lock:
            if self._protocol.addressing == moved.addressing:
                return  # another thread followed it first
            where = moved.addressing
            self._network = network_for(where.scheme, where.host, **self._network_options)
            old, self._pool = (
                self._pool,
                ConnectionPool(where.scheme, where.host, **self._pool_options()),
            )
            self._aio = weakref.WeakKeyDictionary()
            self._protocol.use_region(moved.bucket_region, where)
        old.close()

    def _perform(self, step: HttpRequest | Sleep) -> Reply | None:
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        return self._send(step)

    def _ahead(self, step: HttpRequest | Sleep) -> Callable[[], Reply] | None:
        """Send a request ahead on the blocking pool; None: not now (no free slot, or a wait)."""
        return self._pool.send_ahead(step) if isinstance(step, HttpRequest) else None

    async def _aperform(self, step: HttpRequest | Sleep) -> Reply | None:
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            answer = None
        else:
            answer = await self._asend(step)
        if self._credentials.refresh_due():  # checked here: no coroutine made for nothing
            await self._credentials.ready()
        return answer

    async def _signable(self) -> None:
        """Refresh due credentials in a worker thread (making the next step may sign)."""
        if self._credentials.refresh_due():
            await self._credentials.ready()

    def _run(self, make: Callable[[], Exchange[T]], begun: Callable[[], T] | None = None) -> T:
        """Carry out ``make()``'s exchange (or finish ``begun``, one already sent ahead),
        following the bucket once to another region's host."""
        try:
            return run_steps(make(), self._perform) if begun is None else begun()
        except BucketRegionError as moved:
            self._move(moved)
        return run_steps(make(), self._perform)

    def send_ahead(self, request: StorageRequest) -> Callable[[], Any]:
        """Send the first HTTP request of ``request`` now (see :class:`~..requests.SendsAhead`);
        retries, and a request that finds no free connection slot, run when it is read."""
        make: Callable[[], Exchange[Any]] = partial(call, self._protocol, request)
        begun = send_steps_ahead(make(), self._perform, self._ahead)
        return lambda: self._run(make, begun)

    async def _arun(self, make: Callable[[], Exchange[T]]) -> T:
        """Carry out ``make()``'s exchange on the running loop, following the bucket once."""
        try:
            await self._signable()
            return await arun_steps(make(), self._aperform)
        except BucketRegionError as moved:
            old = self._aio.get(asyncio.get_running_loop())
            self._move(moved)
            if old is not None:
                await old.close()
        await self._signable()
        return await arun_steps(make(), self._aperform)

    def close(self) -> None:
        """Close the blocking pool's idle connections (the store stays usable)."""
        self._pool.close()

    async def aclose(self) -> None:
        """Close the idle connections of the running loop's pool (the store stays usable)."""
        pool = self._aio.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()

    def check(self) -> None:
        """Check that the bucket exists and the credentials may use it (``HeadBucket``)."""
        self._run(self._protocol.check)

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key`` with one ``PutObject`` (``CREATE``: ``If-None-Match: *``)."""
        self._run(partial(self._protocol.put, key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it."""
        return self._run(partial(self._protocol.get, key, byte_range))

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` keys after ``start_after`` under ``prefix`` (one request)."""
        return self._run(partial(self._protocol.list, prefix, start_after, limit))

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the keys with quiet ``DeleteObjects``, 1,000 keys per request."""
        self._run(partial(self._protocol.delete, keys))

    async def acheck(self) -> None:
        """Coroutine of :meth:`check`."""
        await self._arun(self._protocol.check)

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Coroutine of :meth:`put`."""
        await self._arun(partial(self._protocol.put, key, data, mode))

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Coroutine of :meth:`get`."""
        return await self._arun(partial(self._protocol.get, key, byte_range))

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """Coroutine of :meth:`list`."""
        return await self._arun(partial(self._protocol.list, prefix, start_after, limit))

    async def adelete(self, keys: Sequence[str]) -> None:
        """Coroutine of :meth:`delete`."""
        await self._arun(partial(self._protocol.delete, keys))

    def retention(self) -> Retention:
        """The bucket's versioning and Object Lock state (``GetBucketVersioning``, and
        ``GetObjectLockConfiguration`` when versioning was ever on)."""
        return self._run(partial(version_requests.retention, self._protocol))

    def versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under ``prefix`` (``ListObjectVersions``)."""
        return self._run(partial(version_requests.versions, self._protocol, prefix))

    def delete_versions(self, versions: Sequence[ObjectVersion]) -> list[RefusedVersion]:
        """Delete these versions for good; return those the bucket refused (Object Lock)."""
        return self._run(partial(version_requests.delete_versions, self._protocol, versions))
