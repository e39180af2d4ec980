"""Saver behaviour the conformance suite does not reach: conflicts, lost
responses, corruption, hostile identifiers, isolation and the prune sweep."""

from __future__ import annotations

from collections.abc import Iterator

import msgpack
import pytest
from backends import Backend
from deleted import not_tombstones
from faultkit import all_keys, put_values
from langgraph.checkpoint.base import empty_checkpoint
from payloads import HOSTILE_IDS, incompressible_text
from standalone_values import (
    ALONE_KINDS,
    embedded_body,
    put_embedded,
    put_located,
    rewrite_embedded,
)

from objstore_saver import (
    CheckpointConflictError,
    CorruptObjectError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjectStoreSaver,
    UnsupportedFormatError,
)
from objstore_saver.format import keys as k
from objstore_saver.storage import ObjectStore, PutMode
from objstore_saver.storage.base import ObjectExistsError

pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store("saver/")


@pytest.fixture
def saver(store: ObjectStore) -> Iterator[ObjectStoreSaver]:
    with ObjectStoreSaver(store) as s:
        yield s


@pytest.mark.parametrize("thread", HOSTILE_IDS)
def test_hostile_ids_round_trip_and_stay_in_their_prefix(
    saver: ObjectStoreSaver, store: ObjectStore, thread: str
) -> None:
    ns = "parent:1|child:" + thread[:50]
    stored = put_values(saver, thread, {"v": "x" * 3000, "small": 1}, ns=ns)
    saver.put_writes(stored, [("ch", thread)], task_id=thread[:300] or "task")
    tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ns}})
    assert tup is not None
    assert tup.config["configurable"]["thread_id"] == thread
    assert tup.config["configurable"]["checkpoint_ns"] == ns
    assert tup.checkpoint["channel_values"] == {"v": "x" * 3000, "small": 1}
    assert tup.pending_writes == [(thread[:300] or "task", "ch", thread)]
    listed = list(saver.list({"configurable": {"thread_id": thread}}))
    assert [t.config["configurable"]["checkpoint_ns"] for t in listed] == [ns]
    assert all(key.startswith(k.thread_prefix(thread)) for key in all_keys(store))


def test_delete_thread_is_a_prefix_sweep_that_spares_neighbours(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    for thread in ("t1", "t10", "t1/x", "t"):
        stored = put_values(saver, thread, {"v": "y" * 2000 + thread})
        saver.put_writes(stored, [("c", thread)], "task")
    before = {t: all_keys(store, k.thread_prefix(t)) for t in ("t10", "t1/x", "t")}
    saver.delete_thread("t1")
    assert not_tombstones(all_keys(store, k.thread_prefix("t1"))) == []
    assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is None
    for thread, keys_before in before.items():
        assert all_keys(store, k.thread_prefix(thread)) == keys_before
        tup = saver.get_tuple({"configurable": {"thread_id": thread}})
        assert tup is not None and tup.checkpoint["channel_values"]["v"].endswith(thread)


def test_list_none_spans_every_thread_and_namespace(saver: ObjectStoreSaver) -> None:
    expected = set()
    for thread in ("a", "b", "a/b", "ü"):
        for ns in ("", "sub:1"):
            cfg = put_values(saver, thread, {"n": thread + ns}, ns=ns)
            expected.add((thread, ns, cfg["configurable"]["checkpoint_id"]))
    listed = {
        (
            t.config["configurable"]["thread_id"],
            t.config["configurable"]["checkpoint_ns"],
            t.config["configurable"]["checkpoint_id"],
        )
        for t in saver.list(None)
    }
    assert listed == expected
    assert len(list(saver.list(None, limit=3))) == 3
    assert len(list(saver.list(None, filter={"step": 0}))) == len(expected)


def test_manifest_retry_after_lost_response_succeeds(saver: ObjectStoreSaver) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": 1}
    cp["channel_versions"] = {"v": 1}
    config = {"configurable": {"thread_id": "lost", "checkpoint_ns": ""}}
    first = saver.put(config, cp, {"step": 0}, {"v": 1})
    # The same put again stands for a retried request whose first response was
    # lost: the manifest exists with the very same bytes, so it is ours.
    again = saver.put(config, cp, {"step": 0}, {"v": 1})
    assert first == again
    assert len(list(saver.list(config))) == 1


def test_different_manifest_under_same_id_is_a_conflict(
    saver: ObjectStoreSaver, store: ObjectStore
) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": 1}
    cp["channel_versions"] = {"v": 1}
    config = {"configurable": {"thread_id": "clash", "checkpoint_ns": ""}}
    saver.put(config, cp, {"step": 0}, {"v": 1})
    key = k.manifest_key("clash", "", cp["id"])
    stored = store.get(key)
    cp["channel_values"] = {"v": 2}
    with pytest.raises(CheckpointConflictError, match="clash") as info:
        saver.put(config, cp, {"step": 0}, {"v": 1})
    assert info.value.key == key
    assert store.get(key) == stored  # nothing was overwritten


# What stands alone at objects/<H> (a value a manifest past 1 MiB moved out, parts,
# a part, a pending write's value), and a value embedded in a manifest.
ALONE = pytest.mark.parametrize("kind", list(ALONE_KINDS))


@ALONE
def test_corrupted_object_raises_naming_the_key(store: ObjectStore, kind: str) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = ALONE_KINDS[kind](writer, store, "corrupt", 1)
    body = store.get(victim.key)
    store.put(victim.key, body[:-5] + b"xxxxx", PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError) as info:
        reader.get_tuple(victim.config)
    assert info.value.key == victim.key


def test_corrupted_embedded_value_raises_naming_its_manifest(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = put_embedded(writer, store, "corrupt", 1)
    body = embedded_body(store, victim.holder, victim.digest)
    rewrite_embedded(store, victim.holder, victim.digest, body[:-5] + b"xxxxx")
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError) as info:
        reader.get_tuple(victim.config)
    # The manifest no longer embeds the value: the reader looked for it alone.
    assert info.value.key == victim.key
    assert victim.holder in str(info.value)


def test_corrupted_manifest_of_a_located_value_raises_naming_it(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = put_located(writer, store, "corrupt", 1)
    body = store.get(victim.holder)
    store.put(victim.holder, b"\xc1" + body[1:], PutMode.OVERWRITE)  # not MessagePack
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError) as info:
        reader.get_tuple(victim.config)
    assert info.value.key == victim.holder


@ALONE
def test_object_replaced_by_another_objects_bytes_is_detected(
    store: ObjectStore, kind: str
) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = ALONE_KINDS[kind](writer, store, "swap", 1)
        other = ALONE_KINDS[kind](writer, store, "other", 2)
    store.put(victim.key, store.get(other.key), PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError, match="SHA-256"):
        reader.get_tuple(victim.config)


def test_embedded_value_replaced_by_another_ones_bytes_is_detected(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = put_embedded(writer, store, "swap", 1)
        other = put_embedded(writer, store, "other", 2)
    theirs = embedded_body(store, other.holder, other.digest)
    rewrite_embedded(store, victim.holder, victim.digest, theirs)
    # An embedded object is used only under the address a reference names.
    with ObjectStoreSaver(store) as reader, pytest.raises(MissingObjectError) as info:
        reader.get_tuple(victim.config)
    assert info.value.key == victim.key


@ALONE
def test_missing_object_is_an_error_not_an_absence(store: ObjectStore, kind: str) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = ALONE_KINDS[kind](writer, store, "missing", 1)
    store.delete([victim.key])
    with ObjectStoreSaver(store) as reader, pytest.raises(MissingObjectError) as info:
        reader.get_tuple(victim.config)
    assert info.value.key == victim.key
    assert info.value.referenced_by in victim.referrers


def test_located_value_whose_manifest_is_gone_is_an_error_not_an_absence(
    store: ObjectStore,
) -> None:
    with ObjectStoreSaver(store) as writer:
        victim = put_located(writer, store, "missing", 1)
    store.delete([victim.holder])
    with ObjectStoreSaver(store) as reader, pytest.raises(MissingObjectError) as info:
        reader.get_tuple(victim.config)
    # Not where it was located, nor alone at objects/<H>: both are named.
    assert info.value.key == victim.key
    assert info.value.referenced_by.startswith(victim.referenced_by)
    assert victim.holder in str(info.value)


def test_truncated_and_newer_format_manifests_raise(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        stored = put_values(writer, "fmt", {"v": 1})
    key = k.manifest_key("fmt", "", stored["configurable"]["checkpoint_id"])
    body = store.get(key)
    store.put(key, body[: len(body) // 2], PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError, match=key):
        reader.get_tuple({"configurable": {"thread_id": "fmt"}})
    newer = msgpack.unpackb(body)
    newer["f"] = 3
    store.put(key, msgpack.packb(newer), PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as reader, pytest.raises(UnsupportedFormatError, match="3"):
        reader.get_tuple({"configurable": {"thread_id": "fmt"}})


def test_manifest_under_another_checkpoints_key_is_corrupt(store: ObjectStore) -> None:
    with ObjectStoreSaver(store) as writer:
        a = put_values(writer, "moved", {"v": 1})
        b = put_values(writer, "moved", {"v": 2}, parent=a)
    key_a = k.manifest_key("moved", "", a["configurable"]["checkpoint_id"])
    key_b = k.manifest_key("moved", "", b["configurable"]["checkpoint_id"])
    store.put(key_b, store.get(key_a), PutMode.OVERWRITE)
    with ObjectStoreSaver(store) as reader, pytest.raises(CorruptObjectError, match="another"):
        reader.get_tuple(b)


def test_bad_identifiers_raise_clear_errors(saver: ObjectStoreSaver) -> None:
    with pytest.raises(InvalidIdentifierError, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidIdentifierError, match="thread_id must be a string"):
        saver.get_tuple({"configurable": {"thread_id": 7}})
    with pytest.raises(InvalidIdentifierError, match="checkpoint_id"):
        saver.put_writes({"configurable": {"thread_id": "x"}}, [("c", 1)], "task")
    with pytest.raises(InvalidIdentifierError, match="checkpoint_id"):
        put_values(saver, "x", {"v": 1}, checkpoint_id="c" * 200)


def test_special_writes_replace_and_regular_writes_keep_the_first(
    saver: ObjectStoreSaver,
) -> None:
    stored = put_values(saver, "w", {"v": 1})
    saver.put_writes(stored, [("a", "first"), ("__error__", "e1")], "task")
    saver.put_writes(stored, [("a", "second"), ("__error__", "e2")], "task")
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert sorted(tup.pending_writes) == [("task", "__error__", "e2"), ("task", "a", "first")]


def test_copy_thread_copies_values_writes_and_runs(saver: ObjectStoreSaver) -> None:
    a = put_values(saver, "src", {"v": "q" * 3000}, metadata={"step": 0, "run_id": "run-1"})
    # Incompressible: the write's value is an object the copy must copy too.
    saver.put_writes(a, [("c", incompressible_text(30_000, 2))], "task")
    b = put_values(
        saver, "src", {"v": "r" * 3000}, parent=a, metadata={"step": 1, "run_id": "run-1"}
    )
    saver.copy_thread("src", "dst")
    src = list(saver.list({"configurable": {"thread_id": "src"}}))
    dst = list(saver.list({"configurable": {"thread_id": "dst"}}))
    assert [t.checkpoint for t in src] == [t.checkpoint for t in dst]
    assert [t.pending_writes for t in src] == [t.pending_writes for t in dst]
    assert dst[0].config["configurable"]["thread_id"] == "dst"
    assert (
        dst[0].parent_config["configurable"]["checkpoint_id"] == a["configurable"]["checkpoint_id"]
    )
    saver.copy_thread("src", "dst")  # idempotent
    saver.delete_for_runs(["run-1"])
    assert list(saver.list({"configurable": {"thread_id": "dst"}})) == []
    assert list(saver.list({"configurable": {"thread_id": "src"}})) == []
    assert b["configurable"]["thread_id"] == "src"


def test_create_only_put_of_store_raises_for_existing(store: ObjectStore) -> None:
    store.put("x/y", b"1", PutMode.CREATE)
    with pytest.raises(ObjectExistsError):
        store.put("x/y", b"2", PutMode.CREATE)


async def test_async_api_matches_sync(saver: ObjectStoreSaver) -> None:
    cfg = await saver.aput(
        {"configurable": {"thread_id": "async", "checkpoint_ns": ""}},
        {**empty_checkpoint(), "channel_values": {"v": "x" * 2000}, "channel_versions": {"v": 1}},
        {"step": 0},
        {"v": 1},
    )
    await saver.aput_writes(cfg, [("c", 1)], "task", "path")
    a = await saver.aget_tuple(cfg)
    assert a == saver.get_tuple(cfg)
    listed = [t async for t in saver.alist({"configurable": {"thread_id": "async"}})]
    assert listed == list(saver.list({"configurable": {"thread_id": "async"}}))
    await saver.acopy_thread("async", "async2")
    await saver.aprune(["async2"], strategy="delete")
    assert await saver.aget_tuple({"configurable": {"thread_id": "async2"}}) is None
    await saver.adelete_thread("async")
    assert await saver.aget_tuple({"configurable": {"thread_id": "async"}}) is None


def test_longest_checkpoint_id_is_storable(saver: ObjectStoreSaver) -> None:
    cid = "é" * 60  # 120 UTF-8 bytes: its reversed segment is 241 characters
    stored = put_values(saver, "long-id", {"v": 1}, checkpoint_id=cid)
    tup = saver.get_tuple({"configurable": {"thread_id": "long-id"}})
    assert tup is not None and tup.config == stored
    assert tup.config["configurable"]["checkpoint_id"] == cid
