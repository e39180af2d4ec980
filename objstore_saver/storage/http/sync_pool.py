"""A small thread-safe keep-alive pool of HTTP/1.1 socket connections to one origin.

The blocking side of the lean S3 transport. A request is written as one
head (plus the body) with ``sendall`` and the answer is read from the socket
into a buffer of the connection's own: no ``http.client`` (whose answer
parsing goes through ``email.parser``), about half its CPU per request
(``docs/transport.md``). Answers are framed by ``Content-Length``, chunked
transfer coding or the end of the connection. It never retries: a failed
request is reported to the caller's retry policy, which knows whether a
resend is safe.
"""

from __future__ import annotations

import select
import socket
import struct
import sys
import threading
from collections.abc import Callable

from objstore_saver.storage.http.connection_cap import JOINED_BODY_MAX, CappedPool
from objstore_saver.storage.http.messages import (
    HttpRequest,
    HttpResponse,
    Reply,
    TransportFailure,
)
from objstore_saver.storage.http.reader import MAX_HEAD_BYTES, ProtocolError, parse_head

_RECV = 256 * 1024

#: Plain sockets wait in the kernel (``SO_RCVTIMEO``/``SO_SNDTIMEO``) where the
#: option takes a ``struct timeval``: a socket with a Python timeout polls
#: before every ``recv`` and ``send``, a second system call that also hands
#: the GIL to another thread and back, about a tenth of a request's CPU with
#: 8 threads (docs/profile.md, "One request's CPU", kernel socket timeouts).
_KERNEL_TIMEOUTS = sys.platform.startswith(("linux", "darwin", "freebsd"))
#: What a blocking socket raises when its kernel timeout expires (EAGAIN).
_TIMED_OUT = (TimeoutError, BlockingIOError)


def _wait_in_kernel(sock: socket.socket, seconds: float) -> None:
    """Make ``sock`` blocking, each ``recv`` and ``send`` bounded by ``seconds`` in the kernel."""
    sock.settimeout(None)
    whole = int(seconds)
    # A zero timeval means no timeout at all: the shortest wait is 1 µs.
    micros = max(int((seconds - whole) * 1e6), 0 if whole else 1)
    wait = struct.pack("ll", whole, micros)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, wait)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, wait)


class _Connection:
    """One socket and the bytes read from it but not consumed yet."""

    __slots__ = ("buf", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def line(self, limit: int) -> bytes:
        """The next line without its CRLF; at most ``limit`` bytes."""
        buf = self.buf
        start = 0
        while True:
            end = buf.find(b"\r\n", start)
            if end >= 0:
                line = bytes(buf[:end])
                del buf[: end + 2]
                return line
            if len(buf) > limit:
                raise ProtocolError(f"answer head longer than {limit} bytes")
            start = max(0, len(buf) - 1)
            chunk = self.sock.recv(_RECV)
            if not chunk:
                raise EOFError("connection closed by the server before a full line")
            buf += chunk

    def head(self) -> bytes:
        """The next status line and headers, without the blank line ending them."""
        buf = self.buf
        start = 0
        while True:
            end = buf.find(b"\r\n\r\n", start)
            if end >= 0:
                head = bytes(buf[:end])
                del buf[: end + 4]
                return head
            if len(buf) > MAX_HEAD_BYTES:
                raise ProtocolError(f"answer head longer than {MAX_HEAD_BYTES} bytes")
            start = max(0, len(buf) - 3)
            chunk = self.sock.recv(_RECV)
            if not chunk:
                raise EOFError("connection closed by the server before a full answer head")
            buf += chunk

    def exactly(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        buf = self.buf
        if len(buf) >= n:
            data = bytes(buf[:n])
            del buf[:n]
            return data
        out = bytearray(n)
        view = memoryview(out)
        have = len(buf)
        view[:have] = buf
        buf.clear()
        while have < n:
            got = self.sock.recv_into(view[have:], n - have)
            if not got:
                raise EOFError(f"connection closed after {have} of {n} body bytes")
            have += got
        return bytes(out)

    def rest(self) -> bytes:
        """Everything until the server closes the connection."""
        parts = [bytes(self.buf)]
        self.buf.clear()
        while chunk := self.sock.recv(_RECV):
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self.sock.close()


def _read_head(conn: _Connection) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of the next answer on ``conn``."""
    return parse_head(conn.head())


def _read_chunked(conn: _Connection) -> bytes:
    parts = []
    while True:
        size = int(conn.line(MAX_HEAD_BYTES).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while conn.line(MAX_HEAD_BYTES):  # trailers
                pass
            return b"".join(parts)
        parts.append(conn.exactly(size))
        if conn.exactly(2) != b"\r\n":
            raise ProtocolError("chunk not followed by CRLF")


class ConnectionPool(CappedPool):
    """Blocking connections to ``scheme://host``, at most ``max_connections`` open.

    Many threads sending at once never open more sockets than the cap; the
    async twin is ``async_pool.AsyncConnectionPool``. Arguments: :class:`CappedPool`.
    """

    def _setup(self) -> None:
        self._slots = threading.BoundedSemaphore(self._max_connections)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def _take(self) -> _Connection | None:
        """An idle connection still open, or ``None``."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return None
            # An idle keep-alive connection has nothing to read (its buffer is
            # empty, see send); if the socket has, the server closed it (EOF)
            # or sent garbage: drop it.
            if not select.select([conn.sock], [], [], 0)[0]:
                return conn
            conn.close()

    def _connect(self) -> _Connection:
        sock = socket.create_connection((self._host, self._port), timeout=self._connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None:
                sock = self._ssl.wrap_socket(sock, server_hostname=self._host)
                sock.settimeout(self._read_timeout)
            elif _KERNEL_TIMEOUTS:
                _wait_in_kernel(sock, self._read_timeout)
            else:
                sock.settimeout(self._read_timeout)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer; failures become :class:`TransportFailure`.

        Waits for a free slot first when ``max_connections`` requests are busy.
        """
        if not self._slots.acquire(timeout=self._wait_timeout):
            return self._no_slot()
        return self._read(self._write(request))

    def send_ahead(self, request: HttpRequest) -> Callable[[], Reply] | None:
        """Write one request now; return the function that reads its answer.

        The caller must call that function exactly once (it frees the
        connection slot). None, with nothing sent, when no slot is free at
        once: a thread holding slots for answers it has not read yet never
        waits for another.
        """
        if not self._slots.acquire(blocking=False):
            return None
        written = self._write(request)
        return lambda: self._read(written)

    def _write(self, request: HttpRequest) -> tuple[_Connection, HttpRequest] | TransportFailure:
        """Write a request on a connection; the caller holds a slot, :meth:`_read` frees it."""
        with self._lock:
            self._began()
        try:
            conn = self._take()
            if conn is None:
                try:
                    conn = self._connect()
                except OSError as exc:
                    if isinstance(exc, TimeoutError):
                        wait = self._connect_timeout
                        return TransportFailure(
                            f"ConnectTimeoutError: no connection within {wait} s", sent=False
                        )
                    return TransportFailure(f"{type(exc).__name__}: {exc}", sent=False)
            body = request.body
            wire = self._head_bytes(request)
            try:
                if len(body) <= JOINED_BODY_MAX:  # one segment: small bodies are the rule
                    conn.sock.sendall(wire + body)
                else:
                    conn.sock.sendall(wire)
                    conn.sock.sendall(body)
            except _TIMED_OUT:
                conn.close()
                return TransportFailure(
                    f"WriteTimeoutError: not sent within {self._read_timeout} s"
                )
            except OSError as exc:
                conn.close()
                return TransportFailure(f"{type(exc).__name__}: {exc}")
        except BaseException:
            self._done()
            raise
        return conn, request

    def _read(self, written: tuple[_Connection, HttpRequest] | TransportFailure) -> Reply:
        """Read the answer to a written request and free its slot."""
        try:
            if isinstance(written, TransportFailure):
                return written
            conn, request = written
            return self._answer(conn, request)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1
        self._slots.release()

    def _answer(self, conn: _Connection, request: HttpRequest) -> Reply:
        try:
            status, headers = _read_head(conn)
            while 100 <= status < 200:  # interim answers carry no body
                status, headers = _read_head(conn)
            if request.method == "HEAD" or status in (204, 304):
                data = b""
            elif "chunked" in headers.get("transfer-encoding", "").lower():
                data = _read_chunked(conn)
            elif "content-length" in headers:
                data = conn.exactly(int(headers["content-length"]))
            else:
                data = conn.rest()
                headers["connection"] = "close"
        except _TIMED_OUT:
            conn.close()
            wait = self._read_timeout
            return TransportFailure(f"ReadTimeoutError: no answer within {wait} s")
        except (OSError, EOFError, ValueError, ProtocolError) as exc:
            # A bad length or chunk size is a ValueError.
            conn.close()
            return TransportFailure(f"{type(exc).__name__}: {exc}")
        # Bytes beyond the answer break the framing of the next one: not reused.
        if conn.buf or "close" in headers.get("connection", "").lower():
            conn.close()
        else:
            self._give_back(conn)
        return HttpResponse(status, headers, data)

    def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
