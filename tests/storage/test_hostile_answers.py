"""Both HTTP pools against broken and hostile answers from a scripted loopback server.

Every broken answer must end as a :class:`TransportFailure` saying what was
wrong, within a bound near the read timeout, never as a success or a raw
``MemoryError``/``ValueError``/``OverflowError``; and the connection it came
on must be closed (the next request opens a new one). Through
``LeanS3Store.get``/``aget`` with one attempt it is the store's
``StoreUnavailableError``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from http_servers import OK, Script, ScriptedServer, repeat

from objstore_saver.errors import StorageError, StoreUnavailableError
from objstore_saver.storage.http.async_pool import AsyncConnectionPool, read_chunked
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, Reply, TransportFailure
from objstore_saver.storage.http.reader import (
    MAX_HEAD_BYTES,
    MAX_INTERIM,
    AnswerReader,
    ProtocolError,
    parse_head,
)
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.s3.lean import LeanS3Store

READ_TIMEOUT = 1.0
OPTIONS = {"connect_timeout": 2.0, "read_timeout": READ_TIMEOUT, "max_idle": 4}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _head(*lines: str) -> bytes:
    return ("HTTP/1.1 200 OK\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


#: name -> (script, what the failure says). Each is refused by the reader's rules.
HOSTILE: dict[str, tuple[Script, str]] = {
    "negative-length": (_head("Content-Length: -3") + b"hello", "Content-Length '-3'"),
    "length-over-2-GiB": (_head("Content-Length: 2147483648") + b"hello", "body cap"),
    "length-of-30-digits": (_head("Content-Length: " + "9" * 30) + b"hello", "Content-Length"),
    "hex-length": (_head("Content-Length: 0x5") + b"hello", "Content-Length '0x5'"),
    "underscore-length": (_head("Content-Length: 0_5") + b"hello", "Content-Length '0_5'"),
    "plus-length": (_head("Content-Length: +5") + b"hello", "Content-Length '+5'"),
    "superscript-length": (_head("Content-Length: \xb2") + b"he", "Content-Length"),
    "space-before-colon": (_head("Content-Length : 5") + b"hello", "bad header line"),
    "folded-header": (_head("X-A: 1", " folded", "Content-Length: 2") + b"ok", "bad header"),
    "nul-in-value": (_head("X-A: a\x00b", "Content-Length: 2") + b"ok", "bad header line"),
    "bare-lf-in-value": (_head("X-A: a\nb: c", "Content-Length: 2") + b"ok", "bad header"),
    "conflicting-lengths": (
        _head("Content-Length: 5", "Content-Length: 6") + b"hello!",
        "conflicting Content-Length",
    ),
    "te-and-cl": (
        _head("Transfer-Encoding: chunked", "Content-Length: 5") + b"5\r\nhello\r\n0\r\n\r\n",
        "both Transfer-Encoding and Content-Length",
    ),
    "te-gzip": (_head("Transfer-Encoding: gzip") + b"hello", "unsupported Transfer-Encoding"),
    "chunk-without-crlf": (
        _head("Transfer-Encoding: chunked") + b"5\r\nhelloXX0\r\n\r\n",
        "chunk not followed by CRLF",
    ),
    "hex-prefixed-chunk-size": (
        _head("Transfer-Encoding: chunked") + b"0x5\r\nhello\r\n0\r\n\r\n",
        "bad chunk-size",
    ),
    "negative-chunk-size": (
        _head("Transfer-Encoding: chunked") + b"-5\r\nhello\r\n0\r\n\r\n",
        "bad chunk-size",
    ),
    "huge-chunk-size": (
        _head("Transfer-Encoding: chunked") + b"7fffffffffffffff\r\nhello",
        "bad chunk-size",
    ),
    "oversize-head": (
        _head(*(f"X-Pad-{i}: {'x' * 1000}" for i in range(80)), "Content-Length: 2") + b"ok",
        f"answer head longer than {MAX_HEAD_BYTES}",
    ),
    "bad-status-line": (b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok", "bad status line"),
    "not-http": (b"ICY 200 OK\r\nContent-Length: 2\r\n\r\nok", "bad status line"),
    "switching-protocols": (b"HTTP/1.1 101 Switching\r\n\r\n", "101"),
    "endless-interims": (repeat(CONTINUE, every=0.01), f"more than {MAX_INTERIM} interim"),
    "endless-trailers": (
        repeat(
            b"X-Trailer: 1\r\n", every=0.005, first=_head("Transfer-Encoding: chunked") + b"0\r\n"
        ),
        "trailer lines",
    ),
    "short-body-then-close": (_head("Content-Length: 10") + b"hello", "closed after 5"),
}
#: Broken answers the deadline ends: bytes keep coming, too slowly to finish.
SLOW: dict[str, Script] = {
    "slow-interims": repeat(CONTINUE, every=0.3),
    "trickled-body": repeat(b"x", every=0.1, first=_head("Content-Length: 1000")),
    "trickled-head": repeat(b"X-A: 1\r\n", every=0.1, first=b"HTTP/1.1 200 OK\r\n"),
}
#: Bodies over a pool's ``max_body`` (1 KiB in these tests), however framed.
OVER_CAP: dict[str, Script] = {
    "length": _head("Content-Length: 2048") + b"x" * 2048,
    "chunked": _head("Transfer-Encoding: chunked") + b"800\r\n" + b"x" * 2048 + b"\r\n0\r\n\r\n",
    "many-chunks": _head("Transfer-Encoding: chunked")
    + b"100\r\n"
    + b"x" * 256
    + b"\r\n" * 1
    + (b"100\r\n" + b"x" * 256 + b"\r\n") * 4
    + b"0\r\n\r\n",
    "until-close": _head() + b"x" * 2048,
}


def _request(host: str) -> HttpRequest:
    return HttpRequest("GET", "/bucket/key", {"host": host})


def _send_twice(pool_kind: str, host: str, **options: Any) -> tuple[Reply, Reply, float]:
    """Two requests on one pool: the hostile answer, then a sound one; and the first's time."""
    if pool_kind == "sync":
        pool = ConnectionPool("http", host, **{**OPTIONS, **options})
        try:
            began = time.monotonic()
            first = pool.send(_request(host))
            took = time.monotonic() - began
            return first, pool.send(_request(host)), took
        finally:
            pool.close()

    async def both() -> tuple[Reply, Reply, float]:
        pool = AsyncConnectionPool("http", host, **{**OPTIONS, **options})
        try:
            began = time.monotonic()
            first = await pool.send(_request(host))
            took = time.monotonic() - began
            return first, await pool.send(_request(host)), took
        finally:
            await pool.close()

    return asyncio.run(both())


def _check(first: Reply, second: Reply, server: ScriptedServer, prefix: str, says: str) -> None:
    assert isinstance(first, TransportFailure), first
    assert first.sent is True
    assert first.error.startswith(prefix), first.error
    assert says in first.error, first.error
    # The broken connection was closed: the next request came on a new one.
    assert isinstance(second, HttpResponse) and second.body == b"ok", second
    assert server.accepted == 2


@pytest.mark.parametrize("pool_kind", ["sync", "async"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_broken_answer_is_a_transport_failure_and_its_connection_is_dropped(
    case: str, pool_kind: str
) -> None:
    script, says = HOSTILE[case]
    server = ScriptedServer(script, close_after=case == "short-body-then-close")
    try:
        first, second, took = _send_twice(pool_kind, server.host)
    finally:
        server.close()
    _check(first, second, server, "ProtocolError: ", says)
    assert took < READ_TIMEOUT, took  # refused as soon as seen, no waiting on the deadline


@pytest.mark.parametrize("pool_kind", ["sync", "async"])
@pytest.mark.parametrize("case", sorted(SLOW))
def test_an_answer_that_never_ends_stops_at_the_deadline(case: str, pool_kind: str) -> None:
    server = ScriptedServer(SLOW[case])
    try:
        first, second, took = _send_twice(pool_kind, server.host)
    finally:
        server.close()
    _check(first, second, server, "ReadTimeoutError: ", f"{READ_TIMEOUT} s")
    # One deadline per attempt, not one per read: about the read timeout.
    assert READ_TIMEOUT * 0.9 <= took <= 2 * READ_TIMEOUT, took


@pytest.mark.parametrize("pool_kind", ["sync", "async"])
@pytest.mark.parametrize("case", sorted(OVER_CAP))
def test_a_body_over_the_cap_is_refused(case: str, pool_kind: str) -> None:
    server = ScriptedServer(OVER_CAP[case], close_after=case == "until-close")
    try:
        first, second, _ = _send_twice(pool_kind, server.host, max_body=1024)
    finally:
        server.close()
    _check(first, second, server, "ProtocolError: ", "1024-byte")


@pytest.mark.parametrize("pool_kind", ["sync", "async"])
def test_sound_framings_still_read(pool_kind: str) -> None:
    # The strict rules refuse nothing a sound server sends: chunk extensions,
    # trailers, interim answers, repeated equal lengths, OWS around values.
    answers = {
        "chunked": _head("Transfer-Encoding: Chunked")
        + b"2;name=value\r\nok\r\n0\r\nX-Checksum: 1\r\n\r\n",
        "interim": CONTINUE * MAX_INTERIM + _head("Content-Length: 2") + b"ok",
        "equal-lengths": _head("Content-Length: 2", "Content-Length: 2") + b"ok",
        "ows": _head("Content-Length: \t2 ", "X-Empty:") + b"ok",
    }
    for name, answer in answers.items():
        server = ScriptedServer(answer)
        try:
            first, second, _ = _send_twice(pool_kind, server.host)
        finally:
            server.close()
        assert isinstance(first, HttpResponse) and first.body == b"ok", (name, first)
        assert isinstance(second, HttpResponse), (name, second)


def test_the_reader_never_allocates_from_an_announced_length() -> None:
    # 2 GiB announced, 5 bytes sent, the cap raised past it: only what came is held.
    reader = AnswerReader(max_body=2**62)
    assert reader.feed(_head("Content-Length: 2147483648") + b"hello") is None
    assert reader.wanted == 2147483648 - 5


#: head lines -> the error naming the line at fault (None: the head is accepted).
HEADS: dict[str, tuple[bytes, str | None]] = {
    "tab and latin-1 in a value": (b"HTTP/1.1 200 OK\r\nX-A: a\tb \xe9", None),
    "empty value": (b"HTTP/1.1 200 OK\r\nX-A:", None),
    "control byte in the status line": (b"HTTP/1.1 200 O\x01K\r\nX-A: 1", "bad status line"),
    "bare CR in a value": (b"HTTP/1.1 200 OK\r\nX-A: a\rb", "bad header line 'X-A: a\\rb'"),
    "DEL in a value": (b"HTTP/1.1 200 OK\r\nX-A: a\x7fb", "bad header line 'X-A: a\\x7fb'"),
    "no colon": (b"HTTP/1.1 200 OK\r\nX-A 1", "bad header line 'X-A 1'"),
    "empty name": (b"HTTP/1.1 200 OK\r\n: 1", "bad header line ': 1'"),
    "slash in a name": (b"HTTP/1.1 200 OK\r\nX-B: 2\r\nX/A: 1", "bad header line 'X/A: 1'"),
    "latin-1 in a name": (b"HTTP/1.1 200 OK\r\nX-\xe9: 1", "bad header line 'X-\xe9: 1'"),
}


@pytest.mark.parametrize("case", sorted(HEADS))
def test_a_head_is_refused_naming_the_line_at_fault(case: str) -> None:
    head, error = HEADS[case]
    if error is None:
        status, headers = parse_head(head)
        assert status == 200
        assert headers["x-a"] == head.partition(b":")[2].strip(b" \t").decode("latin-1")
        return
    with pytest.raises(ProtocolError) as caught:
        parse_head(head)
    assert str(caught.value).startswith(error)


def test_repeated_headers_are_joined_and_names_lower_cased() -> None:
    head = b'HTTP/1.0 206 Partial\r\nX-Amz-A: 1\r\nx-amz-a:  2\t\r\nETag: "e"'
    assert parse_head(head) == (206, {"x-amz-a": "1, 2", "etag": '"e"', "connection": "close"})


async def test_read_chunked_reads_no_byte_past_the_body() -> None:
    stream = asyncio.StreamReader()
    stream.feed_data(b"2\r\nok\r\n3;x=y\r\n!!!\r\n0\r\nT: 1\r\n\r\nNEXT")
    assert await read_chunked(stream) == b"ok!!!"
    assert await stream.read(4) == b"NEXT"
    broken = asyncio.StreamReader()
    broken.feed_data(b"2\r\nokXX")
    with pytest.raises(ValueError, match="CRLF"):
        await read_chunked(broken)


# --- through the store, one attempt ------------------------------------------------------


@pytest.mark.parametrize("way", ["get", "aget"])
@pytest.mark.parametrize(
    "case", ["negative-length", "length-over-2-GiB", "endless-interims", "endless-trailers"]
)
def test_the_store_raises_its_unavailable_error_for_a_broken_answer(
    case: str, way: str, creds: None
) -> None:
    script, says = HOSTILE[case]
    server = ScriptedServer(script)
    store = LeanS3Store(
        "bucket",
        endpoint_url=f"http://{server.host}",
        region_name="us-east-1",
        max_attempts=1,
        read_timeout=READ_TIMEOUT,
    )
    began = time.monotonic()
    try:
        with pytest.raises(StorageError) as info:
            if way == "get":
                store.get("key")
            else:
                asyncio.run(store.aget("key"))
    finally:
        store.close()
        server.close()
    assert time.monotonic() - began < 3 * READ_TIMEOUT
    assert isinstance(info.value, StoreUnavailableError)
    message = str(info.value)
    assert "ProtocolError" in message and says in message and "'key'" in message
    assert server.heads and server.heads[0].startswith(b"GET /bucket/key ")


def test_a_sound_answer_after_a_broken_one_reaches_the_store(creds: None) -> None:
    # The control of the cases above: the same server's second connection answers.
    server = ScriptedServer(OK)
    store = LeanS3Store(
        "bucket", endpoint_url=f"http://{server.host}", region_name="us-east-1", max_attempts=1
    )
    try:
        assert store.get("key") == b"ok"
    finally:
        store.close()
        server.close()
