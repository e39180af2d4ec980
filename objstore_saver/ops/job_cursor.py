"""Where a long job resumes: a cursor object in the bucket (spec §3, ``jobs/``).

The cursor is the *low-water mark* of threads finished out of order: the last one
such that it and every one before it are done. It is written every few seconds and
when the job stops; a killed job redoes at most what finished since (jobs are
idempotent). Each shard has its own; a run through its whole source deletes it.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from objstore_saver.driver import Driver
from objstore_saver.errors import CorruptObjectError
from objstore_saver.ops.fanout import Fanout, each, for_each
from objstore_saver.ops.sharding import Shard
from objstore_saver.plans.requests import Delete, Get, Put, run_one
from objstore_saver.storage.base import PutMode

__all__ = ["JOBS", "Cursor", "for_each_resumable", "resumable_fields"]

X = TypeVar("X")
T = TypeVar("T")

#: Key prefix of job cursors: written by operator jobs only, never read by a saver.
JOBS = "jobs/"
#: Seconds between two writes of a running job's cursor.
SAVE_EVERY = 5.0


@dataclass
class Cursor:
    """The low-water mark of one job run, and the object (``key``) that keeps it, with
    ``description`` (what the job reads, no secret); ``after``: where the run started."""

    key: str
    description: str
    after: str | None = None
    _order: collections.deque[str] = field(default_factory=collections.deque)
    _finished: set[str] = field(default_factory=set)
    _mark: str | None = None
    _done: int = 0
    _saved_at: float = field(default_factory=time.monotonic)
    _dirty: bool = False
    _saving: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, job: str, description: str, shard: Shard) -> Cursor:
        """The cursor of ``job`` on the source ``description`` for ``shard``, at
        ``jobs/<job>/<F>/shard-<K>-of-<N>`` (``<F>``: a hash of the description)."""
        source = hashlib.sha256(description.encode()).hexdigest()[:16]
        return cls(f"{JOBS}{job}/{source}/shard-{shard.index}-of-{shard.count}", description)

    async def load(self, driver: Driver) -> None:
        """Read the stored cursor (``CorruptObjectError`` if not one of this source)."""
        body = await driver.arun(run_one(Get(self.key)))
        if body is None:
            return
        try:
            data = json.loads(body)
            after = data["after"]
            described = data["source"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptObjectError(self.key, f"not a job cursor: {exc}") from None
        if described != self.description or not isinstance(after, str):
            raise CorruptObjectError(self.key, f"a cursor of {described!r}, not of this source")
        self.after = self._mark = after

    def started(self, position: str) -> None:
        """A thread at ``position`` (after every earlier one) is being worked on."""
        self._order.append(position)

    def finished(self, position: str) -> None:
        """The thread at ``position`` is done (or is another shard's)."""
        self._finished.add(position)
        while self._order and self._order[0] in self._finished:
            self._mark = self._order.popleft()
            self._finished.discard(self._mark)
            self._done += 1
            self._dirty = True

    async def save(self, driver: Driver, *, force: bool = False) -> None:
        """Write the mark when it moved and ``SAVE_EVERY`` seconds passed (or ``force``)."""
        if not self._dirty or (not force and time.monotonic() - self._saved_at < SAVE_EVERY):
            return
        self._dirty = False
        self._saved_at = time.monotonic()
        body = json.dumps(
            {
                "source": self.description,
                "after": self._mark,
                "threads_done_this_run": self._done,
                "updated": datetime.now(UTC).isoformat(),
            },
            sort_keys=True,
        ).encode()
        await driver.arun(run_one(Put(self.key, body, PutMode.OVERWRITE)))

    def save_soon(self, driver: Driver) -> None:
        """:meth:`save` in the background; at most one save in flight (it writes only when due)."""
        if self._saving is None or self._saving.done():
            self._saving = asyncio.ensure_future(self.save(driver))

    async def end(self, driver: Driver, *, complete: bool, keep: bool) -> None:
        """At the end of a run: let a background save finish, then, with ``keep``, delete the
        cursor of a ``complete`` run or store the mark of any other."""
        if self._saving is not None:
            await asyncio.gather(self._saving, return_exceptions=True)
        if not keep:
            return
        if not complete:
            await self.save(driver, force=True)
            return
        # The whole source is done: the next run checks every thread again (a
        # thread added to the source since may sort before the mark).
        self._dirty = False
        await driver.arun(run_one(Delete((self.key,))))


async def for_each_resumable(
    cursor: Cursor,
    driver: Driver,
    source: Callable[[str | None], AsyncGenerator[X, None]],
    work: Callable[[X], Awaitable[T]],
    on_result: Callable[[X, T], None],
    *,
    named: Iterable[X] | None = None,
    position: Callable[[X], str],
    token: Callable[[X], str],
    shard: Shard,
    restart: bool,
    apply: bool,
    stats: Fanout,
    failed: Callable[[T], bool] = lambda _result: False,
    **fanout: Any,
) -> bool:
    """:func:`~objstore_saver.ops.fanout.for_each` moving ``cursor``; True when the run
    went through its whole source.

    ``source(after)`` yields the items past the cursor's position, in order. Another
    shard's item counts as finished; a ``failed`` result holds the mark back. ``named``
    items are worked on instead of the source's, as no resumable run: no cursor is read
    or written. Only an ``apply`` run stores one.
    """
    keep = named is None
    if keep and not restart:
        await cursor.load(driver)

    def owns(item: X) -> bool:
        if keep:
            cursor.started(position(item))
        mine = shard.owns(token(item))
        if not mine and keep:
            cursor.finished(position(item))
        return mine

    def done(item: X, result: T) -> None:
        on_result(item, result)
        if keep and not failed(result):
            cursor.finished(position(item))
            if apply:
                cursor.save_soon(driver)

    complete = False
    try:
        items = source(cursor.after) if named is None else each(named)
        await for_each(items, work, done, owns=owns, stats=stats, **fanout)
        complete = not stats.cancelled
    finally:
        await cursor.end(driver, complete=complete, keep=keep and apply)
    return complete


def resumable_fields(
    run: Fanout, complete: bool, shard: Shard, cursor: Cursor, keep: bool
) -> dict[str, Any]:
    """What a resumable job's report says of its run and its cursor."""
    return {
        "cancelled": run.cancelled,
        "complete": complete,
        "shard": str(shard),
        "resumed_after": cursor.after,
        "cursor": cursor.key if keep else None,
    }
