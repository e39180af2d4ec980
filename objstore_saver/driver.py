"""The two thin drivers that carry out plans: one blocking, one asyncio.

Both feed the same plan generators; only the way a batch of requests is run
differs: the blocking driver runs a batch's requests on a thread pool, the
asyncio driver awaits the store's coroutines on the event loop (a backend with
a native async client makes no thread hop at all).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from objstore_saver.storage.base import ObjectStore
from objstore_saver.store_requests import Batch, Emit, Op, Plan, aexecute, execute

T = TypeVar("T")


class Driver:
    """Runs plans against one store, sync or async, with bounded parallelism."""

    def __init__(self, store: ObjectStore, *, max_workers: int = 32) -> None:
        self.store = store
        self._max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="objstore")

    def close(self) -> None:
        """Stop the worker threads (waits for running requests)."""
        self._pool.shutdown(wait=True)

    # --- sync --------------------------------------------------------------

    def _run_batch(self, batch: Batch) -> list[Any]:
        if len(batch.ops) == 1:
            return [execute(self.store, batch.ops[0])]
        futures = [self._pool.submit(execute, self.store, op) for op in batch.ops]
        # Wait for every request before raising, so none outlives the plan step.
        errors = [f.exception() for f in futures]
        for err in errors:
            if err is not None:
                raise err
        return [f.result() for f in futures]

    def iterate(self, plan: Plan[Any]) -> Iterator[Any]:
        """Run a plan, yielding what it emits."""
        reply: list[Any] | None = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, Emit):
                reply = None
                yield step.item
            else:
                reply = self._run_batch(step)

    def run(self, plan: Plan[T]) -> T:
        """Run a plan that emits nothing; return its result."""
        result: list[T] = []
        for _ in self.iterate(_returning(plan, result)):
            raise TypeError("plan emitted an item where none was expected")
        return result[0]

    # --- async -------------------------------------------------------------

    async def _arun_batch(self, batch: Batch) -> list[Any]:
        if len(batch.ops) == 1:
            return [await aexecute(self.store, batch.ops[0])]
        # At most max_workers requests of one batch in flight, as on the sync path.
        gate = asyncio.Semaphore(self._max_workers)

        async def one(op: Op) -> Any:
            async with gate:
                return await aexecute(self.store, op)

        results = await asyncio.gather(*(one(op) for op in batch.ops), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res
        return list(results)

    async def aiterate(self, plan: Plan[Any]) -> AsyncIterator[Any]:
        """Run a plan without blocking the event loop, yielding what it emits."""
        reply: list[Any] | None = None
        while True:
            try:
                step = plan.send(reply)
            except StopIteration:
                return
            if isinstance(step, Emit):
                reply = None
                yield step.item
            else:
                reply = await self._arun_batch(step)

    async def arun(self, plan: Plan[T]) -> T:
        """Async twin of :meth:`run`."""
        result: list[T] = []
        async for _ in self.aiterate(_returning(plan, result)):
            raise TypeError("plan emitted an item where none was expected")
        return result[0]


def _returning(plan: Plan[T], result: list[T]) -> Plan[None]:
    """Wrap a plan so that its return value lands in ``result``."""
    result.append((yield from plan))
