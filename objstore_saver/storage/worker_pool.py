"""Worker threads that run blocking storage calls for coroutines, leaner than
``loop.run_in_executor`` (docs/profile.md, "Local store, 64 async"): outcomes come back
through a per-loop inbox, those posted before the loop collects needing no other wake-up.

Workers are daemon threads: a call running at exit is abandoned, and every store
operation is atomic, so it leaves nothing half-written.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

#: What a worker runs: where to post the outcome, its future, context, call and arguments.
_Job = tuple[
    "_Inbox", "asyncio.Future[Any]", contextvars.Context, Callable[..., Any], tuple[Any, ...]
]


class _Inbox:
    """Outcomes of finished calls waiting for one event loop to collect them."""

    __slots__ = ("_items", "_lock", "_loop", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: a strong one would defeat the pool's weak map of loops to inboxes.
        self._loop = weakref.ref(loop)
        self._items: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def post(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """Hand one outcome to the loop (called from a worker thread)."""
        with self._lock:
            self._items.append((future, ok, value))
            if self._scheduled:
                return  # the loop has yet to run the collection already asked for
            self._scheduled = True
        loop = self._loop()
        try:
            if loop is None:  # the loop is gone: nobody awaits these futures
                raise RuntimeError("event loop collected")
            loop.call_soon_threadsafe(self._collect)
        except RuntimeError:  # the loop is closed: nobody awaits these futures
            with self._lock:
                self._items.clear()
                self._scheduled = False

    def _collect(self) -> None:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            self._scheduled = False
        for future, ok, value in items:
            if future.done():  # cancelled while the call ran
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class WorkerPool:
    """Up to ``max_workers`` threads (named ``name-N``) running blocking calls for coroutines."""

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._max_workers = max_workers
        self._name = name
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads = 0
        self._threads_lock = threading.Lock()
        self._inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def threads(self) -> int:
        """Worker threads started so far."""
        return self._threads

    def _inbox(self, loop: asyncio.AbstractEventLoop) -> _Inbox:
        inbox = self._inboxes.get(loop)
        if inbox is None:
            with self._threads_lock:
                inbox = self._inboxes.setdefault(loop, _Inbox(loop))
        return inbox

    def submit(self, call: Callable[..., Any], args: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Run ``call(*args)`` in a worker, in a copy of the caller's context; a future of
        the running loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((self._inbox(loop), future, contextvars.copy_context(), call, args))
        # An idle worker takes the job; without one, start a thread (up to the cap).
        if not self._idle.acquire(blocking=False):
            with self._threads_lock:
                start = self._threads < self._max_workers
                if start:
                    self._threads += 1
                    number = self._threads
            if start:
                threading.Thread(
                    target=self._work, name=f"{self._name}-{number}", daemon=True
                ).start()
        return future

    def _work(self) -> None:
        jobs = self._jobs
        while True:
            inbox, future, context, call, args = jobs.get()
            try:
                value, ok = context.run(call, *args), True
            except BaseException as exc:  # noqa: BLE001  # handed to the awaiting coroutine
                value, ok = exc, False
            inbox.post(future, ok, value)
            del inbox, future, context, call, args, value  # drop references while idle
            self._idle.release()


_shared: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_pool(max_workers: int) -> WorkerPool:
    """The process's pool for blocking storage calls (created on first use)."""
    global _shared
    pool = _shared
    if pool is None:
        with _shared_lock:
            if _shared is None:
                _shared = WorkerPool(max_workers, "objstore-io")
            pool = _shared
    return pool


def _forget_after_fork() -> None:
    # A forked child has none of the parent's threads: start a new pool.
    global _shared, _shared_lock
    _shared = None
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
