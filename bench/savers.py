"""Every saver of the comparison, opened the same way for every workload.

A :class:`SaverSpec` opens a fresh, empty instance of one saver (its own bucket,
directory, file or database) as a :class:`Handle`: the saver, the meter that
reads what it sent to storage, and, where storage can be listed, a function
returning every stored object with a fingerprint of its content.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config

from bench.meters import (
    CallCounter,
    CountingSerializer,
    Meter,
    ProxyMeter,
    SerdeMeter,
    StoreMeter,
    open_tcp_relay,
)
from bench.shims import LegacySerdeShim
from objstore_saver.storage.base import PutMode, StoreWrapper

if TYPE_CHECKING:
    from objstore_saver.crypto import ClientEncryption

ACCESS_KEY = "bench-access-key"
SECRET_KEY = "bench-secret-key"
REGION = "us-east-1"

Listing = dict[str, str]
"""Stored objects: key (or row id) to a fingerprint of the content."""


@dataclass
class Env:
    """The servers and scratch space shared by every saver of a run."""

    proxy_url: str
    s3_url: str
    """The S3 server itself, bypassing the proxy (setup and proofs, not metered)."""
    tmp: str
    postgres: Any = None
    #: Round trip injected into every request of the local-directory saver
    #: (workload 6 only: the same latency as the proxy, without an S3 server).
    local_delay_s: float = 0.0
    keys: tuple[str, str] = (ACCESS_KEY, SECRET_KEY)
    """Access key id and secret key of the S3 server."""
    postgres_relay_port: int | None = None
    """The server process's delaying relay to PostgreSQL, once opened (workload 6)."""
    _names: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        # Clients that take no endpoint argument (aioboto3 sessions of the
        # langgraph-checkpoint-s3 saver) find the proxy through these.
        os.environ["AWS_ACCESS_KEY_ID"] = self.keys[0]
        os.environ["AWS_SECRET_ACCESS_KEY"] = self.keys[1]
        os.environ["AWS_DEFAULT_REGION"] = REGION
        os.environ["AWS_ENDPOINT_URL"] = self.proxy_url
        self.direct = self.client(self.s3_url)

    def client(self, url: str | None = None) -> Any:
        """A boto3 S3 client on the proxy (or ``url``), path-style addressing."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=url or self.proxy_url,
            region_name=REGION,
            aws_access_key_id=self.keys[0],
            aws_secret_access_key=self.keys[1],
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                max_pool_connections=64,
                retries={"mode": "standard", "total_max_attempts": 5},
            ),
        )

    def name(self, stem: str) -> str:
        """A new unique name (bucket, database, directory)."""
        return f"{stem}-{next(self._names)}".lower().replace("_", "-")

    def new_bucket(self, stem: str) -> str:
        """Create a bucket directly on the S3 server (not metered), ready for writes.

        SeaweedFS allocates a new bucket's storage volumes at its first
        non-empty write, about 200 ms: a warm-up object is written and
        deleted here, so no saver's first request pays for it (a workload of
        64 conversations lasts about a second).
        """
        bucket = self.name(stem)[:63]
        self.direct.create_bucket(Bucket=bucket)
        self.direct.put_object(Bucket=bucket, Key="bench-warm-up", Body=b"warm-up")
        self.direct.delete_object(Bucket=bucket, Key="bench-warm-up")
        return bucket

    def bucket_listing(self, bucket: str) -> Listing:
        """Every object of a bucket with its ETag, read directly from the S3 server."""
        out: Listing = {}
        for page in self.direct.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                out[item["Key"]] = item["ETag"]
        return out


@dataclass
class Handle:
    """One open saver instance."""

    saver: Any
    meter: Meter
    calls: CallCounter
    listing: Callable[[], Listing] | None = None
    """Every stored object, for proofs of what a delete left; None if not listable."""
    simulated_latency: bool = False
    """Whether requests of this saver get the proxy's injected round trip."""


def _directory_listing(root: str) -> Listing:
    out: Listing = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _sqlite_listing(path: str) -> Listing:
    conn = sqlite3.connect(path)
    try:
        out: Listing = {}
        for table in ("checkpoints", "writes"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                digest = hashlib.sha256(repr(row).encode()).hexdigest()
                out[f"{table}/{row[0]}/{row[1]}/{row[2]}/{digest[:16]}"] = digest
        return out
    finally:
        conn.close()


def _postgres_listing(conninfo: str) -> Listing:
    import psycopg

    out: Listing = {}
    with psycopg.connect(conninfo) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                digest = hashlib.sha256(repr(row).encode()).hexdigest()
                out[f"{table}/{row[0]}/{row[1]}/{row[2]}/{digest[:16]}"] = digest
    return out


def _serde_handle(saver: Any, serde: CountingSerializer, listing: Any = None) -> Handle:
    calls = CallCounter(saver)
    return Handle(saver, SerdeMeter(serde, calls), calls, listing)


class SaverSpec:
    """How to open one saver of the comparison, sync and async.

    Subclasses implement :meth:`open_sync` and :meth:`open_async`; both yield a
    fresh empty instance.
    """

    name = ""
    label = ""
    storage = ""
    """``s3``, ``local``, ``memory`` or ``sql``."""
    package = ""
    """Distribution whose version the report records."""
    workloads: tuple[str, ...] = ()
    """Ids of the only workloads it runs in; empty: any workload."""

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        raise NotImplementedError
        yield  # pragma: no cover


class ObjstoreS3(SaverSpec):
    """objstore-saver on S3 with its default transport (``LeanS3Store``), in clear."""

    name, label, storage, package = "objstore-s3", "objstore-saver (S3)", "s3", "objstore-saver"

    def store(self, env: Env, bucket: str) -> Any:
        from objstore_saver.storage import LeanS3Store

        # Credentials come from the environment Env set (the server's keys).
        return LeanS3Store(bucket, endpoint_url=env.proxy_url, region_name=REGION)

    def client_encryption(self) -> ClientEncryption | bool:
        """The saver's ``client_encryption`` argument: ``False``, in clear.

        Explicitly ``False``, not the default ``None``: an
        ``OBJSTORE_SAVER_ENCRYPTION_KEY`` in the benchmark's environment must
        not encrypt the clear rows silently.
        """
        return False

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from objstore_saver import ObjectStoreSaver

        bucket = env.new_bucket("objstore")
        with ObjectStoreSaver(
            self.store(env, bucket), client_encryption=self.client_encryption()
        ) as saver:
            calls = CallCounter(saver)
            yield Handle(
                saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
            )

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        with self.open_sync(env) as handle:
            yield handle


class ObjstoreS3Boto3(ObjstoreS3):
    """objstore-saver on S3 through boto3 (``transport=boto3``), for comparison."""

    name, label = "objstore-s3-boto3", "objstore-saver (S3, boto3)"

    def store(self, env: Env, bucket: str) -> Any:
        from objstore_saver import Boto3S3Store

        return Boto3S3Store(bucket, client=env.client())


class ObjstoreS3Encrypted(ObjstoreS3):
    """objstore-saver on S3 (``LeanS3Store``) with client-side encryption.

    Each open instance gets a fresh random local master key (32 bytes from
    ``os.urandom``), so nothing is read from the environment; every object
    of a thread is sealed with AES-256-SIV under the thread's own key, whose
    key object (``keys/threads/<T>``) the thread's first write creates
    (docs/encryption.md). Everything else is :class:`ObjstoreS3`'s, so its
    rows compare with that saver's: the targets' encrypted ÷ clear ratios.
    """

    name, label = "objstore-s3-encrypted", "objstore-saver (S3, encrypted)"

    def client_encryption(self) -> ClientEncryption | bool:
        """Settings with one fresh random local master key (needs ``cryptography``)."""
        from objstore_saver.crypto import ClientEncryption
        from objstore_saver.crypto.master_keys import LocalMasterKey

        return ClientEncryption.of(LocalMasterKey(os.urandom(32)))


class DelayedStore(StoreWrapper):
    """Waits ``env.local_delay_s`` before each request, like a network round trip.

    The blocking methods sleep in the calling (worker) thread; the coroutines
    await ``asyncio.sleep`` on the event loop, as a request to a remote store
    would. Either way requests issued in parallel overlap.
    """

    def __init__(self, inner: Any, env: Env) -> None:
        super().__init__(inner)
        self.env = env

    def _wait(self) -> None:
        if self.env.local_delay_s:
            time.sleep(self.env.local_delay_s)

    async def _await(self) -> None:
        if self.env.local_delay_s:
            await asyncio.sleep(self.env.local_delay_s)

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self._wait()
        self.inner.put(key, data, mode)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        self._wait()
        return self.inner.get(key, byte_range)

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> Any:
        self._wait()
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, keys: Any) -> None:
        self._wait()
        self.inner.delete(keys)

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        await self._await()
        await self.inner.aput(key, data, mode)

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        await self._await()
        return await self.inner.aget(key, byte_range)

    async def alist(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> Any:
        await self._await()
        return await self.inner.alist(prefix, start_after=start_after, limit=limit)

    async def adelete(self, keys: Any) -> None:
        await self._await()
        await self.inner.adelete(keys)


class ObjstoreLocal(SaverSpec):
    name, label, storage, package = (
        "objstore-local",
        "objstore-saver (local dir)",
        "local",
        "objstore-saver",
    )

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver

        root = os.path.join(env.tmp, env.name("objstore-local"))
        store = MeteredStore(LocalStore(root))
        # In clear whatever the environment says (see ObjstoreS3.client_encryption).
        with ObjectStoreSaver(DelayedStore(store, env), client_encryption=False) as saver:
            calls = CallCounter(saver)
            yield Handle(saver, StoreMeter(store), calls, lambda: _directory_listing(root))

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        with self.open_sync(env) as handle:
            yield handle


class InMemory(SaverSpec):
    name, label, storage, package = "inmemory", "InMemorySaver", "memory", "langgraph-checkpoint"

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from langgraph.checkpoint.memory import InMemorySaver

        serde = CountingSerializer()
        yield _serde_handle(InMemorySaver(serde=serde), serde)

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        with self.open_sync(env) as handle:
            yield handle


class Sqlite(SaverSpec):
    name, label, storage, package = "sqlite", "SqliteSaver", "sql", "langgraph-checkpoint-sqlite"

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = os.path.join(env.tmp, env.name("sqlite") + ".db")
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            serde = CountingSerializer()
            saver = SqliteSaver(conn, serde=serde)
            saver.setup()
            yield _serde_handle(saver, serde, lambda: _sqlite_listing(path))
        finally:
            conn.close()

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = os.path.join(env.tmp, env.name("sqlite") + ".db")
        async with aiosqlite.connect(path) as conn:
            serde = CountingSerializer()
            saver = AsyncSqliteSaver(conn, serde=serde)
            await saver.setup()
            yield _serde_handle(saver, serde, lambda: _sqlite_listing(path))


class Postgres(SaverSpec):
    name, label, storage, package = (
        "postgres",
        "PostgresSaver",
        "sql",
        "langgraph-checkpoint-postgres",
    )
    #: Whether the saver's queries wait the proxy's injected round trip.
    delayed = False

    def _conninfo(self, env: Env) -> str:
        """A fresh database for one saver."""
        if env.postgres is None:
            raise RuntimeError("PostgreSQL server was not started for this run")
        return env.postgres.create_database(env.name("pg").replace("-", "_"))

    def _handle(self, saver: Any, serde: CountingSerializer, conninfo: str) -> Handle:
        handle = _serde_handle(saver, serde, lambda: _postgres_listing(conninfo))
        handle.simulated_latency = self.delayed
        return handle

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conninfo = self._conninfo(env)
        with psycopg.connect(
            conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            serde = CountingSerializer()
            saver = PostgresSaver(conn, serde=serde)
            saver.setup()
            yield self._handle(saver, serde, conninfo)

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row

        conninfo = self._conninfo(env)
        async with await psycopg.AsyncConnection.connect(
            conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            serde = CountingSerializer()
            saver = AsyncPostgresSaver(conn, serde=serde)
            await saver.setup()
            yield self._handle(saver, serde, conninfo)


class PostgresSameTrip(Postgres):
    """PostgresSaver whose queries wait the S3 requests' round trip (workload 6).

    The same saver on the same single connection as :class:`Postgres`, but
    reached through a :class:`~bench.tcp_relay.DelayRelay` in the benchmark's
    server process, which holds what the client sends for the proxy's
    injected round trip: with it on, every query waits as each S3 request
    does. (PostgresSaver runs one query of an instance at a time, under its
    own lock, even on a pool of connections.)
    """

    name, label = "postgres-rtt", "PostgresSaver (S3's round trip)"
    workloads = ("6a", "6b")
    delayed = True

    def _conninfo(self, env: Env) -> str:
        from psycopg.conninfo import make_conninfo

        conninfo = super()._conninfo(env)
        assert env.postgres is not None
        if env.postgres_relay_port is None:
            env.postgres_relay_port = open_tcp_relay(env.proxy_url, "127.0.0.1", env.postgres.port)
        return make_conninfo(conninfo, host="127.0.0.1", port=env.postgres_relay_port)


class ObjectStoragePeer(SaverSpec):
    name, label, storage, package = (
        "objectstorage",
        "langgraph-checkpoint-objectstorage (s3fs)",
        "s3",
        "langgraph-checkpoint-objectstorage",
    )

    def _fs(self, env: Env, **kwargs: Any) -> Any:
        import s3fs

        return s3fs.S3FileSystem(
            key=env.keys[0],
            secret=env.keys[1],
            endpoint_url=env.proxy_url,
            client_kwargs={"region_name": REGION},
            skip_instance_cache=True,
            use_listings_cache=False,
            **kwargs,
        )

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from langgraph_checkpoint_objectstorage import ObjectStorageSaver

        bucket = env.new_bucket("objectstorage")
        saver = ObjectStorageSaver(self._fs(env), f"{bucket}/checkpoints")
        calls = CallCounter(saver)
        yield Handle(
            saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
        )

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        import asyncio

        from langgraph_checkpoint_objectstorage import ObjectStorageSaver

        bucket = env.new_bucket("objectstorage")
        fs = self._fs(env, asynchronous=True, loop=asyncio.get_running_loop())
        session = await fs.set_session()
        try:
            saver = ObjectStorageSaver(fs, f"{bucket}/checkpoints")
            calls = CallCounter(saver)
            yield Handle(
                saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
            )
        finally:
            await session.close()


class TigrisPeer(SaverSpec):
    name, label, storage, package = (
        "tigris",
        "langgraph-checkpoint-tigris",
        "s3",
        "langgraph-checkpoint-tigris",
    )

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from langgraph.checkpoint.tigris import TigrisSaver

        bucket = env.new_bucket("tigris")
        saver = TigrisSaver(bucket, client=env.client())
        saver.setup()
        calls = CallCounter(saver)
        yield Handle(
            saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
        )

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        from langgraph.checkpoint.tigris.aio import AsyncTigrisSaver

        bucket = env.new_bucket("tigris")
        saver = AsyncTigrisSaver(bucket, endpoint_url=env.proxy_url, region_name=REGION)
        await saver.setup()
        calls = CallCounter(saver)
        yield Handle(
            saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
        )


class S3Peer(SaverSpec):
    name, label, storage, package = (
        "s3peer",
        "langgraph-checkpoint-s3 (+serde shim)",
        "s3",
        "langgraph-checkpoint-s3",
    )

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        from langgraph_checkpoint_s3 import S3CheckpointSaver

        bucket = env.new_bucket("s3peer")
        saver = S3CheckpointSaver(bucket, s3_client=env.client(), serde=LegacySerdeShim())
        calls = CallCounter(saver)
        yield Handle(
            saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
        )

    @contextlib.asynccontextmanager
    async def open_async(self, env: Env) -> AsyncIterator[Handle]:
        from langgraph_checkpoint_s3 import AsyncS3CheckpointSaver

        bucket = env.new_bucket("s3peer")
        saver = AsyncS3CheckpointSaver(bucket, serde=LegacySerdeShim())
        calls = CallCounter(saver)
        yield Handle(
            saver, ProxyMeter(env.proxy_url), calls, lambda: env.bucket_listing(bucket), True
        )


ALL_SAVERS: list[SaverSpec] = [
    ObjstoreS3(),
    ObjstoreS3Encrypted(),
    ObjstoreS3Boto3(),
    ObjstoreLocal(),
    InMemory(),
    Sqlite(),
    Postgres(),
    PostgresSameTrip(),
    ObjectStoragePeer(),
    TigrisPeer(),
    S3Peer(),
]
"""Every saver of the comparison, in report order."""

POSTGRES_SAVERS = (Postgres.name, PostgresSameTrip.name)
"""The savers that need the run's PostgreSQL server."""
