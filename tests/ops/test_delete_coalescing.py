"""Deletes of the threads a job runs together share DeleteObjects requests.

The wrapper alone (:class:`DeleteCoalescingStore`: sharing, order, errors,
closing), then the jobs on the local store and on S3: ``prune --apply`` and
``delete_threads`` over many threads send a few DeleteObjects instead of two
or three a thread, leave what a run of one thread at a time leaves, delete a
thread's manifests before its other keys are sent, and, after a failed shared
request, a rerun completes the work. The sharing sits above the store, so
one S3 transport is enough (each transport's DeleteObjects is in its
contract suite).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from backends import Backend
from deleted import not_tombstones
from layout import is_manifest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.ops import OpsConfig, adelete_threads, aprune, delete_coalescing, maintain
from objstore_saver.ops.delete_coalescing import DeleteCoalescingStore
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore
from objstore_saver.storage.base import (
    InvalidKeyError,
    PutMode,
    StorageError,
    StoreUnavailableError,
    StoreWrapper,
)
from objstore_saver.testing.faults import FailWhere, Fault, FaultyStore, InjectedFaultError

#: Threads of the jobs' tests, each one chat turn: 3 checkpoints.
THREADS = [f"t{i:02d}" for i in range(60)]
#: The linger of the tests that count requests. moto answers in the tests'
#: own process, one request after the other, so the threads of a job drift
#: apart by hundreds of milliseconds where a remote server's round trips keep
#: them within a few: a longer wait gathers each delete step of the window's
#: threads, as the default gathers them against a server of its own.
GATHER_ALL = 0.25

pytestmark = pytest.mark.backends("local", "s3-lean")


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


# --- the jobs ---------------------------------------------------------------------------------


def _keys(store: ObjectStore) -> list[str]:
    out: list[str] = []
    after = None
    while True:
        page = store.list("", start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _held(store: ObjectStore) -> Counter[str]:
    """Every key; a sweep mark as its thread and the digests it names (its name is random)."""
    out: Counter[str] = Counter()
    for key in _keys(store):
        if k.is_tombstone_key(key):
            # Which epoch it begins depends on how many deletes ran: a thread
            # holds one tombstone after any of them.
            out[key.rsplit("/", 1)[0] + "/-tombstone"] += 1
        elif "/marks/" in key:
            digests = sorted(d.hex() for d in codec.decode_mark(store.get(key), key))
            out[key[: key.index("/marks/")] + "/marks/" + ",".join(digests)] += 1
        else:
            out[key] += 1
    return out


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the threads, one chat turn each: written once for the module."""
    root = tmp_path_factory.mktemp("seed")
    with ObjectStoreSaver(LocalStore(root, fsync=False)) as saver, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda t: chat(saver, t, ["hello"]), THREADS))
    return root


def _seeded(backend: Backend, seed: Path, copies: int) -> list[ObjectStore]:
    """``copies`` stores of the backend holding the seed's threads, byte for byte."""
    source = LocalStore(seed)
    stores = []
    for n in range(copies):
        prefix = f"c{n}/"
        if backend.is_s3:
            store = backend.store(prefix)
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda key, s=store: s.put(key, source.get(key)), _keys(source)))
        else:
            shutil.copytree(seed, backend.root / prefix)
            store = backend.store(prefix, fsync=False)
        stores.append(store)
    return stores


@contextlib.contextmanager
def _jobs_on(store: ObjectStore, linger: float | None) -> Any:
    """The maintenance jobs open a saver on ``store`` (a wrapped one) instead of their URL.

    ``linger``: their coalescing wrapper's, when not its default.
    """

    @contextlib.asynccontextmanager
    async def opened(_config: OpsConfig) -> AsyncIterator[ObjectStoreSaver]:
        # No reuse window: the writes a lost delete answer leaves without their
        # checkpoint are orphans at once, so a rerun deletes them as the
        # uninterrupted run did (spec §6.9 step 2 waits W for them otherwise).
        saver = ObjectStoreSaver(store, reuse_window=timedelta(0))
        try:
            yield saver
        finally:
            saver.close()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(maintain, "aopen_saver", opened)
        if linger is not None:
            mp.setattr(
                delete_coalescing,
                "DeleteCoalescingStore",
                functools.partial(DeleteCoalescingStore, linger=linger),
            )
        yield


def _prune(
    store: ObjectStore, concurrency: int = 64, linger: float | None = None
) -> dict[str, Any]:
    with _jobs_on(store, linger):
        return asyncio.run(
            aprune(
                keep_last=1,
                min_age=0,
                apply=True,
                concurrency=concurrency,
                config=OpsConfig(url="unused://"),
            )
        )


def _delete(
    store: ObjectStore, ids: list[str], concurrency: int = 64, linger: float | None = None
) -> dict[str, Any]:
    with _jobs_on(store, linger):
        return asyncio.run(
            adelete_threads(
                ids, apply=True, concurrency=concurrency, config=OpsConfig(url="unused://")
            )
        )


def _deleted(before: Counter[str], after: Counter[str]) -> int:
    return sum((before - after).values())


def test_prune_sends_a_few_shared_deletes_and_leaves_what_one_at_a_time_leaves(
    backend: Backend,
    seed: Path,
) -> None:
    together, alone = _seeded(backend, seed, 2)
    before = _held(together)
    metered = MeteredStore(together)
    report = _prune(metered, linger=GATHER_ALL)
    assert report["totals"]["checkpoints_deleted"] == 2 * len(THREADS)
    deleted = _deleted(before, _held(together))
    # Two delete steps a thread (its old manifests, then their writes), each
    # step of the threads in flight sharing requests of up to 1,000 keys:
    # uncoalesced it is two requests a thread.
    bound = 2 * math.ceil(deleted / 1000) + 4
    requests = metered.snapshot().delete_requests
    assert requests <= bound < len(THREADS) / 4, (requests, deleted)
    one_by_one = MeteredStore(alone)
    _prune(one_by_one, concurrency=1)
    assert one_by_one.snapshot().delete_requests == 2 * len(THREADS)  # nothing to share
    assert _held(together) == _held(alone)


def test_delete_threads_sends_a_few_shared_deletes_and_leaves_the_other_threads(
    backend: Backend,
    seed: Path,
) -> None:
    (store,) = _seeded(backend, seed, 1)
    doomed, spared = THREADS[:50], THREADS[50:]
    before = _held(store)
    metered = MeteredStore(store)
    report = _delete(metered, doomed, linger=GATHER_ALL)
    assert all(row["deleted"] for row in report["threads"])
    after = _held(store)
    tombstones = Counter(_pfx(t) + "checkpoints/_/-tombstone" for t in doomed)
    assert after == tombstones + Counter(
        {key: n for key, n in before.items() if key.startswith(tuple(map(_pfx, spared)))}
    )
    # Manifests, then writes and objects in one round: the threads' steps share requests.
    bound = 3 * math.ceil(_deleted(before, after) / 1000) + 4
    requests = metered.snapshot().delete_requests
    assert requests <= bound < len(doomed) / 4, requests


def _pfx(thread_id: str) -> str:
    return k.thread_prefix(thread_id)


def _thread_of(key: str) -> str:
    """The thread prefix a deleted key belongs to."""
    if key.startswith(k.THREADS):
        return key[: key.index("/", len(k.THREADS)) + 1]
    return f"{k.THREADS}{key.rsplit('/', 1)[1]}/"  # a run's index entry, runs/<U>/<T>


def _check_order(events: list[tuple[str, tuple[str, ...]]]) -> int:
    """For each thread, its manifests' requests completed before any other key of it was sent.

    Returns the number of threads checked.
    """
    done_at: dict[str, int] = {}  # a thread's last completed request holding a manifest of it
    sent_at: dict[str, int] = {}  # the first request holding another key of it
    for at, (what, keys) in enumerate(events):
        for key in keys:
            pfx = _thread_of(key)
            if what == "done" and is_manifest(key):
                done_at[pfx] = at
            elif what == "sent" and not is_manifest(key):
                sent_at.setdefault(pfx, at)
    assert done_at, "no manifest was deleted"
    for pfx, at in done_at.items():
        assert pfx in sent_at, f"{pfx}: no other key deleted"
        assert sent_at[pfx] > at, f"{pfx}: a key was sent before its manifests were deleted"
    return len(done_at)


@pytest.mark.parametrize("job", ["prune", "delete_threads"])
def test_a_threads_manifests_are_deleted_before_its_other_keys_are_sent(
    backend: Backend, seed: Path, job: str
) -> None:
    (store,) = _seeded(backend, seed, 1)
    # Slow requests, the default linger: were a call to return before its
    # request completed, a thread's next keys would be sent (or queued in the
    # same request) while its manifests' request is in flight.
    recording = _Recording(store, delay=0.03)
    if job == "prune":
        _prune(recording)
    else:
        _delete(recording, THREADS)
    assert _check_order(recording.events) == len(THREADS)
    sent = [keys for what, keys in recording.events if what == "sent"]
    # Requests were shared, or the order would be the plans' alone.
    assert any(len({_thread_of(key) for key in keys}) > 1 for keys in sent)


def _first_shared_delete_fails(fault: Fault) -> Callable[[Any], Fault | None]:
    """Fails the first delete request holding keys of two threads or more."""

    def shared(request: Any) -> bool:
        return request.op == "delete" and len({_thread_of(key) for key in request.keys}) > 1

    return FailWhere(shared, fault, times=1)


@pytest.mark.parametrize("fault", [Fault.ERROR, Fault.LOST_RESPONSE])
@pytest.mark.parametrize("job", ["prune", "delete_threads"])
def test_a_failed_shared_delete_fails_its_threads_and_a_rerun_completes(
    backend: Backend, seed: Path, job: str, fault: Fault
) -> None:
    failed, clean = _seeded(backend, seed, 2)

    def run(store: ObjectStore, linger: float | None = None) -> Any:
        if job == "prune":
            return _prune(store, linger=linger)
        return _delete(store, THREADS, linger=linger)

    with pytest.raises(StorageError) as info:
        run(FaultyStore(failed, _first_shared_delete_fails(fault)), GATHER_ALL)
    # The failed request held keys of several threads: each failed naming its
    # own key, caused by the store's error.
    assert str(info.value).startswith("delete of key 'threads/")
    assert isinstance(info.value.__cause__, InjectedFaultError)
    run(failed)
    run(clean)
    assert _held(failed) == _held(clean)
    if job == "delete_threads":
        assert not_tombstones(_keys(failed)) == []
