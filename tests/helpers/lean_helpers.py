"""Helpers of the LeanS3Store tests: a store builder, a request recorder and a
driver of the coroutines (the ``creds_env`` fixture is in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from objstore_saver.storage import (
    ListPage,
    PutMode,
)
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.s3.lean import LeanS3Store


def lean(s3_endpoint: Any, bucket: str, prefix: str = "", **options: Any) -> LeanS3Store:
    """A store on the test endpoint (credentials from the environment)."""
    return LeanS3Store(
        bucket, prefix, endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region, **options
    )


class Recorder:
    """Wraps a store's two send paths, recording requests and optionally replacing replies."""

    def __init__(
        self,
        store: LeanS3Store,
        reply: Callable[[HttpRequest, Reply], Reply] | None = None,
        *,
        intercept: Callable[[HttpRequest], Reply | None] | None = None,
    ) -> None:
        """``intercept`` may answer a request instead of the server (it is then not sent);
        ``reply`` may replace the server's answer after the request was sent."""
        self.requests: list[HttpRequest] = []
        send, asend = store._send, store._asend
        edit = reply or (lambda _req, rep: rep)
        early = intercept or (lambda _req: None)

        def sync(request: HttpRequest) -> Reply:
            self.requests.append(request)
            answer = early(request)
            return answer if answer is not None else edit(request, send(request))

        async def asyn(request: HttpRequest) -> Reply:
            self.requests.append(request)
            answer = early(request)
            return answer if answer is not None else edit(request, await asend(request))

        store._send = sync  # type: ignore[method-assign]
        store._asend = asyn  # type: ignore[method-assign]

    def of(self, method: str) -> list[HttpRequest]:
        return [r for r in self.requests if r.method == method]


Reply = HttpResponse | TransportFailure


class AsyncDriven:
    """The blocking protocol carried out by a LeanS3Store's coroutines on a private loop.

    Like the contract suite's ``ThroughCoroutines``, plus closing the store's
    connections on that loop.
    """

    def __init__(self, store: LeanS3Store) -> None:
        self.store = store
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    @property
    def location(self) -> str:
        return self.store.location

    def _wait(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)  # type: ignore[arg-type]

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self._wait(self.store.aput(key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._wait(self.store.aget(key, byte_range))

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> ListPage:
        return self._wait(self.store.alist(prefix, start_after=start_after, limit=limit))

    def delete(self, keys: Sequence[str]) -> None:
        self._wait(self.store.adelete(keys))

    def close(self) -> None:
        self._wait(self.store.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class SocketCounter:
    """Counts the connections a process opens with ``asyncio.open_connection`` and has not closed.

    Installed over ``asyncio.open_connection`` (the only way the async pool
    opens sockets); a connection counts from its opening until the first
    ``close()`` of its writer.
    """

    def __init__(self, monkeypatch: Any) -> None:
        self.open = 0
        self.peak = 0
        self.opened = 0
        original = asyncio.open_connection

        async def counted(*args: Any, **kwargs: Any) -> Any:
            reader, writer = await original(*args, **kwargs)
            self.opened += 1
            self.open += 1
            self.peak = max(self.peak, self.open)
            close = writer.close
            closed = False

            def counted_close() -> None:
                nonlocal closed
                if not closed:
                    closed = True
                    self.open -= 1
                close()

            writer.close = counted_close  # type: ignore[method-assign]
            return reader, writer

        monkeypatch.setattr(asyncio, "open_connection", counted)


class ThreadSocketCounter:
    """Counts the blocking pool's connections open at once (``http_pool`` sockets).

    A connection counts from a successful ``ConnectionPool._connect()`` until
    its first ``close()``. With ``hold`` set, the first ``hold`` connects wait (at most
    10 s) until all of them are open together: a way to prove they can be.
    """

    def __init__(self, monkeypatch: Any, hold: int | None = None) -> None:
        from objstore_saver.storage.http import sync_pool as http_pool

        self.open = 0
        self.peak = 0
        self.opened = 0
        lock = threading.Lock()
        barrier = threading.Barrier(hold) if hold else None
        connect, close = http_pool.ConnectionPool._connect, http_pool._Connection.close
        counted: set[int] = set()

        def counted_connect(pool: Any) -> Any:
            conn = connect(pool)
            with lock:
                counted.add(id(conn))
                self.opened += 1
                self.open += 1
                self.peak = max(self.peak, self.open)
                first = self.opened <= (hold or 0)
            if barrier is not None and first:
                # Only the first ``hold`` connections wait for each other; if
                # they cannot all be open at once, the wait times out and the
                # caller's assertion on ``peak`` fails.
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(10)
            return conn

        def counted_close(conn: Any) -> None:
            with lock:
                if id(conn) in counted:
                    counted.discard(id(conn))
                    self.open -= 1
            close(conn)

        monkeypatch.setattr(http_pool.ConnectionPool, "_connect", counted_connect)
        monkeypatch.setattr(http_pool._Connection, "close", counted_close)
