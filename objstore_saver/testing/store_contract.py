"""The behaviour every ObjectStore backend must have, as a pytest suite to subclass
(usage in :mod:`objstore_saver.testing`).

Every test runs on the blocking methods and on the coroutines, which
:class:`ThroughCoroutines` drives from a loop of its own (no asyncio plugin needed).
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from objstore_saver.storage import (
    InvalidKeyError,
    ListPage,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
    StorageError,
)

# Keys whose byte order differs from path-by-path order: '-' (0x2d) and '.'
# (0x2e) sort before '/' (0x2f), '/' before '0', and '%' / '~' are kept verbatim.
ORDER_KEYS = [
    "a-c",
    "a/b",
    "a.d/x",
    "a0",
    "t1-x",
    "t1.x",
    "t1/x",
    "t1/y",
    "t10/x",
    "t2",
    "%41",
    "A",
    "a%2Fb",
    "b~c",
    "b/c~/d",
    "~z",
    "_u",
]

INVALID_KEYS = [
    "",
    "/a",
    "a/",
    "a//b",
    "a/../b",
    "a/./b",
    "..",
    ".",
    "caf\u00e9",
    "a b",
    "a#b",
    "a\\b",
    "a\nb",
    "a:b",
    "x" * 1025,
]


T = TypeVar("T")


class ThroughCoroutines:
    """The blocking store API carried out by a store's coroutines.

    Each call is awaited on an event loop running in a thread of its own, so
    callers on many threads issue concurrent coroutine requests.
    """

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=120)

    @property
    def location(self) -> str:
        return self.inner.location

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self._await(self.inner.aput(key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._await(self.inner.aget(key, byte_range))

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> ListPage:
        return self._await(self.inner.alist(prefix, start_after=start_after, limit=limit))

    def delete(self, keys: Sequence[str]) -> None:
        self._await(self.inner.adelete(keys))


def longest_key(nbytes: int) -> str:
    """A key of ``nbytes`` bytes in segments short enough for any filesystem."""
    segments = []
    while nbytes > 201:
        segments.append("k" * 200)
        nbytes -= 201
    return "/".join([*segments, "k" * nbytes])


def _body(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _put_all(store: ObjectStore, keys: list[str]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda k: store.put(k, k.encode()), keys))


def _list_all(store: ObjectStore, prefix: str = "", limit: int = 1000) -> list[str]:
    keys: list[str] = []
    start_after = None
    while True:
        page = store.list(prefix, start_after=start_after, limit=limit)
        keys += [o.key for o in page.objects]
        if not page.truncated:
            return keys
        assert len(page.objects) == limit
        start_after = page.objects[-1].key


class StoreContract:
    """Tests any ObjectStore must pass; subclasses define the ``empty_store`` fixture."""

    #: Longest key the store accepts (less than 1,024 when it adds a prefix).
    max_key_bytes = 1024

    @pytest.fixture
    def empty_store(self) -> ObjectStore:
        """The store under test, holding no object; subclasses override this fixture."""
        raise NotImplementedError(f"{type(self).__name__} provides no empty_store fixture")

    @pytest.fixture(params=["sync", "async"])
    def store(self, empty_store: ObjectStore, request: pytest.FixtureRequest) -> Iterator[Any]:
        if request.param == "sync":
            yield empty_store
            return
        facade = ThroughCoroutines(empty_store)
        try:
            yield facade
        finally:
            facade.close()

    def test_is_an_object_store(self, empty_store: ObjectStore) -> None:
        assert isinstance(empty_store, ObjectStore)
        assert empty_store.location
        for name in ("aput", "aget", "alist", "adelete"):
            assert asyncio.iscoroutinefunction(getattr(empty_store, name)), name

    @pytest.mark.parametrize("size", [0, 1, 3 * 1024 * 1024])
    def test_round_trip(self, store: ObjectStore, size: int) -> None:
        body = _body(size, size)
        store.put("obj/data", body)
        assert store.get("obj/data") == body
        [info] = store.list("obj/").objects
        assert (info.key, info.size) == ("obj/data", size)

    def test_overwrite_replaces(self, store: ObjectStore) -> None:
        store.put("k", b"first version, longer")
        store.put("k", b"second", PutMode.OVERWRITE)
        assert store.get("k") == b"second"
        assert [o.size for o in store.list("").objects] == [6]

    def test_create_on_free_key(self, store: ObjectStore) -> None:
        store.put("k", b"v", PutMode.CREATE)
        assert store.get("k") == b"v"

    def test_create_on_existing_key_raises_and_keeps_old_bytes(self, store: ObjectStore) -> None:
        store.put("dir/k", b"old", PutMode.CREATE)
        with pytest.raises(ObjectExistsError) as info:
            store.put("dir/k", b"new", PutMode.CREATE)
        assert "dir/k" in str(info.value)
        assert isinstance(info.value, StorageError)
        assert store.get("dir/k") == b"old"

    def test_get_missing(self, store: ObjectStore) -> None:
        store.put("present", b"x")
        with pytest.raises(ObjectNotFoundError) as info:
            store.get("absent/key")
        assert isinstance(info.value, KeyError)
        assert "absent/key" in str(info.value)
        with pytest.raises(ObjectNotFoundError):
            store.get("absent/key", (0, 1))
        with pytest.raises(ObjectNotFoundError):
            store.get("absent/key", (0, 0))

    def test_get_after_delete_is_missing(self, store: ObjectStore) -> None:
        store.put("k", b"v")
        store.delete(["k"])
        with pytest.raises(ObjectNotFoundError):
            store.get("k")

    @pytest.mark.parametrize(
        ("byte_range", "expected"),
        [
            ((0, 3), b"012"),
            ((4, 7), b"456"),
            ((7, 10), b"789"),
            ((8, 100), b"89"),
            ((0, 10), b"0123456789"),
            ((3, 3), b""),
            ((10, 10), b""),
            ((10, 20), b""),
            ((15, 20), b""),
        ],
    )
    def test_byte_range(
        self, store: ObjectStore, byte_range: tuple[int, int], expected: bytes
    ) -> None:
        store.put("r", b"0123456789")
        assert store.get("r", byte_range) == expected

    def test_byte_range_of_empty_object(self, store: ObjectStore) -> None:
        store.put("empty", b"")
        assert store.get("empty", (0, 0)) == b""
        assert store.get("empty", (0, 5)) == b""

    def test_byte_range_of_large_object(self, store: ObjectStore) -> None:
        body = _body(7, 1024 * 1024 + 5)
        store.put("big", body)
        assert store.get("big", (1000, 700_000)) == body[1000:700_000]
        assert store.get("big", (1024 * 1024, 2**40)) == body[1024 * 1024 :]

    @pytest.mark.parametrize("byte_range", [(-1, 2), (3, 2), (0.0, 1)])
    def test_invalid_byte_range(self, store: ObjectStore, byte_range: tuple[int, int]) -> None:
        store.put("r", b"0123")
        with pytest.raises(ValueError, match="byte range"):
            store.get("r", byte_range)

    def test_list_is_in_byte_order(self, store: ObjectStore) -> None:
        bodies = {key: key.encode() * (i + 1) for i, key in enumerate(ORDER_KEYS)}
        for key, body in bodies.items():
            store.put(key, body)
        page = store.list("")
        assert [o.key for o in page.objects] == sorted(ORDER_KEYS)
        assert not page.truncated
        assert {o.key: o.size for o in page.objects} == {k: len(b) for k, b in bodies.items()}
        # '%' is not an escape: "%41" and "A" are two objects.
        assert store.get("%41") == bodies["%41"]
        assert store.get("A") == bodies["A"]

    @pytest.mark.parametrize(
        "prefix",
        [
            "",
            "t1",
            "t1/",
            "t10",
            "t10/",
            "a",
            "a/",
            "a-",
            "b",
            "b/c~",
            "b/c~/",
            "%",
            "~",
            "zz",
            "t1/x",
        ],
    )
    def test_list_prefix(self, store: ObjectStore, prefix: str) -> None:
        for key in ORDER_KEYS:
            store.put(key, b"")
        expected = sorted(k for k in ORDER_KEYS if k.startswith(prefix))
        assert [o.key for o in store.list(prefix).objects] == expected

    @pytest.mark.parametrize(
        "start_after",
        ["", "a", "a-c", "a/", "a/b", "a/a", "t1", "t1/", "t1/x", "t10/x", "~z", "~~"],
    )
    def test_list_start_after(self, store: ObjectStore, start_after: str) -> None:
        for key in ORDER_KEYS:
            store.put(key, b"")
        expected = sorted(k for k in ORDER_KEYS if k > start_after)
        assert [o.key for o in store.list("", start_after=start_after).objects] == expected
        expected_t = [k for k in expected if k.startswith("t")]
        assert [o.key for o in store.list("t", start_after=start_after).objects] == expected_t

    def test_list_with_limit(self, store: ObjectStore) -> None:
        for key in ORDER_KEYS:
            store.put(key, b"")
        ordered = sorted(ORDER_KEYS)
        page = store.list("", limit=3)
        assert [o.key for o in page.objects] == ordered[:3]
        assert page.truncated
        page = store.list("", start_after=ordered[-4], limit=3)
        assert [o.key for o in page.objects] == ordered[-3:]
        assert _list_all(store, limit=1) == ordered
        assert _list_all(store, limit=4) == ordered

    @pytest.mark.parametrize("limit", [0, -1, 1001])
    def test_list_limit_out_of_range(self, store: ObjectStore, limit: int) -> None:
        with pytest.raises(ValueError, match="limit"):
            store.list("", limit=limit)

    def test_list_empty_store(self, store: ObjectStore) -> None:
        page = store.list("")
        assert page.objects == []
        assert not page.truncated

    def test_many_keys_paginate_and_delete(self, store: ObjectStore) -> None:
        # More than one S3 page and one S3 delete batch (1,000 keys each).
        keys = [f"many/{i % 7}/{i:05d}" for i in range(1100)]
        _put_all(store, keys)
        store.put("manz", b"")  # after every "many/" key, outside the prefix
        first = store.list("many/")
        assert len(first.objects) == 1000
        assert first.truncated
        assert _list_all(store, "many/") == sorted(keys)
        assert _list_all(store, "many/", limit=333) == sorted(keys)
        assert _list_all(store, "many/3/", limit=100) == sorted(k for k in keys if "/3/" in k)
        store.delete(keys)
        assert _list_all(store) == ["manz"]
        with pytest.raises(ObjectNotFoundError):
            store.get(keys[1050])

    def test_delete_missing_keys_is_fine(self, store: ObjectStore) -> None:
        store.put("a/present", b"x")
        store.delete([])
        store.delete(["never/was", "a/never"])
        store.delete(["a/present", "b/missing"])
        assert store.list("").objects == []
        store.delete(["a/present"])

    @pytest.mark.parametrize("key", INVALID_KEYS, ids=lambda k: repr(k)[:20])
    def test_invalid_keys(self, store: ObjectStore, key: str) -> None:
        for call in (
            lambda: store.put(key, b"x"),
            lambda: store.put(key, b"x", PutMode.CREATE),
            lambda: store.get(key),
            lambda: store.delete(["fine", key]),
        ):
            with pytest.raises(InvalidKeyError) as info:
                call()
            assert repr(key) in str(info.value)
            assert isinstance(info.value, ValueError)
        assert store.list("").objects == []

    def test_invalid_key_in_delete_deletes_nothing(self, store: ObjectStore) -> None:
        store.put("fine", b"x")
        with pytest.raises(InvalidKeyError):
            store.delete(["fine", "bad key"])
        assert store.get("fine") == b"x"

    def test_longest_key(self, store: ObjectStore) -> None:
        key = longest_key(self.max_key_bytes)
        assert len(key) == self.max_key_bytes
        store.put(key, b"long")
        assert store.get(key) == b"long"
        assert [o.key for o in store.list("k").objects] == [key]
        with pytest.raises(InvalidKeyError):
            store.put(key + "k", b"too long")

    def test_last_modified_is_aware_and_recent(self, store: ObjectStore) -> None:
        store.put("t", b"x")
        [info] = store.list("").objects
        assert info.last_modified.tzinfo is not None
        assert info.last_modified.utcoffset() == timedelta(0)
        assert abs(datetime.now(UTC) - info.last_modified) < timedelta(minutes=5)

    @pytest.mark.parametrize("round_", range(3))
    def test_concurrent_creates_have_one_winner(self, store: ObjectStore, round_: int) -> None:
        n = 8
        barrier = threading.Barrier(n)
        key = f"race/{round_}"

        def attempt(i: int) -> int | None:
            body = f"writer {i} ".encode() * 1000
            barrier.wait()
            try:
                store.put(key, body, PutMode.CREATE)
            except ObjectExistsError:
                return None
            return i

        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(attempt, range(n)))
        winners = [i for i in results if i is not None]
        assert len(winners) == 1, results
        assert store.get(key) == f"writer {winners[0]} ".encode() * 1000
