"""The blocking HTTP/1.1 connection pool (:class:`ConnectionPool`, plain sockets, no
``http.client``: docs/transport.md), and :class:`CappedPool`, what it shares with the
asyncio one. Neither retries: a failure goes to the caller's retry policy.
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
from http import HTTPStatus
from urllib.parse import urlsplit

from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, Reply, TransportFailure
from objstore_saver.storage.http.proxy import Proxy
from objstore_saver.storage.http.reader import MAX_BODY_BYTES, AnswerReader, ProtocolError

#: Characters that would end a request line or a header line early, or cut it.
_BREAKING = ("\r", "\n", "\x00")

#: Bodies up to this size go out in the same write as the head (one segment).
JOINED_BODY_MAX = 64 * 1024


class CappedPool:
    """Address, timeouts, connection cap and busy gauge of a connection pool.

    A request beyond ``max_connections`` (busy and idle together) waits for
    another to finish, at most ``wait_timeout`` (default ``read_timeout``),
    then fails as not sent. ``max_idle`` connections are kept between
    requests; ``tls`` defaults to the system's trust; ``proxy`` is a forward
    proxy (``https`` origins through a ``CONNECT`` tunnel); a body over
    ``max_body`` is a transport failure. ValueError: an extra header holds
    CR, LF or NUL.
    """

    def __init__(
        self,
        scheme: str,
        host: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        max_idle: int,
        max_connections: int = 64,
        wait_timeout: float | None = None,
        extra_headers: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        proxy: Proxy | None = None,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        parts = urlsplit(f"{scheme}://{host}")
        self._host = parts.hostname or host
        self._port = parts.port or (443 if scheme == "https" else 80)
        self._ssl = (tls or ssl.create_default_context()) if scheme == "https" else None
        self._proxy = proxy
        self._max_body = max_body
        authority = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = f"{authority}:{self._port}"  # as a CONNECT request names it
        self._dial = (proxy.host, proxy.port) if proxy is not None else (self._host, self._port)
        # A plain origin behind a proxy is asked in absolute form: this goes before the path.
        self._target_prefix = ""
        self._tunnel = proxy is not None and scheme == "https"
        extra = dict(extra_headers or {})
        if proxy is not None and not self._tunnel:
            self._target_prefix = f"http://{host}"
            if proxy.authorization is not None:
                extra["proxy-authorization"] = proxy.authorization
        for name, value in extra.items():
            _check_field(name, value)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._max_connections = max_connections
        self._wait_timeout = read_timeout if wait_timeout is None else wait_timeout
        # Invariant: open connections <= max_connections. A request holds a
        # slot (the subclass's semaphore) from before it takes a connection
        # until it has put it back or closed it, and a new connection is opened
        # only when no idle one is left: at that moment every open connection
        # is held by a busy request.
        self._busy = 0
        self._peak_busy = 0
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        self._fixed_lines = len(extra) + 2
        self._setup()

    def _setup(self) -> None:  # the pool's slot semaphore and idle list
        raise NotImplementedError

    @property
    def busy(self) -> int:
        """Requests holding a connection (or opening one) now."""
        return self._busy

    @property
    def peak_busy(self) -> int:
        """The most requests that held a connection at once; open sockets never exceed it."""
        return self._peak_busy

    def _began(self) -> None:  # callers serialize this themselves
        self._busy += 1
        self._peak_busy = max(self._peak_busy, self._busy)

    def _head_bytes(self, request: HttpRequest) -> bytes:
        """The request line and headers, ready to send; ValueError naming a header whose
        CR, LF or NUL (or a space in the method or target) would change the framing."""
        headers = request.headers
        head = f"{request.method} {self._target_prefix}{request.target} HTTP/1.1\r\n" + "".join(
            [f"{k}: {v}\r\n" for k, v in headers.items()]
        )
        lines = self._fixed_lines + len(headers)
        if request.body or request.method in ("PUT", "POST"):
            head += f"content-length: {len(request.body)}\r\n"
            lines += 1
        head += self._extra + "\r\n"
        # One pass each in C: every CR and LF is one of the line ends we wrote,
        # and the request line has its two spaces only.
        if (
            head.count("\n") != lines
            or head.count("\r") != lines
            or "\x00" in head
            or head.count(" ", 0, head.index("\r")) != 2
        ):
            _check_request(request)
        return head.encode("latin-1")

    def _connect_head(self) -> bytes:
        head = f"CONNECT {self._authority} HTTP/1.1\r\nhost: {self._authority}\r\n"
        if self._proxy is not None and self._proxy.authorization is not None:
            head += f"proxy-authorization: {self._proxy.authorization}\r\n"
        return (head + "\r\n").encode("latin-1")

    def _proxy_name(self) -> str:  # address only, never its credentials
        proxy = self._proxy
        return f"proxy {proxy.host}:{proxy.port}" if proxy is not None else "no proxy"

    def _proxy_refused(self, status: int) -> TransportFailure:
        try:
            reason = f" {HTTPStatus(status).phrase}"
        except ValueError:  # a status without a standard phrase
            reason = ""
        return TransportFailure(
            f"ProxyError: {self._proxy_name()} refused {self._authority}: HTTP {status}{reason}",
            sent=False,
        )

    def _proxy_broke(self, exc: ProtocolError) -> TransportFailure:
        return TransportFailure(
            f"ProxyError: {self._proxy_name()} answered CONNECT {self._authority} "
            f"with a broken answer: {exc}",
            sent=False,
        )

    def _tunnel_opened(self, answer: HttpResponse, leftover: bool) -> None:
        """Raise ProxyRefused unless the answer to ``CONNECT`` is a bare 2xx."""
        if not 200 <= answer.status < 300:
            raise ProxyRefused(self._proxy_refused(answer.status))
        if leftover:
            raise ProxyRefused(self._proxy_broke(ProtocolError("bytes after its 2xx to CONNECT")))

    def _proxy_answered(self, answer: HttpResponse) -> bool:  # a forwarding proxy's own 407
        return answer.status == 407 and bool(self._target_prefix)

    def _read_failed(self, exc: OSError | ProtocolError) -> TransportFailure:  # maybe acted on
        if isinstance(exc, TimeoutError | BlockingIOError):  # BlockingIOError: a kernel timeout
            return TransportFailure(f"ReadTimeoutError: no answer within {self._read_timeout} s")
        return TransportFailure(f"{type(exc).__name__}: {exc}")

    def _connect_failed(self, exc: OSError) -> TransportFailure:
        where = f"{self._authority}" + (f" via {self._proxy_name()}" if self._proxy else "")
        if isinstance(exc, ssl.SSLCertVerificationError):
            detail = exc.verify_message or str(exc)
            return TransportFailure(
                f"CertificateError: {where}: certificate verification failed: {detail}", sent=False
            )
        if isinstance(exc, TimeoutError):
            return TransportFailure(
                f"ConnectTimeoutError: no connection to {where} within {self._connect_timeout} s",
                sent=False,
            )
        return TransportFailure(f"{type(exc).__name__}: {exc}", sent=False)

    def _no_slot(self) -> TransportFailure:
        return TransportFailure(
            f"PoolTimeoutError: all {self._max_connections} connections stayed busy "
            f"for {self._wait_timeout} s",
            sent=False,
        )


class ProxyRefused(Exception):
    """A proxy did not open the tunnel: carries the failure to report."""

    def __init__(self, failure: TransportFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


def _check_field(name: str, value: str) -> None:
    for part in (name, value):
        if any(c in part for c in _BREAKING):
            raise ValueError(f"header {name!r}: CR, LF or NUL in its name or value")
    if not name or " " in name or ":" in name:
        raise ValueError(f"header name {name!r} is not a token")


def _check_request(request: HttpRequest) -> None:
    for what, part in (("method", request.method), ("target", request.target)):
        if not part or " " in part or any(c in part for c in _BREAKING):
            raise ValueError(f"request {what} {part[:80]!r}: empty, or a space, CR, LF or NUL")
    for name, value in request.headers.items():
        _check_field(name, value)
    raise ValueError("request head holds CR, LF or NUL outside its line ends")


_RECV = 256 * 1024
_POLL = hasattr(select, "poll")

#: Plain sockets wait in the kernel (``SO_RCVTIMEO``) where it takes a ``struct timeval``:
#: a Python timeout polls before every ``recv`` and ``send`` (docs/profile.md, "One
#: request's CPU", kernel socket timeouts).
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
    """Blocking connections to ``scheme://host``, at most ``max_connections`` open (thread-safe)."""

    def _setup(self) -> None:
        self._slots = threading.BoundedSemaphore(self._max_connections)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def _take(self) -> _Connection | None:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return None
            # An idle connection has nothing to read (see _answer): if it has, the
            # server closed it (EOF) or sent garbage.
            if not conn.readable():
                return conn
            conn.close()

    def _connect(self) -> _Connection:
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
        """Send one request and read the whole answer; failures become :class:`TransportFailure`."""
        if not self._slots.acquire(timeout=self._wait_timeout):
            return self._no_slot()
        return self._read(self._write(request))

    def send_ahead(self, request: HttpRequest) -> Callable[[], Reply] | None:
        """Write one request now; return the function (to call exactly once) reading its
        answer. None, nothing sent, when no slot is free at once: a thread holding slots
        for answers it has not read yet never waits for another."""
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
        """Read one answer within ``read_timeout`` for all of it: once less than half is
        left, each ``recv`` waits at most what is left (a trickling server cannot hold it)."""
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
