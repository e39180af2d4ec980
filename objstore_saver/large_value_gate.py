"""The large-value gate of a saver: one large serialized value alive at a time (spec §6.1).

A plan serializes under the gate and keeps it while a large value's parts are
stored; when the gate is taken it yields :class:`Hold`, which the driver waits for.

Invariant: whoever holds the gate releases it in a ``finally`` of the plan
that took it, and the drivers close a plan they stop running, so an error or
a cancellation between two steps runs that ``finally``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

#: First and largest pause of an asyncio waiter between two tries, seconds.
_POLL_FIRST = 0.001
_POLL_MAX = 0.02


class LargeValueGate:
    """A lock that plans running on threads and on event loops can both wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        """Take the gate if it is free; ``True`` when taken."""
        return self._lock.acquire(blocking=False)

    def acquire(self) -> None:
        """Take the gate, blocking this thread until it is free."""
        self._lock.acquire()

    async def aacquire(self) -> None:
        """Take the gate without blocking the event loop.

        It polls, as the holder may be a task of this very loop; a cancelled
        waiter holds nothing.
        """
        pause = _POLL_FIRST
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)

    def release(self) -> None:
        """Give the gate back."""
        self._lock.release()

    def locked(self) -> bool:
        """Whether some plan holds the gate."""
        return self._lock.locked()


@dataclass(frozen=True, slots=True)
class Hold:
    """A plan step: wait until the gate is taken for this plan (reply ``None``)."""

    gate: LargeValueGate
