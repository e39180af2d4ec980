"""CPU work while requests are in flight: the drivers' ``meanwhile`` and its use by get_tuple.

Real stores (a local directory; a native-async wrapper over it) whose LIST
waits for, or reports on, the work: each test fails when the work runs after
the requests instead of during them. Nothing is timed.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver import ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.plans.requests import ListKeys, Put, run_batch_while
from objstore_saver.storage import LocalStore
from objstore_saver.storage.base import ListPage

#: How long a gated LIST waits for the work before giving up (never reached when it works).
WAIT_S = 10.0


class GatedStore(LocalStore):
    """A local store whose LISTs of prefixes ending in ``gated`` wait until ``work_done`` is set."""

    def __init__(self, root: Path, gated: str) -> None:
        super().__init__(root, fsync=False)
        self.gated = gated
        self.started = threading.Event()
        self.work_done = threading.Event()
        self.saw_work: list[bool] = []

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> ListPage:
        if prefix.endswith(self.gated):
            self.started.set()
            self.saw_work.append(self.work_done.wait(WAIT_S))
        return super().list(prefix, start_after=start_after, limit=limit)


class NativeAsyncStore(LocalStore):
    """A local store whose ``alist`` is a coroutine of its own (no thread), like S3's."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        self.sent = 0
        self.answered = 0

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = 1000
    ) -> ListPage:
        self.sent += 1  # the request is on the wire before its first await
        await asyncio.sleep(0.01)
        self.answered += 1
        return self.list(prefix, start_after=start_after, limit=limit)


class SignallingSerde(JsonPlusSerializer):
    """LangGraph's serializer that tells the store when it first deserializes."""

    def __init__(self, store: GatedStore) -> None:
        super().__init__()
        self.store = store

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.store.work_done.set()
        return super().loads_typed(data)


def _work(store: GatedStore) -> str:
    # Waits for the request to start, then lets it answer: only possible when
    # the two overlap.
    assert store.started.wait(WAIT_S), "the request was not sent before the work ran"
    store.work_done.set()
    return "computed"


@pytest.mark.parametrize("api", ["sync", "async"])
def test_meanwhile_runs_while_the_requests_are_in_flight(tmp_path: Path, api: str) -> None:
    store = GatedStore(tmp_path, "gated/")
    store.put("gated/a", b"1")
    driver = Driver(store, max_workers=4)
    plan = run_batch_while(lambda: _work(store), ListKeys("gated/"), ListKeys("other/"))
    try:
        if api == "sync":
            (gated, other), value = driver.run(plan)
        else:
            (gated, other), value = asyncio.run(driver.arun(plan))
    finally:
        driver.close()
    assert value == "computed"
    assert [o.key for o in gated.objects] == ["gated/a"]
    assert other.objects == []
    assert store.saw_work == [True]


def test_async_requests_are_sent_before_the_loop_is_held(tmp_path: Path) -> None:
    store = NativeAsyncStore(tmp_path)
    driver = Driver(store)

    def work() -> tuple[int, int]:
        return store.sent, store.answered

    try:
        (_, _), (sent, answered) = asyncio.run(
            driver.arun(run_batch_while(work, ListKeys("a/"), ListKeys("b/")))
        )
    finally:
        driver.close()
    assert (sent, answered) == (2, 0)
    assert store.answered == 2


@pytest.mark.parametrize("api", ["sync", "async"])
def test_failed_work_is_raised_after_the_requests_finish(tmp_path: Path, api: str) -> None:
    store = LocalStore(tmp_path, fsync=False)
    driver = Driver(store, max_workers=4)

    def work() -> None:
        raise ValueError("the work failed")

    plan = run_batch_while(work, Put("k", b"v"))
    try:
        with pytest.raises(ValueError, match="the work failed"):
            if api == "sync":
                driver.run(plan)
            else:
                asyncio.run(driver.arun(plan))
    finally:
        driver.close()
    # The request was not abandoned: it completed before the error surfaced.
    assert store.get("k") == b"v"


def _history(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out += [HumanMessage(f"q{i} " + "q" * 300, id=f"h{i}"), AIMessage("a" * 900, id=f"a{i}")]
    return out


@pytest.mark.parametrize("api", ["sync", "async"])
def test_get_tuple_decodes_the_history_while_listing_the_namespace(
    tmp_path: Path, api: str
) -> None:
    # The namespace's LIST of the latest lookup (not the put's tombstone LIST).
    store = GatedStore(tmp_path, "/checkpoints/_/")
    with ObjectStoreSaver(store, serde=SignallingSerde(store)) as saver:
        cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        messages = _history(30)
        cp["channel_values"] = {"messages": messages}
        cp["channel_versions"] = {"messages": 1}
        saver.put(cfg, cp, {"step": 1}, {"messages": 1})
        got = saver.get_tuple(cfg) if api == "sync" else asyncio.run(saver.aget_tuple(cfg))
    assert got is not None
    assert got.checkpoint["channel_values"]["messages"] == messages
    assert got.checkpoint["id"] == cp["id"]
    assert got.metadata["step"] == 1
    # The LIST of the namespace answered only once the values were being decoded.
    assert store.saw_work == [True]
