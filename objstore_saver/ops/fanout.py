"""Running one job's work on many threads at once, with a bounded window.

The threads come from a paginated listing of the bucket
(:func:`~objstore_saver.plans.scan.scan_threads_ranged`: a LIST returns 1,000
keys, so a small thread costs a fraction of a request to find, and past the
first page several key ranges are listed at once) or from named thread ids.
Each thread's work is a coroutine (usually a plan run by the asyncio driver);
at most ``concurrency`` of them are in flight, and the listing is read only as
fast as the window frees, so a job holds the window's threads and the pages of
one round of LISTs, whatever the bucket's size. A shard (:mod:`objstore_saver.ops.sharding`)
skips the threads other workers own.

The first error stops the scheduling of new threads; the threads in flight
finish (nothing is left half-sent), then the error is raised. What finished
was handed to ``on_result`` first, so a job's report says what was done.
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
    """``concurrency`` if it is a whole number of 1 or more.

    Raises:
        ConfigurationError: otherwise, naming ``--concurrency``.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(
            f"--concurrency must be a whole number of 1 or more, got {concurrency!r}"
        )
    return concurrency


#: Wall time below which the progress line shows no rate: a few items done
#: within milliseconds would claim thousands a second.
MIN_RATE_SECONDS = 1.0


def rate(done: int, seconds: float) -> float:
    """Items done per second of a job's wall time (0 before any time has passed).

    The one formula of the progress line and of a report's
    ``threads_per_second``: both count every item done since the fan-out
    started, so the last progress line and the report agree.
    """
    return done / seconds if seconds > 0 else 0.0


def shown_rate(done: int, seconds: float) -> float | None:
    """:func:`rate` as the progress line shows it: None below :data:`MIN_RATE_SECONDS`."""
    return rate(done, seconds) if seconds >= MIN_RATE_SECONDS else None


@dataclass(frozen=True, slots=True)
class Target:
    """One thread to work on.

    Attributes:
        pfx: Its key prefix (``threads/<token>/``).
        thread_id: Its id when the caller named it (a scanned thread's id is
            in its token, or in a manifest when the token is hashed:
            :func:`~objstore_saver.plans.threads.thread_id_of`).
        listing: Its keys when a scan found it; None for a named thread (the
            work lists what it needs, as the saver's own call would).
    """

    pfx: str
    thread_id: str | None = None
    listing: ThreadListing | None = None

    @property
    def token(self) -> str:
        """The thread's key token."""
        return self.pfx[len(keys.THREADS) : -1]

    @property
    def name(self) -> str:
        """The thread id when it can be told without a read, else the token."""
        return self.thread_id or keys.untoken(self.token) or self.token


@dataclass
class Fanout:
    """What a fan-out did.

    Attributes:
        found: Threads the listing (or the caller) named.
        done: Threads (or items) of this shard whose work finished.
        skipped: Threads (or items) another shard owns.
        lists: LISTs sent to find the threads (0 when they were named).
        cancelled: ``should_cancel`` stopped it.
        seconds: Wall time.
    """

    found: int = 0
    done: int = 0
    skipped: int = 0
    lists: int = 0
    cancelled: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The counts for a report (a rate over a blink is noisy; the seconds say so)."""
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
    """Run ``work`` on each item of ``source``, ``concurrency`` at once (the source is
    read only as fast as the window frees).

    Args:
        source: The items; closed when the run ends.
        work: One item's work.
        on_result: Called on the loop, in completion order, with each item and
            its result; the place to aggregate a report.
        concurrency: Items in flight at once.
        owns: Whether this worker handles an item (its shard); default all.
        name: How progress names an item.
        progress: ``progress(done, total, item)`` after each item; total is
            None until the source has ended. If it has a ``begin(at)`` method
            (the CLI's progress bar), that is called first with the start's
            ``time.monotonic()``, so that its rate is the report's.
        should_cancel: Polled before each item is started.
        stats: Counts to add to (a caller's that also counts the source).

    Raises:
        ConfigurationError: a bad ``concurrency``.
        Exception: the first error of an item's work or of the source, once
            the items in flight have finished.
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
        scan = driver.aiterate(counted(scan_threads_ranged(), stats))
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
    """The objects alive before a job are left out of the collector's passes while it runs.

    A job makes many short-lived objects, and each full collection it sets
    off would walk the whole heap of the process (millions of objects in a
    large one) for none of them. Only when nothing else froze the heap
    (``gc.freeze``): a caller's freeze is left as it is.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_sync(job: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a job's coroutine to the end from blocking code (in a :func:`frozen_heap`).

    On a thread without an event loop it runs on a new loop; inside a running
    loop (a notebook, a server) it runs on a new loop in a worker thread, so a
    blocking job API can be called from anywhere.
    """
    with frozen_heap():
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(job())
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="objstore-job") as pool:
            return pool.submit(asyncio.run, job()).result()


def blocking(job: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of a job's coroutine function, for code without an event loop.

    ``prune = blocking(aprune)``: the same arguments, documentation and result;
    the coroutine runs to the end through :func:`run_sync`.
    """

    @functools.wraps(job)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(lambda: job(*args, **kwargs))

    twin.__name__ = twin.__qualname__ = job.__name__.removeprefix("a")
    return twin
