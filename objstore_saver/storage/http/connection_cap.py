"""What the blocking and the asyncio connection pools share (spec-free plumbing).

Both pools talk to one ``scheme://host`` with the same timeouts, keep at most
``max_idle`` connections between requests and open at most
``max_connections`` at once; they differ only in how they wait (a thread
semaphore or an asyncio one) and how they read answers.
"""

from __future__ import annotations

import ssl
from http import HTTPStatus
from urllib.parse import urlsplit

from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.http.proxy import Proxy
from objstore_saver.storage.http.reader import MAX_BODY_BYTES, ProtocolError

#: Characters that would end a request line or a header line early, or cut it.
_BREAKING = ("\r", "\n", "\x00")

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
            ``http`` origins are asked through it in absolute form, ``https``
            ones through a ``CONNECT`` tunnel (TLS with the origin inside).
        max_body: Most bytes of an answer's body accepted (default
            :data:`~.reader.MAX_BODY_BYTES`); a longer one is a transport failure.

    Raises:
        ValueError: an extra header's name or value holds CR, LF or NUL.
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
        #: ``host:port`` of the origin, as a CONNECT request names it.
        self._authority = f"{authority}:{self._port}"
        #: Where sockets connect: the proxy, else the origin.
        self._dial = (proxy.host, proxy.port) if proxy is not None else (self._host, self._port)
        #: A plain origin behind a proxy is asked in absolute form: this goes before the path.
        self._target_prefix = ""
        #: Whether a connection begins with a CONNECT tunnel through the proxy.
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
        #: Lines of the extra headers, the request line and the blank line.
        self._fixed_lines = len(extra) + 2
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
        """The request line and headers (with the pool's extra ones), ready to send.

        Raises:
            ValueError: the method, target or a header holds CR, LF or NUL (or
                the method or target a space), which would change the request's
                framing; the message names the header.
        """
        headers = request.headers
        head = f"{request.method} {self._target_prefix}{request.target} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
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
        """The ``CONNECT`` request opening a tunnel to the origin through the proxy."""
        head = f"CONNECT {self._authority} HTTP/1.1\r\nhost: {self._authority}\r\n"
        if self._proxy is not None and self._proxy.authorization is not None:
            head += f"proxy-authorization: {self._proxy.authorization}\r\n"
        return (head + "\r\n").encode("latin-1")

    def _proxy_name(self) -> str:
        """The proxy as failures name it: address only, never its credentials."""
        proxy = self._proxy
        return f"proxy {proxy.host}:{proxy.port}" if proxy is not None else "no proxy"

    def _proxy_refused(self, status: int) -> TransportFailure:
        """The failure of a proxy that answered ``status`` instead of forwarding: never sent."""
        try:
            reason = f" {HTTPStatus(status).phrase}"
        except ValueError:  # a status without a standard phrase
            reason = ""
        return TransportFailure(
            f"ProxyError: {self._proxy_name()} refused {self._authority}: HTTP {status}{reason}",
            sent=False,
        )

    def _proxy_broke(self, exc: ProtocolError) -> TransportFailure:
        """The failure of a proxy whose answer to ``CONNECT`` was not HTTP: never sent."""
        return TransportFailure(
            f"ProxyError: {self._proxy_name()} answered CONNECT {self._authority} "
            f"with a broken answer: {exc}",
            sent=False,
        )

    def _tunnel_opened(self, answer: HttpResponse, leftover: bool) -> None:
        """Check the proxy's answer to ``CONNECT``; ``leftover``: bytes came after it.

        Raises:
            ProxyRefused: the proxy refused the tunnel, or sent bytes past its 2xx.
        """
        if not 200 <= answer.status < 300:
            raise ProxyRefused(self._proxy_refused(answer.status))
        if leftover:
            raise ProxyRefused(self._proxy_broke(ProtocolError("bytes after its 2xx to CONNECT")))

    def _proxy_answered(self, answer: HttpResponse) -> bool:
        """Whether ``answer`` is a forwarding proxy refusing to forward (its own 407)."""
        return answer.status == 407 and bool(self._target_prefix)

    def _read_failed(self, exc: OSError | ProtocolError) -> TransportFailure:
        """The failure of a request whose answer could not be read (it may have been acted on)."""
        if isinstance(exc, TimeoutError | BlockingIOError):  # BlockingIOError: a kernel timeout
            return TransportFailure(f"ReadTimeoutError: no answer within {self._read_timeout} s")
        return TransportFailure(f"{type(exc).__name__}: {exc}")

    def _connect_failed(self, exc: OSError) -> TransportFailure:
        """The failure of a connection that could not be opened: never sent.

        A certificate the TLS context does not trust (or one for another
        host) reads ``CertificateError: ...``: no retry will change it.
        """
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
        """The failure of a request that waited ``wait_timeout`` for a slot: never sent."""
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
    """Refuse a header whose name or value would break the request's framing."""
    for part in (name, value):
        if any(c in part for c in _BREAKING):
            raise ValueError(f"header {name!r}: CR, LF or NUL in its name or value")
    if not name or " " in name or ":" in name:
        raise ValueError(f"header name {name!r} is not a token")


def _check_request(request: HttpRequest) -> None:
    """Find what breaks a request's head: raise naming it."""
    for what, part in (("method", request.method), ("target", request.target)):
        if not part or " " in part or any(c in part for c in _BREAKING):
            raise ValueError(f"request {what} {part[:80]!r}: empty, or a space, CR, LF or NUL")
    for name, value in request.headers.items():
        _check_field(name, value)
    raise ValueError("request head holds CR, LF or NUL outside its line ends")
