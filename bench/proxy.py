"""A metering, latency-injecting reverse proxy in front of an S3 endpoint.

Every S3 client of the benchmark (boto3, aiobotocore, s3fs) talks to this proxy,
so requests and bytes are counted the same way whatever the client, and each
request is delayed by the same simulated round trip. The proxy serves every
connection in its own thread: requests a client issues in parallel overlap.

Control requests under ``/__bench__/`` are neither counted nor delayed:
``GET /__bench__/counters`` returns the counters as JSON and
``PUT /__bench__/delay?ms=N`` changes the injected round trip and
``POST /__bench__/reset-maxima`` forgets the largest bodies seen.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

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


class MeteringProxy(ThreadingHTTPServer):
    """A threaded HTTP server forwarding every request to ``upstream``.

    Args:
        upstream: ``host:port`` of the S3 server.
        delay: Simulated round trip added to every forwarded request, in seconds.
        address: Where to listen; port 0 picks a free port.
    """

    daemon_threads = True
    request_queue_size = 256

    def __init__(
        self, upstream: str, *, delay: float = 0.02, address: tuple[str, int] = ("127.0.0.1", 0)
    ) -> None:
        super().__init__(address, _Handler)
        self.upstream = upstream
        self.delay = delay
        self.counters = Counters()
        self._local = threading.local()

    @property
    def url(self) -> str:
        """Base URL of the proxy."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def upstream_connection(self) -> http.client.HTTPConnection:
        """The calling thread's keep-alive connection to the upstream server."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.upstream, timeout=300)
            self._local.conn = conn
        return conn

    def drop_upstream_connection(self) -> None:
        """Forget the calling thread's upstream connection after a failure."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle on, the body waits for
    # the client's delayed ACK of the headers (~40 ms per response).
    disable_nagle_algorithm = True
    server: MeteringProxy

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log line."""

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _control(self) -> None:
        split = urlsplit(self.path)
        if split.path == CONTROL_PREFIX + "counters":
            body = json.dumps(self.server.counters.snapshot()).encode()
        elif split.path == CONTROL_PREFIX + "reset-maxima":
            self.server.counters.reset_maxima()
            body = b"{}"
        elif split.path == CONTROL_PREFIX + "delay":
            self.server.delay = float(parse_qs(split.query)["ms"][0]) / 1000
            body = json.dumps({"delay_ms": self.server.delay * 1000}).encode()
        else:
            self.send_error(404, f"unknown control path {split.path}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._read_body()
            self._control()
            return
        body = self._read_body()
        split = urlsplit(self.path)
        query = parse_qs(split.query, keep_blank_values=True)
        op = classify(self.command, split.path, query, self.headers)
        decoded = self.headers.get("x-amz-decoded-content-length")
        sent = int(decoded) if decoded is not None else len(body)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        if self.server.delay > 0:
            time.sleep(self.server.delay)
        t0 = time.perf_counter()
        for attempt in (1, 2):
            conn = self.server.upstream_connection()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                break
            except (ConnectionError, http.client.HTTPException):
                # A keep-alive connection the upstream closed: reconnect once.
                self.server.drop_upstream_connection()
                if attempt == 2:
                    raise
        received = 0 if self.command == "HEAD" else len(data)
        self.server.counters.add(op, sent, received, resp.status, time.perf_counter() - t0)
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP_HEADERS and k.lower() != "content-length":
                self.send_header(k, v)
        if self.command == "HEAD":
            length = resp.getheader("Content-Length")
            if length is not None:
                self.send_header("Content-Length", length)
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward
