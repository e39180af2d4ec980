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
import selectors
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable

from objstore_saver.storage.http.connection_cap import JOINED_BODY_MAX, CappedPool, ProxyRefused
from objstore_saver.storage.http.messages import (
    HttpRequest,
    HttpResponse,
    Reply,
    TransportFailure,
)
from objstore_saver.storage.http.reader import AnswerReader, ProtocolError

_RECV = 256 * 1024
_POLL = hasattr(select, "poll")

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
    """One socket, and how its liveness is checked before it is reused."""

    __slots__ = ("poller", "short", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: Set when a read waited less than the read timeout (the deadline was near).
        self.short = False
        # poll, not select: select() cannot watch a descriptor numbered 1024 or more.
        self.poller = select.poll() if _POLL else None
        if self.poller is not None:
            self.poller.register(sock, select.POLLIN)

    def readable(self) -> bool:
        """Whether the socket has bytes (or its end) waiting: never, for an idle one."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        if self.poller is not None:
            return bool(self.poller.poll(0))
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            return bool(selector.select(0))

    def wait_at_most(self, seconds: float) -> None:
        """Bound the next reads by ``seconds`` (what is left of the answer's deadline)."""
        self.short = True
        if _KERNEL_TIMEOUTS and not isinstance(self.sock, ssl.SSLSocket):
            _wait_in_kernel(self.sock, seconds)
        else:
            self.sock.settimeout(seconds)

    def close(self) -> None:
        self.sock.close()


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
            # An idle keep-alive connection has nothing to read (no bytes came
            # after its last answer, see _answer); if the socket has, the
            # server closed it (EOF) or sent garbage: drop it.
            if not conn.readable():
                return conn
            conn.close()

    def _connect(self) -> _Connection:
        """A new connection to the origin (through the proxy's tunnel, if any).

        Raises:
            OSError: no connection, or its TLS handshake failed.
            ProxyRefused: the proxy refused the tunnel or answered it wrongly.
        """
        sock = socket.create_connection(self._dial, timeout=self._connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tunnel:
                self._open_tunnel(sock)
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

    def _open_tunnel(self, sock: socket.socket) -> None:
        """Open a ``CONNECT`` tunnel to the origin on ``sock`` within the connect timeout."""
        sock.sendall(self._connect_head())
        reader = AnswerReader(bodiless=True)
        deadline = time.monotonic() + self._connect_timeout
        try:
            while True:
                data = sock.recv(_RECV)
                answer = reader.feed(data) if data else reader.end()
                if answer is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer to CONNECT within {self._connect_timeout} s")
                sock.settimeout(left)
        except ProtocolError as exc:
            raise ProxyRefused(self._proxy_broke(exc)) from exc
        self._tunnel_opened(answer, bool(reader.leftover))
        sock.settimeout(self._connect_timeout)

    def _give_back(self, conn: _Connection) -> None:
        if conn.short:  # the next request gets the whole read timeout again
            conn.wait_at_most(self._read_timeout)
            conn.short = False
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
            wire = self._head_bytes(request)  # a bad header raises before a connection is taken
            conn = self._take()
            if conn is None:
                try:
                    conn = self._connect()
                except ProxyRefused as refused:
                    return refused.failure
                except OSError as exc:
                    return self._connect_failed(exc)
            body = request.body
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
        reader = AnswerReader(bodiless=request.method == "HEAD", max_body=self._max_body)
        try:
            answer = self._receive(conn, reader)
        except (OSError, ProtocolError) as exc:  # timeouts included
            conn.close()
            return self._read_failed(exc)
        if self._proxy_answered(answer):
            conn.close()
            return self._proxy_refused(407)
        # Bytes beyond the answer break the framing of the next one: not reused.
        if reader.reusable:
            self._give_back(conn)
        else:
            conn.close()
        return answer

    def _receive(self, conn: _Connection, reader: AnswerReader) -> HttpResponse:
        """Read one answer within one deadline: ``read_timeout`` for all of it.

        Each ``recv`` waits at most the read timeout; once less than half of
        it is left, at most what is left, so a server trickling bytes (or
        endless interim answers) cannot hold the request much past it.
        """
        sock = conn.sock
        deadline = time.monotonic() + self._read_timeout
        while True:
            data = sock.recv(_RECV)
            if not data:
                return reader.end()
            answer = reader.feed(data)
            if answer is not None:
                return answer
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if left < self._read_timeout / 2:
                conn.wait_at_most(left)

    def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
