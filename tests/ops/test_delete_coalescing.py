"""The store wrapper that shares DeleteObjects requests between concurrent deletes.

:class:`DeleteCoalescingStore` alone: sharing, a call spanning two requests,
errors, closing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from objstore_saver.ops.delete_coalescing import DeleteCoalescingStore
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore
from objstore_saver.storage.base import (
    InvalidKeyError,
    PutMode,
    StorageError,
    StoreUnavailableError,
    StoreWrapper,
)


class _Recording(MeteredStore):
    """A metered store whose deletes take a while, each request's start and end logged.

    ``events`` holds ``("sent", keys)`` when a delete request starts and
    ``("done", keys)`` when it has completed, in the order they happened.

    Args:
        inner: The store.
        delay: Seconds each delete request waits before it is carried out,
            or the waits of the first requests in turn (0 after them).
    """

    def __init__(self, inner: ObjectStore, delay: float | list[float] = 0.0) -> None:
        super().__init__(inner)
        self.delays = delay if isinstance(delay, list) else None
        self.delay = 0.0 if isinstance(delay, list) else delay
        self.events: list[tuple[str, tuple[str, ...]]] = []

    async def adelete(self, keys: Sequence[str]) -> None:
        keys = tuple(keys)
        self.events.append(("sent", keys))
        await asyncio.sleep(self.delays.pop(0) if self.delays else self.delay)
        await super().adelete(keys)
        self.events.append(("done", keys))


class _Failing(StoreWrapper):
    """A store whose async deletes raise ``error``; nothing else is used."""

    def __init__(self, inner: ObjectStore, error: Exception) -> None:
        super().__init__(inner)
        self.error = error

    async def adelete(self, keys: Sequence[str]) -> None:
        await asyncio.sleep(0.001)
        raise self.error


# --- the wrapper alone ------------------------------------------------------------------------


def _stored(tmp_path: Path, names: Sequence[str]) -> LocalStore:
    store = LocalStore(tmp_path / "store", fsync=False)
    for name in names:
        store.put(name, b"x", PutMode.OVERWRITE)
    return store


def _left(store: ObjectStore) -> list[str]:
    return [o.key for o in store.list("").objects]


async def test_concurrent_calls_share_one_request(tmp_path: Path) -> None:
    names = [f"a/{i:03d}" for i in range(40)]
    inner = _Recording(_stored(tmp_path, names), delay=0.01)
    async with DeleteCoalescingStore(inner) as store:
        await asyncio.gather(*(store.adelete(names[i : i + 4]) for i in range(0, 40, 4)))
    assert (store.calls, store.requests) == (10, 1)
    assert inner.snapshot().delete_requests == 1
    assert [len(keys) for what, keys in inner.events if what == "sent"] == [40]
    assert _left(inner) == []


async def test_a_full_request_goes_at_once_and_a_call_waits_for_both_of_its_requests(
    tmp_path: Path,
) -> None:
    names = [f"a/{i:04d}" for i in range(1500)]
    inner = _Recording(_stored(tmp_path, names), delay=0.05)
    # A linger far longer than the test: only a full request is sent before close.
    store = DeleteCoalescingStore(inner, linger=60)
    first = asyncio.ensure_future(store.adelete(names[:600]))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(store.adelete(names[600:1200]))  # 400 + 200 keys
    third = asyncio.ensure_future(store.adelete(names[1200:]))
    await asyncio.sleep(0.02)
    # The first 1,000 keys went without waiting; the rest wait for more.
    assert [len(keys) for _, keys in inner.events] == [1000]
    await asyncio.wait_for(first, 5)
    assert not second.done()  # its last 200 keys are still queued
    await store.aclose()  # sends them
    await asyncio.gather(second, third)
    assert [(w, len(keys)) for w, keys in inner.events] == [
        ("sent", 1000),
        ("done", 1000),
        ("sent", 500),
        ("done", 500),
    ]
    assert store.requests == 2 and _left(inner) == []


async def test_a_call_settles_only_when_every_request_holding_its_keys_completed(
    tmp_path: Path,
) -> None:
    names = [f"a/{i:04d}" for i in range(1200)]
    # The request holding a call's first keys completes after the one holding its last.
    inner = _Recording(_stored(tmp_path, names), delay=[0.2, 0.0])
    finished: list[str] = []
    async with DeleteCoalescingStore(inner, linger=0.001) as store:

        async def call(name: str, keys: list[str]) -> None:
            await store.adelete(keys)
            finished.append(name)
            # Its keys are gone when it returns: every request holding one completed.
            assert not any(inner.list(key).objects for key in keys[:: len(keys) - 1])

        await asyncio.gather(call("small", names[:900]), call("spanning", names[900:]))
    assert finished == ["small", "spanning"]
    assert [len(keys) for w, keys in inner.events if w == "sent"] == [1000, 200]


async def test_a_failed_shared_request_fails_each_call_naming_its_own_key(
    tmp_path: Path,
) -> None:
    cause = StorageError("S3 delete of key 'a/0' in s3://b/ failed: InternalError")
    failing = _Failing(LocalStore(tmp_path / "store"), cause)
    async with DeleteCoalescingStore(failing) as store:
        results = await asyncio.gather(
            store.adelete(["a/0", "a/1"]), store.adelete(["b/0"]), return_exceptions=True
        )
    expected = [("a/0", " (and 1 more keys)"), ("b/0", "")]
    for result, (key, more) in zip(results, expected, strict=True):
        assert type(result) is StorageError and result.__cause__ is cause
        assert f"delete of key {key!r}{more} in {failing.location} failed" in str(result)
        assert "InternalError" in str(result)


async def test_a_request_of_one_call_fails_with_the_stores_own_error(tmp_path: Path) -> None:
    cause = StoreUnavailableError("bucket 'b' is not there")
    async with DeleteCoalescingStore(_Failing(LocalStore(tmp_path), cause)) as store:
        with pytest.raises(StoreUnavailableError) as info:
            await store.adelete(["a/0"])
    assert info.value is cause  # as uncoalesced: the error names this call's key


async def test_an_unavailable_store_stays_unavailable_and_a_bug_is_not_disguised(
    tmp_path: Path,
) -> None:
    for cause, kind in (
        (StoreUnavailableError("endpoint down"), StoreUnavailableError),
        (ZeroDivisionError("a bug"), ZeroDivisionError),
    ):
        async with DeleteCoalescingStore(_Failing(LocalStore(tmp_path), cause)) as store:
            got = await asyncio.gather(
                store.adelete(["a/0"]), store.adelete(["b/0"]), return_exceptions=True
            )
        assert all(type(e) is kind for e in got), got
        if kind is ZeroDivisionError:
            assert all(e is cause for e in got)


async def test_a_bad_key_fails_its_own_call_only(tmp_path: Path) -> None:
    inner = _Recording(_stored(tmp_path, ["a/0"]))
    async with DeleteCoalescingStore(inner) as store:
        bad, good = await asyncio.gather(
            store.adelete(["a/../x"]), store.adelete(["a/0"]), return_exceptions=True
        )
    assert isinstance(bad, InvalidKeyError) and good is None
    assert [keys for w, keys in inner.events if w == "sent"] == [("a/0",)]


async def test_close_sends_what_is_queued_and_leaves_no_task(tmp_path: Path) -> None:
    inner = _Recording(_stored(tmp_path, ["a/0", "a/1"]), delay=0.01)
    store = DeleteCoalescingStore(inner, linger=60)
    waiting = asyncio.ensure_future(store.adelete(["a/0"]))
    abandoned = asyncio.ensure_future(store.adelete(["a/1"]))
    await asyncio.sleep(0)
    abandoned.cancel()  # its caller went away; its keys were asked for, so they still go
    await store.aclose()
    with pytest.raises(asyncio.CancelledError):
        await abandoned
    assert waiting.done() and waiting.result() is None
    assert _left(inner) == []
    sending = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("._send")]
    assert sending == []
    with pytest.raises(RuntimeError, match="closed"):
        await store.adelete(["a/0"])


async def test_a_cancelled_close_fails_the_calls_in_flight_and_leaves_no_task(
    tmp_path: Path,
) -> None:
    inner = _Recording(_stored(tmp_path, ["a/0"]), delay=60)
    store = DeleteCoalescingStore(inner, linger=0)
    waiting = asyncio.ensure_future(store.adelete(["a/0"]))
    await asyncio.sleep(0.01)  # sent, and held by the slow store
    closing = asyncio.ensure_future(store.aclose())
    await asyncio.sleep(0.01)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    with pytest.raises(StorageError, match=r"'a/0' .* its request was cancelled"):
        await waiting
    sending = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("._send")]
    assert sending == []


async def test_other_requests_pass_through(tmp_path: Path) -> None:
    inner = MeteredStore(LocalStore(tmp_path))
    async with DeleteCoalescingStore(inner) as store:
        await store.aput("a/0", b"v")
        store.put("a/1", b"w")
        assert await store.aget("a/0") == b"v" and store.get("a/1") == b"w"
        assert [o.key for o in (await store.alist("a/")).objects] == ["a/0", "a/1"]
        assert [o.key for o in store.list("a/", start_after="a/0").objects] == ["a/1"]
        store.delete(["a/1"])  # the blocking delete is not queued
        assert store.requests == 0 and store.location == inner.location
    assert inner.snapshot().requests == {"put": 2, "get": 2, "list": 2, "delete": 1}
