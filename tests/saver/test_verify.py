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
from payloads import incompressible_text

from objstore_saver import ObjectStoreSaver
from objstore_saver.errors import ConfigurationError
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import digest_of
from objstore_saver.format.keys import manifest_beside
from objstore_saver.storage import MeteredStore, ObjectStore, PutMode
from objstore_saver.verify import Depth


# Both S3 transports: verify --read-data reads every object back (ranged GETs, listings
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


def _values_alone(saver: ObjectStoreSaver, thread: str, parent: dict | None = None) -> dict:
    """A checkpoint of five incompressible 250 KB values: over 1 MiB, so they stand alone."""
    big = {f"v{i}": random.Random(i).randbytes(250_000) for i in range(5)}
    return put_values(saver, thread, big, parent=parent)


def _object_keys(store: ObjectStore, thread: str) -> list[str]:
    return all_keys(store, k.objects_prefix(thread))


def _kind(store: ObjectStore, key: str) -> str:
    return msgpack.unpackb(store.get(key), raw=False)["k"]


def test_healthy_store_is_clean_and_counted(saver: ObjectStoreSaver, store: ObjectStore) -> None:
    _chat(saver, "t1", turns=70)  # 140 messages: segments of 128, 8 and merges of 32
    _chat(saver, "t10", turns=3)
    report = saver.verify(read_data=True)
    assert report.ok, report.problems
    assert report.threads == 2
    assert report.manifests == 73
    # Write objects: each turn's put_writes (two regular writes) is one write group.
    assert report.writes == 73
    assert report.objects == len(_object_keys(store, "t1")) + len(_object_keys(store, "t10"))
    assert report.orphan_objects == 0
    # The list is inline in each manifest and its segments are embedded in the
    # manifests that sealed or merged them, as is each turn's new blob value
    # (format version 2): the objects standing alone are the big value's
    # parts, and every segment and value was checked.
    assert {_kind(store, key) for key in _object_keys(store, "t1")} == {"parts", "part"}
    assert report.embedded_objects >= 17 + 73  # the 17 seals (merges on top) and the blobs
    json.dumps(report.to_dict())
    one = saver.verify("t10", read_data=True)
    assert one.ok and one.threads == 1 and one.manifests == 3


async def test_async_verify_matches_sync(saver: ObjectStoreSaver) -> None:
    _chat(saver, "t1", turns=3)
    assert (await saver.averify("t1", read_data=True)).to_dict() == saver.verify(
        "t1", read_data=True
    ).to_dict()


@pytest.mark.parametrize("kind", ["part", "value", "parts"])
def test_missing_object_is_reported_with_its_referrer(
    saver: ObjectStoreSaver, store: ObjectStore, kind: str
) -> None:
    _values_alone(saver, "t1", _chat(saver, "t1", turns=10))
    victim = next(key for key in _object_keys(store, "t1") if _kind(store, key) == kind)
    store.delete([victim])
    report = saver.verify("t1", read_data=True)
    missing = [p for p in report.problems if p.kind == "missing"]
    assert [p.key for p in missing] == [victim]
    assert "threads/" in missing[0].detail  # names who referenced it


def test_corrupted_truncated_and_swapped_objects_fail_their_digest(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    _values_alone(saver, "t1", _chat(saver, "t1"))
    objs = _object_keys(store, "t1")
    flipped, truncated, swapped = objs[0], objs[1], objs[2]
    data = bytearray(store.get(flipped))
    data[len(data) // 2] ^= 0xFF
    store.put(flipped, bytes(data), PutMode.OVERWRITE)
    store.put(truncated, store.get(truncated)[:-7], PutMode.OVERWRITE)
    store.put(swapped, store.get(objs[3]), PutMode.OVERWRITE)
    report = saver.verify("t1", read_data=True)
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
    report = saver.verify("t1", read_data=True)
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
    report = saver.verify("t1", read_data=True)
    assert [(p.key, p.kind) for p in report.problems] == [
        (k.object_key_in(pfx, digest), "wrong-kind")
    ]


def test_segment_count_disagreeing_with_its_list_is_a_shape_problem(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
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
    report = saver.verify("t1", read_data=True)
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
    report = saver.verify("t1", read_data=True)
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
    report = saver.verify("t1", read_data=True)
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
    report = saver.verify(read_data=True)
    assert sorted((p.key, p.kind) for p in report.problems) == sorted(
        [(stray, "unknown-key"), (bad_object, "unknown-key")]
    )


# --- values located in manifests (format version 2) ---------------------------------------


def _located_chat(saver: ObjectStoreSaver, thread: str, turns: int = 12) -> dict:
    """A chat whose messages do not compress: each is a ``value`` object over 128 bytes.

    Each is embedded in the manifest of the put that added it; later
    manifests locate it there, from their list's tail and from the segments
    their seals and merges embed (spec §4.0, §4.4).
    """
    messages: list[Any] = []
    cfg = None
    for t in range(turns):
        messages = [
            *messages,
            HumanMessage(incompressible_text(400, 2 * t), id=f"h{t}"),
            AIMessage(incompressible_text(400, 2 * t + 1), id=f"a{t}"),
        ]
        cfg = put_values(saver, thread, {"messages": messages}, parent=cfg, metadata={"step": t})
    assert cfg is not None
    return cfg


def _manifests(store: ObjectStore, thread: str) -> dict[str, codec.Manifest]:
    """The thread's manifests, newest first."""
    listed = all_keys(store, k.manifests_prefix(thread))
    return {key: codec.decode_manifest(store.get(key), key) for key in listed if is_manifest(key)}


def _segment_value(store: ObjectStore, thread: str) -> tuple[str, bytes, dict[bytes, bytes]]:
    """A value only segments locate, in an older manifest: its key, its digest, what it embeds.

    Returns the manifest embedding the value (not the head, whose tail would
    locate it too), the value's digest and that manifest's embedded objects.
    """
    ms = _manifests(store, thread)
    hkey, head = next(iter(ms.items()))
    lst = head.channels["messages"]
    assert isinstance(lst, codec.InlineList) and lst.obj.segments
    tails = {e.digest for m in ms.values() for e in _tail(m)}
    for g in lst.obj.segments:
        assert g.loc is not None and g.loc in ms
        seg = codec.decode_object(codec.embedded_objects(ms[g.loc])[g.digest], g.loc)
        assert isinstance(seg, codec.SegmentObj)
        for item in seg.items:
            assert isinstance(item, codec.Ref) and item.at is not None
            mkey = manifest_beside(hkey, item.at)
            if mkey != hkey and item.digest not in tails and mkey in ms:
                return mkey, item.digest, codec.embedded_objects(ms[mkey])
    raise AssertionError("no value located only by segments")


def _tail(m: codec.Manifest) -> list[codec.Ref]:
    e = m.channels["messages"]
    assert isinstance(e, codec.InlineList)
    return [t for t in e.obj.tail if isinstance(t, codec.Ref)]


def _without_embedded(store: ObjectStore, key: str, digest: bytes) -> None:
    """Rewrite manifest ``key`` without the object ``digest`` (as a writer short of room)."""
    fields = msgpack.unpackb(store.get(key), raw=False)
    fields["e"] = [b for b in fields["e"] if digest_of(b) != digest]
    store.put(key, msgpack.packb(fields, use_bin_type=True), PutMode.OVERWRITE)


def test_located_values_resolve_in_their_manifests_with_no_request_more(
    store: ObjectStore,
) -> None:
    with ObjectStoreSaver(store) as saver:
        _located_chat(saver, "t1")
    ms = _manifests(store, "t1")
    # Every message is a value embedded in a manifest, located by the tails and segments.
    assert not _object_keys(store, "t1")
    embedded = [codec.decode_object(b, "e") for m in ms.values() for b in m.embedded]
    values = [o for o in embedded if isinstance(o, codec.ValueObj)]
    assert len(values) >= 24  # the 24 messages (and a few checkpoint values)
    assert any(o.items for o in embedded if isinstance(o, codec.SegmentObj))
    metered = MeteredStore(store)
    with ObjectStoreSaver(metered) as fresh:
        report = fresh.verify("t1", read_data=True)
    assert report.ok, report.problems
    assert report.objects == 0 and report.orphan_objects == 0
    every = [b for m in ms.values() for b in m.embedded]
    assert report.embedded_objects == len(every)
    assert report.embedded_bytes == sum(len(b) for b in every)
    # One GET a manifest: a value located in a manifest verify read is not read again.
    assert metered.snapshot().get_requests == len(ms)


@pytest.mark.parametrize("how", ["deleted", "not-embedded"])
def test_a_located_value_stored_alone_is_found_there(store: ObjectStore, how: str) -> None:
    """Its manifest deleted by prune (which stores what it embeds first), or short of room."""
    with ObjectStoreSaver(store) as saver:
        _located_chat(saver, "t1")
    mkey, digest, held = _segment_value(store, "t1")
    pfx = k.thread_prefix("t1")
    if how == "deleted":
        for d, body in held.items():
            store.put(k.object_key_in(pfx, d), body, PutMode.CREATE)
        store.delete([mkey])
    else:
        store.put(k.object_key_in(pfx, digest), held[digest], PutMode.CREATE)
        _without_embedded(store, mkey, digest)
    with ObjectStoreSaver(store) as fresh:
        report = fresh.verify("t1", read_data=True)
    assert report.ok, report.problems
    # Reached through the fallback: not orphans.
    assert report.objects == (len(held) if how == "deleted" else 1)
    assert report.orphan_objects == 0


@pytest.mark.parametrize("how", ["deleted", "not-embedded"])
def test_a_located_value_held_nowhere_names_both_keys(store: ObjectStore, how: str) -> None:
    with ObjectStoreSaver(store) as saver:
        _located_chat(saver, "t1")
    mkey, digest, held = _segment_value(store, "t1")
    alone = k.object_key_in(k.thread_prefix("t1"), digest)
    if how == "deleted":
        for d, body in held.items():  # all but the value: only it goes missing
            if d != digest:
                store.put(k.object_key_in(k.thread_prefix("t1"), d), body, PutMode.CREATE)
        store.delete([mkey])
    else:
        _without_embedded(store, mkey, digest)
    with ObjectStoreSaver(store) as fresh:
        report = fresh.verify("t1", read_data=True)
    assert [(p.key, p.kind) for p in report.problems] == [(alone, "missing")]
    assert mkey in report.problems[0].detail and alone in report.problems[0].detail
    # The referrer is the segment, in the manifest that embeds it.
    assert "(embedded object " in report.problems[0].detail


def test_a_located_value_that_is_another_kind_is_reported(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _located_chat(saver, "t1")
    ms = _manifests(store, "t1")
    hkey, head = next(iter(ms.items()))
    lst = head.channels["messages"]
    assert isinstance(lst, codec.InlineList)
    g = next(g for g in lst.obj.segments if g.loc not in (None, hkey))
    assert g.loc is not None
    # The head says a value of its is the segment an older manifest embeds.
    fields = msgpack.unpackb(store.get(hkey), raw=False)
    at = k.checkpoint_id_of_manifest_key(g.loc)
    fields["channels"]["other"] = codec.entry_to_msgpack(codec.Ref("b", g.digest, at), hkey)
    store.put(hkey, msgpack.packb(fields, use_bin_type=True), PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as fresh:
        report = fresh.verify("t1", read_data=True)
    assert [(p.key, p.kind) for p in report.problems] == [(g.loc, "wrong-kind")]
    assert f"{g.digest.hex()} is a segment, not a value" in report.problems[0].detail


def test_a_value_located_in_a_write_is_unreadable(store: ObjectStore) -> None:
    """Locations resolve in a manifest's namespace: a write has none (spec §4.0)."""
    with ObjectStoreSaver(store) as saver:
        saver.put_writes(_located_chat(saver, "t1", turns=2), [("x", 1), ("y", 2)], task_id="t")
    ms = _manifests(store, "t1")
    hkey, head = next(iter(ms.items()))
    [wkey] = [key for key in all_keys(store, k.manifests_prefix("t1")) if is_write(key)]
    value = next(d for d in codec.embedded_objects(head))
    fields = msgpack.unpackb(store.get(wkey), raw=False)
    at = k.checkpoint_id_of_manifest_key(hkey)
    fields["w"][0][2] = codec.entry_to_msgpack(codec.Ref("b", value, at))
    store.put(wkey, msgpack.packb(fields, use_bin_type=True), PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as fresh:
        report = fresh.verify("t1", read_data=True)
    assert [(p.key, p.kind) for p in report.problems] == [(wkey, "unreadable")]
    assert value.hex() in report.problems[0].detail


# --- the two depths: the listing's check, and --read-data (all or a share) ---------------
#
# These work on the stored bytes without decoding them, so they hold with client-side
# encryption too (OBJSTORE_SAVER_ENCRYPTION_KEY set): an object's raw key is then its
# sealed name.


def _alone_thread(saver: ObjectStoreSaver, thread: str, checkpoints: int = 4) -> None:
    """``checkpoints`` checkpoints of five values each stored alone, their manifests' references."""
    cfg = None
    for c in range(checkpoints):
        big = {f"v{i}": random.Random(c * 5 + i).randbytes(250_000) for i in range(5)}
        cfg = put_values(saver, thread, big, parent=cfg)
    assert cfg is not None
    saver.put_writes(cfg, [("x", 1), ("y", 2)], task_id="w")


def _object_gets(metered: MeteredStore) -> list[str]:
    return [e.key for e in metered.log if e.op == "get" and "/objects/" in e.key]


def _fresh_verify(store: ObjectStore, **depth: Any) -> tuple[Any, list[str]]:
    """verify("t1") by a saver that remembers nothing; the keys of objects/ it read."""
    metered = MeteredStore(store, log=True)
    with ObjectStoreSaver(metered) as fresh:
        report = fresh.verify("t1", **depth)
    return report, _object_gets(metered)


def test_the_default_depth_reads_no_content_object(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1")
        _chat(saver, "t1", turns=3)  # and a parts index over parts
    objs = _object_keys(store, "t1")
    assert len(objs) >= 20
    report, read = _fresh_verify(store)
    assert report.ok, report.problems
    assert read == []  # not one GET under objects/
    assert (report.objects, report.bytes, report.objects_not_read) == (0, 0, len(objs))
    assert report.manifests == 7 and report.writes == 4
    assert report.orphan_objects is None and report.orphan_bytes is None  # not counted
    out = report.to_dict()
    assert (out["depth"], out["read_data_subset"]) == ("default", None)
    json.dumps(out)

    full, read = _fresh_verify(store, read_data=True)
    assert full.ok, full.problems
    assert sorted(read) == sorted(objs)  # each object once
    assert (full.objects, full.objects_not_read, full.orphan_objects) == (len(objs), 0, 0)
    assert full.to_dict()["depth"] == "read-data"


def test_the_default_depth_finds_a_missing_content_object(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1", checkpoints=1)
    victim = _object_keys(store, "t1")[2]
    store.delete([victim])
    for depth in ({}, {"read_data": True}):
        report, read = _fresh_verify(store, **depth)
        missing = [p for p in report.problems if p.kind == "missing"]
        assert len(report.problems) == len(missing) == 1, report.problems
        assert missing[0].key.startswith(k.objects_prefix("t1"))
        assert "checkpoints/" in missing[0].detail  # the manifest referring to it
        if not depth:
            assert read == [victim]  # only the check that it is gone (not listed)


@pytest.mark.parametrize("size", [0, 2 * 1024 * 1024 + 8192])
def test_the_default_depth_finds_an_object_of_a_size_no_object_has(
    store: ObjectStore, size: int
) -> None:
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1", checkpoints=1)
    victim = _object_keys(store, "t1")[0]
    store.put(victim, b"\0" * size, PutMode.OVERWRITE)
    report, read = _fresh_verify(store)
    assert [p.kind for p in report.problems] == ["shape"]
    assert f"listed at {size} bytes" in report.problems[0].detail
    assert read == []
    report, _ = _fresh_verify(store, read_data=True)  # its bytes do not hash to its key
    assert [p.kind for p in report.problems] == ["digest"]


def test_both_depths_name_an_unreadable_manifest_and_write(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _chat(saver, "t1", turns=4)
    listed = all_keys(store, k.manifests_prefix("t1"))
    manifest = next(key for key in listed if is_manifest(key))
    write = next(key for key in listed if is_write(key))
    store.put(manifest, store.get(manifest)[:20], PutMode.OVERWRITE)
    store.put(write, b"\xc1 not msgpack", PutMode.OVERWRITE)
    for depth in ({}, {"read_data": True}):
        report, _ = _fresh_verify(store, **depth)
        assert sorted((p.key, p.kind) for p in report.problems) == sorted(
            [(manifest, "unreadable"), (write, "unreadable")]
        )


def test_the_default_depth_does_not_see_inside_content_objects(store: ObjectStore) -> None:
    """A flipped byte in a content object: only a read finds it (restic's ``--read-data``)."""
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1", checkpoints=1)
    victim = _object_keys(store, "t1")[1]
    data = bytearray(store.get(victim))
    data[len(data) // 2] ^= 0xFF
    store.put(victim, bytes(data), PutMode.OVERWRITE)
    assert _fresh_verify(store)[0].ok
    report, _ = _fresh_verify(store, read_data=True)
    assert [p.kind for p in report.problems] == ["digest"]
    shares = [_fresh_verify(store, read_data_subset=f"{i}/3")[0] for i in (1, 2, 3)]
    assert sorted(r.ok for r in shares) == [False, True, True]  # found by its share alone


def test_subsets_read_a_share_each_and_every_object_once(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1", checkpoints=8)
    objs = _object_keys(store, "t1")
    assert len(objs) == 40
    n = 4
    read_by: list[list[str]] = []
    for i in range(1, n + 1):
        report, read = _fresh_verify(store, read_data_subset=f"{i}/{n}")
        assert report.ok, report.problems
        assert report.objects == len(read) and report.objects_not_read == len(objs) - len(read)
        assert report.orphan_objects is None  # a share cannot tell an orphan
        out = report.to_dict()
        assert (out["depth"], out["read_data_subset"]) == ("read-data-subset", f"{i}/{n}")
        read_by.append(read)
    every = [key for share in read_by for key in share]
    assert sorted(every) == sorted(objs)  # each object read once, by one share
    assert all(3 <= len(share) <= 20 for share in read_by), [len(s) for s in read_by]
    # The same share twice reads the same objects.
    assert sorted(_fresh_verify(store, read_data_subset=(2, n))[1]) == sorted(read_by[1])


async def test_async_verify_takes_the_depth(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as saver:
        _alone_thread(saver, "t1", checkpoints=1)
        for depth in ({}, {"read_data": True}, {"read_data_subset": "1/2"}):
            assert (await saver.averify("t1", **depth)).to_dict() == saver.verify(
                "t1", **depth
            ).to_dict()


def test_the_share_of_a_key_is_even_and_the_subset_is_checked() -> None:
    keys_ = [k.object_key_in(k.thread_prefix(f"t{i}"), digest_of(b"%d" % i)) for i in range(8000)]
    for n in (2, 5):
        counts = [
            sum(Depth.of(read_data_subset=(i, n)).reads(key) for key in keys_)
            for i in (1, 2, 3, 4, 5)[:n]
        ]
        assert sum(counts) == len(keys_)
        assert all(abs(c - len(keys_) / n) < 0.1 * len(keys_) / n for c in counts), counts
    assert Depth.of(read_data_subset="1/1") == Depth.of(read_data=True)
    assert not Depth.of().reads(keys_[0]) and Depth.of(read_data=True).reads(keys_[0])
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", (0, 2)):
        with pytest.raises(ConfigurationError, match="--read-data-subset"):
            Depth.of(read_data_subset=bad)
