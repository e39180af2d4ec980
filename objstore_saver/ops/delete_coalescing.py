"""Deletes of the threads a job works on together, sent in shared DeleteObjects requests.

A job runs up to ``concurrency`` threads at once (:mod:`objstore_saver.ops.fanout`)
and each thread's plan deletes its own keys, a few at a time: a prune with
``--keep-last 1`` sends two DeleteObjects of a handful of keys per thread,
where one request takes 1,000 keys. :class:`DeleteCoalescingStore` wraps the
job's store: its :meth:`~DeleteCoalescingStore.adelete` queues the keys and
waits; the queue goes to the wrapped store as one ``adelete`` of at most
1,000 keys (one DeleteObjects on S3) when it holds 1,000 keys or when its
first keys have waited :data:`DEFAULT_LINGER`. Every other request passes
through untouched, and so does the blocking ``delete``. Plans are unchanged:
the wrapper sits under the jobs' driver only.

**Order.** A call returns only once every request holding one of its keys has
completed (a call's keys may span two requests). A thread's plan awaits each
delete before it sends the next, so a thread's manifests are gone before its
other keys are even queued (spec §6.6, §6.9): coalescing delays a thread's
deletes, it never reorders them. The keys of one call carry no order among
themselves (the requests holding them may be in flight together), as the
plans assume: where they need an order they make one call after the other.

**Errors.** A key outside the key alphabet fails its own call at once, before
it is queued, so it cannot fail the others. When a request fails, every call
with keys in it fails. A request that held the keys of one call only raises
the store's own error, which names one of them, as without coalescing. A
shared one raises, in each of its calls, a
:class:`~objstore_saver.errors.StorageError` (a
:class:`~objstore_saver.errors.StoreUnavailableError` when the store was
unavailable) naming the call's own first key, and so its thread, the number
of its keys and the store, caused by the store's error (which names the
request's first key, perhaps another thread's); an error that is not a
storage error (a bug) reaches every such call as it was raised. Nothing is
dropped silently: the calls whose keys were all in requests that completed
succeed, the others raise, and the job reports the error as it reports any
failed request of a thread (the first error stops the job once the threads
in flight have finished). Some of a failed request's keys may be deleted (a
lost answer, per-key errors); the jobs are idempotent, so running the same
job again completes what the failed threads left, as after any interrupted
run.

**Closing.** :meth:`~DeleteCoalescingStore.aclose` (or leaving ``async with``)
sends what is queued and waits for every request in flight, so no key stays
queued and no task is left pending when a job ends; a call made after it is
refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from objstore_saver.driver import Driver
from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    ObjectStore,
    StorageError,
    StoreUnavailableError,
    validate_key,
)
from objstore_saver.storage.layer import Layer

__all__ = ["DEFAULT_LINGER", "DeleteCoalescingStore", "coalescing_driver"]

#: Seconds the first keys of a request wait for other threads' keys before it
#: is sent. A job's threads run the same plan on similar threads, so their
#: deletes arrive close together; the wait bounds the job's DeleteObjects to
#: 200 a second whatever its rate, and adds at most 5 ms to each delete step
#: of a thread (the calls that join a request later wait less), small against
#: the 20 ms and more of one request over a network. In the benchmark's
#: workload 7 (1,000 threads, 20 ms a request, 64 at once) a prune sent 0.34
#: DeleteObjects a thread with 1 ms, 0.28 with 2 ms, 0.16 with 5 ms and 0.17
#: with 10 ms, against 2 uncoalesced, its rate the same within the runs' noise:
#: a longer wait saves nothing more and delays every thread.
DEFAULT_LINGER = 0.005


@dataclass(eq=False)
class _Call:
    """One ``adelete`` call waiting for the requests that hold its keys."""

    keys: list[str]
    done: asyncio.Future[None]
    requests: int = 0
    """Requests holding some of its keys that have not completed."""
    error: BaseException | None = None
    """The error of the first of those requests that failed."""

    def settle(self) -> None:
        """Resolve the caller's future: its error, or success."""
        if self.done.done():  # the caller was cancelled: nobody waits any more
            return
        if self.error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(self.error)


@dataclass(eq=False)
class _Request:
    """The keys of one request being gathered, and the calls they come from."""

    keys: list[str] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)


class DeleteCoalescingStore(Layer):
    """A store whose coroutine ``adelete`` shares requests between concurrent calls; use
    it on one event loop, as ``async with DeleteCoalescingStore(store) as s`` (or call
    :meth:`aclose`).

    Args:
        inner: The store doing the work.
        linger: Seconds the first keys of a request wait for more (0: the
            request is sent at the next pass of the event loop, with whatever
            was queued until then).
        max_keys: Keys of one request, at most :data:`MAX_DELETE_BATCH`.

    Raises:
        ValueError: ``linger`` below 0 or ``max_keys`` outside 1 to 1,000.
    """

    def __init__(
        self,
        inner: ObjectStore,
        *,
        linger: float = DEFAULT_LINGER,
        max_keys: int = MAX_DELETE_BATCH,
    ) -> None:
        super().__init__(inner)
        if not linger >= 0:
            raise ValueError(f"linger must be 0 or more seconds, got {linger!r}")
        if not 1 <= max_keys <= MAX_DELETE_BATCH:
            raise ValueError(f"max_keys must be 1 to {MAX_DELETE_BATCH}, got {max_keys!r}")
        self._linger = linger
        self._max_keys = max_keys
        self._open = _Request()
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._closed = False
        self.calls = 0
        """``adelete`` calls queued so far."""
        self.requests = 0
        """Requests sent to the wrapped store so far (each of at most ``max_keys`` keys)."""

    # --- coalesced deletes ----------------------------------------------------------

    async def adelete(self, keys: Sequence[str]) -> None:
        """Delete the keys in requests shared with concurrent calls; return once they are gone.

        Raises:
            InvalidKeyError: a key is outside the key alphabet; nothing is queued.
            StorageError: a request holding some of the keys failed (see the
                module's documentation).
            RuntimeError: the store was closed.
        """
        keys = list(keys)
        for key in keys:
            validate_key(key)  # a bad key fails this call alone, not a shared request
        if not keys:
            return
        if self._closed:
            raise RuntimeError(f"{self!r} is closed: it sends no more deletes")
        loop = asyncio.get_running_loop()
        call = _Call(keys, loop.create_future())
        self.calls += 1
        rest = keys
        while rest:
            room = self._max_keys - len(self._open.keys)
            self._open.keys += rest[:room]
            self._open.calls.append(call)
            call.requests += 1
            rest = rest[room:]
            if len(self._open.keys) == self._max_keys:
                self._flush()
        if self._open.keys and self._timer is None:
            self._timer = loop.call_later(self._linger, self._flush)
        await call.done

    def _flush(self) -> None:
        """Send the request being gathered, if it holds any key."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        request, self._open = self._open, _Request()
        if not request.keys:
            return
        self.requests += 1
        task = asyncio.get_running_loop().create_task(self._send(request))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, request: _Request) -> None:
        """One request to the wrapped store; then settle the calls it completes."""
        try:
            await self._inner.adelete(request.keys)
        except asyncio.CancelledError:
            for call in request.calls:
                call.error = StorageError(self._describe(call, "its request was cancelled"))
                call.settle()
            raise
        except Exception as exc:  # noqa: BLE001  # handed to every call whose keys it held
            shared = len(request.calls) > 1
            for call in request.calls:
                if call.error is None:
                    call.error = self._caller_error(call, exc) if shared else exc
        for call in request.calls:
            call.requests -= 1
            if call.requests == 0:
                call.settle()

    def _describe(self, call: _Call, what: str) -> str:
        first = call.keys[0]
        more = f" (and {len(call.keys) - 1} more keys)" if len(call.keys) > 1 else ""
        return f"delete of key {first!r}{more} in {self.location} failed: {what}"

    def _caller_error(self, call: _Call, exc: Exception) -> Exception:
        """The error a call whose keys were in a failed request raises."""
        if not isinstance(exc, StorageError):
            return exc
        kind = StoreUnavailableError if isinstance(exc, StoreUnavailableError) else StorageError
        error = kind(self._describe(call, f"a DeleteObjects request holding them failed: {exc}"))
        error.__cause__ = exc
        return error

    # --- closing --------------------------------------------------------------------

    async def aclose(self) -> None:
        """Send what is queued, wait for every request in flight; refuse later calls.

        If it is cancelled while it waits, the requests in flight are
        cancelled too and their calls fail (nothing is left pending).
        """
        self._closed = True
        self._flush()
        try:
            while self._sending:
                await asyncio.gather(*self._sending, return_exceptions=True)
        except asyncio.CancelledError:
            for task in self._sending:
                task.cancel()
            await asyncio.gather(*self._sending, return_exceptions=True)
            raise

    async def __aenter__(self) -> DeleteCoalescingStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def coalescing_driver(store: ObjectStore) -> AsyncIterator[Driver]:
    """A job's driver whose deletes share requests; nothing stays queued when it ends."""
    async with DeleteCoalescingStore(store) as coalesced:
        with contextlib.closing(Driver(coalesced, max_workers=16)) as driver:
            yield driver
