"""LeanS3Store's configuration from the environment, and its cap on open connections.

The endpoint and region come from the same environment variables boto3 reads
(plus ``AWS_REGION``) when no argument names them, on every path that builds
the store, not only ``from_url``. The async pool never opens more than
``max_connections`` sockets per event loop: counted where sockets are opened
(``asyncio.open_connection``) and closed, not by the pool's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from lean_helpers import Recorder, SocketCounter, ThreadSocketCounter

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import PutMode
from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.s3 import Boto3S3Store
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.urls import open_s3_store, store_from_url

ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No endpoint or region from the environment or a profile."""
    for name in (*ENV, "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    return monkeypatch


# --- endpoint ------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"])
async def test_endpoint_from_the_environment_is_used(
    clean_env: pytest.MonkeyPatch,
    creds_env: None,
    s3_endpoint: Any,
    s3_bucket: str,
    variable: str,
) -> None:
    clean_env.setenv(variable, s3_endpoint.url)
    store = LeanS3Store(s3_bucket, "env/", region_name=s3_endpoint.region)
    assert store.endpoint == s3_endpoint.url
    assert store.location == f"s3://{s3_bucket}/env/ at {s3_endpoint.url}"
    store.put("k", b"sync", PutMode.CREATE)
    assert await store.aget("k") == b"sync"
    try:
        await store.aput("a", b"async")
        assert store.get("a") == b"async"
        # ...and it is the bucket on that server.
        assert s3_endpoint.client().get_object(Bucket=s3_bucket, Key="env/a")["Body"].read() == (
            b"async"
        )
    finally:
        await store.aclose()
        store.close()


@pytest.mark.parametrize(
    ("argument", "s3_variable", "generic_variable"),
    [("server", "down", "down"), (None, "server", "down"), (None, None, "server")],
    ids=["argument-first", "s3-variable-next", "generic-variable-last"],
)
def test_endpoint_precedence(
    clean_env: pytest.MonkeyPatch,
    creds_env: None,
    s3_endpoint: Any,
    s3_bucket: str,
    argument: str | None,
    s3_variable: str | None,
    generic_variable: str | None,
) -> None:
    urls = {"server": s3_endpoint.url, "down": _closed_port_url(), None: None}
    for name, which in (
        ("AWS_ENDPOINT_URL_S3", s3_variable),
        ("AWS_ENDPOINT_URL", generic_variable),
    ):
        if which is not None:
            clean_env.setenv(name, str(urls[which]))
    store = LeanS3Store(
        s3_bucket, endpoint_url=urls[argument], region_name=s3_endpoint.region, max_attempts=1
    )
    assert store.endpoint == s3_endpoint.url
    store.put("k", b"v")
    assert store.get("k") == b"v"
    store.close()


def test_from_bucket_reaches_the_endpoint_of_the_environment(
    clean_env: pytest.MonkeyPatch, creds_env: None, s3_endpoint: Any, s3_bucket: str
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    clean_env.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint.url)
    clean_env.setenv("AWS_DEFAULT_REGION", s3_endpoint.region)
    with ObjectStoreSaver.from_bucket(s3_bucket, "saver/") as saver:
        assert isinstance(saver.store, LeanS3Store)
        assert saver.store.endpoint == s3_endpoint.url
        saver.store.check()
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        saver.put(config, checkpoint, {}, {})
        got = saver.get_tuple(config)
        assert got is not None and got.checkpoint["id"] == checkpoint["id"]
    listed = s3_endpoint.client().list_objects_v2(Bucket=s3_bucket, Prefix="saver/")
    assert listed["KeyCount"] > 0


def test_ignore_configured_endpoint_urls(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AWS_ENDPOINT_URL_S3", _closed_port_url())
    clean_env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    store = LeanS3Store("bucket", region_name="eu-west-1")
    assert store.endpoint == "https://bucket.s3.eu-west-1.amazonaws.com"


@pytest.mark.parametrize("transport", ["lean", "boto3"])
def test_a_url_and_a_store_built_directly_resolve_the_endpoint_alike(
    clean_env: pytest.MonkeyPatch, transport: str
) -> None:
    configured = _closed_port_url()
    clean_env.setenv("AWS_ENDPOINT_URL_S3", configured)
    direct = open_s3_store("bucket", transport=transport, region_name="eu-west-1")
    from_url = store_from_url(f"s3://bucket/?region=eu-west-1&transport={transport}", check=False)
    assert configured in direct.location
    assert from_url.location == direct.location
    # Ignored endpoints are ignored by both: they go to AWS itself.
    clean_env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    direct = open_s3_store("bucket", transport=transport, region_name="eu-west-1")
    from_url = store_from_url(f"s3://bucket/?region=eu-west-1&transport={transport}", check=False)
    assert configured not in from_url.location
    assert from_url.location == direct.location


def test_boto3_store_uses_path_style_for_an_endpoint_of_the_environment(
    clean_env: pytest.MonkeyPatch,
) -> None:
    configured = _closed_port_url()
    clean_env.setenv("AWS_ENDPOINT_URL", configured)
    store = Boto3S3Store("bucket", region_name="eu-west-1")
    assert store.client.meta.config.s3 == {"addressing_style": "path"}
    assert store.client.meta.endpoint_url == configured


def test_bad_endpoint_in_the_environment_names_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AWS_ENDPOINT_URL", "ftp://127.0.0.1:9")
    with pytest.raises(
        ValueError, match=re.escape("AWS_ENDPOINT_URL 'ftp://127.0.0.1:9' is not an http")
    ):
        LeanS3Store("bucket")
    clean_env.setenv("AWS_ENDPOINT_URL_S3", "http://user:pw-in-env@127.0.0.1:9")
    with pytest.raises(ValueError, match=r"AWS_ENDPOINT_URL_S3 .* carries user info") as info:
        LeanS3Store("bucket")
    assert "pw-in-env" not in str(info.value)


# --- region --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "on_session", "aws_region", "aws_default_region", "expected"),
    [
        ("ap-south-1", "sa-east-1", "eu-west-3", "eu-central-1", "ap-south-1"),
        (None, "sa-east-1", "eu-west-3", "eu-central-1", "sa-east-1"),
        (None, None, "eu-west-3", "eu-central-1", "eu-west-3"),
        (None, None, None, "eu-central-1", "eu-central-1"),
        (None, None, None, None, "us-east-1"),
    ],
    ids=["argument", "session", "AWS_REGION", "AWS_DEFAULT_REGION", "default"],
)
def test_region_precedence_and_signature_scope(
    clean_env: pytest.MonkeyPatch,
    creds_env: None,
    argument: str | None,
    on_session: str | None,
    aws_region: str | None,
    aws_default_region: str | None,
    expected: str,
) -> None:
    for name, value in (("AWS_REGION", aws_region), ("AWS_DEFAULT_REGION", aws_default_region)):
        if value is not None:
            clean_env.setenv(name, value)
    session = boto3.session.Session(region_name=on_session) if on_session else None
    store = LeanS3Store(
        "bucket", endpoint_url=_closed_port_url(), region_name=argument, session=session
    )
    assert store.region == expected
    recorder = Recorder(store, intercept=lambda _req: HttpResponse(200, {}, b"body"))
    assert store.get("k") == b"body"
    assert f"/{expected}/s3/aws4_request" in recorder.requests[0].headers["authorization"]


# --- open connections per event loop --------------------------------------------------------


def _seed(s3_endpoint: Any, s3_bucket: str, count: int) -> None:
    client = s3_endpoint.client()
    for i in range(count):
        client.put_object(Bucket=s3_bucket, Key=f"cap/k{i}", Body=bytes([i]) * 300)


async def _concurrent_gets(
    s3_endpoint: Any, s3_bucket: str, count: int, counter: SocketCounter, **options: Any
) -> AsyncConnectionPool:
    _seed(s3_endpoint, s3_bucket, count)
    store = s3_endpoint.lean_store(s3_bucket, "cap/", **options)
    try:
        bodies = await asyncio.gather(*(store.aget(f"k{i}") for i in range(count)))
        assert bodies == [bytes([i]) * 300 for i in range(count)]
        return store._aio_pool()
    finally:
        await store.aclose()


async def test_max_connections_caps_the_sockets_of_64_concurrent_gets(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = SocketCounter(monkeypatch)
    pool = await _concurrent_gets(s3_endpoint, s3_bucket, 64, counter, max_connections=4)
    assert 1 <= counter.peak <= 4
    assert pool.peak_busy == 4  # the 64 did run four at a time
    assert counter.open == 0  # aclose closed what was left idle


async def test_without_a_low_cap_the_same_gets_open_more_sockets(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control of the test above: the counter does see concurrent connections."""
    counter = SocketCounter(monkeypatch)
    await _concurrent_gets(s3_endpoint, s3_bucket, 64, counter)
    assert counter.peak > 4


async def test_a_request_waits_for_a_free_connection_at_most_wait_timeout() -> None:
    accepted: list[socket.socket] = []
    listener = socket.create_server(("127.0.0.1", 0))
    host = f"127.0.0.1:{listener.getsockname()[1]}"

    async def black_hole() -> None:  # accepts, never answers
        loop = asyncio.get_running_loop()
        listener.setblocking(False)
        while True:
            conn, _ = await loop.sock_accept(listener)
            accepted.append(conn)

    server = asyncio.create_task(black_hole())
    pool = AsyncConnectionPool(
        "http",
        host,
        connect_timeout=5.0,
        read_timeout=30.0,
        max_idle=4,
        max_connections=1,
        wait_timeout=0.2,
    )
    request = HttpRequest("GET", "/b/k", {"host": host})
    holder = asyncio.create_task(pool.send(request))
    try:
        for _ in range(500):  # bounded: until the first request holds the one connection
            if accepted:
                break
            await asyncio.sleep(0.01)
        assert pool.busy == 1
        reply = await pool.send(request)
        assert isinstance(reply, TransportFailure)
        assert reply.error.startswith("PoolTimeoutError: all 1 connections stayed busy")
        assert reply.sent is False
        assert len(accepted) == 1
    finally:
        holder.cancel()
        server.cancel()
        await asyncio.gather(holder, server, return_exceptions=True)
        for conn in accepted:
            conn.close()
        listener.close()
    assert pool.busy == 0  # a cancelled request gave its slot back


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "4"])
def test_invalid_max_connections_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="max_connections must be an integer of at least 1"):
        LeanS3Store("bucket", endpoint_url="http://127.0.0.1:9", max_connections=value)


def _threaded_gets(store: LeanS3Store, count: int) -> list[bytes]:
    barrier = threading.Barrier(count)
    bodies: dict[int, bytes] = {}

    def get(i: int) -> None:
        barrier.wait(30)
        bodies[i] = store.get(f"k{i}")

    threads = [threading.Thread(target=get, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return [bodies.get(i, b"") for i in range(count)]


def test_max_connections_caps_the_blocking_pool_too(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(s3_endpoint, s3_bucket, 64)
    store = s3_endpoint.lean_store(s3_bucket, "cap/", max_connections=4)
    counter = ThreadSocketCounter(monkeypatch)
    try:
        assert _threaded_gets(store, 64) == [bytes([i]) * 300 for i in range(64)]
    finally:
        store.close()
    assert 1 <= counter.peak <= 4
    assert 1 <= store._pool.peak_busy <= 4
    assert counter.open == 0


def test_without_a_low_cap_64_threads_open_more_sockets(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control of the test above: eight connections can be open at once."""
    _seed(s3_endpoint, s3_bucket, 64)
    store = s3_endpoint.lean_store(s3_bucket, "cap/")
    counter = ThreadSocketCounter(monkeypatch, hold=8)
    try:
        assert _threaded_gets(store, 64) == [bytes([i]) * 300 for i in range(64)]
    finally:
        store.close()
    assert counter.peak >= 8


def test_a_blocking_request_waits_for_a_free_connection_at_most_wait_timeout() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    pool = ConnectionPool(
        "http",
        host,
        connect_timeout=5.0,
        read_timeout=30.0,
        max_idle=4,
        max_connections=1,
        wait_timeout=0.2,
    )
    request = HttpRequest("GET", "/b/k", {"host": host})
    replies: list[Any] = []
    holder = threading.Thread(target=lambda: replies.append(pool.send(request)))
    holder.start()
    conn, _ = listener.accept()  # the holder's request arrived; it is never answered
    try:
        assert pool.busy == 1
        reply = pool.send(request)
        assert isinstance(reply, TransportFailure)
        assert reply.error.startswith("PoolTimeoutError: all 1 connections stayed busy")
        assert reply.sent is False
    finally:
        conn.close()  # the holder reads EOF and gives its slot back
        holder.join(30)
        listener.close()
    assert isinstance(replies[0], TransportFailure)
    assert pool.busy == 0


def test_lean_only_options_with_boto3_are_refused_naming_them() -> None:
    from objstore_saver.storage.urls import open_s3_store

    with pytest.raises(
        ValueError, match="options of transport='lean' only: max_connections, session"
    ):
        open_s3_store("bucket", transport="boto3", max_connections=4, session=object())
    store = open_s3_store("bucket", endpoint_url="http://127.0.0.1:9", max_connections=4)
    assert isinstance(store, LeanS3Store)
