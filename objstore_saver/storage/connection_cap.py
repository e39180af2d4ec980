"""A cap on the connections the blocking pool of the lean S3 transport opens at once.

``http_pool.ConnectionPool`` opens a connection whenever no idle one is left,
so 64 threads sending at once open 64 sockets. :class:`CappedPool` lets at most
``max_connections`` requests into the pool at a time; the others wait (at most
``wait_timeout``) for one to finish. The async pool has the same cap built in
(``aio_pool.AsyncConnectionPool``).
"""

from __future__ import annotations

import threading
from typing import Protocol

from objstore_saver.storage.s3_protocol import HttpRequest, Reply, TransportFailure


class BlockingPool(Protocol):
    """What :class:`CappedPool` needs of the pool it guards."""

    def send(self, request: HttpRequest) -> Reply:
        """Send one request and read the whole answer."""
        ...

    def close(self) -> None:
        """Close the idle connections."""
        ...


class CappedPool:
    """A blocking pool that never has more than ``max_connections`` connections open.

    Invariant: open connections <= max_connections. A request holds a slot
    from before it enters the pool until the pool has put its connection back
    or closed it, and the pool opens a connection only when no idle one is
    left: at that moment every open connection is held by a request holding a
    slot.

    Args:
        pool: The pool guarded (``http_pool.ConnectionPool``).
        max_connections: Requests in the pool at once.
        wait_timeout: Seconds a request waits for a free slot; then it fails
            as a :class:`TransportFailure` that was not sent.
    """

    def __init__(self, pool: BlockingPool, *, max_connections: int, wait_timeout: float) -> None:
        self._pool = pool
        self._max_connections = max_connections
        self._wait_timeout = wait_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._busy = 0
        self._peak_busy = 0

    @property
    def busy(self) -> int:
        """Requests in the pool now."""
        return self._busy

    @property
    def peak_busy(self) -> int:
        """The most requests that were in the pool at once; open sockets never exceed it."""
        return self._peak_busy

    def send(self, request: HttpRequest) -> Reply:
        """Send one request through the pool once a slot is free."""
        if not self._slots.acquire(timeout=self._wait_timeout):
            return TransportFailure(
                f"PoolTimeoutError: all {self._max_connections} connections stayed busy "
                f"for {self._wait_timeout} s",
                sent=False,
            )
        with self._lock:
            self._busy += 1
            self._peak_busy = max(self._peak_busy, self._busy)
        try:
            return self._pool.send(request)
        finally:
            with self._lock:
                self._busy -= 1
            self._slots.release()

    def close(self) -> None:
        """Close the guarded pool's idle connections (the pool stays usable)."""
        self._pool.close()
