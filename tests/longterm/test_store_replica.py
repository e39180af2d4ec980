"""The long-term store on a replicated bucket (docs/replication.md).

Items written in one region (``east/``) are copied to the other one object at
a time, in random order; a store there with ``replica_lag`` is read between
copies. In clear every read goes through; encrypted, a namespace whose key
object has not arrived reads as not replicated yet, and a write to it is
refused rather than making a second key.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from helpers.backends import Backend

from objstore_saver import ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.errors import ConfigurationError, ThreadKeyError, ThreadKeyMissingError
from objstore_saver.server_settings import store_options
from objstore_saver.testing.replication import BothWays, Replicator

pytestmark = pytest.mark.backends("local", "s3-lean")

NS = ("users", "u1", "memories")


def _settings_of(encrypted: bool) -> Callable[[], ClientEncryption | bool]:
    """The encryption settings of each store a test opens: one master key, or none."""
    master = LocalMasterKey(os.urandom(32))
    return lambda: ClientEncryption.of(master) if encrypted else False


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
def test_a_replica_store_reads_through_while_items_arrive(
    backend: Backend, encrypted: bool
) -> None:
    settings = _settings_of(encrypted)
    east, west = backend.store("east/"), backend.store("west/")
    rep = Replicator(east, west, seed=4, max_lag=2, per_tick=1)
    rng = random.Random(4)
    probes = 0
    with (
        ObjectStoreStore(east, client_encryption=settings()) as source,
        ObjectStoreStore(west, client_encryption=settings(), replica_lag=900) as replica,
    ):
        for i in range(12):
            source.put(NS, f"k{i % 5}", {"text": f"memory {i}"})
            for _ in range(rng.randint(1, 4)):
                rep.tick()
                probes += 1
                found = {it.key: it.value for it in replica.search(NS, limit=50)}
                assert set(found) <= {f"k{j}" for j in range(5)}
                got = replica.get(NS, "k0")
                assert got is None or got.value["text"].startswith("memory ")
                replica.list_namespaces(prefix=("users",))
        rep.drain()
        assert {it.key: it.value for it in replica.search(NS, limit=50)} == {
            it.key: it.value for it in source.search(NS, limit=50)
        }
    assert probes >= 12


def test_the_key_of_a_namespace_still_arriving_is_not_made_twice(backend: Backend) -> None:
    master = LocalMasterKey(os.urandom(32))
    east, west = backend.store("east/"), backend.store("west/")
    with ObjectStoreStore(east, client_encryption=ClientEncryption.of(master)) as source:
        source.put(NS, "k", {"text": "first"})
    Replicator(east, west, prefix="store/", seed=0, max_lag=0).drain()  # no keys/ yet
    settings = ClientEncryption.of(master)
    with ObjectStoreStore(west, client_encryption=settings, replica_lag=900) as replica:
        assert replica.search(NS) == [] and replica.get(NS, "k") is None
        with pytest.raises(ThreadKeyError, match="not arrived on this replica"):
            replica.put(NS, "k2", {"text": "second"})
        replica.put(("elsewhere",), "k", {"text": "a namespace of its own"})
    plain = ObjectStoreStore(west, client_encryption=ClientEncryption.of(master))
    with plain, pytest.raises(ThreadKeyMissingError):
        plain.search(NS)  # not a replica: a missing key is an error
    Replicator(east, west, seed=0, max_lag=0).drain()
    with ObjectStoreStore(west, client_encryption=settings, replica_lag=900) as replica:
        assert [it.value for it in replica.search(NS)] == [{"text": "first"}]


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
def test_an_item_written_in_both_regions_reads_as_the_newer_write_in_both(
    backend: Backend, encrypted: bool
) -> None:
    settings = _settings_of(encrypted)
    east, west = backend.store("east/"), backend.store("west/")
    pair = BothWays.between(east, west, seed=2, max_lag=0)
    with ObjectStoreStore(east, client_encryption=settings()) as first:
        first.put(NS, "shared", {"text": "before the partition"})
    pair.drain()
    with pair.partitioned():
        with ObjectStoreStore(east, client_encryption=settings()) as older:
            older.put(NS, "shared", {"text": "east, older"})
        with ObjectStoreStore(west, client_encryption=settings()) as newer:
            newer.put(NS, "shared", {"text": "west, newer"})
    # East to west first: each region's item object ends up holding the older
    # write (the copy that landed last), while each index holds both records.
    pair.a_to_b.drain()
    pair.b_to_a.drain()
    pair.drain()
    assert pair.a_to_b.conflicts  # the item object is one key written in both regions
    for region in (east, west):
        with ObjectStoreStore(region, client_encryption=settings(), replica_lag=900) as store:
            got = store.get(NS, "shared")
            assert got is not None and got.value == {"text": "west, newer"}
            assert [it.value for it in store.search(NS)] == [{"text": "west, newer"}]


def test_langgraph_json_sets_the_stores_replica_lag() -> None:
    assert store_options({"replica_lag": 600}) == {"replica_lag": 600.0}
    with pytest.raises(ConfigurationError, match=r"store\.replica_lag"):
        store_options({"replica_lag": 0})
