"""A small keep-alive pool of asyncio stream connections speaking HTTP/1.1 to one origin.

The async side of the lean S3 transport, the twin of ``sync_pool.py``: one
request per connection at a time, answers framed by ``Content-Length``,
chunked transfer coding or the end of the connection. It never retries; a
failed request is reported to the caller's retry policy. Connections belong
to the event loop that opened them.
"""

from __future__ import annotations

import asyncio
import contextlib

from objstore_saver.storage.http.connection_cap import JOINED_BODY_MAX, CappedPool
from objstore_saver.storage.http.messages import (
    HttpRequest,
    HttpResponse,
    Reply,
    TransportFailure,
)
from objstore_saver.storage.http.reader import MAX_HEAD_BYTES, ProtocolError, parse_head

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body read to its last chunk (trailers skipped), the chunks joined."""
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


class AsyncConnectionPool(CappedPool):
    """Connections to ``scheme://host`` on one event loop, at most ``max_connections`` open.

    A burst of coroutines never opens more sockets than the cap; the blocking
    twin is ``sync_pool.ConnectionPool``. Arguments: :class:`CappedPool`.
    """

    def _setup(self) -> None:
        self._slots = asyncio.Semaphore(self._max_connections)
        self._idle: list[_Conn] = []

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

    async def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer; failures become :class:`TransportFailure`.

        Waits for a free slot first when ``max_connections`` requests are busy.
        """
        if self._slots.locked():
            try:
                async with asyncio.timeout(self._wait_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                return self._no_slot()
        else:  # a free slot: taken without suspending, so no timer to arm and cancel
            await self._slots.acquire()
        self._began()
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
        head = self._head_bytes(request)
        try:
            if len(body) <= JOINED_BODY_MAX:  # one write, one segment: small bodies are the rule
                writer.write(head + body)
            else:
                writer.write(head)
                writer.write(body)
            async with asyncio.timeout(self._read_timeout):
                await writer.drain()
                raw = await reader.readuntil(b"\r\n\r\n")
                status, headers = parse_head(raw[:-4])
                while 100 <= status < 200:  # interim answers carry no body
                    raw = await reader.readuntil(b"\r\n\r\n")
                    status, headers = parse_head(raw[:-4])
                if request.method == "HEAD" or status in (204, 304):
                    data = b""
                elif "chunked" in headers.get("transfer-encoding", "").lower():
                    data = await read_chunked(reader)
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
