"""The prune job stores what deleted manifests embed alone first, threads' deletes coalesced.

Several chat threads are pruned at once: their DeleteObjects are shared
(:mod:`objstore_saver.ops.delete_coalescing`) and each thread's list
segments, embedded in the manifests it deletes, are stored at
``objects/<H>`` before. The ``verify`` assertion needs a ``verify`` that
knows embedded objects and segments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from layout import is_manifest

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.ops import OpsConfig, prune, verify
from objstore_saver.storage import LocalStore

THREADS = ("chat-0", "chat-1", "chat-2")
TURNS = 40


def _chat(saver: ObjectStoreSaver, thread: str) -> list[tuple[str | None, Any]]:
    """``TURNS`` puts of two short messages each; every message as (id, content)."""
    config: dict = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[Any] = []
    for i in range(TURNS):
        messages += [
            HumanMessage(f"{thread} question {i}: " + "please " * 20, id=f"h{i}"),
            AIMessage(f"{thread} answer {i}: " + "sure " * 20, id=f"a{i}"),
        ]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": list(messages)}
        cp["channel_versions"] = {"messages": i + 1}
        config = saver.put(config, cp, {"step": i}, {"messages": i + 1})  # type: ignore[arg-type]
    return [(m.id, m.content) for m in messages]


def _doomed_embedded(store: LocalStore, thread: str) -> dict[bytes, bytes]:
    """What the manifests other than the head embed."""
    infos = store.list(k.thread_prefix(thread) + "checkpoints/").objects
    out: dict[bytes, bytes] = {}
    for o in [o for o in infos if is_manifest(o.key)][1:]:  # newest first: the head is kept
        out |= codec.embedded_objects(codec.decode_manifest(store.get(o.key), o.key))
    return out


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def test_prune_job_stores_each_threads_embedded_objects_before_deleting(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    store = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(store) as saver:
        expected = {t: _chat(saver, t) for t in THREADS}
    doomed = {t: _doomed_embedded(store, t) for t in THREADS}
    assert all(doomed.values())
    config = OpsConfig(url=url)

    before = _files(tmp_path / "store")
    dry = prune(keep_last=1, min_age=0, config=config, concurrency=3)
    assert _files(tmp_path / "store") == before
    assert dry["totals"]["objects_extracted"] == sum(len(d) for d in doomed.values())
    assert {r["thread_id"]: r["objects_extracted"] for r in dry["threads"]} == {
        t: len(d) for t, d in doomed.items()
    }

    report = prune(keep_last=1, min_age=0, apply=True, config=config, concurrency=3)
    assert report["totals"]["objects_extracted"] == dry["totals"]["objects_extracted"]
    assert report["totals"]["checkpoints_deleted"] == len(THREADS) * (TURNS - 1)
    with ObjectStoreSaver(LocalStore(tmp_path / "store")) as reader:
        for t in THREADS:
            head = reader.get_tuple({"configurable": {"thread_id": t}})
            assert head is not None
            got = [(m.id, m.content) for m in head.checkpoint["channel_values"]["messages"]]
            assert got == expected[t]
    for t, objects in doomed.items():
        pfx = k.thread_prefix(t)
        for d, body in objects.items():
            assert store.get(k.object_key_in(pfx, d)) == body
    assert verify(config=config, read_data=True)["ok"]
