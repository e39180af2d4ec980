"""Running one job's work on many threads at once, with a bounded window.

The threads come from a listing of the bucket (1,000 keys a LIST, key ranges listed
side by side past the first page) or from named ids. At most ``concurrency`` are in
flight and the listing is read only as fast as the window frees, so memory does not
grow with the bucket. The first error stops new threads; those in flight finish and
reach ``on_result``, then the error is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from objstore_saver.driver import Driver
from objstore_saver.errors import ConfigurationError
from objstore_saver.format import keys
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.requests import Batch, Plan
from objstore_saver.plans.scan import scan_threads_ranged
from objstore_saver.plans.threads import ThreadListing

__all__ = [
    "DEFAULT_CONCURRENCY",
    "Fanout",
    "Target",
    "blocking",
    "check_concurrency",
    "each",
    "for_each",
    "for_each_thread",
    "rate",
    "run_sync",
]

T = TypeVar("T")
P = ParamSpec("P")
X = TypeVar("X")

#: Threads in flight at once: about what one S3 prefix and one client sustain
#: at 20 ms a request without a queue building up in the client.
DEFAULT_CONCURRENCY = 64


def check_concurrency(concurrency: Any) -> int:
    """``concurrency`` if it is a whole number of 1 or more, else a ``ConfigurationError``."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(
            f"--concurrency must be a whole number of 1 or more, got {concurrency!r}"
        )
    return concurrency


#: Wall time below which the progress line shows no rate (a few items in milliseconds
#: would claim thousands a second).
MIN_RATE_SECONDS = 1.0


def rate(done: int, seconds: float) -> float:
    """Items done per second of a job's wall time (0 before any time has passed): the
    one formula of the progress line and the report, so that they agree."""
    return done / seconds if seconds > 0 else 0.0


def shown_rate(done: int, seconds: float) -> float | None:
    """:func:`rate` as the progress line shows it: None below :data:`MIN_RATE_SECONDS`."""
    return rate(done, seconds) if seconds >= MIN_RATE_SECONDS else None


@dataclass(frozen=True, slots=True)
class Target:
    """One thread to work on: its ``threads/<token>/`` prefix, its id when the caller named
    it, its keys when a scan found it (None: the work lists what it needs)."""

    pfx: str
    thread_id: str | None = None
    listing: ThreadListing | None = None

    @property
    def token(self) -> str:
        return self.pfx[len(keys.THREADS) : -1]

    @property
    def name(self) -> str:
        """The thread id when it can be told without a read, else the token."""
        return self.thread_id or keys.untoken(self.token) or self.token


@dataclass
class Fanout:
    """What a fan-out did: items found, done by this shard, skipped (another shard's),
    LISTs sent to find them, whether it was cancelled, and its wall time."""

    found: int = 0
    done: int = 0
    skipped: int = 0
    lists: int = 0
    cancelled: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The counts for a report."""
        return {
            "threads_found": self.found,
            "threads_done": self.done,
            "threads_skipped_other_shards": self.skipped,
            "lists": self.lists,
            "seconds": round(self.seconds, 3),
            "threads_per_second": round(rate(self.done, self.seconds), 1),
        }


def counted(plan: Plan[Any], stats: Fanout) -> Plan[Any]:
    """The plan, counting its requests (one LIST a batch) into ``stats.lists``."""
    reply: list[Any] | None = None
    while True:
        try:
            step = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        if isinstance(step, Batch):
            stats.lists += len(step.ops)
        reply = yield step


async def each(items: Iterable[X]) -> AsyncGenerator[X, None]:
    """The items as an async source of :func:`for_each`."""
    for item in items:
        yield item


async def for_each(
    source: AsyncGenerator[X, None],
    work: Callable[[X], Awaitable[T]],
    on_result: Callable[[X, T], None],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    owns: Callable[[X], bool] | None = None,
    name: Callable[[X], str] = str,
    progress: Callable[[int, int | None, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    stats: Fanout | None = None,
) -> Fanout:
    """Run ``work`` on each item of ``source``, ``concurrency`` at once; ``on_result`` gets
    each item and result on the loop, in completion order.

    ``owns``: whether this worker handles an item (default all); ``progress(done, total,
    item)``: total is None until the source ends, and a ``begin(at)`` method (the CLI's
    bar) is called first with the start's ``time.monotonic()`` so its rate is the
    report's; ``stats``: counts to add to. The source is closed at the end; the first
    error is raised once the items in flight have finished.
    """
    check_concurrency(concurrency)
    stats = Fanout() if stats is None else stats
    started = time.monotonic()
    begin = getattr(progress, "begin", None)
    if begin is not None:
        begin(started)
    window = asyncio.Semaphore(concurrency)
    running: set[asyncio.Task[None]] = set()
    errors: list[BaseException] = []
    total: int | None = None

    async def one(item: X) -> None:
        try:
            on_result(item, await work(item))
            stats.done += 1
            if progress is not None:
                progress(stats.done, total, name(item))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001  # raised below, once the others are settled
            errors.append(exc)
        finally:
            window.release()

    owned = 0
    try:
        async for item in source:
            stats.found += 1
            if owns is not None and not owns(item):
                stats.skipped += 1
                continue
            if should_cancel is not None and should_cancel():
                stats.cancelled = True
                break
            await window.acquire()
            if errors:
                window.release()
                break
            owned += 1
            task = asyncio.create_task(one(item))
            running.add(task)
            task.add_done_callback(running.discard)
        else:
            total = owned
    finally:
        await source.aclose()
        if running:
            await asyncio.gather(*running)
        stats.seconds = time.monotonic() - started
    if errors:
        raise errors[0]
    return stats


async def for_each_thread(
    driver: Driver,
    work: Callable[[Target], Awaitable[T]],
    on_result: Callable[[Target, T], None],
    *,
    thread_ids: Iterable[str] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: Callable[[int, int | None, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> Fanout:
    """:func:`for_each` on every thread of the store (key ranges listed side by side by
    ``driver``), or on ``thread_ids``; only those ``shard`` owns."""
    stats = Fanout()
    source: AsyncGenerator[Target, None]
    if thread_ids is None:
        mine = None if shard.count == 1 else lambda pfx: shard.owns(Target(pfx).token)
        scan = driver.aiterate(counted(scan_threads_ranged(owns=mine), stats))
        source = (Target(listing.pfx, listing=listing) async for listing in scan)
    else:
        source = each(Target(keys.thread_prefix(t), t) for t in thread_ids)
    return await for_each(
        source,
        work,
        on_result,
        concurrency=concurrency,
        owns=lambda target: shard.owns(target.token),
        name=lambda target: target.name,
        progress=progress,
        should_cancel=should_cancel,
        stats=stats,
    )


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive before a job are left out of the collector's passes while it runs
    (a full collection would walk the whole heap for none of them); a caller's own
    ``gc.freeze`` is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_sync(job: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a job's coroutine to the end from blocking code (in a :func:`frozen_heap`), on a
    new loop: in a worker thread when this one runs a loop (a notebook, a server)."""
    with frozen_heap():
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(job())
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="objstore-job") as pool:
            return pool.submit(asyncio.run, job()).result()


def blocking(job: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of a job's coroutine function (same arguments, documentation and
    result), run through :func:`run_sync`: ``prune = blocking(aprune)``."""

    @functools.wraps(job)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(lambda: job(*args, **kwargs))

    twin.__name__ = twin.__qualname__ = job.__name__.removeprefix("a")
    return twin
