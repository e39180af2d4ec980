"""A small keep-alive pool of asyncio stream connections speaking HTTP/1.1 to one origin.

The async side of the lean S3 transport, the twin of ``http_pool.py``: one
request per connection at a time, answers framed by ``Content-Length``,
chunked transfer coding or the end of the connection. It never retries; a
failed request is reported to the caller's retry policy. Connections belong
to the event loop that opened them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit

from objstore_saver.storage.s3_protocol import (
    HttpRequest,
    HttpResponse,
    Reply,
    TransportFailure,
)

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
#: Longest status line plus headers accepted, in bytes.
MAX_HEAD_BYTES = 64 * 1024


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read."""


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return int(parts[1]), headers


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


class AsyncConnectionPool:
    """Connections to ``scheme://host`` on one event loop, at most ``max_connections`` open.

    At most ``max_idle`` of them are kept open between requests. A request
    beyond ``max_connections`` waits for another to finish (at most
    ``wait_timeout``; then it fails as not sent), so a burst of coroutines
    never opens more sockets than the cap.

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
    ) -> None:
        parts = urlsplit(f"{scheme}://{host}")
        self._host = parts.hostname or host
        self._port = parts.port or (443 if scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if scheme == "https" else None
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_idle = max_idle
        self._max_connections = max_connections
        self._wait_timeout = read_timeout if wait_timeout is None else wait_timeout
        # Invariant: open connections <= max_connections. A request holds a
        # slot from before it takes a connection until it has put it back or
        # closed it, and a new connection is opened only when no idle one is
        # left: at that moment every open connection is held by a busy request.
        self._slots = asyncio.Semaphore(max_connections)
        self._busy = 0
        self._peak_busy = 0
        self._idle: list[_Conn] = []
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (extra_headers or {}).items())

    async def _take(self) -> tuple[_Conn | None, str | None]:
        """An open idle connection, a new one, or ``(None, error)`` when none opens."""
        while self._idle:
            reader, writer = self._idle.pop()
            # An idle connection has nothing to read: data or EOF means the
            # server closed it (or broke framing); drop it.
            # (StreamReader has no public "bytes buffered" accessor; without
            # one, stray bytes surface as a framing error the retry sees.)
            buffered = getattr(reader, "_buffer", b"")
            if not writer.is_closing() and not reader.at_eof() and not buffered:
                return (reader, writer), None
            writer.close()
        try:
            async with asyncio.timeout(self._connect_timeout):
                conn = await asyncio.open_connection(
                    self._host, self._port, ssl=self._ssl, limit=MAX_HEAD_BYTES
                )
        except TimeoutError:
            return None, f"ConnectTimeoutError: no connection within {self._connect_timeout} s"
        except OSError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return conn, None

    @property
    def busy(self) -> int:
        """Requests holding a connection (or opening one) now."""
        return self._busy

    @property
    def peak_busy(self) -> int:
        """The most requests that held a connection at once; open sockets never exceed it."""
        return self._peak_busy

    async def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer; failures become :class:`TransportFailure`.

        Waits for a free slot first when ``max_connections`` requests are busy.
        """
        try:
            async with asyncio.timeout(self._wait_timeout):
                await self._slots.acquire()
        except TimeoutError:
            return TransportFailure(
                f"PoolTimeoutError: all {self._max_connections} connections stayed busy "
                f"for {self._wait_timeout} s",
                sent=False,
            )
        self._busy += 1
        self._peak_busy = max(self._peak_busy, self._busy)
        try:
            return await self._send(request)
        finally:
            self._busy -= 1
            self._slots.release()

    async def _send(self, request: HttpRequest) -> Reply:
        conn, error = await self._take()
        if conn is None:
            return TransportFailure(str(error), sent=False)
        reader, writer = conn
        body = request.body
        head = f"{request.method} {request.target} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in request.headers.items()
        )
        if body or request.method in ("PUT", "POST"):
            head += f"content-length: {len(body)}\r\n"
        head += self._extra + "\r\n"
        try:
            if len(body) < 65536:  # one write, one segment: small bodies are the rule
                writer.write(head.encode("latin-1") + body)
            else:
                writer.write(head.encode("latin-1"))
                writer.write(body)
            async with asyncio.timeout(self._read_timeout):
                await writer.drain()
                raw = await reader.readuntil(b"\r\n\r\n")
                status, headers = _parse_head(raw[:-4])
                while 100 <= status < 200:  # interim answers carry no body
                    raw = await reader.readuntil(b"\r\n\r\n")
                    status, headers = _parse_head(raw[:-4])
                if request.method == "HEAD" or status in (204, 304):
                    data = b""
                elif "chunked" in headers.get("transfer-encoding", "").lower():
                    data = await _read_chunked(reader)
                elif "content-length" in headers:
                    data = await reader.readexactly(int(headers["content-length"]))
                else:
                    data = await reader.read()
                    headers["connection"] = "close"
        except TimeoutError:
            writer.close()
            return TransportFailure(f"ReadTimeoutError: no answer within {self._read_timeout} s")
        except (OSError, EOFError, ValueError, ProtocolError, asyncio.LimitOverrunError) as exc:
            # IncompleteReadError is an EOFError; a bad length or chunk size a ValueError.
            writer.close()
            return TransportFailure(f"{type(exc).__name__}: {exc}")
        except asyncio.CancelledError:
            writer.close()  # mid-exchange: the connection's framing is unknown
            raise
        if "close" in headers.get("connection", "").lower() or len(self._idle) >= self._max_idle:
            writer.close()
        else:
            self._idle.append((reader, writer))
        return HttpResponse(status, headers, data)

    async def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
        for _, writer in idle:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
