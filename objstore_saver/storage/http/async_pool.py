"""The asyncio twin of ``sync_pool.py``: keep-alive stream connections to one origin,
bound to the event loop that opened them."""

from __future__ import annotations

import asyncio
import contextlib

from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, Reply, TransportFailure
from objstore_saver.storage.http.reader import MAX_HEAD_BYTES, AnswerReader, ProtocolError
from objstore_saver.storage.http.sync_pool import JOINED_BODY_MAX, CappedPool, ProxyRefused

_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_RECV = 256 * 1024


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body read to its last chunk, no byte past it; ValueError for broken framing."""
    body = AnswerReader.chunked_body()
    while True:
        wanted = body.wanted
        data = await (reader.readexactly(wanted) if wanted else reader.readuntil(b"\r\n"))
        try:
            answer = body.feed(data)
        except ProtocolError as exc:
            raise ValueError(str(exc)) from exc
        if answer is not None:
            return answer.body


async def _receive(reader: asyncio.StreamReader, answer: AnswerReader) -> HttpResponse:
    while True:
        data = await reader.read(_RECV)
        if not data:
            return answer.end()
        whole = answer.feed(data)
        if whole is not None:
            return whole


class AsyncConnectionPool(CappedPool):
    """Connections to ``scheme://host`` on one event loop, at most ``max_connections`` open."""

    def _setup(self) -> None:
        self._slots = asyncio.Semaphore(self._max_connections)
        self._idle: list[_Conn] = []
        # Each exchange's read deadline, oldest first (one read timeout for all), those
        # cut at theirs, and the one timer that cuts them (not one timer a request).
        self._reading: dict[asyncio.StreamWriter, float] = {}
        self._late: set[asyncio.StreamWriter] = set()
        self._watch: asyncio.TimerHandle | None = None

    def _expire(self) -> None:  # cut the connections past their deadline; wake at the next
        self._watch = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for writer, deadline in list(self._reading.items()):
            if deadline > now:
                self._watch = loop.call_at(deadline, self._expire)
                return
            del self._reading[writer]
            self._late.add(writer)
            writer.transport.abort()  # the read under way ends: a read timeout (see _send)

    async def _take(self) -> _Conn | TransportFailure:
        """An open idle connection, a new one, or the failure (not sent) when none opens."""
        while self._idle:
            reader, writer = self._idle.pop()
            # An idle connection has nothing to read: data or EOF means the server
            # closed it or broke framing. (No public "bytes buffered" accessor.)
            buffered = getattr(reader, "_buffer", b"")
            if not writer.is_closing() and not reader.at_eof() and not buffered:
                return reader, writer
            writer.close()
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await self._open()
        except ProxyRefused as refused:
            return refused.failure
        except OSError as exc:  # TimeoutError and certificate failures included
            return self._connect_failed(exc)

    async def _open(self) -> _Conn:
        host, port = self._dial
        if not self._tunnel:
            return await asyncio.open_connection(host, port, ssl=self._ssl, limit=MAX_HEAD_BYTES)
        reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEAD_BYTES)
        try:
            writer.write(self._connect_head())
            answer = AnswerReader(bodiless=True)
            try:
                reply = await _receive(reader, answer)
            except ProtocolError as exc:
                raise ProxyRefused(self._proxy_broke(exc)) from exc
            self._tunnel_opened(reply, bool(answer.leftover or getattr(reader, "_buffer", b"")))
            await writer.start_tls(self._ssl, server_hostname=self._host)  # type: ignore[arg-type]
        except BaseException:
            writer.close()
            raise
        return reader, writer

    async def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer; failures become :class:`TransportFailure`."""
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
        head = self._head_bytes(request)  # a bad header raises before a connection is taken
        conn = await self._take()
        if isinstance(conn, TransportFailure):
            return conn
        reader, writer = conn
        body = request.body
        answer = AnswerReader(bodiless=request.method == "HEAD", max_body=self._max_body)
        try:
            if len(body) <= JOINED_BODY_MAX:  # one write, one segment: small bodies are the rule
                writer.write(head + body)
            else:
                writer.write(head)
                writer.write(body)
            # One deadline for the whole answer: interim answers, body and trailers.
            loop = asyncio.get_running_loop()
            self._reading[writer] = deadline = loop.time() + self._read_timeout
            if self._watch is None:
                self._watch = loop.call_at(deadline, self._expire)
            await writer.drain()
            reply = await _receive(reader, answer)
        except (OSError, ProtocolError) as exc:
            writer.close()  # cut at its deadline (late): a read timeout
            return self._read_failed(TimeoutError() if writer in self._late else exc)
        except asyncio.CancelledError:
            writer.close()  # mid-exchange: the connection's framing is unknown
            raise
        finally:
            self._reading.pop(writer, None)
            self._late.discard(writer)
        if self._proxy_answered(reply):
            writer.close()
            return self._proxy_refused(407)
        if answer.reusable and len(self._idle) < self._max_idle:
            self._idle.append((reader, writer))
        else:
            writer.close()
        return reply

    async def close(self) -> None:
        """Close every idle connection (the pool stays usable)."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
        for _, writer in idle:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
