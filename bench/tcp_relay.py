"""A TCP relay that gives a database connection the S3 requests' round trip.

Workload 6 compares CPU per turn with S3 requests that wait the injected
round trip. A thread that waits for an answer pays to sleep and wake; a
query answered on loopback at once does not. :class:`DelayRelay` sits between
a saver and its PostgreSQL server, in the benchmark's server process (its CPU
is not the saver's), and holds every byte the client sends for the current
round trip before passing it on; answers pass at once. Bytes keep their
order, and bytes sent together (a pipeline of statements) arrive together:
one round trip per exchange, as on a network, whatever the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

_CHUNK = 256 * 1024


def _no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class DelayRelay:
    """Relays connections to ``upstream``, delaying client bytes by ``delay()`` seconds.

    Runs on the caller's event loop: :meth:`start` binds a loopback port,
    :meth:`close` hangs up on every connection.

    Args:
        upstream: ``(host, port)`` of the server.
        delay: Returns the round trip to add now, in seconds (read per chunk,
            so a change applies to the next bytes sent).
    """

    def __init__(self, upstream: tuple[str, int], delay: Callable[[], float]) -> None:
        self.upstream = upstream
        self._delay = delay
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        """Listen on a free loopback port; return it."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        """Stop listening and end every relayed connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        _no_delay(writer)
        writers, pumps = [writer], []
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            writers.append(up_writer)
            _no_delay(up_writer)
            pumps += [
                asyncio.ensure_future(self._delayed(reader, up_writer)),
                asyncio.ensure_future(self._at_once(up_reader, writer)),
            ]
            # Either side closing ends the relayed connection.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except OSError:
            pass  # the server is unreachable: the client is hung up on
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for w in writers:
                w.close()
            self._tasks.discard(task)

    async def _delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client to server: each chunk is written ``delay()`` after it arrived, in order."""
        loop = asyncio.get_running_loop()
        due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                at, data = await due.get()
                wait = at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while True:
                try:
                    data = await reader.read(_CHUNK)
                except ConnectionError:
                    data = b""
                due.put_nowait((loop.time() + self._delay(), data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender

    async def _at_once(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Server to client, without delay."""
        while True:
            try:
                data = await reader.read(_CHUNK)
            except ConnectionError:
                return
            if not data:
                return
            writer.write(data)
            await writer.drain()
