"""A long-term store namespace's delete (spec §8.4.9), with several store instances on one root.

Each test fails if a deleted item comes back to any reader, if a write made
after the delete by a process that missed it is lost or left unreadable, if
a delete that stopped part-way shows part of the old namespace to search, or
if the namespace's keys (with encryption) survive the delete.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest
from backends import Backend
from faultkit import all_keys as _keys
from langgraph.store.base import InvalidNamespaceError
from longterm_helpers import Caller, Clock

from objstore_saver import MeteredStore, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.format import store_keys
from objstore_saver.longterm.records import PUT, Record, encode_snapshot
from objstore_saver.storage.base import ObjectStore, PutMode
from objstore_saver.testing.faults import FailWhere, FaultyStore, InjectedFaultError

pytestmark = pytest.mark.backends("local", "s3-lean")

U1, SUB, U10 = ("users", "u1"), ("users", "u1", "notes"), ("users", "u10")
IX = "store/ix/_users/_u1/x/"


@pytest.fixture(params=["plain", "encrypted"])
def encryption(request: pytest.FixtureRequest) -> ClientEncryption | bool:
    if request.param == "plain":
        return False
    return ClientEncryption.of(LocalMasterKey(os.urandom(32)))


def _open(root: ObjectStore, encryption: ClientEncryption | bool, **options: Any) -> Any:
    return ObjectStoreStore(root, client_encryption=encryption, **options)


def _seen(store: ObjectStoreStore, ns: tuple[str, ...] = U1) -> dict[str, Any]:
    """What search and get each return of a namespace's own items."""
    found = {i.key: i.value for i in store.search(ns, limit=1000) if tuple(i.namespace) == ns}
    for key in found:
        item = store.get(ns, key)
        assert item is not None and item.value == found[key], f"get and search disagree on {key}"
    return found


def _a_delete_that_stops_at_its_first_delete(
    root: ObjectStore, encryption: ClientEncryption | bool, items: int
) -> None:
    """``items`` items in ``U1``, then its delete, failing at its first DELETE (the items')."""
    with _open(root, encryption) as store:
        for i in range(items):
            store.put(U1, f"k{i}", {"i": i})
    faulty = FaultyStore(root, FailWhere(lambda r: r.op == "delete", times=1))
    with _open(faulty, encryption) as deleter, pytest.raises(InjectedFaultError):
        deleter.delete_namespace(U1)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_deleted_namespace_is_gone_for_every_reader(
    backend: Backend, encryption: ClientEncryption | bool, mode: str
) -> None:
    root = backend.store()
    writer = _open(root, encryption, compact_after=4)
    reader = _open(root, encryption)
    for i in range(10):
        writer.put(U1, f"k{i}", {"i": i, "note": "private"})
    writer.put(U1, "brief", {"x": 1}, ttl=60)
    writer.delete(U1, "k9")
    writer.put(SUB, "n", {"below": True})
    writer.put(U10, "n", {"sibling": True})
    assert len(_seen(reader)) == 10
    items_before = len(_keys(root, "store/it/_users/_u1/i/"))
    assert any("/s/" in k for k in _keys(root, IX)), "the test needs a compacted index"

    done = Caller(writer, mode)("delete_namespace", U1)

    assert (done.namespace, done.items, done.rewritten) == (U1, items_before, [])
    assert done.shredded is (encryption is not False)
    fresh = _open(root, encryption)
    for store in (reader, writer, fresh):
        assert _seen(store) == {}
        assert store.get(U1, "k0") is None
        assert store.list_namespaces(prefix=("users",)) == [SUB, U10]
        assert _seen(store, SUB) == {"n": {"below": True}}
        assert _seen(store, U10) == {"n": {"sibling": True}}
    assert _keys(root, "store/it/_users/_u1/i/") == []
    assert _keys(root, IX) == [IX + "c/" + done.clear]
    if encryption is not False:
        keys = _keys(root, "keys/store/")
        assert "keys/store/_users/_u1/k" not in keys
        assert {"keys/store/_users/_u1/_notes/k", "keys/store/_users/_u10/k"} <= set(keys)
    # Deleting again: a new clear, nothing else to delete.
    again = writer.delete_namespace(U1)
    assert (again.items, again.index_objects) == (0, 1) and again.clear > done.clear
    assert _keys(root, IX) == [IX + "c/" + again.clear]


def test_a_writer_that_missed_the_delete_writes_after_it(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    """The late writer's clock is an hour behind: without put step 7 its record
    would be ended by the clear (search loses it while get shows it), and with
    encryption it would be sealed with the destroyed key."""
    root = backend.store()
    deleter = _open(root, encryption, clock=Clock(2_000_000_000.0))
    late = _open(root, encryption, clock=Clock(2_000_000_000.0 - 3600))
    late.put(U1, "old", {"v": "before"})
    deleter.put(U1, "other", {"v": "before"})
    deleter.delete_namespace(U1)

    late.put(U1, "new", {"v": "after"})
    late.put(U1, "old", {"v": "after"})

    for store in (_open(root, encryption), deleter, late):
        assert _seen(store) == {"new": {"v": "after"}, "old": {"v": "after"}}
        assert store.get(U1, "other") is None
    records = [k for k in _keys(root, IX) if "/r/" in k]
    assert len(records) == 2, records  # the records written first, below the clear, went
    if encryption is not False:
        keys = _keys(root, "keys/store/_users/_u1")
        assert len(keys) == 1 and "%e" in keys[0], keys  # no key of the ended life came back


def test_a_writer_that_lists_the_delete_first_pays_one_list(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    root = backend.store()
    with _open(root, encryption) as first:
        first.put(U1, "a", {"v": 1})
        first.delete_namespace(U1)
    metered = MeteredStore(root)
    with _open(metered, encryption) as fresh:
        fresh.put(U1, "b", {"v": 2})
        fresh.put(U1, "c", {"v": 3})
    # Two puts of 1 GET + 2 PUT + 1 LIST, the clears' LIST once; with
    # encryption, the new life's key object (its create-only PUT).
    counted = metered.snapshot()
    assert counted.delete_requests == 0
    assert counted.list_requests == 3
    assert counted.put_requests == 4 + (encryption is not False)
    assert _seen(_open(root, encryption)) == {"b": {"v": 2}, "c": {"v": 3}}


def test_a_delete_that_stopped_hides_the_namespace_from_search_and_a_rerun_finishes(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    root = backend.store()
    _a_delete_that_stops_at_its_first_delete(root, encryption, 5)
    assert _keys(root, IX + "c/"), "the marker went first"
    with _open(root, encryption) as reader:
        assert [i.key for i in reader.search(U1)] == []
        assert reader.list_namespaces() == []
        # Until the items' DELETE has run, get still finds them (spec §8.4.9).
        assert reader.get(U1, "k0") is not None
    with _open(root, encryption) as deleter:
        done = deleter.delete_namespace(U1)
    assert done.items == 5
    with _open(root, encryption) as reader:
        assert reader.get(U1, "k0") is None and _seen(reader) == {}
    assert _keys(root, IX) == [IX + "c/" + done.clear]
    if encryption is not False:
        assert _keys(root, "keys/store/_users/_u1") == []


def test_an_interrupted_shred_is_finished_by_the_next_delete(backend: Backend) -> None:
    root = backend.store()
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    with _open(root, settings) as store:
        store.put(U1, "k", {"secret": 1})
    faulty = FaultyStore(
        root, FailWhere(lambda r: r.op == "delete" and r.key.startswith("keys/"), times=1)
    )
    with _open(faulty, settings) as deleter, pytest.raises(InjectedFaultError):
        deleter.delete_namespace(U1)
    assert "keys/store/_users/_u1/k" in _keys(root, "keys/")
    with _open(root, settings) as reader:
        assert reader.get(U1, "k") is None and _seen(reader) == {}
    with _open(root, settings) as deleter:
        deleter.delete_namespace(U1)
    assert _keys(root, "keys/") == []


def test_a_put_from_a_clock_ahead_that_landed_before_the_marker_is_written_again(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    """Clear step 4: a writer whose clock runs an hour ahead puts just before the
    marker lands, so its record is above the clear while step 3 deletes its
    item and, with encryption, step 5 destroys the key that sealed it. The
    clear writes it again: get and search agree, and every reader opens it."""
    root = backend.store()
    ahead = _open(root, encryption, clock=lambda: time.time() + 3600)
    ahead.put(U1, "early", {"v": 0})

    def before_the_marker(request: Any) -> None:
        if request.op == "put" and "/x/c/" in request.key and not raced:
            raced.append(request.key)
            ahead.put(U1, "raced", {"v": 1})

    raced: list[str] = []
    with _open(FaultyStore(root, before_the_marker), encryption) as deleter:
        done = deleter.delete_namespace(U1)
    assert raced and done.rewritten == ["raced"]
    for store in (_open(root, encryption), ahead):
        assert _seen(store) == {"raced": {"v": 1}}


def test_a_snapshot_compacted_from_before_the_delete_is_ignored_then_collected(
    backend: Backend,
) -> None:
    """A compaction that listed the index before the marker and stored its snapshot
    after it (with a version above the clear's) must not bring the old items back."""
    root = backend.store()
    store = ObjectStoreStore(root, client_encryption=False, compact_after=2, index_grace=0)
    store.put(U1, "old", {"v": "before"})
    done = store.delete_namespace(U1)
    stale = (
        IX + "s/" + store_keys.snapshot_name(store._ctx.versions.next(above=done.clear), 1)
    )  # no clear in its name: built from a listing without the marker
    before = "0" * 20 + "-00000000"  # a record version below the clear
    old = Record(U1, "old", before, PUT, {"v": "before"}, 1, 1, before)
    root.put(stale, encode_snapshot(U1, [], [old]), PutMode.CREATE)
    reader = ObjectStoreStore(root, client_encryption=False)
    assert _seen(reader) == {} and reader.get(U1, "old") is None
    for i in range(4):  # a compaction of the new life
        store.put(U1, f"n{i}", {"i": i})
    names = [k.rsplit("/", 1)[1] for k in _keys(root, IX + "s/")]
    assert stale.rsplit("/", 1)[1] not in names
    assert names and all(store_keys.snapshot_clear(n) == done.clear for n in names)
    assert set(_seen(reader)) == {"n0", "n1", "n2", "n3"}


def test_writers_in_several_processes_during_a_delete(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    """Three writers put distinct keys while a fourth instance deletes the namespace:
    every put that began after the delete returned is visible, every put that
    returned before the delete began is gone, and get and search agree on all."""
    root = backend.store()
    writers = [_open(root, encryption) for _ in range(3)]
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def write(n: int) -> None:
        for i in range(2000):  # bounded; stopped once enough puts began after the delete
            if stop.is_set():
                return
            key = f"w{n}-{i}"
            began = time.monotonic()
            writers[n].put(U1, key, {"n": n, "i": i})
            with lock:
                spans[key] = (began, time.monotonic())

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    while len(spans) < 12:
        time.sleep(0.01)
    with _open(root, encryption) as deleter:
        start = time.monotonic()
        deleter.delete_namespace(U1)
        end = time.monotonic()
    # Under load the delete can outlast a fixed pause: wait for puts begun after it.
    deadline = end + 60
    while time.monotonic() < deadline:
        with lock:
            if sum(began > end for began, _ in spans.values()) >= 6:
                break
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    with _open(root, encryption) as reader:
        seen = _seen(reader)
    after = {k for k, (b, _) in spans.items() if b > end}
    before = {k for k, (_, e) in spans.items() if e < start}
    assert after, "no put began after the delete: the test proved nothing"
    assert after <= set(seen)
    assert not before & set(seen)
    for w in writers:
        w.close()


@pytest.mark.parametrize("bad", [(), ("",), ("users", 7), "users", None])
def test_a_malformed_namespace_is_refused_naming_it(backend: Backend, bad: Any) -> None:
    root = backend.store()
    with ObjectStoreStore(root, client_encryption=False) as store:
        with pytest.raises(InvalidNamespaceError, match="cannot delete namespace") as info:
            store.delete_namespace(bad)
        assert repr(bad) in str(info.value)
    assert _keys(root, "") == []


def test_verify_counts_what_a_stopped_delete_left_and_checks_the_markers(
    backend: Backend, encryption: ClientEncryption | bool
) -> None:
    """verify (spec §8.4.8): the leftovers of a delete that stopped after its marker
    are unswept, not problems; a marker that is not one is a problem naming it."""
    from objstore_saver import ObjectStoreSaver

    root = backend.store()
    _a_delete_that_stops_at_its_first_delete(root, encryption, 3)
    with ObjectStoreSaver(root, client_encryption=encryption) as saver:
        report = saver.verify(read_data=True)
    assert report.ok, report.problems
    # three items and three records of the ended life; the marker is in force
    assert (report.store_unswept, report.store_index_objects) == (6, 1)
    marker = _keys(root, IX + "c/")[0]
    root.put(IX + "c/" + "9" * 20 + "-00000000", root.get(marker), PutMode.CREATE)
    with ObjectStoreSaver(root, client_encryption=encryption) as saver:
        report = saver.verify(read_data=True)
    assert [(p.kind, p.key.rsplit("/", 1)[1][:20]) for p in report.problems] == [
        ("unreadable", "9" * 20)
    ]
