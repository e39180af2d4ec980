"""Encrypted threads begun in two regions at once (spec §6.16, docs/replication.md).

During a partition a thread (or a long-term store namespace) the replica
holds nothing of is new there, though the other region may have begun it:
the replica's writer makes its key as a second key object
(``keys/threads/<T>%r<id>``), a name no other writer uses, so replication
never lands one region's key object over the other's. After the heal both
keys are in both buckets and every object opens with the key its envelope
names: nothing either region wrote is lost.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from helpers.backends import Backend
from langchain_core.messages import HumanMessage
from replicas import cfg, ids, messages

from bench.graphs import noisy_chat_graph
from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.storage import ObjectStore
from objstore_saver.testing.replication import BothWays

pytestmark = pytest.mark.backends("local", "s3-lean")


def _prune(saver: ObjectStoreSaver, later: timedelta) -> dict[str, Any]:
    """Prune thread ``t`` to its head as if ``later`` had passed (a sweep after the marks)."""
    plan = saver._prune_plan(["t"], "keep_latest", 1, 0.0, False, now=datetime.now(UTC) + later)
    return saver._driver.run(plan)  # type: ignore[no-any-return]


def _keys(store: ObjectStore, prefix: str) -> list[str]:
    return sorted(o.key for o in store.list(prefix).objects)


def test_a_thread_begun_in_both_regions_keeps_both_regions_checkpoints(backend: Backend) -> None:
    master = LocalMasterKey(os.urandom(32))
    east, west = backend.store("east/"), backend.store("west/")
    pair = BothWays.between(east, west, seed=5, max_lag=2, per_tick=3)

    def saver(store: ObjectStore, **options: float) -> ObjectStoreSaver:
        return ObjectStoreSaver(store, client_encryption=ClientEncryption.of(master), **options)

    with pair.partitioned():
        with saver(east) as in_east:
            chat = noisy_chat_graph(in_east, seed=1)
            for turn in range(3):
                chat.invoke({"messages": [HumanMessage(f"e{turn}", id=f"e{turn}")]}, cfg("t"))
            east_head = in_east.get_tuple(cfg("t"))
        # West holds nothing of the thread: new there, its key a second key object.
        with saver(west, replica_lag=900) as in_west:
            chat = noisy_chat_graph(in_west, seed=2)
            for turn in range(3):
                chat.invoke({"messages": [HumanMessage(f"w{turn}", id=f"w{turn}")]}, cfg("t"))
            west_head = in_west.get_tuple(cfg("t"))
            assert west_head is not None and east_head is not None
            # A new process on the replica finds the second key and writes on.
            with saver(west, replica_lag=900) as again:
                noisy_chat_graph(again, seed=3).invoke(
                    {"messages": [HumanMessage("w3", id="w3")]}, cfg("t")
                )
                west_head = again.get_tuple(cfg("t"))
        assert _keys(east, "keys/") == ["keys/threads/_t"]
        [second] = _keys(west, "keys/")
        assert second.startswith("keys/threads/_t%r")
    with saver(east) as in_east, saver(west, replica_lag=900) as in_west:
        written = ids(in_east, "t") | ids(in_west, "t")
    assert west_head is not None
    pair.drain()
    assert pair.a_to_b.conflicts == [] and pair.b_to_a.conflicts == []
    for region in (east, west):
        assert _keys(region, "keys/") == sorted(["keys/threads/_t", second])
        for options in ({}, {"replica_lag": 900.0}):
            with saver(region, **options) as reader:
                assert ids(reader, "t") == written
                for checkpoint_id in written:
                    assert reader.get_tuple(cfg("t", checkpoint_id)) is not None
                head = reader.get_tuple(cfg("t"))
                assert head is not None and head.config == west_head.config
                assert messages(head) == messages(west_head)
                tail = reader.get_tuple(east_head.config)
                assert tail is not None and messages(tail) == messages(east_head)
                assert reader.verify().ok
    # Each region's jobs see both keys' objects as the thread's: prune keeps
    # what the kept checkpoints reach, and a delete takes both keys.
    # S3's LastModified has one-second resolution, and the sweep takes only
    # objects stored strictly before their mark (spec §6.9). The first run
    # stores the deleted manifests' embedded objects alone and marks them,
    # often within one second: the next run then spares them and marks them
    # again, a second later, and the run after it sweeps them.
    time.sleep(1.1)
    with saver(west) as in_west:
        first = _prune(in_west, timedelta(0))
        assert first["checkpoints_deleted"] > 0 and first["objects_marked"] > 0
        time.sleep(1.1)
        swept = _prune(in_west, timedelta(hours=2))
        time.sleep(1.1)
        late = _prune(in_west, timedelta(hours=4))
        assert swept["objects_swept"] + late["objects_swept"] > 0
        head = in_west.get_tuple(cfg("t"))
        assert head is not None and messages(head) == messages(west_head)
        assert in_west.verify().ok
        # A process that lists the thread before it reads: both keys' names open.
        with saver(west) as fresh:
            objects = [o.key for o in fresh.store.list("threads/_t/objects/").objects]
            assert objects and all(len(k.rsplit("/", 1)[1]) == 64 for k in objects)
        in_west.delete_thread("t")
        assert in_west.get_tuple(cfg("t")) is None
    assert not [k for k in _keys(west, "keys/") if k.startswith("keys/threads/_t")]


def test_a_store_namespace_begun_in_both_regions_keeps_both_regions_items(
    backend: Backend,
) -> None:
    master = LocalMasterKey(os.urandom(32))
    east, west = backend.store("east/"), backend.store("west/")
    pair = BothWays.between(east, west, seed=6, max_lag=1)
    ns = ("users", "u1")

    def store(region: ObjectStore, **options: float) -> ObjectStoreStore:
        return ObjectStoreStore(region, client_encryption=ClientEncryption.of(master), **options)

    with pair.partitioned():
        with store(east) as in_east:
            in_east.put(ns, "from-east", {"text": "east"})
        with store(west, replica_lag=900) as in_west:
            in_west.put(ns, "from-west", {"text": "west"})
    pair.drain()
    assert pair.a_to_b.conflicts == [] and pair.b_to_a.conflicts == []
    for region in (east, west):
        for options in ({}, {"replica_lag": 900.0}):
            with store(region, **options) as reader:
                found = {it.key: it.value for it in reader.search(ns)}
                assert found == {"from-east": {"text": "east"}, "from-west": {"text": "west"}}
                got = reader.get(ns, "from-west")
                assert got is not None and got.value == {"text": "west"}
