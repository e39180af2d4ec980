"""A metering, latency-injecting reverse proxy in front of an S3 endpoint.

Every S3 client of the benchmark (boto3, aiobotocore, s3fs) talks to this proxy,
so requests and bytes are counted the same way whatever the client, and each
request is delayed by the same simulated round trip. The proxy is one asyncio
event loop: each client connection is served by a task with its own
keep-alive connection to the server, so requests a client issues in parallel
overlap, and the injected round trip is a timer rather than a sleeping thread.
A thread per connection (``http.server``) cost about 0.4 ms of CPU a request,
half a core at 64 conversations on a 2-core machine, and so took CPU from the
S3 server it stands in front of (bench/README.md, "Is the server the
bottleneck?").

Control requests under ``/__bench__/`` are neither counted nor delayed:
``GET /__bench__/counters`` returns the counters as JSON and
``PUT /__bench__/delay?ms=N`` changes the injected round trip,
``POST /__bench__/reset-maxima`` forgets the largest bodies seen and
``PUT /__bench__/tcp-relay?to=HOST:PORT`` opens a :class:`~bench.tcp_relay.DelayRelay`
to a database server on this loop, whose client bytes wait the same injected
round trip, and answers its port as ``{"port": N}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from bench.tcp_relay import DelayRelay

CONTROL_PREFIX = "/__bench__/"
#: Headers that belong to one hop, not to the request being forwarded.
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "upgrade"}
)


def classify(method: str, path: str, query: dict[str, list[str]], headers: Any) -> str:
    """Name the S3 operation of a request from its method, path and query.

    Args:
        method: HTTP method.
        path: URL path (path-style addressing: ``/bucket`` or ``/bucket/key``).
        query: Parsed query string.
        headers: Request headers (``get`` by name).

    Returns:
        An S3 API operation name such as ``PutObject`` or ``ListObjectsV2``.
    """
    has_key = "/" in path.strip("/")
    if method == "GET":
        if not has_key:
            if "list-type" in query:
                return "ListObjectsV2"
            if "uploads" in query:
                return "ListMultipartUploads"
            if path.strip("/") == "":
                return "ListBuckets"
            if query and not ({"prefix", "delimiter", "marker", "max-keys"} & set(query)):
                return "GetBucket" + "".join(sorted(query)).title()
            return "ListObjects"
        if "uploadId" in query:
            return "ListParts"
        return "GetObject"
    if method == "HEAD":
        return "HeadObject" if has_key else "HeadBucket"
    if method == "PUT":
        if not has_key:
            return "CreateBucket" if not query else "PutBucketConfig"
        if "uploadId" in query:
            return "UploadPartCopy" if headers.get("x-amz-copy-source") else "UploadPart"
        if headers.get("x-amz-copy-source"):
            return "CopyObject"
        return "PutObject"
    if method == "POST":
        if "delete" in query:
            return "DeleteObjects"
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
        return "PostObject"
    if method == "DELETE":
        if "uploadId" in query:
            return "AbortMultipartUpload"
        return "DeleteObject" if has_key else "DeleteBucket"
    return method


#: Operations that create an object (a billed write that leaves bytes stored).
OBJECT_WRITES = frozenset({"PutObject", "CopyObject", "CompleteMultipartUpload"})


@dataclass
class Counters:
    """Thread-safe counters of the requests seen by the proxy."""

    requests: dict[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    """Request body bytes (payload, without aws-chunked framing)."""
    bytes_received: int = 0
    """Response body bytes."""
    largest_request_body: int = 0
    largest_response_body: int = 0
    objects_written: int = 0
    errors: int = 0
    """Responses with status >= 400 (conditional-put conflicts, 404 lookups)."""
    server_s: float = 0.0
    """Seconds spent waiting for the upstream server, summed over requests."""
    server_s_by_op: dict[str, float] = field(default_factory=dict)
    """``server_s`` by S3 operation."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, op: str, sent: int, received: int, status: int, server_s: float = 0.0) -> None:
        """Count one request."""
        with self._lock:
            self.server_s += server_s
            self.server_s_by_op[op] = self.server_s_by_op.get(op, 0.0) + server_s
            self.requests[op] = self.requests.get(op, 0) + 1
            self.bytes_sent += sent
            self.bytes_received += received
            self.largest_request_body = max(self.largest_request_body, sent)
            self.largest_response_body = max(self.largest_response_body, received)
            if op in OBJECT_WRITES and status < 300:
                self.objects_written += 1
            if status >= 400:
                self.errors += 1

    def reset_maxima(self) -> None:
        """Forget the largest bodies seen so far."""
        with self._lock:
            self.largest_request_body = self.largest_response_body = 0

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-serializable dict."""
        with self._lock:
            return {
                "requests": dict(self.requests),
                "bytes_sent": self.bytes_sent,
                "bytes_received": self.bytes_received,
                "largest_request_body": self.largest_request_body,
                "largest_response_body": self.largest_response_body,
                "objects_written": self.objects_written,
                "errors": self.errors,
                "server_s": self.server_s,
                "server_s_by_op": dict(self.server_s_by_op),
            }


_HEAD_END = b"\r\n\r\n"
#: Seconds :meth:`MeteringProxy.shutdown` waits for the loop to start or to end.
_SHUTDOWN_WAIT_S = 30.0


class ProtocolError(ValueError):
    """A request or response the proxy cannot parse as HTTP/1.1."""


class UpstreamError(OSError):
    """The S3 server could not be reached, or dropped a fresh connection."""


@dataclass
class _Head:
    """The start line and headers of an HTTP message."""

    start: str
    pairs: list[tuple[str, str]]
    """The headers as sent, in order."""
    lower: dict[str, str]
    """The headers by lower-case name (the last one wins)."""

    @classmethod
    def parse(cls, raw: bytes) -> _Head:
        lines = raw.decode("latin-1").split("\r\n")
        pairs = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"malformed header line {line!r} after {lines[0]!r}")
            pairs.append((name.strip(), value.strip()))
        return cls(lines[0], pairs, {name.lower(): value for name, value in pairs})

    def forwarded(self) -> list[str]:
        """Header lines to pass on: neither hop-by-hop headers nor the body's length."""
        return [
            f"{name}: {value}"
            for name, value in self.pairs
            if name.lower() not in _HOP_HEADERS and name.lower() != "content-length"
        ]

    @property
    def chunked(self) -> bool:
        return self.lower.get("transfer-encoding", "").lower() == "chunked"


async def _read_body(reader: asyncio.StreamReader, head: _Head, *, until_eof: bool) -> bytes:
    """The body after ``head``, de-chunked; without a length, to EOF if ``until_eof``."""
    if head.chunked:
        # Imported here: a probe measuring another tree's package imports it first.
        from objstore_saver.storage.http.async_pool import read_chunked

        try:
            return await read_chunked(reader)
        except ValueError as exc:  # a chunk size that is not hexadecimal
            raise ProtocolError(f"malformed chunked body: {exc}") from exc
    length = head.lower.get("content-length")
    if length is not None:
        return await reader.readexactly(int(length)) if int(length) else b""
    return await reader.read() if until_eof else b""


def _message(start: str, lines: list[str], body: bytes) -> bytes:
    return ("\r\n".join([start, *lines]) + "\r\n\r\n").encode("latin-1") + body


def _json_response(status: str, payload: Any) -> bytes:
    body = json.dumps(payload).encode()
    return _message(
        f"HTTP/1.1 {status}",
        ["Content-Type: application/json", f"Content-Length: {len(body)}"],
        body,
    )


class _Upstream:
    """One keep-alive connection to the S3 server."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = False
        """Whether a response came back on it (a failure then may be a stale keep-alive)."""

    def close(self) -> None:
        self.writer.close()


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class MeteringProxy:
    """An asyncio HTTP/1.1 proxy forwarding every request to ``upstream``.

    The listening socket is bound at construction (so :attr:`url` is known);
    :meth:`serve_forever` runs the event loop in the calling thread until
    :meth:`shutdown` is called from another.

    Args:
        upstream: ``host:port`` of the S3 server.
        delay: Simulated round trip added to every forwarded request, in seconds.
        address: Where to listen; port 0 picks a free port.
    """

    def __init__(
        self, upstream: str, *, delay: float = 0.02, address: tuple[str, int] = ("127.0.0.1", 0)
    ) -> None:
        host, sep, port = upstream.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"upstream must be host:port, got {upstream!r}")
        self.upstream = upstream
        self._upstream_address = (host, int(port))
        self.delay = delay
        self.counters = Counters()
        self._socket = socket.create_server(address, backlog=512)
        self.server_address: tuple[str, int] = self._socket.getsockname()[:2]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._finished = threading.Event()
        self._clients: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._relays: list[DelayRelay] = []

    @property
    def url(self) -> str:
        """Base URL of the proxy."""
        host, port = self.server_address
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        """Serve connections until :meth:`shutdown` is called (blocks)."""
        try:
            asyncio.run(self._serve())
        finally:
            self._finished.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it returns."""
        if not self._started.wait(_SHUTDOWN_WAIT_S):
            return  # never served
        assert self._loop is not None and self._stop is not None
        with contextlib.suppress(RuntimeError):  # the loop already ended
            self._loop.call_soon_threadsafe(self._stop.set)
        self._finished.wait(_SHUTDOWN_WAIT_S)

    def server_close(self) -> None:
        """Close the listening socket."""
        self._socket.close()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._serve_client, sock=self._socket)
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            # Hang up on every client: an idle handler then sees the end of its
            # stream and returns. Cancelling it instead makes Python 3.11's
            # stream callback log the cancellation as an error.
            for writer in self._clients.values():
                writer.transport.abort()
            if self._clients:
                await asyncio.wait(self._clients, timeout=_SHUTDOWN_WAIT_S)
            for relay in self._relays:
                await relay.close()

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        _no_delay(writer)
        upstream: list[_Upstream] = []  # this client's upstream connection, once opened
        task = asyncio.current_task()
        assert task is not None
        self._clients[task] = writer
        try:
            while True:
                try:
                    head = _Head.parse(await reader.readuntil(_HEAD_END))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the client closed its connection between requests
                except asyncio.LimitOverrunError as exc:
                    raise ProtocolError(f"request head over {exc.consumed} bytes") from exc
                words = head.start.split(" ")
                if len(words) != 3:
                    raise ProtocolError(f"malformed request line {head.start!r}")
                method, target, version = words
                if head.lower.get("expect", "").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = await _read_body(reader, head, until_eof=False)
                if target.startswith(CONTROL_PREFIX):
                    writer.write(await self._control(target))
                else:
                    writer.write(await self._forward(method, target, head, body, upstream))
                await writer.drain()
                if version == "HTTP/1.0" or head.lower.get("connection", "").lower() == "close":
                    return
        except ProtocolError as exc:
            writer.write(_json_response("400 Bad Request", {"error": str(exc)}))
        except UpstreamError as exc:  # say so, then hang up
            writer.write(_json_response("502 Bad Gateway", {"error": str(exc)}))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away in the middle of a request
        finally:
            for conn in upstream:
                conn.close()
            writer.close()
            del self._clients[task]

    async def _control(self, target: str) -> bytes:
        split = urlsplit(target)
        name = split.path.removeprefix(CONTROL_PREFIX)
        if name == "counters":
            return _json_response("200 OK", self.counters.snapshot())
        if name == "reset-maxima":
            self.counters.reset_maxima()
            return _json_response("200 OK", {})
        if name == "delay":
            self.delay = float(parse_qs(split.query)["ms"][0]) / 1000
            return _json_response("200 OK", {"delay_ms": self.delay * 1000})
        if name == "tcp-relay":
            host, _, port = parse_qs(split.query)["to"][0].rpartition(":")
            relay = DelayRelay((host, int(port)), lambda: self.delay)
            self._relays.append(relay)
            return _json_response("200 OK", {"port": await relay.start()})
        return _json_response("404 Not Found", {"error": f"unknown control path {split.path}"})

    async def _forward(
        self, method: str, target: str, head: _Head, body: bytes, upstream: list[_Upstream]
    ) -> bytes:
        split = urlsplit(target)
        query = parse_qs(split.query, keep_blank_values=True)
        op = classify(method, split.path, query, head.lower)
        decoded = head.lower.get("x-amz-decoded-content-length")
        sent = int(decoded) if decoded is not None else len(body)
        lines = head.forwarded()
        if body or method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(body)}")
        request = _message(f"{method} {target} HTTP/1.1", lines, body)
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        t0 = time.perf_counter()
        response, data = await self._exchange(request, method, upstream)
        status = int(response.start.split(" ", 2)[1])
        received = 0 if method == "HEAD" else len(data)
        self.counters.add(op, sent, received, status, time.perf_counter() - t0)
        lines = response.forwarded()
        if method == "HEAD":
            length = response.lower.get("content-length")
            if length is not None:
                lines.append(f"Content-Length: {length}")
        else:
            lines.append(f"Content-Length: {len(data)}")
        _, status_text = response.start.split(" ", 1)
        return _message(f"HTTP/1.1 {status_text}", lines, b"" if method == "HEAD" else data)

    async def _exchange(
        self, request: bytes, method: str, upstream: list[_Upstream]
    ) -> tuple[_Head, bytes]:
        while True:
            if not upstream:
                try:
                    streams = await asyncio.open_connection(*self._upstream_address)
                except OSError as exc:
                    raise UpstreamError(f"S3 server {self.upstream} unreachable: {exc}") from exc
                upstream.append(_Upstream(*streams))
                _no_delay(upstream[0].writer)
            conn = upstream[0]
            try:
                conn.writer.write(request)
                response, data, keep = await self._read_response(conn.reader, method)
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                upstream.clear()
                conn.close()
                if conn.used:
                    continue  # a keep-alive connection the server closed: once more, afresh
                raise UpstreamError(
                    f"S3 server {self.upstream} dropped the request: {exc}"
                ) from exc
            conn.used = True
            if not keep:
                upstream.clear()
                conn.close()
            return response, data

    @staticmethod
    async def _read_response(
        reader: asyncio.StreamReader, method: str
    ) -> tuple[_Head, bytes, bool]:
        while True:
            head = _Head.parse(await reader.readuntil(_HEAD_END))
            version, status, *_ = head.start.split(" ", 2)
            if not status.isdigit():
                raise ProtocolError(f"malformed status line {head.start!r} from the server")
            if not 100 <= int(status) < 200:
                break  # interim 1xx responses are dropped
        keep = version == "HTTP/1.1" and head.lower.get("connection", "").lower() != "close"
        if method == "HEAD" or int(status) in (204, 304):
            return head, b"", keep
        framed = head.chunked or "content-length" in head.lower
        data = await _read_body(reader, head, until_eof=True)
        return head, data, keep and framed
