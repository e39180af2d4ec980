"""verify (the fsck): a healthy store is clean, and each kind of damage is named."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from backends import Backend
from faultkit import all_keys, put_values
from langchain_core.messages import AIMessage, HumanMessage
from layout import is_manifest, is_write

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import keys as k
from objstore_saver.format.codec import digest_of
from objstore_saver.storage import ObjectStore, PutMode


# Both S3 transports: verify reads every object back (ranged GETs, listings
# with start-after), and the async case runs the lean store's own coroutines.
@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store("fsck/")


@pytest.fixture
def saver(store: ObjectStore) -> Iterator[ObjectStoreSaver]:
    with ObjectStoreSaver(store) as s:
        yield s


def _chat(saver: ObjectStoreSaver, thread: str, turns: int = 20) -> dict:
    """A thread with every object kind: lists, chunks, blobs, parts, inline, writes."""
    messages: list[Any] = []
    cfg = None
    for t in range(turns):
        messages = [
            *messages,
            HumanMessage(f"question {t} " + "q" * 300, id=f"h{t}"),
            AIMessage(f"answer {t} " + "a" * 900, id=f"a{t}"),
        ]
        values = {"messages": messages, "step": t, "blob": f"{t}" * 5000}
        if t == turns - 1:
            values["big"] = random.Random(t).randbytes(300 * 1024)  # a parts index
        cfg = put_values(saver, thread, values, parent=cfg, metadata={"step": t})
        saver.put_writes(cfg, [("messages", [AIMessage("w" * 2000)]), ("x", 1)], task_id=f"t{t}")
    assert cfg is not None
    return cfg


def _object_keys(store: ObjectStore, thread: str) -> list[str]:
    return all_keys(store, k.objects_prefix(thread))


def _kind(store: ObjectStore, key: str) -> str:
    return msgpack.unpackb(store.get(key), raw=False)["k"]


def test_healthy_store_is_clean_and_counted(saver: ObjectStoreSaver, store: ObjectStore) -> None:
    _chat(saver, "t1", turns=70)  # 140 messages: segments of 128, 8 and merges of 32
    _chat(saver, "t10", turns=3)
    report = saver.verify()
    assert report.ok, report.problems
    assert report.threads == 2
    assert report.manifests == 73
    # Write objects: each turn's put_writes (two regular writes) is one write group.
    assert report.writes == 73
    assert report.objects == len(_object_keys(store, "t1")) + len(_object_keys(store, "t10"))
    assert report.orphan_objects == 0
    # The list is inline in each manifest and its segments are embedded in the
    # manifests that sealed or merged them (format version 2): the objects
    # standing alone are values and parts, and every segment was checked.
    assert {_kind(store, key) for key in _object_keys(store, "t1")} == {"value", "parts", "part"}
    assert report.embedded_objects >= 17  # the 17 seals; merges come on top
    json.dumps(report.to_dict())
    one = saver.verify("t10")
    assert one.ok and one.threads == 1 and one.manifests == 3


async def test_async_verify_matches_sync(saver: ObjectStoreSaver) -> None:
    _chat(saver, "t1", turns=3)
    assert (await saver.averify("t1")).to_dict() == saver.verify("t1").to_dict()


@pytest.mark.parametrize("kind", ["part", "value", "parts"])
def test_missing_object_is_reported_with_its_referrer(
    saver: ObjectStoreSaver, store: ObjectStore, kind: str
) -> None:
    _chat(saver, "t1", turns=10)
    victim = next(key for key in _object_keys(store, "t1") if _kind(store, key) == kind)
    store.delete([victim])
    report = saver.verify("t1")
    missing = [p for p in report.problems if p.kind == "missing"]
    assert [p.key for p in missing] == [victim]
    assert "threads/" in missing[0].detail  # names who referenced it


def test_corrupted_truncated_and_swapped_objects_fail_their_digest(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    _chat(saver, "t1")
    objs = _object_keys(store, "t1")
    flipped, truncated, swapped = objs[0], objs[1], objs[2]
    data = bytearray(store.get(flipped))
    data[len(data) // 2] ^= 0xFF
    store.put(flipped, bytes(data), PutMode.OVERWRITE)
    store.put(truncated, store.get(truncated)[:-7], PutMode.OVERWRITE)
    store.put(swapped, store.get(objs[3]), PutMode.OVERWRITE)
    report = saver.verify("t1")
    assert sorted((p.key, p.kind) for p in report.problems) == sorted(
        [(flipped, "digest"), (truncated, "digest"), (swapped, "digest")]
    )
    assert not report.ok


def test_unreadable_manifests_and_writes_are_named(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    _chat(saver, "t1", turns=4)
    listed = all_keys(store, k.manifests_prefix("t1"))
    manifests = [key for key in listed if is_manifest(key)]
    writes = [key for key in listed if is_write(key)]
    store.put(manifests[0], store.get(manifests[0])[:20], PutMode.OVERWRITE)
    newer = msgpack.unpackb(store.get(manifests[1]), raw=False)
    newer["f"] = 3
    store.put(manifests[1], msgpack.packb(newer, use_bin_type=True), PutMode.OVERWRITE)
    store.put(writes[0], b"\xc1 not msgpack", PutMode.OVERWRITE)
    report = saver.verify("t1")
    by_key = {p.key: p for p in report.problems}
    assert set(by_key) == {manifests[0], manifests[1], writes[0]}
    assert all(p.kind == "unreadable" for p in report.problems)
    assert "format version 3" in by_key[manifests[1]].detail


def test_reference_to_an_object_of_another_kind_is_reported(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    # A list entry that points at a plain value object, correctly addressed.
    value = msgpack.packb({"f": 1, "k": "value", "p": ["json", "raw", b"1"]}, use_bin_type=True)
    digest = digest_of(value)
    pfx = k.thread_prefix("t1")
    store.put(k.object_key_in(pfx, digest), value, PutMode.CREATE)
    cfg = put_values(saver, "t1", {"small": 1})
    key = k.manifest_key("t1", "", cfg["configurable"]["checkpoint_id"])
    manifest = msgpack.unpackb(store.get(key), raw=False)
    manifest["channels"]["messages"] = ["l", digest]
    store.put(key, msgpack.packb(manifest, use_bin_type=True), PutMode.OVERWRITE)
    report = saver.verify("t1")
    assert [(p.key, p.kind) for p in report.problems] == [
        (k.object_key_in(pfx, digest), "wrong-kind")
    ]


def test_segment_count_disagreeing_with_its_list_is_a_shape_problem(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    from objstore_saver.format import codec

    _chat(saver, "t1", turns=10)
    head = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert head is not None
    head_key = k.manifest_key("t1", "", head.config["configurable"]["checkpoint_id"])
    entry = codec.decode_manifest(store.get(head_key), head_key).channels["messages"]
    assert isinstance(entry, codec.InlineList) and entry.obj.segments
    first = entry.obj.segments[0]
    # A later manifest says the first segment holds 4 times its elements.
    lying = codec.SegmentRef(first.digest, first.count * 4, first.loc)
    obj = entry.obj
    forged = codec.InlineList(
        codec.ListObj(obj.count + 3 * first.count, (), obj.tail, (lying, *obj.segments[1:]))
    )
    cfg = put_values(saver, "t1", {"small": 2})
    key = k.manifest_key("t1", "", cfg["configurable"]["checkpoint_id"])
    manifest = msgpack.unpackb(store.get(key), raw=False)
    manifest["channels"]["messages"] = codec.entry_to_msgpack(forged, key)
    store.put(key, msgpack.packb(manifest, use_bin_type=True), PutMode.OVERWRITE)
    report = saver.verify("t1")
    assert [p.kind for p in report.problems] == ["shape"]
    assert first.digest.hex() in report.problems[0].key + report.problems[0].detail
    assert key in report.problems[0].detail


def test_node_count_disagreeing_with_a_version_1_list_is_a_shape_problem(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    """As an earlier release stored a list: a list object over nodes of chunks."""
    cfg = put_values(saver, "t1", {"small": 1})
    pfx = k.thread_prefix("t1")

    def stored(obj: dict[str, Any]) -> bytes:
        body = msgpack.packb(obj, use_bin_type=True)
        store.put(k.object_key_in(pfx, digest_of(body)), body, PutMode.CREATE)
        return digest_of(body)

    chunk = stored({"f": 1, "k": "chunk", "x": [["i", "msgpack", "raw", b"\x01"]] * 8})
    node = stored({"f": 1, "k": "node", "c": [[chunk, 8]] * 4})  # holds 32 elements
    lst = stored({"f": 1, "k": "list", "n": 64, "c": [[node, 64]], "x": []})
    key = k.manifest_key("t1", "", cfg["configurable"]["checkpoint_id"])
    manifest = msgpack.unpackb(store.get(key), raw=False)
    manifest["channels"]["messages"] = ["l", lst]
    store.put(key, msgpack.packb(manifest, use_bin_type=True), PutMode.OVERWRITE)
    report = saver.verify("t1")
    assert [(p.key, p.kind) for p in report.problems] == [(k.object_key_in(pfx, node), "shape")]
    assert k.object_key_in(pfx, lst) in report.problems[0].detail


def test_orphans_are_counted_not_reported_as_corruption(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    _chat(saver, "t1", turns=3)
    orphan = msgpack.packb({"f": 1, "k": "value", "p": ["json", "raw", b"2"]}, use_bin_type=True)
    store.put(k.object_key_in(k.thread_prefix("t1"), digest_of(orphan)), orphan, PutMode.CREATE)
    manifests = [key for key in all_keys(store, k.manifests_prefix("t1")) if is_manifest(key)]
    store.delete([manifests[-1]])  # the oldest: its writes become orphans
    report = saver.verify("t1")
    assert report.ok, report.problems
    assert report.orphan_objects >= 1
    assert report.orphan_bytes >= len(orphan)
    assert report.orphan_writes == 1  # the input task's write group


def test_unknown_key_under_a_thread_is_reported(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    put_values(saver, "t1", {"small": 1})
    stray = k.thread_prefix("t1") + "notes/readme"
    store.put(stray, b"hello", PutMode.CREATE)
    bad_object = k.thread_prefix("t1") + "objects/xyz"
    store.put(bad_object, b"hello", PutMode.CREATE)
    report = saver.verify()
    assert sorted((p.key, p.kind) for p in report.problems) == sorted(
        [(stray, "unknown-key"), (bad_object, "unknown-key")]
    )
