"""Long lists stay flat (spec §4.4): full segments go under indexes, bounded however long.

A list grows by a few elements a checkpoint for over a thousand elements;
every checkpoint reads back whole by a saver that remembers nothing, each
manifest's list entry holds at most one index reference and 3 open
segments, and the bytes an append writes do not grow with the list.
Indexes are placed like segments: embedded in the manifest that makes them,
stored alone before a prune deletes that manifest, walked by verify.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgpack
import pytest
from backends import S3_BACKENDS, Backend
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_manifest

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import IndexObj, InlineList, Manifest
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore

#: A small fanout makes indexes of two levels out of a list of a thousand elements.
FANOUT = 4
PER_PUT = 3


def _element(i: int) -> bytes:
    # Every third incompressible (a value object, located), the others inline.
    if i % 3 == 0:
        return random.Random(i).randbytes(300)
    return b"element %d " % i + b"x" * 280


def _put(saver: ObjectStoreSaver, thread: str, config: dict | None, n: int) -> dict:
    config = config or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_values"] = {"items": [_element(i) for i in range(n)]}
    cp["channel_versions"] = {"items": n}
    return saver.put(config, cp, {"n": n}, {"items": n})  # type: ignore[arg-type]


def _items(store: ObjectStore, config: dict) -> list[bytes]:
    with ObjectStoreSaver(store) as reader:
        tup = reader.get_tuple(config)
    assert tup is not None
    return tup.checkpoint["channel_values"]["items"]


def _manifests(store: ObjectStore, thread: str) -> dict[str, Manifest]:
    infos = store.list(k.thread_prefix(thread) + "checkpoints/").objects
    return {
        o.key: codec.decode_manifest(store.get(o.key), o.key) for o in infos if is_manifest(o.key)
    }


def _grow(store: ObjectStore, thread: str, puts: int, check_every: int = 0) -> list[int]:
    """``puts`` checkpoints of a list growing by PER_PUT; bytes written by each put."""
    metered = MeteredStore(store)
    written = []
    config = None
    with ObjectStoreSaver(metered) as saver:
        for p in range(1, puts + 1):
            before = metered.snapshot().bytes_sent
            config = _put(saver, thread, config, p * PER_PUT)
            written.append(metered.snapshot().bytes_sent - before)
            if check_every and (p % check_every == 0 or p == puts):
                assert _items(store, config) == [_element(i) for i in range(p * PER_PUT)], p
    return written


def _index_levels(obj: IndexObj, embedded: dict[bytes, bytes]) -> int:
    inner = [r for r in obj.refs if r.index]
    if not inner:
        return 1
    below = codec.decode_object(embedded[inner[0].digest], "index", "n")
    assert isinstance(below, IndexObj)
    return 1 + _index_levels(below, embedded)


@pytest.fixture
def fanout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "INDEX_FANOUT", FANOUT)


@pytest.mark.backends("local", *S3_BACKENDS)
def test_a_long_list_reads_back_at_every_checkpoint_with_bounded_entries(
    backend: Backend, fanout: None
) -> None:
    store = backend.store("long/")
    puts = 400  # 1,200 elements: 18 full segments of 64, two levels of full indexes
    _grow(store, "t", puts, check_every=25)
    manifests = _manifests(store, "t")
    assert len(manifests) == puts
    embedded: dict[bytes, bytes] = {}
    for m in manifests.values():
        embedded |= codec.embedded_objects(m)
    for key, m in manifests.items():
        entry = m.channels["items"]
        if isinstance(entry, codec.Inline):  # the first put's 3 elements: one small value
            continue
        assert isinstance(entry, InlineList)
        refs = entry.obj.segments
        # At most one index (first), then at most 3 open segments, each below full size.
        assert sum(g.index for g in refs) <= 1 and not any(g.index for g in refs[1:])
        open_ = [g for g in refs if not g.index]
        assert len(open_) <= 3 and all(g.count < codec.SEGMENT_FULL_LEN for g in open_)
        assert len(entry.obj.tail) < codec.CHUNK_LEN
        # A bounded number of embedded objects and bytes per manifest.
        assert len(m.embedded) <= 3 + 3 + PER_PUT, key
        for body in m.embedded:
            obj = codec.decode_object(body, key)
            if isinstance(obj, IndexObj):
                # A full index holds FANOUT references, the root at most FANOUT-1 per level.
                assert len(obj.refs) <= 2 * (FANOUT - 1), key
            else:
                assert len(body) <= 64 * 400
    head = manifests[min(manifests)]
    root_ref = head.channels["items"].obj.segments[0]  # type: ignore[union-attr]
    assert root_ref.index and root_ref.count == 18 * codec.SEGMENT_FULL_LEN
    root = codec.decode_object(embedded[root_ref.digest], "root", "n")
    # 18 = 16 + 2: the root, a full index of level 2 over 4 of level 1, and 2 segments.
    assert isinstance(root, IndexObj) and [r.count for r in root.refs] == [1024, 64, 64]
    assert _index_levels(root, embedded) == 3


def test_bytes_per_append_stay_flat(tmp_path: Path) -> None:
    # With the real fanout: appends around element 1,500 write no more than
    # appends around element 300, seals, merges and index rewrites included.
    written = _grow(LocalStore(tmp_path / "store"), "t", 560)
    early = sum(written[80:160]) / 80  # elements 240-480
    late = sum(written[480:560]) / 80  # elements 1,440-1,680
    assert late <= early * 1.1, (early, late)
    assert max(written) < 64 * 1024


def test_prune_keeps_a_long_list_readable(tmp_path: Path, fanout: None) -> None:
    store = LocalStore(tmp_path / "store")
    _grow(store, "t", 380)
    everything = [_element(i) for i in range(380 * PER_PUT)]
    manifests = _manifests(store, "t")
    head_key = min(manifests)
    older = [m for key, m in manifests.items() if key != head_key]
    doomed: dict[bytes, bytes] = {}
    for m in older:
        doomed |= codec.embedded_objects(m)
    indexes = {d for d, b in doomed.items() if isinstance(codec.decode_object(b, "x"), IndexObj)}
    assert indexes  # the head's indexes sit in older manifests
    with ObjectStoreSaver(store) as saver:
        report = saver.prune(["t"], keep_last=1, min_age=0)
        assert report["checkpoints_deleted"] == 379
        assert list(_manifests(store, "t")) == [head_key]
        # Every index and segment an older manifest embedded is stored alone, found there.
        listed = {o.key for o in store.list(k.objects_prefix("t")).objects}
        pfx = k.thread_prefix("t")
        assert {k.object_key_in(pfx, d) for d in doomed} <= listed
        config = {"configurable": {"thread_id": "t"}}
        assert _items(store, config) == everything
        with ObjectStoreSaver(store) as reader:
            assert len(list(reader.list(config))) == 1
        assert saver.verify("t", read_data=True).ok
        # Swept once unreached: the head still reads (its indexes are reached).
        plan = saver._prune_plan(["t"], "keep_latest", 1, 0.0, False, datetime.now(UTC))
        saver._driver.run(plan)
        later = datetime.now(UTC) + timedelta(hours=2)
        plan = saver._prune_plan(["t"], "keep_latest", 1, 0.0, False, later)
        saver._driver.run(plan)
        assert _items(store, config) == everything
        # The writer goes on from the pruned head: a saver that remembers nothing.
        with ObjectStoreSaver(store) as writer:
            tup = writer.get_tuple(config)
            assert tup is not None
            _put(writer, "t", dict(tup.config), 381 * PER_PUT)
        assert _items(store, config) == [_element(i) for i in range(381 * PER_PUT)]
        assert saver.verify("t", read_data=True).ok


def _index_in_older_manifest(store: ObjectStore) -> tuple[str, bytes]:
    """A manifest embedding an index the head refers to, and that index's digest."""
    manifests = _manifests(store, "t")
    head = manifests[min(manifests)]
    root = head.channels["items"].obj.segments[0]  # type: ignore[union-attr]
    assert root.index and root.loc is not None and root.loc != min(manifests)
    return root.loc, root.digest


def test_verify_walks_indexes_and_finds_one_missing_or_corrupt(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _grow(store, "t", 30)  # 90 elements: one full segment under a root index
    # The head's root index sits in the manifest that sealed the full segment.
    with ObjectStoreSaver(store) as saver:
        clean = saver.verify("t", read_data=True)
        assert clean.ok, clean.problems
    mkey, digest = _index_in_older_manifest(store)
    raw = msgpack.unpackb(store.get(mkey), raw=False)
    body = next(b for b in raw["e"] if codec.digest_of(b) == digest)
    index = msgpack.unpackb(body, raw=False)

    # Its bytes altered in the manifest: another hash, so the list finds no index there.
    index["c"] = index["c"] + index["c"]
    raw["e"] = [b for b in raw["e"] if b != body] + [msgpack.packb(index, use_bin_type=True)]
    bad = _rewritten(tmp_path, store, mkey, raw)
    with ObjectStoreSaver(bad) as saver:
        report = saver.verify("t", read_data=True)
    assert not report.ok
    assert any(p.kind == "missing" and digest.hex() in p.detail for p in report.problems)

    # Missing from its manifest (and not stored alone): missing, naming both.
    raw["e"] = [b for b in raw["e"] if codec.digest_of(b) != digest and b != body]
    gone = _rewritten(tmp_path, store, mkey, raw, "gone")
    with ObjectStoreSaver(gone) as saver:
        report = saver.verify("t", read_data=True)
        assert any(p.kind == "missing" and digest.hex() in p.detail for p in report.problems)
        with pytest.raises(Exception, match=digest.hex()):
            saver.get_tuple({"configurable": {"thread_id": "t"}})


def _rewritten(
    tmp_path: Path, store: ObjectStore, mkey: str, raw: dict[str, Any], name: str = "bad"
) -> ObjectStore:
    """A copy of the store with the manifest ``mkey`` replaced by ``raw``."""
    copy = LocalStore(tmp_path / name)
    for o in store.list("").objects:
        copy.put(o.key, store.get(o.key))
    copy.put(mkey, msgpack.packb(raw, use_bin_type=True))
    return copy


def test_an_index_count_that_disagrees_is_a_shape_problem(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _grow(store, "t", 30)
    mkey, digest = _index_in_older_manifest(store)
    raw = msgpack.unpackb(store.get(mkey), raw=False)
    # The lists locate the index by its hash: a changed index is another
    # object. Change the count every list gives it instead, in the head.
    manifests = _manifests(store, "t")
    head_key = min(manifests)
    head = msgpack.unpackb(store.get(head_key), raw=False)
    entry = head["channels"]["items"]
    assert entry[2][0][0] == digest
    entry[2][0][1] += 8
    entry[1] += 8
    bad = _rewritten(tmp_path, store, head_key, head)
    with ObjectStoreSaver(bad) as saver:
        report = saver.verify("t", read_data=True)
        assert any(p.kind == "shape" and digest.hex() in p.detail for p in report.problems)
        with pytest.raises(Exception, match="index does not hold"):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert raw  # the index's own manifest is untouched


# --- lists written before indexes ------------------------------------------------------

#: What releases before indexes made of 427 elements: merges up to 2,048, every
#: segment's reference in the entry (53 runs of 8 = 0b110101: 256, 128, 32, 8).
OLD_COUNTS = (256, 128, 32, 8)


def _old_layout_thread(store: ObjectStore, thread: str) -> tuple[dict, list[bytes]]:
    """A checkpoint stored as releases before indexes stored it, built from the entry shapes.

    Its list's four segments are embedded in its manifest and located there
    (``""``); their element entries are inline payloads.
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from objstore_saver.format import value_encoding

    serde = JsonPlusSerializer()
    n = sum(OLD_COUNTS) + 3
    values = [b"old element %d " % i + b"y" * 280 for i in range(n)]
    entries = [["i", *codec.make_payload(*serde.dumps_typed(v)).to_msgpack()] for v in values]
    cid = "1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"
    mkey = k.manifest_key(thread, "", cid)
    bodies, refs, start = [], [], 0
    for count in OLD_COUNTS:
        body = codec.pack_object({"f": 2, "k": "segment", "x": entries[start : start + count]})
        bodies.append(body)
        refs.append(codec.SegmentRef(codec.digest_of(body), count, mkey))
        start += count
    tail = tuple(codec.decode_entry(e, "tail") for e in entries[start:])
    listed = codec.InlineList(codec.ListObj(n, (), tail, tuple(refs)))
    cp = empty_checkpoint()
    cp["channel_versions"] = {"items": n}
    bare = {key: v for key, v in cp.items() if key not in ("id", "channel_values")}
    store.put(
        mkey,
        codec.encode_manifest(
            thread_id=thread,
            checkpoint_ns="",
            checkpoint_id=cid,
            parent_checkpoint_id=None,
            checkpoint=value_encoding.encode_serialized(*serde.dumps_typed(bare)).entry,
            metadata=value_encoding.encode_serialized(*serde.dumps_typed({})).entry,
            channels={"items": listed},
            embedded=bodies,
        ),
    )
    # The entry as stored: references of 256 and 128 elements, no index.
    raw = msgpack.unpackb(store.get(mkey), raw=False)["channels"]["items"]
    assert [r[1:] for r in raw[2]] == [[c, ""] for c in OLD_COUNTS]
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}}
    return config, values


@pytest.mark.backends("local", *S3_BACKENDS)
def test_a_list_of_the_layout_before_indexes_reads_and_grows(backend: Backend) -> None:
    store = backend.store("old/")
    config, values = _old_layout_thread(store, "t")
    assert _items(store, config) == values
    with ObjectStoreSaver(store) as saver:
        assert saver.verify("t", read_data=True).ok
    # A put on top re-encodes the list in the current layout: full segments
    # of 64 under a root index, and reads back whole.
    with ObjectStoreSaver(store) as writer:
        grown = [*values, b"new element"]
        cp = empty_checkpoint()
        cp["channel_values"] = {"items": grown}
        cp["channel_versions"] = {"items": len(grown)}
        new = writer.put(config, cp, {}, {"items": len(grown)})  # type: ignore[arg-type]
    manifests = _manifests(store, "t")
    head = manifests[k.manifest_key("t", "", new["configurable"]["checkpoint_id"])]
    entry = head.channels["items"]
    assert isinstance(entry, InlineList)
    assert [(g.count, g.index) for g in entry.obj.segments] == [
        (384, True),
        (32, False),
        (8, False),
    ]
    assert _items(store, {"configurable": {"thread_id": "t"}}) == grown
    assert _items(store, config) == values
    with ObjectStoreSaver(store) as saver:
        assert saver.verify("t", read_data=True).ok


def test_an_encrypted_long_list_reads_back_and_prunes(tmp_path: Path) -> None:
    # Indexes are sealed with the manifest that embeds them, or alone once a
    # prune stored them at objects/<H>: read back either way.
    import os

    from objstore_saver.crypto import ClientEncryption
    from objstore_saver.crypto.master_keys import LocalMasterKey

    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    store = LocalStore(tmp_path / "store")
    config = None
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        for p in range(1, 101):  # 300 elements: 4 full segments under a root index
            config = _put(saver, "t", config, p * PER_PUT)
    everything = [_element(i) for i in range(300)]
    latest = {"configurable": {"thread_id": "t"}}
    with ObjectStoreSaver(store, client_encryption=settings) as cold:
        tup = cold.get_tuple(latest)
        assert tup is not None and tup.checkpoint["channel_values"]["items"] == everything
        assert cold.prune(["t"], keep_last=1, min_age=0)["checkpoints_deleted"] == 99
    with ObjectStoreSaver(store, client_encryption=settings) as cold:
        tup = cold.get_tuple(latest)
        assert tup is not None and tup.checkpoint["channel_values"]["items"] == everything
        assert cold.verify("t", read_data=True).ok
