"""The replication simulator of ``objstore_saver.testing``: two regions of one backend.

Each region is a prefix of the test's bucket (a folder on the local backend):
what the replicator copies, when, in which order, and what it leaves alone.
"""

from __future__ import annotations

import threading

import pytest
from helpers.backends import Backend

from objstore_saver.storage.base import ObjectStore, PutMode
from objstore_saver.testing.replication import BothWays, Replicator


def _keys(store: ObjectStore) -> list[str]:
    return [o.key for o in store.list("", limit=1000).objects]


def _contents(store: ObjectStore) -> dict[str, bytes]:
    return {k: store.get(k) for k in _keys(store)}


def _write(store: ObjectStore, n: int, stem: str = "o") -> list[str]:
    keys = [f"threads/t/{stem}{i:03d}" for i in range(n)]
    for i, key in enumerate(keys):
        store.put(key, f"{stem} {i}".encode(), PutMode.CREATE)
    return keys


def test_every_object_arrives_one_by_one_in_another_order(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    written = _write(east, 12)
    rep = Replicator(east, west, seed=7, max_lag=0, per_tick=1)
    arrived: list[str] = []
    for _ in range(12):
        assert rep.tick() == 1
        arrived += [k for k in _keys(west) if k not in arrived]
    assert sorted(arrived) == written and arrived != written
    assert _contents(west) == _contents(east)
    assert rep.tick() == 0 and rep.pending() == []
    assert rep.stats.copied == 12 and rep.conflicts == []


def test_an_object_waits_its_lag(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    written = _write(east, 20)
    rep = Replicator(east, west, seed=3, max_lag=4)
    rep.tick()
    first = set(_keys(west))
    assert first < set(written)  # some wait (20 lags of 0 out of 0..4: 1 in 5**20)
    for _ in range(4):
        rep.tick()
    assert _keys(west) == written  # every lag is over by the fifth tick


def test_a_partition_copies_nothing_until_it_heals(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    _write(east, 5)
    rep = Replicator(east, west, seed=1, max_lag=0)
    with rep.partitioned():
        assert rep.tick() == 0
        with pytest.raises(RuntimeError, match="is partitioned"):
            rep.drain(max_ticks=3)
        assert _keys(west) == []
    rep.drain()
    assert _contents(west) == _contents(east)


def test_deletes_stay_behind_unless_asked_for(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    written = _write(east, 4)
    plain = Replicator(east, west, seed=2, max_lag=0)
    plain.drain()
    east.delete(written[:2])
    plain.drain()
    assert _keys(west) == written  # S3's default: a delete is not replicated
    both = backend.store("south/")
    with_deletes = Replicator(east, both, seed=2, max_lag=0, deletes=True)
    _write(east, 2, "p")
    with_deletes.drain()
    east.delete(["threads/t/p000"])
    with_deletes.drain()
    assert _keys(both) == _keys(east)
    assert with_deletes.stats.deleted == 1


def test_two_regions_writing_converge(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    _write(east, 6, "e")
    _write(west, 6, "w")
    _write(east, 1, "same")
    _write(west, 1, "same")  # the same key and bytes in both: content addressing
    pair = BothWays.between(east, west, seed=11, max_lag=2, per_tick=3)
    pair.drain()
    assert _contents(east) == _contents(west)
    assert len(_keys(east)) == 13
    assert pair.a_to_b.conflicts == [] and pair.b_to_a.conflicts == []


def test_one_key_written_twice_with_other_bytes_is_a_conflict(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    east.put("threads/t/k", b"east", PutMode.CREATE)
    west.put("threads/t/k", b"west", PutMode.CREATE)
    rep = Replicator(east, west, seed=0, max_lag=0)
    rep.drain()
    assert rep.conflicts == ["threads/t/k"]
    assert west.get("threads/t/k") == b"east"  # as on S3: the copy that lands last wins


def test_a_key_written_again_is_copied_again_and_a_pair_settles(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    pair = BothWays.between(east, west, seed=3, max_lag=1)
    east.put("store/it/k", b"first", PutMode.OVERWRITE)
    pair.drain()
    assert west.get("store/it/k") == b"first"
    east.put("store/it/k", b"second, longer", PutMode.OVERWRITE)
    pair.drain()
    assert west.get("store/it/k") == b"second, longer"
    for _ in range(5):  # settled: nothing goes back and forth
        assert pair.tick() == 0
    assert pair.a_to_b.conflicts == [] and pair.b_to_a.conflicts == []


@pytest.mark.backends("local", "s3-lean")
def test_it_copies_on_its_own_thread_while_a_writer_writes(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    rep = Replicator(east, west, seed=5, max_lag=2)
    with rep.running(interval=0.001):
        for i in range(40):
            east.put(f"threads/t/r{i:03d}", b"x" * i, PutMode.CREATE)
        for _ in range(10_000):  # until the thread has copied one (bounded: 10 s)
            if rep.stats.copied:
                break
            threading.Event().wait(0.001)
    assert rep.stats.copied > 0
    rep.drain()
    assert _contents(west) == _contents(east)
    assert len(_keys(west)) == 40


def test_bad_settings_name_the_setting(backend: Backend) -> None:
    east = backend.store("east/")
    with pytest.raises(ValueError, match="max_lag"):
        Replicator(east, east, max_lag=-1)
    with pytest.raises(ValueError, match="per_tick"):
        Replicator(east, east, per_tick=0)
