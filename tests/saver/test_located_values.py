"""Values embedded in manifests and found through located references (spec §4.0, §6.1 step 3).

A list element over 128 bytes compressed, or a channel value of 1-256 KiB,
travels in the manifest of the put that makes it; later manifests and the
list's segments name that manifest. These tests check that every location a
put writes can be read, whatever the writer remembers: a cold writer, a
thread deleted and written again under the same id, a put that failed, a
manifest too large to embed, and prune deleting the manifests that embed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_manifest
from payloads import incompressible_text

from objstore_saver import ObjectStoreSaver
from objstore_saver.errors import CheckpointConflictError
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import InlineList, Manifest, Ref, SegmentObj
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore

THREAD = "located"


def _turn(i: int, size: int = 600) -> list[BaseMessage]:
    # Incompressible: each message is a value object, never inline in the list.
    return [
        HumanMessage(incompressible_text(size, 2 * i), id=f"h{i}"),
        AIMessage(incompressible_text(size, 2 * i + 1), id=f"a{i}"),
    ]


def _put(
    saver: ObjectStoreSaver, config: dict[str, Any], messages: list[BaseMessage], step: int
) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": list(messages)}
    cp["channel_versions"] = {"messages": step + 1}
    return saver.put(config, cp, {"step": step}, {"messages": step + 1})  # type: ignore[arg-type]


def _chat(
    saver: ObjectStoreSaver, turns: int, *, start: int = 0, config: dict | None = None, messages=()
) -> tuple[dict[str, Any], list[BaseMessage]]:
    config = config or {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    messages = list(messages)
    for i in range(start, start + turns):
        messages += _turn(i)
        config = _put(saver, config, messages, i)
    return config, messages


def _contents(messages: list[BaseMessage]) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in messages]


def _head(store: ObjectStore, thread: str = THREAD) -> list[tuple[str | None, Any]]:
    """The head's messages as a saver that remembers nothing reads them."""
    with ObjectStoreSaver(store) as reader:
        tup = reader.get_tuple({"configurable": {"thread_id": thread}})
        assert reader.verify(read_data=True).ok
    assert tup is not None
    return _contents(tup.checkpoint["channel_values"]["messages"])


def _manifests(store: ObjectStore, thread: str = THREAD) -> dict[str, Manifest]:
    infos = store.list(k.thread_prefix(thread) + "checkpoints/").objects
    return {
        o.key: codec.decode_manifest(store.get(o.key), o.key) for o in infos if is_manifest(o.key)
    }


def _objects(store: ObjectStore, thread: str = THREAD) -> list[str]:
    return [o.key for o in store.list(k.objects_prefix(thread)).objects]


def test_a_chat_of_long_messages_writes_one_object_per_put(tmp_path: Path) -> None:
    store = MeteredStore(LocalStore(tmp_path))
    with ObjectStoreSaver(store) as saver:
        config, messages = _chat(saver, 3)
        store.reset()
        config, messages = _chat(saver, 20, start=3, config=config, messages=messages)
        assert store.snapshot().put_requests == 20
    assert _objects(store) == []
    head = next(iter(_manifests(store).values()))
    entry = head.channels["messages"]
    assert isinstance(entry, InlineList)
    # The tail's values are located (the head embeds the newest two), and so
    # are the elements of the segments, in the manifests that added them.
    assert entry.obj.tail and all(isinstance(e, Ref) and e.at for e in entry.obj.tail)
    assert head.embedded
    assert _head(store) == _contents(messages)


def test_a_cold_writer_makes_the_same_segments_without_reading_values(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        config, messages = _chat(saver, 18)
    metered = MeteredStore(store)
    with ObjectStoreSaver(metered) as cold:
        # A put straight after a restart: no get_tuple has filled the memory.
        config, messages = _chat(cold, 1, start=18, config=config, messages=messages)
        got = metered.snapshot()
    # The parent manifest, then the manifest of its one segment (not the values).
    assert got.requests["put"] == 1
    assert got.requests["get"] == 2
    head = next(iter(_manifests(store).values()))
    # 38 messages: a segment of 32 made by an earlier put and located there,
    # and a tail of 6; the cold put embeds only its two new messages.
    assert len(head.embedded) == 2
    assert _head(store) == _contents(messages)


def test_a_thread_deleted_and_written_again_reads_back(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        _chat(saver, 10)
        saver.delete_thread(THREAD)
        # The same messages again: the writer remembers their segments, whose
        # locations named manifests that are gone.
        _, messages = _chat(saver, 10)
    assert _head(store) == _contents(messages)


def test_a_failed_put_leaves_no_location_behind(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        config, messages = _chat(saver, 3)
        # Another writer's checkpoint under the id this put will use.
        taken = empty_checkpoint()
        with ObjectStoreSaver(store) as other:
            other.put(config, {**taken, "channel_values": {}}, {}, {})
        cp = empty_checkpoint()
        cp["id"] = taken["id"]
        cp["channel_values"] = {"messages": messages + _turn(3)}
        cp["channel_versions"] = {"messages": 4}
        with pytest.raises(CheckpointConflictError):
            saver.put(config, cp, {}, {"messages": 4})
        # The same messages under a fresh id: located there, not in the
        # other writer's manifest.
        config, messages = _chat(saver, 3, start=3, config=config, messages=messages)
    assert _head(store) == _contents(messages)


def test_a_manifest_too_large_to_embed_stores_its_values_alone(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    config: dict[str, Any] = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
    # Eight 200 KB messages in one put: a segment whose elements are located
    # in this manifest, which would pass 1 MiB with them.
    messages: list[BaseMessage] = [
        HumanMessage(incompressible_text(200_000, i), id=f"m{i}") for i in range(8)
    ]
    with ObjectStoreSaver(store) as saver:
        config = _put(saver, config, messages, 0)
        messages.append(AIMessage("done " * 60, id="last"))
        _put(saver, config, messages, 1)
    manifests = _manifests(store)
    assert all(len(store.get(key)) <= codec.MANIFEST_BUDGET for key in manifests)
    assert len(_objects(store)) >= 8
    assert _head(store) == _contents(messages)


def test_prune_stores_embedded_values_before_deleting_their_manifests(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        _, messages = _chat(saver, 12)
        doomed = list(_manifests(store))[1:]
        located_elsewhere = {
            item.digest
            for m in list(_manifests(store).values())[1:]
            for body in m.embedded
            if isinstance(obj := codec.decode_object(body, "e"), SegmentObj)
            for item in obj.items
            if isinstance(item, Ref)
        }
        assert located_elsewhere
        plan = saver._prune_plan([THREAD], "keep_latest", 1, 0.0, False, datetime.now(UTC))
        saver._driver.run(plan)
    assert not set(doomed) & set(_manifests(store))
    listed = {key.rsplit("/", 1)[1] for key in _objects(store)}
    assert {d.hex() for d in located_elsewhere} <= listed
    assert _head(store) == _contents(messages)


def test_a_copy_reads_its_located_values_in_its_own_thread(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        _, messages = _chat(saver, 12)
        saver.copy_thread(THREAD, "copy")
        saver.delete_thread(THREAD)
    assert _head(store, "copy") == _contents(messages)
