"""The worker pool behind every coroutine of a blocking store (``in_thread``)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
from typing import Any

import pytest

from objstore_saver.storage.base import in_thread
from objstore_saver.storage.worker_pool import WorkerPool

_request = contextvars.ContextVar("_request", default="none")


def test_results_errors_and_context_reach_the_caller() -> None:
    def blocking(x: int, *, scale: int) -> tuple[int, str, str]:
        return x * scale, _request.get(), threading.current_thread().name

    def failing(key: str) -> None:
        raise KeyError(key)

    async def main() -> None:
        _request.set("turn-7")
        value, seen, thread = await in_thread(blocking, 6, scale=7)
        assert (value, seen) == (42, "turn-7")
        assert thread.startswith("objstore-io-")
        with pytest.raises(KeyError, match="k1"):
            await in_thread(failing, "k1")

    asyncio.run(main())


def test_outcomes_finished_together_wake_the_loop_once() -> None:
    pool = WorkerPool(16, "test-pool")
    release = threading.Event()
    calls = 12

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        wakeups = []
        original = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
            wakeups.append(callback)
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        futures = [pool.submit(lambda i=i: release.wait(10) and i, ()) for i in range(calls)]
        await asyncio.sleep(0.05)  # let the workers pick their jobs up
        release.set()
        # Block the loop while every worker finishes: their outcomes pile up in
        # the inbox, and only the first asks the loop to collect them.
        deadline = time.monotonic() + 10
        while not _all_posted(futures, pool):
            if time.monotonic() > deadline:
                raise AssertionError("workers did not finish")
            time.sleep(0.01)
        results = await asyncio.gather(*futures)
        assert len(wakeups) == 1, wakeups
        return results

    assert asyncio.run(main()) == list(range(calls))


def _all_posted(futures: list[asyncio.Future[Any]], pool: WorkerPool) -> bool:
    """Whether every job's outcome is waiting in its loop's inbox."""
    inboxes = list(pool._inboxes.values())
    return sum(len(inbox._items) for inbox in inboxes) == len(futures)


def test_threads_are_capped_and_reused() -> None:
    pool = WorkerPool(3, "capped")
    names: list[str] = []
    lock = threading.Lock()

    def record() -> None:
        time.sleep(0.01)
        with lock:
            names.append(threading.current_thread().name)

    async def main() -> None:
        await asyncio.gather(*(pool.submit(record, ()) for _ in range(30)))
        await asyncio.gather(*(pool.submit(record, ()) for _ in range(30)))

    asyncio.run(main())
    assert len(names) == 60
    assert len(set(names)) <= 3
    assert pool.threads <= 3


def test_a_call_outliving_its_loop_does_not_stop_the_worker() -> None:
    pool = WorkerPool(1, "single")
    release = threading.Event()

    async def abandon() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.submit(release.wait, (10,)), 0.05)

    asyncio.run(abandon())  # the loop closes with the call still running
    release.set()  # the worker posts to a closed loop

    async def again() -> str:
        return await asyncio.wait_for(pool.submit(lambda: "still working", ()), 10)

    assert asyncio.run(again()) == "still working"
    assert pool.threads == 1


def test_a_cancelled_caller_leaves_the_pool_usable() -> None:
    pool = WorkerPool(2, "cancel")
    release = threading.Event()

    async def main() -> int:
        task = asyncio.ensure_future(pool.submit(release.wait, (10,)))
        await asyncio.sleep(0.01)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await pool.submit(lambda: 5, ())

    assert asyncio.run(main()) == 5


def test_a_finished_loop_is_not_kept_alive() -> None:
    pool = WorkerPool(2, "weak")

    async def main() -> int:
        return await pool.submit(lambda: 1, ())

    for _ in range(3):
        assert asyncio.run(main()) == 1
    # A worker drops its job's references just after posting the outcome, so the
    # last loop can outlive asyncio.run for a moment: wait for that, boundedly.
    deadline = time.monotonic() + 5
    gc.collect()
    while pool._inboxes and time.monotonic() < deadline:
        time.sleep(0.01)
        gc.collect()
    assert len(pool._inboxes) == 0


def test_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        WorkerPool(0, "none")
