"""The large-value gate of a saver: one large serialized value alive at a time (spec §6.1).

LangGraph runs a turn's input checkpoint ``put`` and its input task's
``put_writes`` concurrently, both serializing the same message. LangGraph's
serializer peaks at about three times a large value while it builds the
bytes, so two of them at once (or one while the other's bytes are being
compressed and stored) cost four times the value or more.

A plan serializes every value under the gate. A small result gives the gate
back at once; a large one keeps it while its parts are stored, across the
plan's requests, until its serialized bytes are dropped. Plans take it
without blocking when it is free (the rule) and otherwise yield
:class:`Hold`, which the driver carries out: the blocking driver waits on the
lock, the asyncio driver polls it without blocking its loop.

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

        The holder may be a thread or a task of this very loop (waiting for
        its requests), so this polls: a large value is held for as long as
        its parts take to store, far longer than a pause. A cancelled waiter
        holds nothing.
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
