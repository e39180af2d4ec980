"""ObjectStoreStore (spec §8): round trips, TTL, semantic search, request counts,
hostile input and crashes, on a directory and on S3 (moto), sync and async."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from backends import Backend
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore
from longterm_helpers import DIMS, Caller, Clock, HashEmbeddings, caller

from objstore_saver import InvalidStoreValueError, MeteredStore, ObjectStoreStore
from objstore_saver.format import store_keys
from objstore_saver.longterm import plans
from objstore_saver.longterm.records import PUT, Record, encode_snapshot
from objstore_saver.storage.base import PutMode, StorageError
from objstore_saver.storage.local import LocalStore
from objstore_saver.testing.faults import FailAt, Fault, FaultyStore, InjectedFaultError

MODES = ["sync", "async"]

pytestmark = pytest.mark.backends("local", "s3-lean")


@pytest.fixture(params=MODES)
def st(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Caller]:
    yield from caller(backend.store(), request.param, clock=Clock())


def test_round_trip_and_separation(st: Caller) -> None:
    clock = st.store._ctx.clock
    st("put", ("a",), "k", {"v": 1, "nested": {"x": [1, "two", None, True]}})
    st("put", ("a", "b"), "k", {"v": 2})
    st("put", ("ab",), "k", {"v": 3})
    assert st("get", ("a",), "k").value == {"v": 1, "nested": {"x": [1, "two", None, True]}}
    assert st("get", ("a", "b"), "k").value == {"v": 2}
    assert st("get", ("ab",), "k").value == {"v": 3}
    assert st("get", ("a",), "missing") is None
    assert [i.namespace for i in st("search", ("a",))] == [("a",), ("a", "b")]
    assert st("list_namespaces") == [("a",), ("a", "b"), ("ab",)]
    # created_at survives an update; updated_at moves
    first = st("get", ("a",), "k")
    clock.advance(5)  # type: ignore[attr-defined]
    st("put", ("a",), "k", {"v": 10})
    again = st("get", ("a",), "k")
    assert again.value == {"v": 10}
    assert again.created_at == first.created_at
    assert (again.updated_at - first.updated_at).total_seconds() == pytest.approx(5)
    st("delete", ("a",), "k")
    assert st("get", ("a",), "k") is None
    assert st("list_namespaces") == [("a", "b"), ("ab",)]
    # re-created after a delete: a new created_at
    st("put", ("a",), "k", {"v": 11})
    assert st("get", ("a",), "k").created_at > first.created_at


def test_search_filter_order_offset_limit(st: Caller) -> None:
    for i in range(12):
        st("put", ("docs",), f"d{i}", {"n": i, "tag": "even" if i % 2 == 0 else "odd"})
    st("put", ("docs",), "d3", {"n": 3, "tag": "odd", "updated": True})  # keeps position
    keys = [r.key for r in st("search", ("docs",), limit=100)]
    assert keys == [f"d{i}" for i in range(12)]
    got = st("search", ("docs",), filter={"tag": "odd", "n": {"$gte": 5}}, limit=2, offset=1)
    assert [r.key for r in got] == ["d7", "d9"]
    got = st("search", ("docs",), filter={"n": {"$lt": 3, "$ne": 1}})
    assert [r.key for r in got] == ["d0", "d2"]


def test_ttl_expiry_and_refresh(st: Caller) -> None:
    clock = st.store._ctx.clock
    st("put", ("t",), "short", {"v": 1}, ttl=1.0)
    st("put", ("t",), "forever", {"v": 2})
    clock.advance(50)  # type: ignore[attr-defined]
    assert st("get", ("t",), "short", refresh_ttl=False) is not None
    assert st("get", ("t",), "short") is not None  # refreshes: expires 60 s from now
    clock.advance(50)  # type: ignore[attr-defined]
    assert [r.key for r in st("search", ("t",), refresh_ttl=False)] == ["short", "forever"]
    clock.advance(11)  # type: ignore[attr-defined]
    assert st("get", ("t",), "short") is None
    assert [r.key for r in st("search", ("t",))] == ["forever"]
    expired = st.store._driver.run(plans.expired_items(("t",), st.store._ctx.now()))
    assert [(e.namespace, e.key) for e in expired] == [(("t",), "short")]
    swept = st.store._driver.run(plans.sweep_item(st.store._ctx, expired[0]))
    assert swept
    assert st.store._driver.run(plans.expired_items(("t",), st.store._ctx.now())) == []
    assert st("list_namespaces") == [("t",)]
    st("delete", ("t",), "forever")
    assert st("list_namespaces") == []


def test_ttl_config_default(tmp_path: Any) -> None:
    clock = Clock()
    root = LocalStore(tmp_path / "root")
    for st in caller(root, "sync", clock=clock, ttl={"default_ttl": 2}):
        st("put", ("t",), "k", {"v": 1})
        clock.advance(119)
        assert st("get", ("t",), "k", refresh_ttl=False) is not None
        clock.advance(2)
        assert st("get", ("t",), "k") is None


@pytest.mark.parametrize("mode", MODES)
def test_semantic_search_matches_inmemory(mode: str, tmp_path: Any) -> None:
    index = {"dims": DIMS, "embed": HashEmbeddings(), "fields": ["text", "tags"]}
    ref = InMemoryStore(index=index)  # type: ignore[arg-type]
    docs = [
        ("a", {"text": "the cat sat on the mat", "tags": ["pets", "home"]}),
        ("b", {"text": "dogs chase cats in the park"}),
        ("c", {"text": "stock markets fell sharply today", "tags": ["finance"]}),
        ("d", {"text": "a recipe for bread and butter"}),
        ("e", {"other": "no indexed field here"}),
        ("f", {"text": "cat cat cat mat"}),
    ]
    for st in caller(LocalStore(tmp_path / "root"), mode, index=index):
        for key, value in docs:
            st("put", ("docs",), key, value)
            ref.put(("docs",), key, value)
        st("put", ("docs",), "g", {"text": "cat"}, index=False)
        ref.put(("docs",), "g", {"text": "cat"}, index=False)
        only_tags = {"text": "markets and cats", "tags": ["bread", "cat mat"]}
        st("put", ("docs",), "h", only_tags, index=["tags"])
        ref.put(("docs",), "h", only_tags, index=["tags"])
        for q, limit, offset in [("cat on a mat", 10, 0), ("markets", 3, 1), ("bread cats", 7, 2)]:
            ours = st("search", ("docs",), query=q, limit=limit, offset=offset)
            theirs = ref.search(("docs",), query=q, limit=limit, offset=offset)
            assert [r.key for r in ours] == [r.key for r in theirs]
            for a, b in zip(ours, theirs, strict=True):
                if b.score is None:
                    assert a.score is None
                else:
                    assert a.score == pytest.approx(b.score, abs=1e-6)


def _metered(tmp_path: Any, **options: Any) -> tuple[ObjectStoreStore, MeteredStore]:
    meter = MeteredStore(LocalStore(tmp_path / "m"))
    return ObjectStoreStore(meter, **options), meter


def test_request_counts_get_put(tmp_path: Any) -> None:
    store, meter = _metered(tmp_path)
    with store:
        store.put(("n",), "k", {"v": 1})
        meter.reset()
        assert store.get(("n",), "k") is not None
        assert meter.snapshot().requests == {"put": 0, "get": 1, "list": 0, "delete": 0}
        meter.reset()
        store.put(("n",), "k", {"v": 2})
        # GET (created_at) + PUT record + PUT item + LIST index
        assert meter.snapshot().requests == {"put": 2, "get": 1, "list": 1, "delete": 0}
        meter.reset()
        store.delete(("n",), "k")
        # PUT tombstone record + DELETE item + LIST index
        assert meter.snapshot().requests == {"put": 1, "get": 0, "list": 1, "delete": 1}
        for i in range(200):  # compactions included, every put stays bounded
            meter.reset()
            store.put(("n",), f"k{i}", {"v": i})
            assert meter.snapshot().total_requests <= plans.COMPACT_AFTER + 8


def test_the_gets_of_one_batch_are_read_in_one_concurrent_step(tmp_path: Any) -> None:
    """LangGraph batches concurrent ``get``s into one ``batch``: one round trip, not one each."""
    store, meter = _metered(tmp_path)
    with store:
        for k in ("a", "b"):
            store.put(("n",), k, {"v": k})
        sizes: list[list[str]] = []
        run_batch = store._driver._run_batch

        def recording(batch: Any, call: Any = None) -> list[Any]:
            sizes.append([type(op).__name__ for op in batch.ops])
            return run_batch(batch, call)

        store._driver._run_batch = recording  # type: ignore[method-assign]
        meter.reset()
        got = store.batch([GetOp(("n",), "a"), GetOp(("n",), "missing"), GetOp(("n",), "b")])
        assert [None if g is None else g.value for g in got] == [{"v": "a"}, None, {"v": "b"}]
        assert sizes == [["Get", "Get", "Get"]]
        assert meter.snapshot().requests == {"put": 0, "get": 3, "list": 0, "delete": 0}


def test_a_put_encodes_its_value_once_for_record_and_item(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from objstore_saver.longterm import records

    calls: list[str] = []
    real = records.encode_value

    def counting(namespace: Any, key: str, value: Any) -> bytes:
        calls.append(key)
        return real(namespace, key, value)

    with ObjectStoreStore(LocalStore(tmp_path / "root")) as store:
        monkeypatch.setattr(records, "encode_value", counting)
        store.put(("n",), "k", {"text": "x" * 500})
        # the record and the item object carry the same payload, encoded once
        assert calls == ["k"]
        assert store.get(("n",), "k").value == {"text": "x" * 500}


def _bulk_snapshot(store: ObjectStoreStore, ns: tuple[str, ...], n: int, dims: int) -> None:
    """Write a namespace of ``n`` items as one index snapshot (the compactor's encoding)."""
    ctx = store._ctx
    now = ctx.now()
    recs = []
    vec = HashEmbeddings(dims).embed_query("filler words here")
    from objstore_saver.longterm.query import pack_vector

    for i in range(n):
        v = ctx.versions.next()
        recs.append(
            Record(
                ns,
                f"k{i}",
                v,
                PUT,
                {"i": i, "text": "filler"},
                now,
                now,
                v,
                vec={"text": pack_vector(vec)},
            )
        )
    key = store_keys.index_prefix(ns) + "s/" + store_keys.snapshot_name(ctx.versions.next(), n)
    store.store.put(key, encode_snapshot(ns, [], recs), PutMode.CREATE)


@pytest.mark.parametrize("n", [100, 10_000])
def test_search_requests_do_not_grow_with_items(tmp_path: Any, n: int) -> None:
    index = {"dims": DIMS, "embed": HashEmbeddings(), "fields": ["text"]}
    store, meter = _metered(tmp_path, index=index)
    with store:
        _bulk_snapshot(store, ("big",), n, DIMS)
        for i in range(5):  # a few records beyond the snapshot
            store.put(("big",), f"new{i}", {"i": -1, "text": "cat on the mat"})
        meter.reset()
        got = store.search(("big",), filter={"i": {"$gte": n - 3}}, limit=10)
        assert [r.key for r in got] == [f"k{n - 3}", f"k{n - 2}", f"k{n - 1}"]
        # 1 LIST + 1 snapshot GET + 5 record GETs, whatever n is
        assert meter.snapshot().requests == {"put": 0, "get": 6, "list": 1, "delete": 0}
        meter.reset()
        got = store.search(("big",), query="cat mat", limit=3)
        assert {r.key for r in got} <= {f"new{i}" for i in range(5)}
        assert len(got) == 3
        assert meter.snapshot().requests == {"put": 0, "get": 6, "list": 1, "delete": 0}


def test_compaction_bounds_reads_and_deletes_after_grace(tmp_path: Any) -> None:
    store, meter = _metered(tmp_path, compact_after=4, index_grace=0.0)
    with store:
        for i in range(30):
            store.put(("c",), f"k{i % 7}", {"i": i})
        for i in range(3):
            store.delete(("c",), f"k{i}")
        meter.reset()
        got = store.search(("c",), limit=100)
        assert sorted(r.key for r in got) == [f"k{i}" for i in range(3, 7)]
        assert {r.key: r.value["i"] for r in got} == {"k3": 24, "k4": 25, "k5": 26, "k6": 27}
        assert meter.snapshot().get_requests <= 1 + 4 * 4
        keys = [o.key for o in store.store.list("store/ix/_c/x/").objects]
        assert sum("/s/" in k for k in keys) <= 2  # old snapshots deleted (grace 0)
        assert sum("/r/" in k for k in keys) <= 4 * 4 + 1


def test_hostile_labels_and_keys(st: Caller) -> None:
    labels = ["a/b", "ünïcødé 🚀", "x" * 2000, "%2F", "~", "a b"]  # "." is forbidden
    keys = ["", "/", "..", "k/../k", "ü" * 700, "%41", "\n"]
    written = {}
    for i, (label, key) in enumerate(itertools.product(labels[:5], keys)):
        ns = ("root", label) if i % 2 else (label,)
        written[(ns, key)] = {"i": i}
        st("put", ns, key, {"i": i})
    deep = tuple("y" * 190 + str(d) for d in range(6))  # a hashed namespace path
    st("put", deep, "k", {"deep": True})
    assert st("get", deep, "k").value == {"deep": True}
    for (ns, key), value in written.items():
        assert st("get", ns, key).value == value
    found = {(r.namespace, r.key): r.value for r in st("search", (), limit=1000)}
    assert found == {**written, (deep, "k"): {"deep": True}}
    assert [r.key for r in st("search", deep[:3])] == ["k"]
    assert set(st("list_namespaces", limit=1000)) == {ns for ns, _ in written} | {deep}
    assert st("list_namespaces", prefix=deep[:2]) == [deep]
    assert st("list_namespaces", prefix=deep[:2], max_depth=3) == [deep[:3]]


def test_bad_input_names_it(st: Caller) -> None:
    with pytest.raises(InvalidNamespaceError, match=r"a\.b"):
        st("put", ("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="empty"):
        st("put", (), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        st("put", ("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidStoreValueError, match=r"'kk'.*\('users',\)"):
        st("put", ("users",), "kk", ["not", "a", "dict"])
    with pytest.raises(InvalidStoreValueError, match=r"'kk'.*\('users',\).*set"):
        st("put", ("users",), "kk", {"s": {1, 2}})
    with pytest.raises(InvalidStoreValueError, match="not a string"):
        st("put", ("users",), "kk", {"d": {1: "x"}})
    with pytest.raises(InvalidNamespaceError):
        st("batch", [PutOp(("a", ""), "k", {"v": 1})])
    assert st("list_namespaces") == []  # nothing was written


@pytest.mark.parametrize("fault", [Fault.ERROR, Fault.LOST_RESPONSE])
@pytest.mark.parametrize("what", ["put", "update", "delete"])
def test_crash_at_every_request_leaves_old_or_new(tmp_path: Any, what: str, fault: Fault) -> None:
    """A put/delete interrupted at request i: get and search show the old or the new item."""
    old, new = {"v": "old"}, ({"v": "new"} if what != "delete" else None)
    i = 0
    while True:
        root = LocalStore(tmp_path / f"r{i}")
        clean = ObjectStoreStore(root, compact_after=2)
        for k in range(3):  # enough records that the next write compacts
            clean.put(("ns",), f"other{k}", {"k": k})
        if what != "put":
            clean.put(("ns",), "k", old)
        faulty = ObjectStoreStore(FaultyStore(root, FailAt({i}, fault)), compact_after=2)
        try:
            if new is None:
                faulty.delete(("ns",), "k")
            else:
                faulty.put(("ns",), "k", new)
            finished = True
        except InjectedFaultError:
            finished = False
        before = old if what != "put" else None
        got = clean.get(("ns",), "k")
        got_v = got.value if got else None
        hits = [r.value for r in clean.search(("ns",), limit=100) if r.key == "k"]
        allowed = [before, new]
        assert got_v in allowed
        assert (hits[0] if hits else None) in allowed
        assert len([r for r in clean.search(("ns",), limit=100) if r.key.startswith("other")]) == 3
        if finished:
            assert got_v == new and (hits[0] if hits else None) == new
            # the write completed, retrying on the crashed stores converges too
            clean.close()
            faulty.close()
            break
        # retry after the crash converges to the new state
        if new is None:
            clean.delete(("ns",), "k")
        else:
            clean.put(("ns",), "k", new)
        got = clean.get(("ns",), "k")
        assert (got.value if got else None) == new
        clean.close()
        faulty.close()
        i += 1
    assert i >= (3 if what == "delete" else 4)  # interrupted at each of its requests


def test_concurrent_puts_of_one_key_last_writer_wins(backend: Backend) -> None:
    """Two writers race on one key: the item is one writer's whole value, and get and
    search agree on the writer with the greater version (put step 5 repairs the item)."""
    import threading

    root = backend.store()
    writers = [ObjectStoreStore(root, compact_after=3) for _ in range(2)]
    try:
        for rnd in range(12):
            barrier = threading.Barrier(2)
            written: dict[int, dict[str, Any]] = {}

            def write(
                w: int,
                rnd: int = rnd,
                barrier: threading.Barrier = barrier,
                written: dict[int, dict[str, Any]] = written,
            ) -> None:
                value = {"writer": w, "round": rnd, "pad": "x" * (w * 500)}
                barrier.wait()
                written[w] = value
                writers[w].put(("race",), "k", value)

            threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            got = writers[0].get(("race",), "k")
            hits = writers[1].search(("race",), limit=10)
            assert got is not None and got.value in written.values()
            assert [h.value for h in hits] == [got.value]
    finally:
        for w in writers:
            w.close()


def test_wrong_embedding_size_names_the_item(tmp_path: Any) -> None:
    index = {"dims": DIMS + 1, "embed": HashEmbeddings(), "fields": ["text"]}
    with ObjectStoreStore.from_directory(tmp_path, index=index) as store:
        with pytest.raises(ValueError, match=r"'text' of key 'k' in namespace \('n',\)"):
            store.put(("n",), "k", {"text": "hello"})
        assert store.list_namespaces() == []


class _VanishingSnapshots(LocalStore):
    """A directory whose snapshot GETs find nothing the first ``misses`` times."""

    def __init__(self, path: Any, misses: int) -> None:
        super().__init__(path)
        self.misses = misses

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        if "/x/s/" in key and self.misses > 0:
            self.misses -= 1
            from objstore_saver.storage.base import ObjectNotFoundError

            raise ObjectNotFoundError(self.location, key)
        return super().get(key, byte_range)


@pytest.mark.parametrize(("misses", "found"), [(2, True), (3, False)])
def test_search_retries_when_segments_vanish(tmp_path: Any, misses: int, found: bool) -> None:
    """A compaction may delete a segment a reader listed: the reader lists again (3 tries)."""
    with ObjectStoreStore.from_directory(tmp_path, compact_after=2) as writer:
        for i in range(5):
            writer.put(("ns",), f"k{i}", {"i": i})
    flaky = _VanishingSnapshots(tmp_path, misses)
    with ObjectStoreStore(flaky) as reader:
        if found:
            assert len(reader.search(("ns",))) == 5
        else:
            with pytest.raises(StorageError, match=r"namespace prefix \('ns',\)"):
                reader.search(("ns",))


def test_delete_hides_what_an_interrupted_put_left_in_the_index(tmp_path: Any) -> None:
    from objstore_saver.testing.faults import FailWhere

    root = LocalStore(tmp_path)
    item_puts = FailWhere(lambda r: r.op == "put" and "/it/" in r.key, Fault.ERROR, times=1)
    with ObjectStoreStore(FaultyStore(root, item_puts)) as faulty, ObjectStoreStore(root) as s:
        with pytest.raises(InjectedFaultError):
            faulty.put(("n",), "k", {"v": "new"})
        assert s.get(("n",), "k") is None  # the documented window: index ahead of item
        assert [r.value for r in s.search(("n",))] == [{"v": "new"}]
        s.delete(("n",), "k")
        assert s.get(("n",), "k") is None
        assert s.search(("n",)) == []
        assert s.list_namespaces() == []


def test_sweep_spares_an_item_renewed_after_it_was_found(tmp_path: Any) -> None:
    clock = Clock()
    with ObjectStoreStore.from_directory(tmp_path, clock=clock) as store:
        store.put(("t",), "a", {"v": 1}, ttl=1.0)
        store.put(("t",), "b", {"v": 2}, ttl=1.0)
        clock.advance(61)
        found = store._driver.run(plans.expired_items((), store._ctx.now()))
        assert [e.key for e in found] == ["a", "b"]
        store.put(("t",), "a", {"v": 3}, ttl=1.0)  # renewed between listing and sweep
        swept = [store._driver.run(plans.sweep_item(store._ctx, e)) for e in found]
        assert swept == [False, True]
        assert store.get(("t",), "a").value == {"v": 3}
        assert [r.key for r in store.search(("t",))] == ["a"]
        assert store.list_namespaces() == [("t",)]


def test_list_namespaces_reads_nothing_when_the_listing_decides(tmp_path: Any) -> None:
    store, meter = _metered(tmp_path, compact_after=4)
    with store:
        for user in range(20):
            for i in range(user % 7):  # 0..6 items, some past a compaction
                store.put(("users", f"u{user}"), f"k{i}", {"i": i})
        store.put(("users", "temp"), "k", {"i": 0}, ttl=5)  # a TTL: must be read
        store.put(("users", "gone"), "k", {"i": 0})
        store.delete(("users", "gone"), "k")  # deleted: must be read
        meter.reset()
        found = store.list_namespaces(prefix=("users",), limit=100)
        want = sorted([("users", f"u{u}") for u in range(20) if u % 7] + [("users", "temp")])
        assert found == want
        # one LIST; GETs only for the records of the two namespaces the listing
        # cannot decide: temp's put (TTL), gone's put and delete
        assert meter.snapshot().list_requests == 1
        assert meter.snapshot().get_requests == 3


def test_scores_numpy_and_python_paths_agree() -> None:
    from objstore_saver.longterm.query import cosine, pack_vector, scores

    q = [0.5, -1.0, 2.0, 0.0]
    vecs = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, -1.0, 2.0, 0.0], [-3, 1, 0.25, 9]]
    fast = scores(q, [pack_vector(v) for v in vecs])  # one size: the matrix path
    slow = scores(q, [pack_vector(v) for v in vecs] + [pack_vector([1.0])])[:4]  # mixed: Python
    assert fast == pytest.approx(slow, abs=1e-9)
    assert fast == pytest.approx([cosine(q, v) for v in vecs], abs=1e-6)
    assert fast[1] == 0.0 and fast[2] == pytest.approx(1.0)
