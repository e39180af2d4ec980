"""A small thread-safe keep-alive pool of ``http.client`` connections to one origin.

The blocking side of the lean S3 transport. Measured against urllib3 on the
same requests it costs about two thirds of the CPU (``docs/transport.md``):
urllib3's pool, URL and header layers sit on top of the very same
``http.client``. It never retries: a failed request is reported to the
caller's retry policy, which knows whether a resend is safe.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Callable

from objstore_saver.storage.s3_protocol import (
    HttpRequest,
    HttpResponse,
    Reply,
    TransportFailure,
)


class ConnectionPool:
    """Idle connections to ``scheme://host``, at most ``max_idle`` kept.

    Args:
        scheme: ``http`` or ``https``.
        host: ``host[:port]``.
        connect_timeout: Seconds to open a connection (TLS handshake included).
        read_timeout: Seconds to wait for each read of an answer.
        max_idle: Connections kept open between requests.
        extra_headers: Headers added to every request (e.g. ``user-agent``).
    """

    def __init__(
        self,
        scheme: str,
        host: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        max_idle: int,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        self._factory: Callable[..., http.client.HTTPConnection]
        if scheme == "https":
            context = ssl.create_default_context()
            self._factory = lambda: http.client.HTTPSConnection(
                host, timeout=connect_timeout, context=context
            )
        else:
            self._factory = lambda: http.client.HTTPConnection(host, timeout=connect_timeout)
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._extra = dict(extra_headers or {})

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection still open (and ``True``), or a new one (``False``)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._factory(), False
            sock = conn.sock
            # An idle keep-alive connection has nothing to read; if it has, the
            # server closed it (EOF) or sent garbage: drop it.
            if sock is not None and not select.select([sock], [], [], 0)[0]:
                return conn, True
            conn.close()

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer; failures become :class:`TransportFailure`."""
        conn, reused = self._take()
        if not reused:
            try:
                conn.connect()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                return TransportFailure(f"{type(exc).__name__}: {exc}", sent=False)
            assert conn.sock is not None
            conn.sock.settimeout(self._read_timeout)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            conn.request(
                request.method,
                request.target,
                body=request.body if request.body or request.method in ("PUT", "POST") else None,
                headers={**request.headers, **self._extra},
            )
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if isinstance(exc, TimeoutError):
                wait = self._read_timeout
                return TransportFailure(f"ReadTimeoutError: no answer within {wait} s")
            return TransportFailure(f"{type(exc).__name__}: {exc}")
        headers = {k.lower(): v for k, v in response.getheaders()}
        if response.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return HttpResponse(response.status, headers, body)

    def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
