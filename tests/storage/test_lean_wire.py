"""LeanS3Store on the wire: signing, what goes out, timeouts, connection reuse and
HTTP/1.1 framing of both connection pools (loopback servers of the tests' own)."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import botocore.auth
import botocore.awsrequest
import botocore.credentials
import pytest
from http_servers import read_request
from lean_helpers import AsyncDriven, lean

from objstore_saver.storage import (
    PutMode,
    StoreUnavailableError,
)
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.sigv4 import Credentials, Signer, canonical_query

# --- signing ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "session-token/with+chars="])
def test_signature_matches_botocore(token: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same canonical request, same signature as botocore's S3 SigV4 signer."""
    now = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    body = b"<Delete><Quiet>true</Quiet></Delete>"
    digest = hashlib.sha256(body).hexdigest()
    query = canonical_query(
        {"list-type": "2", "prefix": "a b/%~", "start-after": "x/y", "delete": ""}
    )
    path = "/bucket/dir/%2541~k"
    headers = {"host": "127.0.0.1:9000", "content-md5": "abc==", "x-amz-meta-x": " a  b "}
    Signer("eu-west-3").sign(
        "POST",
        "127.0.0.1:9000",
        path,
        query,
        headers,
        digest,
        Credentials("AKIDEXAMPLE", "secret/key+x", token),
        now,
    )
    request = botocore.awsrequest.AWSRequest(
        "POST",
        f"http://127.0.0.1:9000{path}?{query}",
        data=body,
        headers={"content-md5": "abc==", "x-amz-meta-x": " a  b ", "x-amz-content-sha256": digest},
    )
    auth = botocore.auth.S3SigV4Auth(
        botocore.credentials.Credentials("AKIDEXAMPLE", "secret/key+x", token), "s3", "eu-west-3"
    )
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    auth.add_auth(request)
    assert headers["authorization"] == request.headers["Authorization"]
    assert headers["x-amz-date"] == request.headers["X-Amz-Date"]
    if token:
        assert headers["x-amz-security-token"] == token


def test_credentials_never_show() -> None:
    creds = Credentials("AKIDSHOWN", "very-secret", "tok")
    assert "very-secret" not in repr(creds) and "AKIDSHOWN" not in repr(creds)


# --- timeouts and the wire ---------------------------------------------------------------------


@pytest.fixture
def raw_server() -> Iterator[tuple[str, list[bytes], threading.Event]]:
    """A loopback server recording request heads; answers 200 unless ``silent`` is set.

    ``silent.closing`` (an event too) makes it close each connection after its
    answer, without saying so, as servers do with idle keep-alive connections.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []
    silent = threading.Event()
    closing = threading.Event()
    silent.closing = closing  # type: ignore[attr-defined]
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve_one(conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        try:
            while True:
                got = read_request(conn, data)
                if got is None:
                    return
                request, data = got
                heads.append(request.partition(b"\r\n\r\n")[0])
                if silent.is_set():
                    held.append(conn)
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                if closing.is_set():
                    conn.close()
                    return
        except OSError:
            return

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads, silent
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_puts_do_not_wait_for_100_continue(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None
) -> None:
    url, heads, _ = raw_server
    store = LeanS3Store("bucket", endpoint_url=url)
    store.put("k", b"v" * 100_000)
    driven = AsyncDriven(store)
    try:
        driven.put("k2", b"v" * 100_000, PutMode.CREATE)
    finally:
        driven.close()
    assert len(heads) == 2
    for head in heads:
        assert head.startswith(b"PUT /bucket/")
        assert b"expect:" not in head.lower()
    assert b"if-none-match: *" in heads[1].lower()


@pytest.mark.parametrize("use_async", [False, True])
def test_read_timeout_ends_each_attempt(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None, use_async: bool
) -> None:
    url, heads, silent = raw_server
    silent.set()
    store = LeanS3Store(
        "bucket", endpoint_url=url, max_attempts=2, read_timeout=0.3, backoff_base=0
    )
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        with pytest.raises(StoreUnavailableError) as info:
            driven.get("k")
    finally:
        if use_async:
            driven.close()
    assert url in str(info.value)
    assert "Timeout" in str(info.value)
    assert len(heads) == 2  # one request per attempt, each ended by the timeout


def test_a_put_refused_early_does_not_stall_the_next_put(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    missing = lean(s3_endpoint, f"missing-{uuid.uuid4().hex[:12]}", read_timeout=5, max_attempts=1)
    good = lean(s3_endpoint, s3_bucket, read_timeout=5, max_attempts=1)
    for _ in range(3):
        with pytest.raises(StoreUnavailableError):
            missing.put("k", b"v")
        good.put("k", b"v")
    assert good.get("k") == b"v"


@pytest.mark.parametrize("use_async", [False, True])
def test_a_connection_the_server_closed_is_not_reused(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None, use_async: bool
) -> None:
    url, heads, control = raw_server
    control.closing.set()  # type: ignore[attr-defined]
    # One attempt only: a stale pooled connection must not cost a failed attempt.
    store = LeanS3Store("bucket", endpoint_url=url, max_attempts=1)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        for i in range(5):
            driven.put(f"k{i}", b"v")
            time.sleep(0.05)  # the server's close reaches the client first
    finally:
        if use_async:
            driven.close()
    assert len(heads) == 5


# --- HTTP/1.1 framing of both pools ------------------------------------------------------


def _canned_server(answer: bytes) -> tuple[str, threading.Thread, socket.socket]:
    """A loopback server answering one request with ``answer`` bytes, then closing."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{listener.getsockname()[1]}", thread, listener


FRAMINGS = {
    "content-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, b"hello"),
    "chunked": (
        b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\nX-Amz-Id: 1\r\n\r\n"
        b"3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nTrailer: x\r\n\r\n",
        206,
        b"hello",
    ),
    "until-close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", 200, b"hello"),
    "interim-100": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 412 Precondition Failed\r\n"
        b"Content-Length: 2\r\n\r\nno",
        412,
        b"no",
    ),
}


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_pools_read_every_framing(framing: str, use_async: bool) -> None:
    from objstore_saver.storage.http.async_pool import AsyncConnectionPool
    from objstore_saver.storage.http.sync_pool import ConnectionPool

    answer, status, body = FRAMINGS[framing]
    host, thread, listener = _canned_server(answer)
    options = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}
    request = HttpRequest("GET", "/b/k", {"host": host})
    try:
        if use_async:
            reply = asyncio.run(AsyncConnectionPool("http", host, **options).send(request))
        else:
            reply = ConnectionPool("http", host, **options).send(request)
    finally:
        thread.join(10)
        listener.close()
    assert isinstance(reply, HttpResponse), reply
    assert (reply.status, reply.body) == (status, body)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    "answer",
    [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b""],
    ids=["bad-status-line", "cut-body", "no-answer"],
)
def test_pools_report_broken_answers_as_transport_failures(answer: bytes, use_async: bool) -> None:
    from objstore_saver.storage.http.async_pool import AsyncConnectionPool
    from objstore_saver.storage.http.sync_pool import ConnectionPool

    host, thread, listener = _canned_server(answer)
    options = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}
    request = HttpRequest("PUT", "/b/k", {"host": host}, b"body")
    try:
        if use_async:
            reply = asyncio.run(AsyncConnectionPool("http", host, **options).send(request))
        else:
            reply = ConnectionPool("http", host, **options).send(request)
    finally:
        thread.join(10)
        listener.close()
    assert isinstance(reply, TransportFailure), reply
    assert reply.sent


def test_each_event_loop_has_its_own_connections(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, "loops/")
    first, second = AsyncDriven(store), AsyncDriven(store)
    try:
        for i in range(3):  # interleaved: neither loop may use the other's connections
            first.put(f"a{i}", b"1")
            second.put(f"b{i}", b"2")
            assert first.get(f"b{i}") == b"2"
            assert second.get(f"a{i}") == b"1"
        assert len(store._aio) == 2
    finally:
        first.close()
        second.close()
    assert len(store._aio) == 0
