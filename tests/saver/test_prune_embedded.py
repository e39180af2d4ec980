"""Deleting a manifest stores its embedded objects alone first (spec §6.9 step 4, §6.8).

A chat's ``messages`` list keeps its sealed segments embedded in the manifest
that sealed them; later manifests locate them there. Prune and
``delete_for_runs`` delete such manifests: the segments must be at
``objects/<H>`` before, or the kept head no longer reads.

The ``verify`` assertions (each test's last) need a ``verify`` that knows
embedded objects and segments.
"""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from backends import S3_BACKENDS, Backend
from faultkit import Crash, CrashAfter
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_manifest

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import InlineList, Manifest
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore

TURNS = 40
LATER = timedelta(hours=2)  # past the default sweep delay of one hour


def _turn(i: int) -> list[BaseMessage]:
    # Short enough to be inline list elements, long enough for the list layout.
    return [
        HumanMessage(f"question {i}: " + "please " * 20, id=f"h{i}"),
        AIMessage(f"answer {i}: " + "sure " * 20, id=f"a{i}"),
    ]


def _chat(
    saver: ObjectStoreSaver,
    thread: str,
    turns: int,
    *,
    start: int = 0,
    config: dict | None = None,
    messages: list[BaseMessage] | None = None,
    run_id: str | None = None,
) -> tuple[dict, list[BaseMessage]]:
    """``turns`` puts, each adding two messages; the last config and every message."""
    config = config or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages = list(messages or [])
    for i in range(start, start + turns):
        messages += _turn(i)
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": i + 1}
        metadata: dict[str, Any] = {"step": i}
        if run_id is not None:
            metadata["run_id"] = run_id
        config = saver.put(config, cp, metadata, {"messages": i + 1})  # type: ignore[arg-type]
    return config, messages


def _manifests(store: ObjectStore, thread: str) -> dict[str, Manifest]:
    """The thread's manifests, newest first, read from the store."""
    infos = store.list(k.thread_prefix(thread) + "checkpoints/").objects
    return {
        o.key: codec.decode_manifest(store.get(o.key), o.key) for o in infos if is_manifest(o.key)
    }


def _located(m: Manifest) -> dict[bytes, str | None]:
    """The segments of a manifest's ``messages`` list and where it locates them."""
    entry = m.channels["messages"]
    assert isinstance(entry, InlineList)
    return {g.digest: g.loc for g in entry.obj.segments}


def _reached(located: Any, objects: dict[bytes, bytes]) -> set[bytes]:
    """The segments and indexes a list's references reach, through its indexes (spec §4.4)."""
    out, stack = set(), list(located)
    while stack:
        d = stack.pop()
        out.add(d)
        obj = codec.decode_object(objects[d], "embedded") if d in objects else None
        if isinstance(obj, codec.IndexObj):
            stack += [r.digest for r in obj.refs]
    return out


def _embedded(manifests: Any) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for m in manifests:
        out |= codec.embedded_objects(m)
    return out


def _contents(messages: list[BaseMessage]) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in messages]


def _head_messages(store: ObjectStore, thread: str) -> list[tuple[str | None, Any]]:
    """The head's messages, read by a saver that remembers nothing."""
    with ObjectStoreSaver(store) as reader:
        tup = reader.get_tuple({"configurable": {"thread_id": thread}})
    assert tup is not None
    return _contents(tup.checkpoint["channel_values"]["messages"])


def _stored_alone(store: ObjectStore, thread: str, digests: Any) -> set[bytes]:
    """Those of ``digests`` stored at ``objects/<H>``, their bytes checked."""
    pfx = k.thread_prefix(thread)
    listed = {o.key for o in store.list(k.objects_prefix(thread)).objects}
    out = set()
    for d in digests:
        key = k.object_key_in(pfx, d)
        if key in listed:
            assert codec.digest_of(store.get(key)) == d
            out.add(d)
    return out


def _prune(saver: ObjectStoreSaver, thread: str, later: timedelta = timedelta(0), **kw: Any):
    """A keep_last=1 prune as if ``later`` had passed on the prune host's clock."""
    plan = saver._prune_plan(
        [thread], "keep_latest", 1, 0.0, kw.pop("dry_run", False), datetime.now(UTC) + later
    )
    assert not kw
    return saver._driver.run(plan)


def _chat_with_doomed_segments(store: ObjectStore, thread: str) -> tuple[list, dict, dict]:
    """A chat whose head locates segments in older manifests.

    Returns its messages, the objects the older manifests embed, and the head.
    """
    with ObjectStoreSaver(store) as saver:
        _, messages = _chat(saver, thread, TURNS)
    manifests = _manifests(store, thread)
    head_key, head = next(iter(manifests.items()))
    older = [m for key, m in manifests.items() if key != head_key]
    doomed = _embedded(older)
    # The scenario holds what it tests: the head relies on older manifests.
    assert {loc for loc in _located(head).values()} - {head_key, None}
    assert doomed and not _stored_alone(store, thread, doomed)
    return messages, doomed, {head_key: head}


# --- prune ------------------------------------------------------------------------------


@pytest.mark.backends("local", *S3_BACKENDS)
def test_prune_stores_embedded_segments_alone_before_deleting_their_manifests(
    backend: Backend,
) -> None:
    store = backend.store("embedded/")
    messages, doomed, head = _chat_with_doomed_segments(store, "chat")

    metered = MeteredStore(store, log=True)
    before = sorted(o.key for o in store.list("").objects)
    with ObjectStoreSaver(metered) as saver:
        dry = saver.prune(["chat"], keep_last=1, min_age=0, dry_run=True)
    assert [e for e in metered.log if e.op in ("put", "delete")] == []
    assert sorted(o.key for o in store.list("").objects) == before
    assert dry["objects_extracted"] == len(doomed) > 0
    assert dry["threads"][0]["objects_extracted"] == len(doomed)

    with ObjectStoreSaver(store) as saver:
        report = saver.prune(["chat"], keep_last=1, min_age=0)
        assert report["objects_extracted"] == len(doomed)
        assert report["checkpoints_deleted"] == TURNS - 1
        assert list(_manifests(store, "chat")) == list(head)
        assert _head_messages(store, "chat") == _contents(messages)
        assert _stored_alone(store, "chat", doomed) == set(doomed)
        with ObjectStoreSaver(store) as reader:
            assert len(list(reader.list({"configurable": {"thread_id": "chat"}}))) == 1
        assert saver.verify("chat", read_data=True).ok


def test_extracted_segments_are_marked_and_swept_once_nothing_reaches_them(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    messages, doomed, head = _chat_with_doomed_segments(store, "chat")
    reached = _reached(_located(next(iter(head.values()))), doomed)
    with ObjectStoreSaver(store) as saver:
        assert _prune(saver, "chat")["objects_extracted"] == len(doomed)
        # A file's mtime ticks coarsely (the kernel's clock tick): a mark written in
        # the tick that stored an object leaves it unswept for a round (only an
        # object strictly older than its mark is swept), so the next tick is awaited.
        time.sleep(0.02)
        # Merged segments no kept list holds: marked by the next run, swept after.
        assert _prune(saver, "chat")["objects_marked"] >= len(set(doomed) - reached) > 0
        assert _prune(saver, "chat", LATER)["objects_swept"] >= len(set(doomed) - reached)
        assert _stored_alone(store, "chat", doomed) == set(doomed) & reached
        assert _head_messages(store, "chat") == _contents(messages)
        assert saver.verify("chat", read_data=True).ok


class DeleteFails(Exception):
    pass


class FailingDeletes(MeteredStore):
    """Every DeleteObjects fails: a prune interrupted after its PUTs, before any delete."""

    def delete(self, *a: Any, **kw: Any) -> None:
        raise DeleteFails


def test_prune_interrupted_before_deleting_leaves_the_thread_readable(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    messages, doomed, _ = _chat_with_doomed_segments(store, "chat")
    with ObjectStoreSaver(FailingDeletes(store)) as failing, pytest.raises(DeleteFails):
        failing.prune(["chat"], keep_last=1, min_age=0)
    # Stored alone, and every manifest still there and read as before.
    assert _stored_alone(store, "chat", doomed) == set(doomed)
    assert len(_manifests(store, "chat")) == TURNS
    with ObjectStoreSaver(store) as reader:
        listed = list(reader.list({"configurable": {"thread_id": "chat"}}))
    assert [len(t.checkpoint["channel_values"]["messages"]) for t in listed] == [
        2 * n for n in range(TURNS, 0, -1)
    ]
    with ObjectStoreSaver(store) as saver:
        # Run again: the objects are found stored (412) and renewed, then it completes.
        assert saver.prune(["chat"], keep_last=1, min_age=0)["objects_extracted"] == len(doomed)
        assert _head_messages(store, "chat") == _contents(messages)
        assert saver.verify("chat", read_data=True).ok


def test_prune_interrupted_after_any_write_leaves_every_checkpoint_readable(
    tmp_path: Path,
) -> None:
    template = tmp_path / "template"
    messages, doomed, _ = _chat_with_doomed_segments(LocalStore(template), "chat")
    expected = _contents(messages)
    budget = 0
    while True:
        shutil.copytree(template, tmp_path / f"crash{budget}")
        store = LocalStore(tmp_path / f"crash{budget}")
        with ObjectStoreSaver(CrashAfter(store, budget)) as crashing:
            try:
                crashing.prune(["chat"], keep_last=1, min_age=0)
                done = True
            except Crash:
                done = False
        with ObjectStoreSaver(store) as reader:
            listed = list(reader.list({"configurable": {"thread_id": "chat"}}))
        assert listed, budget
        for tup in listed:
            got = _contents(tup.checkpoint["channel_values"]["messages"])
            assert got == expected[: len(got)], budget
        assert len(listed[0].checkpoint["channel_values"]["messages"]) == len(expected)
        if done:
            break
        budget += 1
    assert budget > len(doomed)  # it crashed among the extraction's PUTs and after them


# --- delete_for_runs --------------------------------------------------------------------


def test_delete_for_runs_stores_segments_a_later_run_locates(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(store) as saver:
        # Run a ends on 8 runs of 8 merged into one segment of 64; run b's 16
        # messages never merge with it, so its head locates it in run a.
        config, messages = _chat(saver, "chat", 32, run_id="run-a")
        run_a = _manifests(store, "chat")
        _, messages = _chat(
            saver, "chat", 8, start=32, config=config, messages=messages, run_id="run-b"
        )
    head = next(iter(_manifests(store, "chat").values()))
    assert set(_located(head).values()) & set(run_a)  # run b's head reads run a's manifests
    doomed = _embedded(run_a.values())
    assert doomed and not _stored_alone(store, "chat", doomed)

    with ObjectStoreSaver(store) as saver:
        saver.delete_for_runs(["run-a"])
        assert not set(_manifests(store, "chat")) & set(run_a)
        assert _head_messages(store, "chat") == _contents(messages)
        assert _stored_alone(store, "chat", doomed) == set(doomed)
        with ObjectStoreSaver(store) as reader:
            listed = list(reader.list({"configurable": {"thread_id": "chat"}}))
        assert len(listed) == 8
        assert saver.verify("chat", read_data=True).ok


def test_delete_for_runs_of_a_run_without_embedded_objects_puts_no_object(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(store) as saver:
        _chat(saver, "chat", 2, run_id="short")
    assert not _embedded(_manifests(store, "chat").values())
    metered = MeteredStore(store, log=True)
    with ObjectStoreSaver(metered) as saver:
        saver.delete_for_runs(["short"])
    assert [e for e in metered.log if e.op == "put"] == []
    assert _manifests(store, "chat") == {}
