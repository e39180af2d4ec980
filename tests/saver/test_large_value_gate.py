"""The large-value gate (spec §6.1 step 2.2): one large serialized value of a saver at a time.

LangGraph puts a turn's input checkpoint and writes its input task's writes
concurrently, each serializing the same large message; its serializer alone
peaks at about 3x the value. Without the gate the two overlapped (4x the value
for a 20 MiB tool result). Memory is counted with tracemalloc (bytes, not time),
on the local directory store.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from faultkit import config, counting_chat, tool_turn, traced_peak, word_text
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from layout import is_manifest, is_write

from objstore_saver import LocalStore, ObjectStoreSaver
from objstore_saver.storage import PutMode, StorageError

MIB = 1024 * 1024


def test_a_20_mib_tool_turn_peaks_at_the_serializers_own_peak(tmp_path: Path) -> None:
    payload = word_text(20 * MIB, seed=1)
    inputs = tool_turn(payload)
    # What LangGraph's serializer costs alone for the message (about 3x).
    own, _ = traced_peak(lambda: JsonPlusSerializer().dumps_typed(inputs[2]))
    with ObjectStoreSaver(LocalStore(tmp_path / "store", fsync=False)) as saver:
        graph = counting_chat(saver)
        cfg = {"configurable": {"thread_id": "big"}}
        graph.invoke({"messages": [HumanMessage("hello")]}, cfg)
        peak, _ = traced_peak(lambda: graph.invoke({"messages": inputs}, cfg))
        state = graph.get_state(cfg).values["messages"]
    assert [m.content for m in state if m.type == "tool"] == [payload]
    # Two serializations overlapping cost own + 1x the value or more (4x).
    assert peak < own + 0.25 * len(payload), (
        f"turn peak {peak / len(payload):.2f}x, serializer alone {own / len(payload):.2f}x"
    )


class _Probe(LocalStore):
    """A local store that records, per PUT, whether the saver's gate was held."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        self.saver: ObjectStoreSaver | None = None
        self.seen: list[tuple[str, bool]] = []
        self.fail_objects = 0
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        assert self.saver is not None
        with self._lock:
            self.seen.append((key, self.saver._ctx.gate.locked()))
            if self.fail_objects and "/objects/" in key:
                self.fail_objects -= 1
                raise StorageError(f"injected failure of the PUT of {key!r}")
        super().put(key, data, mode)


def _checkpoint(values: dict[str, Any]) -> tuple[dict, dict]:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = dict.fromkeys(values, 1)
    return cp, dict.fromkeys(values, 1)


def test_the_gate_is_kept_while_large_parts_are_stored_and_only_then(tmp_path: Path) -> None:
    store = _Probe(tmp_path / "store")
    with ObjectStoreSaver(store) as saver:
        store.saver = saver
        cp, versions = _checkpoint({"big": word_text(3 * MIB, seed=2), "small": "hello"})
        stored = saver.put(config("t"), cp, {"step": 0}, versions)
        saver.put_writes(stored, [("small", "x" * 100), ("big", word_text(MIB, seed=3))], "task")
    held = [key for key, locked in store.seen if locked]
    free = [key for key, locked in store.seen if not locked]
    # Parts of both large values went out under the gate; the manifest, the
    # small objects and the write objects did not.
    assert len(held) >= 4 and all("/objects/" in k for k in held)
    assert any(is_manifest(k) for k in free) and any(is_write(k) for k in free)
    assert not saver._ctx.gate.locked()


def test_a_failed_part_put_gives_the_gate_back(tmp_path: Path) -> None:
    store = _Probe(tmp_path / "store")
    with ObjectStoreSaver(store) as saver:
        store.saver = saver
        store.fail_objects = 1
        cp, versions = _checkpoint({"big": word_text(3 * MIB, seed=4)})
        with pytest.raises(StorageError, match="injected failure"):
            saver.put(config("t"), cp, {"step": 0}, versions)
        assert not saver._ctx.gate.locked()
        saver.put(config("t"), cp, {"step": 0}, versions)  # would block forever if held
        assert saver.get_tuple(config("t")) is not None


def test_concurrent_large_async_calls_on_one_loop_take_turns(tmp_path: Path) -> None:
    store = _Probe(tmp_path / "store")
    big = [word_text(2 * MIB, seed=s) for s in (5, 6, 7)]

    async def go(saver: ObjectStoreSaver) -> Any:
        cps = [_checkpoint({"v": b}) for b in big]
        stored = await asyncio.gather(
            *(saver.aput(config(f"t{i}"), cp, {"step": 0}, v) for i, (cp, v) in enumerate(cps))
        )
        # A call cancelled while it waits for the gate, or holds it, keeps nothing.
        waiting = asyncio.create_task(saver.aput_writes(stored[0], [("v", big[1])], "w"))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        return await asyncio.gather(*(saver.aget_tuple(s) for s in stored))

    with ObjectStoreSaver(store) as saver:
        store.saver = saver
        got = asyncio.run(asyncio.wait_for(go(saver), 60))
        assert not saver._ctx.gate.locked()
    assert [t.checkpoint["channel_values"]["v"] for t in got] == big
