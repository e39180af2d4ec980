"""The blocking HTTP/1.1 pool of the lean S3 transport: when a connection is kept.

A kept connection whose framing is off would hand the next request someone
else's answer, so an answer that may not be followed on its connection (HTTP/1.0
without keep-alive, bytes after the answer, ``Connection: close``) must close it.
Real sockets on loopback.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from objstore_saver.storage.http import sync_pool as http_pool
from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.http.sync_pool import ConnectionPool

OPTIONS = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}


def _serve(answers: list[bytes]) -> tuple[str, threading.Thread, socket.socket, list[int]]:
    """A loopback server answering requests in order; counts the connections it accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    accepted: list[int] = []

    def serve() -> None:
        pending = list(answers)
        while pending:
            conn, _ = listener.accept()
            accepted.append(1)
            with conn:
                data = b""
                while pending:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if b"\r\n\r\n" not in data:
                        break  # the client closed this connection: accept the next
                    data = data.split(b"\r\n\r\n", 1)[1]
                    conn.sendall(pending.pop(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{listener.getsockname()[1]}", thread, listener, accepted


KEEP = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
CASES = {
    "keep-alive": (KEEP, True),
    "http-1.0": (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
    "http-1.0-keep-alive": (
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
        True,
    ),
    "connection-close": (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        False,
    ),
    "bytes-after-answer": (KEEP + b"HTTP/1.1 200 OK\r\n", False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_connection_is_kept_only_when_its_framing_is_sound(case: str) -> None:
    first, kept = CASES[case]
    host, thread, listener, accepted = _serve([first, KEEP])
    pool = ConnectionPool("http", host, **OPTIONS)
    try:
        replies = [pool.send(HttpRequest("GET", f"/b/k{i}", {"host": host})) for i in range(2)]
    finally:
        pool.close()
        thread.join(10)
        listener.close()
    for reply in replies:
        assert isinstance(reply, HttpResponse), reply
        assert (reply.status, reply.body) == (200, b"ok")
    assert len(accepted) == (1 if kept else 2)


def test_a_large_body_arrives_whole_across_reads() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB, many recv calls
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    host, thread, listener, accepted = _serve([answer, KEEP])
    pool = ConnectionPool("http", host, **OPTIONS)
    try:
        big = pool.send(HttpRequest("PUT", "/b/big", {"host": host}, body))
        small = pool.send(HttpRequest("GET", "/b/k", {"host": host}))
    finally:
        pool.close()
        thread.join(10)
        listener.close()
    assert isinstance(big, HttpResponse) and big.body == body
    assert isinstance(small, HttpResponse) and small.body == b"ok"
    assert len(accepted) == 1


@pytest.mark.parametrize("case", sorted(set(CASES) - {"bytes-after-answer"}))
async def test_the_async_pool_keeps_a_connection_by_the_same_rules(case: str) -> None:
    # One head parser for both pools: an HTTP/1.0 answer without keep-alive
    # ends its connection on the asyncio side too.
    first, kept = CASES[case]
    host, thread, listener, accepted = _serve([first, KEEP])
    pool = AsyncConnectionPool("http", host, **OPTIONS)
    try:
        replies = [
            await pool.send(HttpRequest("GET", f"/b/k{i}", {"host": host})) for i in range(2)
        ]
    finally:
        await pool.close()
        await asyncio.to_thread(thread.join, 10)
        listener.close()
    for reply in replies:
        assert isinstance(reply, HttpResponse), reply
        assert (reply.status, reply.body) == (200, b"ok")
    assert len(accepted) == (1 if kept else 2)


# --- timeouts kept by the kernel on plain sockets ---------------------------------------------


@pytest.mark.skipif(not http_pool._KERNEL_TIMEOUTS, reason="no SO_RCVTIMEO timeval here")
def test_a_plain_connection_waits_in_the_kernel_with_the_read_timeout() -> None:
    # A Python-level timeout would poll before every recv and send (a second
    # system call, the GIL handed over and back); the kernel's holds the same bound.
    host, thread, listener, _ = _serve([KEEP])
    pool = ConnectionPool("http", host, **{**OPTIONS, "read_timeout": 2.25})
    try:
        reply = pool.send(HttpRequest("GET", "/b/k", {"host": host}))
        assert isinstance(reply, HttpResponse) and reply.body == b"ok"
        (conn,) = pool._idle  # kept for the next request
        assert conn.sock.gettimeout() is None
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            raw = conn.sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("ll"))
            seconds, micros = struct.unpack("ll", raw)
            assert seconds + micros / 1e6 == pytest.approx(2.25, abs=0.01)
    finally:
        pool.close()
        thread.join(10)
        listener.close()


def test_a_body_the_server_does_not_read_ends_with_a_write_timeout() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    accepted: list[socket.socket] = []
    listener.settimeout(10)
    stop = threading.Event()

    def hold() -> None:  # accepts, never reads
        conn, _ = listener.accept()
        accepted.append(conn)
        stop.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    host = f"127.0.0.1:{listener.getsockname()[1]}"
    pool = ConnectionPool("http", host, **{**OPTIONS, "read_timeout": 0.3})
    try:
        body = b"x" * (64 * 1024 * 1024)  # more than both socket buffers hold
        reply = pool.send(HttpRequest("PUT", "/b/k", {"host": host}, body))
    finally:
        stop.set()
        thread.join(10)
        for conn in accepted:
            conn.close()
        pool.close()
        listener.close()
    assert isinstance(reply, TransportFailure)
    assert reply.error.startswith("WriteTimeoutError")
    assert pool.busy == 0


# --- what a request may hold ----------------------------------------------------------------


BREAKING = {
    "header value": HttpRequest("GET", "/b/k", {"host": "h", "x-amz-meta-a": "v\r\nx-evil: 1"}),
    "header value LF": HttpRequest("GET", "/b/k", {"host": "h", "x-amz-meta-a": "v\nx: 1"}),
    "header value NUL": HttpRequest("GET", "/b/k", {"host": "h", "x-amz-meta-a": "v\x00"}),
    "header name": HttpRequest("GET", "/b/k", {"host": "h", "x-a\r\nx-evil": "1"}),
    "target": HttpRequest("GET", "/b/k HTTP/1.1\r\nx-evil: 1\r\n\r\nGET /b/k", {"host": "h"}),
    "target space": HttpRequest("GET", "/b/k x", {"host": "h"}),
}


@pytest.mark.parametrize("case", sorted(BREAKING))
def test_cr_lf_or_nul_in_a_request_is_refused_before_sending(case: str) -> None:
    host, thread, listener, accepted = _serve([KEEP])
    pool = ConnectionPool("http", host, **OPTIONS)
    apool = AsyncConnectionPool("http", host, **OPTIONS)
    try:
        with pytest.raises(ValueError, match=r"header|target") as info:
            pool.send(BREAKING[case])
        if case.startswith("header"):
            assert "x-a" in str(info.value)  # names the header
        with pytest.raises(ValueError, match=r"header|target"):
            asyncio.run(apool.send(BREAKING[case]))
        assert pool.busy == 0 and apool.busy == 0
        # Nothing was sent: the server still has its one answer for a sound request.
        reply = pool.send(HttpRequest("GET", "/b/k", {"host": host}))
        assert isinstance(reply, HttpResponse) and reply.body == b"ok"
    finally:
        pool.close()
        thread.join(10)
        listener.close()
    assert len(accepted) == 1


def test_cr_lf_in_an_extra_header_is_refused_when_the_pool_is_made() -> None:
    with pytest.raises(ValueError, match="user-agent"):
        ConnectionPool("http", "127.0.0.1:1", **OPTIONS, extra_headers={"user-agent": "a\r\nb"})


# --- descriptors numbered past 1024 -----------------------------------------------------------


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """About 1,100 descriptors open (the soft limit raised if needed, restored after)."""
    resource = pytest.importorskip("resource", reason="no resource module (RLIMIT_NOFILE)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1400
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard RLIMIT_NOFILE is {hard}, under {wanted}")
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    opened: list[int] = []
    try:
        while len(opened) < 1100:
            opened.append(os.open(os.devnull, os.O_RDONLY))
        assert max(opened) >= 1024
        yield
    finally:
        for fd in opened:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_both_pools_reuse_sockets_numbered_past_1024(many_descriptors: None) -> None:
    # select() refuses a descriptor >= 1024 (ValueError); the pools poll instead.
    host, thread, listener, accepted = _serve([KEEP] * 20)
    pool = ConnectionPool("http", host, **OPTIONS)
    replies: list[object] = []
    try:
        for i in range(10):
            replies.append(pool.send(HttpRequest("GET", f"/b/k{i}", {"host": host})))
        (conn,) = pool._idle
        assert conn.sock.fileno() >= 1024

        async def ten() -> None:
            apool = AsyncConnectionPool("http", host, **OPTIONS)
            try:
                for i in range(10):
                    replies.append(await apool.send(HttpRequest("GET", f"/b/a{i}", {"host": host})))
            finally:
                await apool.close()

        pool.close()
        asyncio.run(ten())
    finally:
        pool.close()
        thread.join(10)
        listener.close()
    assert [getattr(r, "body", r) for r in replies] == [b"ok"] * 20
    assert len(accepted) == 2  # one kept-alive connection per pool
