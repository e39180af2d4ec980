"""What the blocking and the asyncio connection pools share (spec-free plumbing).

Both pools talk to one ``scheme://host`` with the same timeouts, keep at most
``max_idle`` connections between requests and open at most
``max_connections`` at once; they differ only in how they wait (a thread
semaphore or an asyncio one) and how they read answers.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

from objstore_saver.storage.http.messages import HttpRequest, TransportFailure
from objstore_saver.storage.http.proxy import Proxy

#: Bodies up to this size go out in the same write as the head (one segment).
JOINED_BODY_MAX = 64 * 1024


class CappedPool:
    """Address, timeouts, connection cap and busy gauge of a connection pool.

    A request beyond ``max_connections`` waits for another to finish (at most
    ``wait_timeout``; then it fails as not sent), so a burst of requests never
    opens more sockets than the cap.

    Args:
        scheme: ``http`` or ``https``.
        host: ``host[:port]``.
        connect_timeout: Seconds to open a connection (TLS handshake included).
        read_timeout: Seconds to wait for each read of an answer.
        max_idle: Connections kept open between requests.
        max_connections: Connections open at once (busy and idle together);
            default 64.
        wait_timeout: Seconds a request waits for a free connection; default
            ``read_timeout``.
        extra_headers: Headers added to every request (e.g. ``user-agent``).
        tls: The TLS context of ``https`` connections (its trust store);
            default the system's (``ssl.create_default_context()``).
        proxy: A forward proxy to reach the origin through; default none.
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
    ) -> None:
        parts = urlsplit(f"{scheme}://{host}")
        self._host = parts.hostname or host
        self._port = parts.port or (443 if scheme == "https" else 80)
        self._ssl = (tls or ssl.create_default_context()) if scheme == "https" else None
        if proxy is not None:
            raise ValueError(f"{proxy}: the pools cannot reach an origin through a proxy yet")
        self._proxy = proxy
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
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (extra_headers or {}).items())
        self._setup()

    def _setup(self) -> None:
        """Make the pool's own parts: its slot semaphore and idle connections."""
        raise NotImplementedError

    @property
    def busy(self) -> int:
        """Requests holding a connection (or opening one) now."""
        return self._busy

    @property
    def peak_busy(self) -> int:
        """The most requests that held a connection at once; open sockets never exceed it."""
        return self._peak_busy

    def _began(self) -> None:
        """Count a request that took a slot (callers serialize this themselves)."""
        self._busy += 1
        self._peak_busy = max(self._peak_busy, self._busy)

    def _head_bytes(self, request: HttpRequest) -> bytes:
        """The request line and headers (with the pool's extra ones), ready to send."""
        head = f"{request.method} {request.target} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in request.headers.items()
        )
        if request.body or request.method in ("PUT", "POST"):
            head += f"content-length: {len(request.body)}\r\n"
        return (head + self._extra + "\r\n").encode("latin-1")

    def _no_slot(self) -> TransportFailure:
        """The failure of a request that waited ``wait_timeout`` for a slot: never sent."""
        return TransportFailure(
            f"PoolTimeoutError: all {self._max_connections} connections stayed busy "
            f"for {self._wait_timeout} s",
            sent=False,
        )
