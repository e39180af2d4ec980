"""MeteredStore: counts requests and bytes of any store without changing it."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from objstore_saver.storage import (
    InvalidKeyError,
    LocalStore,
    Meter,
    MeteredStore,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
)
from objstore_saver.storage.metered import LogEntry
from objstore_saver.testing.store_contract import StoreContract


class TestMeteredStoreContract(StoreContract):
    @pytest.fixture
    def empty_store(self, tmp_path: Path) -> MeteredStore:
        return MeteredStore(LocalStore(tmp_path / "store", fsync=False))


@pytest.fixture
def metered(tmp_path: Path) -> MeteredStore:
    return MeteredStore(LocalStore(tmp_path / "store", fsync=False), log=True)


def test_wraps_and_forwards_location(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path)
    metered = MeteredStore(inner)
    assert isinstance(metered, ObjectStore)
    assert metered.inner is inner
    assert metered.location == inner.location


def test_starts_at_zero(metered: MeteredStore) -> None:
    assert metered.snapshot() == Meter()
    assert metered.snapshot().requests == {"put": 0, "get": 0, "list": 0, "delete": 0}
    assert metered.log == []


def test_counts_requests_and_bytes(metered: MeteredStore) -> None:
    metered.put("a", b"x" * 10)
    metered.put("b", b"y" * 300, PutMode.CREATE)
    metered.put("c", b"")
    assert metered.get("b") == b"y" * 300
    assert metered.get("a", (2, 6)) == b"xxxx"
    assert len(metered.list("").objects) == 3
    metered.delete(["a", "missing"])
    m = metered.snapshot()
    assert m.requests == {"put": 3, "get": 2, "list": 1, "delete": 1}
    assert m.total_requests == 7
    assert m.bytes_sent == 310
    assert m.bytes_received == 304
    assert m.objects_put == 3
    assert m.largest_request_body == 300
    assert m.largest_response_body == 300
    assert m.create_conflicts == 0
    assert metered.log == [
        LogEntry("put", "a", 10),
        LogEntry("put", "b", 300),
        LogEntry("put", "c", 0),
        LogEntry("get", "b", 300),
        LogEntry("get", "a", 4),
        LogEntry("list", "", 0),
        LogEntry("delete", "a", 0),
        LogEntry("delete", "missing", 0),
    ]


def test_failed_calls_count_as_requests(metered: MeteredStore) -> None:
    metered.put("k", b"old")
    with pytest.raises(ObjectExistsError):
        metered.put("k", b"newer", PutMode.CREATE)
    with pytest.raises(ObjectNotFoundError):
        metered.get("nothing")
    with pytest.raises(InvalidKeyError):
        metered.get("bad key")
    m = metered.snapshot()
    assert m.put_requests == 2
    assert m.objects_put == 1
    assert m.create_conflicts == 1
    assert m.bytes_sent == 8
    assert m.get_requests == 2
    assert m.bytes_received == 0
    assert metered.get("k") == b"old"


@pytest.mark.parametrize(
    ("nkeys", "requests"), [(0, 0), (1, 1), (999, 1), (1000, 1), (1001, 2), (2500, 3)]
)
def test_delete_counts_one_request_per_thousand_keys(
    metered: MeteredStore, nkeys: int, requests: int
) -> None:
    metered.delete([f"k{i}" for i in range(nkeys)])
    assert metered.snapshot().delete_requests == requests
    assert len(metered.log) == nkeys


def test_largest_bodies_are_maxima_not_sums(metered: MeteredStore) -> None:
    for size in (5, 50, 20):
        metered.put(f"k{size}", b"z" * size)
        metered.get(f"k{size}")
    m = metered.snapshot()
    assert (m.largest_request_body, m.largest_response_body) == (50, 50)
    assert (m.bytes_sent, m.bytes_received) == (75, 75)


def test_snapshot_is_frozen_and_detached(metered: MeteredStore) -> None:
    metered.put("k", b"v")
    before = metered.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.put_requests = 5  # type: ignore[misc]
    metered.put("k", b"v")
    assert before.put_requests == 1
    assert metered.snapshot().put_requests == 2


def test_reset(metered: MeteredStore) -> None:
    metered.put("k", b"v")
    metered.get("k")
    metered.reset()
    assert metered.snapshot() == Meter()
    assert metered.log == []
    metered.get("k")
    assert metered.snapshot().get_requests == 1


def test_log_is_off_by_default(tmp_path: Path) -> None:
    metered = MeteredStore(LocalStore(tmp_path, fsync=False))
    metered.put("k", b"v")
    assert metered.log == []
    assert metered.snapshot().put_requests == 1


class _NullStore:
    """Instant inner store, so threads spend their time in the counters."""

    location = "null://"

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        pass

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return b"abcd"

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> Any:
        raise NotImplementedError

    def delete(self, keys: Sequence[str]) -> None:
        pass


def test_counters_are_thread_safe() -> None:
    metered = MeteredStore(_NullStore(), log=True)
    # Switch threads as often as possible so unlocked updates would be lost.
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:

        def work(i: int) -> None:
            for _ in range(5000):
                metered.put("k", b"abc")
                metered.get("k")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(8)))
    finally:
        sys.setswitchinterval(old_interval)
    m = metered.snapshot()
    assert (m.put_requests, m.get_requests) == (40_000, 40_000)
    assert (m.bytes_sent, m.bytes_received) == (120_000, 160_000)
    assert m.objects_put == 40_000
    assert len(metered.log) == 80_000
