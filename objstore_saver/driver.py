"""The driver that carries out plans, blocking or on asyncio (docs/architecture.md).

Blocking, a batch runs on a thread pool (the first request on the caller's
thread), or is sent ahead from the caller's thread when the store can and the
requests and answers are small. A batch's ``meanwhile`` work runs while its
requests are in flight; its first error is raised inside the plan, which may handle it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from objstore_saver.large_value_gate import Hold
from objstore_saver.plans.requests import (
    Batch,
    Delete,
    Emit,
    ListKeys,
    Op,
    Plan,
    Put,
    aexecute,
    execute,
    execute_ahead,
)
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.requests import SendsAhead
from objstore_saver.telemetry import Call

T = TypeVar("T")


class Driver:
    """Runs plans against one store, sync or async, with bounded parallelism."""

    def __init__(self, store: ObjectStore, *, max_workers: int = 32) -> None:
        self.store = store
        self._ahead = store if isinstance(store, SendsAhead) else None
        self._max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="objstore")

    def close(self) -> None:
        """Stop the worker threads (waits for running requests)."""
        self._pool.shutdown(wait=True)

    # --- sync --------------------------------------------------------------

    def _run_batch(self, batch: Batch, call: Call | None = None) -> list[Any]:
        ops = batch.ops
        # The per-request cost of telemetry when no span records: this test.
        run = execute if call is None or call.span is None else call.execute
        if (
            self._ahead is not None
            and run is execute
            and (batch.meanwhile or len(ops) > 1)
            and all(_small_both_ways(op) for op in ops)
        ):
            return self._run_ahead(self._ahead, batch, call)
        if batch.meanwhile is not None:
            # Every request goes to the pool; the caller's thread computes meanwhile.
            futures = [self._pool.submit(run, self.store, op) for op in ops]
            failed = _computed(batch.meanwhile)
            return _settled(ops, [_outcome(f) for f in futures], call, failed)
        if not ops:
            return _settled(ops, [], call)
        # The caller's thread runs the first request itself; the others go to the pool.
        futures = [self._pool.submit(run, self.store, op) for op in ops[1:]] if len(ops) > 1 else []
        try:
            first = run(self.store, ops[0])
        except Exception as exc:  # noqa: BLE001  # counted, then re-raised by _settled
            first = exc
        # Wait for every request before raising, so none outlives the plan step.
        outcomes = [first]
        for future in futures:
            outcomes.append(_outcome(future))
        return _settled(ops, outcomes, call)

    def _run_ahead(self, store: SendsAhead, batch: Batch, call: Call | None) -> list[Any]:
        """A batch sent from the caller's thread, answers read after the ``meanwhile`` work."""
        answers: list[Callable[[], Any]] = []
        failed: Exception | None = None
        try:
            for op in batch.ops:
                answers.append(execute_ahead(store, op))
            if batch.meanwhile is not None:
                failed = _computed(batch.meanwhile)
        finally:
            # Every request sent is answered, even when sending another failed.
            outcomes = [_answered(answer) for answer in answers]
        return _settled(batch.ops, outcomes, call, failed)

    def iterate(self, plan: Plan[Any], call: Call | None = None) -> Iterator[Any]:
        """Run a plan, yielding what it emits; ``call`` starts when the iteration does."""
        return self._steps(plan, call, None)

    def run(self, plan: Plan[T], call: Call | None = None) -> T:
        """Run a plan that emits nothing; return its result (``call``: its telemetry)."""
        returned: list[T] = []
        steps = self._steps(plan, call, returned)
        for _ in steps:
            steps.throw(TypeError("plan emitted an item where none was expected"))
        return returned[0]

    def _steps(
        self, plan: Plan[Any], call: Call | None, returned: list[Any] | None
    ) -> Iterator[Any]:
        """The one blocking loop: run ``plan``, yield what it emits, keep what it returns."""
        if call is not None:
            call.start()
        reply: list[Any] | None = None
        error: Exception | None = None
        try:
            while True:
                try:
                    step = plan.send(reply) if error is None else plan.throw(error)
                except StopIteration as done:
                    value = done.value
                    break
                reply, error = None, None
                if isinstance(step, Batch):
                    try:
                        reply = self._run_batch(step, call)
                    except Exception as exc:  # noqa: BLE001 -- raised inside the plan, which may handle it
                        error = exc
                elif isinstance(step, Emit):
                    yield step.item
                elif isinstance(step, Hold):
                    step.gate.acquire()
                else:
                    raise TypeError(f"not a plan step: {step!r}")
        except BaseException as exc:
            # Also GeneratorExit: the caller stopped early; closing the plan
            # runs its finally blocks (a held gate).
            _stopped(plan, call, exc)
            raise
        _returned(call, returned, value)

    # --- async -------------------------------------------------------------

    async def _arun_batch(self, batch: Batch, call: Call | None = None) -> list[Any]:
        ops = batch.ops
        run = aexecute if call is None or call.span is None else call.aexecute
        outcomes: list[Any]
        if batch.meanwhile is not None:
            tasks = [asyncio.ensure_future(run(self.store, op)) for op in ops]
            try:
                # One pass of the loop: each request is written to its socket
                # (or handed to its thread) before the loop is held by the work.
                await asyncio.sleep(0)
                failed = _computed(batch.meanwhile)
            finally:
                # Even when cancelled: no request outlives the plan step.
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            return _settled(ops, outcomes, call, failed)
        if len(ops) == 1:
            try:
                outcomes = [await run(self.store, ops[0])]
            except Exception as exc:  # noqa: BLE001  # counted, then re-raised by _settled
                outcomes = [exc]
        elif len(ops) <= self._max_workers:  # all in flight at once: no gate to pass
            outcomes = await asyncio.gather(
                *(run(self.store, op) for op in ops), return_exceptions=True
            )
        else:
            # At most max_workers requests of one batch in flight, as on the sync path.
            gate = asyncio.Semaphore(self._max_workers)

            async def one(op: Op) -> Any:
                async with gate:
                    return await run(self.store, op)

            # Each gathered request runs in a task with a copy of this context.
            outcomes = await asyncio.gather(*(one(op) for op in ops), return_exceptions=True)
        return _settled(ops, outcomes, call)

    def aiterate(self, plan: Plan[Any], call: Call | None = None) -> AsyncIterator[Any]:
        """Run a plan without blocking the event loop, yielding what it emits."""
        return self._asteps(plan, call, None)

    async def arun(self, plan: Plan[T], call: Call | None = None) -> T:
        """Async twin of :meth:`run`."""
        returned: list[T] = []
        steps = self._asteps(plan, call, returned)
        async for _ in steps:
            await steps.athrow(TypeError("plan emitted an item where none was expected"))
        return returned[0]

    async def _asteps(
        self, plan: Plan[Any], call: Call | None, returned: list[Any] | None
    ) -> AsyncIterator[Any]:
        """Async twin of :meth:`_steps`: a hold and a batch's requests are awaited."""
        if call is not None:
            call.start()
        reply: list[Any] | None = None
        error: Exception | None = None
        try:
            while True:
                try:
                    step = plan.send(reply) if error is None else plan.throw(error)
                except StopIteration as done:
                    value = done.value
                    break
                reply, error = None, None
                if isinstance(step, Batch):
                    try:
                        reply = await self._arun_batch(step, call)
                    except Exception as exc:  # noqa: BLE001 -- raised inside the plan, which may handle it
                        error = exc
                elif isinstance(step, Emit):
                    yield step.item
                elif isinstance(step, Hold):
                    await step.gate.aacquire()
                else:
                    raise TypeError(f"not a plan step: {step!r}")
        except BaseException as exc:
            _stopped(plan, call, exc)
            raise
        _returned(call, returned, value)


def _returned(call: Call | None, returned: list[Any] | None, value: Any) -> None:
    """Keep ``value`` for ``run``; a traced call ends (an untraced one was counted)."""
    if returned is not None:
        returned.append(value)
    if call is not None and call.span is not None:
        call.finish(None, value)


def _stopped(plan: Plan[Any], call: Call | None, exc: BaseException) -> None:
    """A plan run that ends with ``exc``: close the plan (its finally blocks), finish the call."""
    plan.close()
    if call is not None:
        # GeneratorExit: the caller stopped the run, not a failure.
        call.finish(None if isinstance(exc, GeneratorExit) else exc)


def _settled(
    ops: Sequence[Op],
    outcomes: list[Any],
    call: Call | None,
    failed: Exception | None = None,
) -> list[Any]:
    """Count a batch's outcomes, then raise its first error (requests first) or return them."""
    if call is not None:
        call.record(ops, outcomes)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    if failed is not None:
        raise failed
    return outcomes


def _outcome(future: Future[Any]) -> Any:
    """A finished request's result, or its error (waits for it)."""
    error = future.exception()
    return future.result() if error is None else error


#: Largest PUT body a batch sends ahead from one thread.
AHEAD_BODY_MAX = 64 * 1024


def _small_both_ways(op: Op) -> bool:
    """Whether a request and its answer are small enough to send ahead from one thread.

    That is parallel only while each fits the socket buffers; a large part or a
    GET of unknown size goes to the pool.
    """
    if isinstance(op, Put):
        return len(op.data) <= AHEAD_BODY_MAX
    return isinstance(op, ListKeys | Delete)


def _answered(answer: Callable[[], Any]) -> Any:
    try:
        return answer()
    except Exception as exc:  # noqa: BLE001  # counted, then re-raised by _settled
        return exc


def _computed(work: Callable[[], None]) -> Exception | None:
    """Run a batch's ``meanwhile`` work; its error is raised once the requests are settled."""
    try:
        work()
    except Exception as exc:  # noqa: BLE001  # re-raised by _settled after the requests
        return exc
    return None
