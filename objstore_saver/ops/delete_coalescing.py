"""Deletes of the threads a job works on together, sent in shared DeleteObjects requests.

:class:`DeleteCoalescingStore` queues the keys of concurrent ``adelete`` calls and sends
them as one ``adelete`` of at most 1,000 keys when full or after :data:`DEFAULT_LINGER`;
every other request (and the blocking ``delete``) passes through.

**Order.** A call returns once every request holding one of its keys has completed.
A thread's plan awaits each delete before the next, so its manifests are gone before
its other keys are queued (spec §6.6, §6.9): coalescing delays deletes, never
reorders them. One call's keys carry no order among themselves, as plans assume.

**Errors.** A key outside the key alphabet fails its own call before it is queued.
A failed request fails every call with keys in it: with the store's own error when
it held one call's keys; else, in each call, a ``StorageError`` (a
``StoreUnavailableError`` when the store was unavailable) naming the call's first
key, its number of keys and the store, caused by the store's error; an error that
is not a storage error reaches each call as raised. Some of a failed request's keys
may be deleted; the jobs are idempotent, so a rerun completes them.

**Closing.** :meth:`~DeleteCoalescingStore.aclose` (or leaving ``async with``) sends
what is queued and waits for the requests in flight; later calls are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

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

#: Seconds the first keys of a request wait for other threads' keys: at most 200
#: DeleteObjects a second, and 5 ms added to a delete step against 20 ms or more a
#: request. In workload 7 (1,000 threads, 20 ms a request, 64 at once) a prune sent
#: 0.34 DeleteObjects a thread with 1 ms, 0.16 with 5 ms, 0.17 with 10 ms (2 uncoalesced).
DEFAULT_LINGER = 0.005


@dataclass(eq=False)
class _Call:
    """One ``adelete`` call waiting for the requests that hold its keys."""

    keys: list[str]
    done: asyncio.Future[None]
    requests: int = 0  # holding some of its keys, not completed
    error: BaseException | None = None  # of the first of them that failed

    def settle(self) -> None:
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
    it on one event loop, as ``async with DeleteCoalescingStore(store) as s``.

    ``linger``: seconds the first keys of a request wait for more (0: until the next pass
    of the event loop); ``max_keys``: keys of one request, 1 to :data:`MAX_DELETE_BATCH`.
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
        self.calls = 0  # adelete calls queued so far
        self.requests = 0  # requests sent to the wrapped store so far

    async def adelete(self, keys: Sequence[str]) -> None:
        """Delete the keys in requests shared with concurrent calls; return once they are gone.

        Raises ``InvalidKeyError`` (nothing queued), ``StorageError`` (see the module) or
        ``RuntimeError`` (closed).
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
        if not isinstance(exc, StorageError):
            return exc
        kind = StoreUnavailableError if isinstance(exc, StoreUnavailableError) else StorageError
        error = kind(self._describe(call, f"a DeleteObjects request holding them failed: {exc}"))
        error.__cause__ = exc
        return error

    async def aclose(self) -> None:
        """Send what is queued, wait for every request in flight; refuse later calls.

        Cancelled while it waits, it cancels the requests in flight; their calls fail.
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

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def coalescing_driver(store: ObjectStore) -> AsyncIterator[Driver]:
    """A job's driver whose deletes share requests; nothing stays queued when it ends."""
    async with DeleteCoalescingStore(store) as coalesced:
        with contextlib.closing(Driver(coalesced, max_workers=16)) as driver:
            yield driver
