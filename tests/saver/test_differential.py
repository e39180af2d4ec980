"""Differential tests: real graphs on ObjectStoreSaver behave as on InMemorySaver.

Each test compiles the same graph twice, once with an :class:`ObjectStoreSaver`
and once with LangGraph's :class:`InMemorySaver`, feeds both the same inputs and
compares what LangGraph reads back: ``get_state``, ``get_state_history`` and
every ``CheckpointTuple`` of ``list``.

Identifiers that are random per run (checkpoint ids, task ids, interrupt ids,
and the namespaces made from task ids) cannot match, so both sides pass
through a :class:`Normalizer` that renames each such id to ``<idN>`` in order of
first appearance. Walking both sides in the same order, equal structures get
equal labels, and a link between checkpoints (a parent id, a namespace) is
still checked: it must point to the same position on both sides. Channel
versions differ by design (integers here, random-suffixed strings in
InMemorySaver, spec §5) and are compared by their integer part. Messages carry
deterministic ids, so they compare exactly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, TypedDict

import pytest
from backends import Backend
from delta_graph import delta_builder, expected_log, extend_log
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, StateSnapshot, interrupt

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import ObjectStore

MODES = ["sync", "async"]

#: Both APIs on a local directory, and the async API on S3 (keeps the suite fast;
#: the chat tests run every combination).
LOCAL_BOTH_S3_ASYNC = pytest.mark.parametrize(
    ("backend", "mode"),
    [("local", "sync"), ("local", "async"), ("s3-boto3", "async"), ("s3-lean", "async")],
    indirect=["backend"],
)

# --- fixtures --------------------------------------------------------------------


@pytest.fixture
def store_factory(backend: Backend) -> Callable[[], ObjectStore]:
    """Opens the test's one store; every call is a new connection to the same data."""
    return lambda: backend.store("diff/")


@pytest.fixture
def open_saver() -> Iterator[Callable[[ObjectStore], ObjectStoreSaver]]:
    """Builds savers and closes them all at the end of the test."""
    opened: list[ObjectStoreSaver] = []

    def make(store: ObjectStore) -> ObjectStoreSaver:
        saver = ObjectStoreSaver(store)
        opened.append(saver)
        return saver

    yield make
    for saver in opened:
        saver.close()


@pytest.fixture
def saver(
    store_factory: Callable[[], ObjectStore],
    open_saver: Callable[[ObjectStore], ObjectStoreSaver],
) -> ObjectStoreSaver:
    return open_saver(store_factory())


# --- running both APIs the same way ------------------------------------------------


class Runner:
    """Calls LangGraph's sync API (in a worker thread, as a sync app would) or its async API."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def _sync(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.to_thread(fn)

    async def invoke(self, graph: Any, inp: Any, config: RunnableConfig) -> Any:
        if self.mode == "sync":
            return await self._sync(lambda: graph.invoke(inp, config))
        return await graph.ainvoke(inp, config)

    async def state(
        self, graph: Any, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        if self.mode == "sync":
            return await self._sync(lambda: graph.get_state(config, subgraphs=subgraphs))
        return await graph.aget_state(config, subgraphs=subgraphs)

    async def history(self, graph: Any, config: RunnableConfig) -> list[StateSnapshot]:
        if self.mode == "sync":
            return await self._sync(lambda: list(graph.get_state_history(config)))
        return [s async for s in graph.aget_state_history(config)]

    async def tuples(
        self, saver: BaseCheckpointSaver, config: RunnableConfig | None, **kwargs: Any
    ) -> list[CheckpointTuple]:
        if self.mode == "sync":
            return await self._sync(lambda: list(saver.list(config, **kwargs)))
        return [t async for t in saver.alist(config, **kwargs)]

    async def get_tuple(
        self, saver: BaseCheckpointSaver, config: RunnableConfig
    ) -> CheckpointTuple | None:
        if self.mode == "sync":
            return await self._sync(lambda: saver.get_tuple(config))
        return await saver.aget_tuple(config)

    async def delta_history(
        self, saver: BaseCheckpointSaver, config: RunnableConfig, channels: Sequence[str]
    ) -> Any:
        if self.mode == "sync":
            return await self._sync(
                lambda: saver.get_delta_channel_history(config=config, channels=channels)
            )
        return await saver.aget_delta_channel_history(config=config, channels=channels)


# --- normalizing run-specific identifiers ---------------------------------------------

# UUIDs (checkpoint and task ids) and 32-hex digests (interrupt ids).
_ID_RE = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])"
)


def _version(v: Any) -> int:
    """Integer part of a channel version (ints here, ``"%032d.%016f"`` in InMemorySaver)."""
    if isinstance(v, int):
        return v
    return int(str(v).split(".")[0])


class Normalizer:
    """Renames run-specific ids to ``<idN>`` in order of first appearance."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}

    def _label(self, match: re.Match[str]) -> str:
        return self.labels.setdefault(match.group(0), f"<id{len(self.labels)}>")

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return _ID_RE.sub(self._label, obj)
        if isinstance(obj, BaseMessage):
            return obj  # deterministic ids: compared exactly
        if isinstance(obj, BaseException):
            return ("exception", type(obj).__name__, self(str(obj)))
        if isinstance(obj, Send):
            return ("Send", obj.node, self(obj.arg))
        if isinstance(obj, StateSnapshot):
            fields = obj._asdict()
            del fields["created_at"]
            return ("StateSnapshot", {k: self(v) for k, v in fields.items()})
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return (type(obj).__name__, {k: self(v) for k, v in obj._asdict().items()})
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return (
                type(obj).__name__,
                {f.name: self(getattr(obj, f.name)) for f in dataclasses.fields(obj)},
            )
        if isinstance(obj, dict):
            return {self(k): self(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return type(obj)(self(x) for x in obj)
        return obj

    def checkpoint_tuple(self, tup: CheckpointTuple) -> dict[str, Any]:
        config = self(tup.config)
        cp = tup.checkpoint
        checkpoint = {
            k: v
            for k, v in cp.items()
            if k not in ("id", "ts", "channel_versions", "versions_seen", "channel_values")
        }
        checkpoint["channel_versions"] = {k: _version(v) for k, v in cp["channel_versions"].items()}
        checkpoint["versions_seen"] = {
            node: {k: _version(v) for k, v in seen.items()}
            for node, seen in cp["versions_seen"].items()
        }
        return {
            "config": config,
            "checkpoint_id": self(cp["id"]),
            "checkpoint": self(checkpoint),
            "channel_values": self(cp["channel_values"]),
            "metadata": self(tup.metadata),
            "parent_config": self(tup.parent_config),
            "pending_writes": self(tup.pending_writes),
        }


class Differ:
    """Both savers and graphs of a test, and one normalizer per side."""

    def __init__(
        self,
        runner: Runner,
        ours: BaseCheckpointSaver,
        ref: BaseCheckpointSaver,
        builder: StateGraph | None = None,
    ) -> None:
        self.run = runner
        self.ours = ours
        self.ref = ref
        self.graph_ours = builder.compile(checkpointer=ours) if builder else None
        self.graph_ref = builder.compile(checkpointer=ref) if builder else None
        self.norm_ours = Normalizer()
        self.norm_ref = Normalizer()

    async def invoke(self, inp: Any, config: RunnableConfig) -> Any:
        out_ours = await self.run.invoke(self.graph_ours, inp, config)
        out_ref = await self.run.invoke(self.graph_ref, inp, config)
        assert self.norm_ours(out_ours) == self.norm_ref(out_ref)
        return out_ours

    def same(self, what: str, ours: Any, ref: Any) -> Any:
        a, b = self.norm_ours(ours), self.norm_ref(ref)
        assert a == b, f"{what} differs from InMemorySaver"
        return a

    async def state(self, config: RunnableConfig, *, subgraphs: bool = False) -> Any:
        s_ours = await self.run.state(self.graph_ours, config, subgraphs=subgraphs)
        s_ref = await self.run.state(self.graph_ref, config, subgraphs=subgraphs)
        self.same("get_state", s_ours, s_ref)
        return s_ours, s_ref

    async def history(self, config: RunnableConfig) -> tuple[list[Any], list[Any]]:
        h_ours = await self.run.history(self.graph_ours, config)
        h_ref = await self.run.history(self.graph_ref, config)
        assert len(h_ours) > 1
        assert len(h_ours) == len(h_ref), "get_state_history lengths differ"
        for i, (a, b) in enumerate(zip(h_ours, h_ref, strict=True)):
            self.same(f"get_state_history[{i}]", a, b)
        return h_ours, h_ref

    def same_tuples(
        self, what: str, t_ours: Sequence[CheckpointTuple], t_ref: Sequence[CheckpointTuple]
    ) -> None:
        assert len(t_ours) == len(t_ref), (
            f"{what}: {len(t_ours)} checkpoints, InMemorySaver has {len(t_ref)}"
        )
        for i, (a, b) in enumerate(zip(t_ours, t_ref, strict=True)):
            na, nb = self.norm_ours.checkpoint_tuple(a), self.norm_ref.checkpoint_tuple(b)
            for key in na:
                assert na[key] == nb[key], f"{what}[{i}].{key} differs from InMemorySaver"
            assert (a.parent_config is None) == (b.parent_config is None)

    async def tuples(
        self,
        what: str,
        config: RunnableConfig | None,
        ref_config: RunnableConfig | None = None,
        *,
        expect: int | None = None,
        **kwargs: Any,
    ) -> tuple[list[CheckpointTuple], list[CheckpointTuple]]:
        """``list`` on both savers (``ref_config`` when the config names ids of one side)."""
        t_ours = await self.run.tuples(self.ours, config, **kwargs)
        t_ref = await self.run.tuples(
            self.ref, config if ref_config is None else ref_config, **kwargs
        )
        assert t_ours, f"{what}: ObjectStoreSaver listed nothing"
        if expect is not None:
            assert len(t_ours) == expect, f"{what}: {len(t_ours)} checkpoints, expected {expect}"
        self.same_tuples(what, t_ours, t_ref)
        return t_ours, t_ref


def _thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:6]}"}}


def _newest_first(tuples: Sequence[CheckpointTuple]) -> None:
    ids = [t.checkpoint["id"] for t in tuples]
    assert ids == sorted(ids, reverse=True), "list must return newest first"


def _by_namespace(tuples: Sequence[CheckpointTuple]) -> list[list[CheckpointTuple]]:
    """Group a listing by namespace, namespaces ordered by their first checkpoint.

    The order of namespaces in a thread-wide listing is not part of LangGraph's
    contract (InMemorySaver: insertion order; ObjectStoreSaver: key order), the
    order within one namespace is (newest first).
    """
    groups: dict[str, list[CheckpointTuple]] = {}
    for t in tuples:
        groups.setdefault(t.config["configurable"]["checkpoint_ns"], []).append(t)
    for group in groups.values():
        _newest_first(group)
    return sorted(groups.values(), key=lambda g: g[-1].checkpoint["id"])


# --- a. chat ------------------------------------------------------------------------

BIG_TURN = 4
BIG_SIZE = 310 * 1024


def _chat_builder() -> StateGraph:
    def bot(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        reply = f"{'z' * 800} reply {len(state['messages'])} to {len(last.content)} chars"
        return {"messages": [AIMessage(reply, id=f"ai-{last.id}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder


def _human(turn: int) -> HumanMessage:
    if turn == BIG_TURN:
        return HumanMessage("y" * BIG_SIZE + f" turn {turn}", id=f"h{turn}")
    return HumanMessage(f"{'q' * 700} turn {turn}", id=f"h{turn}")


async def _check_chat(d: Differ, config: RunnableConfig, turns: int) -> None:
    state_ours, _ = await d.state(config)
    messages = state_ours.values["messages"]
    assert len(messages) == 2 * turns
    assert [m.id for m in messages[::2]] == [f"h{t}" for t in range(turns)]
    if turns > BIG_TURN:
        assert len(messages[2 * BIG_TURN].content) > BIG_SIZE

    history, _ = await d.history(config)
    assert len(history) == 3 * turns  # per turn: input, before bot, after bot
    t_ours, t_ref = await d.tuples("list(thread)", config, expect=len(history))
    _newest_first(t_ours)
    assert sum(1 for t in t_ours if t.pending_writes) > 0
    assert t_ours[-1].parent_config is None
    # Every checkpoint read by id gives the same tuple as the listing.
    for t in (t_ours[0], t_ours[len(t_ours) // 2], t_ours[-1]):
        again = await d.run.get_tuple(d.ours, t.config)
        assert again is not None
        assert again.checkpoint == t.checkpoint
        assert again.pending_writes == t.pending_writes
        assert again.metadata == t.metadata

    # list options: filter, limit, before.
    await d.tuples("list(filter)", config, filter={"source": "input"}, expect=turns)
    await d.tuples("list(filter step)", config, filter={"step": 3}, expect=1)
    await d.tuples("list(limit)", config, limit=3, expect=3)
    # ``before`` names a checkpoint of each side: the one at the same position.
    b_ours = await d.run.tuples(d.ours, config, before=t_ours[4].config, limit=2)
    b_ref = await d.run.tuples(d.ref, config, before=t_ref[4].config, limit=2)
    assert [t.checkpoint["id"] for t in b_ours] == [t.checkpoint["id"] for t in t_ours[5:7]]
    d.same_tuples("list(before)", b_ours, b_ref)


@pytest.mark.parametrize("mode", MODES)
async def test_chat(mode: str, saver: ObjectStoreSaver) -> None:
    d = Differ(Runner(mode), saver, InMemorySaver(), _chat_builder())
    config = _thread("chat")
    for turn in range(10):
        await d.invoke({"messages": [_human(turn)]}, config)
        await d.state(config)
    await _check_chat(d, config, 10)


@pytest.mark.parametrize("mode", MODES)
async def test_chat_restart(
    mode: str,
    store_factory: Callable[[], ObjectStore],
    open_saver: Callable[[ObjectStore], ObjectStoreSaver],
) -> None:
    """A new saver instance on the same store continues the conversation."""
    runner = Runner(mode)
    ref = InMemorySaver()
    config = _thread("restart")
    first = open_saver(store_factory())
    d = Differ(runner, first, ref, _chat_builder())
    for turn in range(5):
        await d.invoke({"messages": [_human(turn)]}, config)
    first.close()

    second = open_saver(store_factory())
    d = Differ(runner, second, ref, _chat_builder())
    await d.state(config)
    for turn in range(5, 10):
        await d.invoke({"messages": [_human(turn)]}, config)
    await _check_chat(d, config, 10)


# --- b. supervisor with a subgraph ---------------------------------------------------


class TeamState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    notes: Annotated[list[str], operator.add]


def _team_builder() -> StateGraph:
    def research(state: TeamState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "notes": [f"research {n}"],
            "messages": [AIMessage(f"{'r' * 600} findings {n}", id=f"research-{n}")],
        }

    def summarize(state: TeamState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "notes": [f"summary {n}"],
            "messages": [AIMessage(f"summary of {n} messages", id=f"summary-{n}")],
        }

    sub = StateGraph(TeamState)
    sub.add_node("research", research)
    sub.add_node("summarize", summarize)
    sub.add_edge(START, "research")
    sub.add_edge("research", "summarize")
    sub.add_edge("summarize", END)
    team = sub.compile(interrupt_before=["summarize"])

    def supervisor(state: TeamState) -> dict[str, Any]:
        return {"notes": [f"route {len(state['messages'])} to team"]}

    def finish(state: TeamState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"done after {n}", id=f"final-{n}")]}

    builder = StateGraph(TeamState)
    builder.add_node("supervisor", supervisor)
    builder.add_node("team", team)
    builder.add_node("finish", finish)
    builder.add_edge(START, "supervisor")
    builder.add_edge("supervisor", "team")
    builder.add_edge("team", "finish")
    builder.add_edge("finish", END)
    return builder


@LOCAL_BOTH_S3_ASYNC
async def test_supervisor_subgraph(mode: str, saver: ObjectStoreSaver) -> None:
    d = Differ(Runner(mode), saver, InMemorySaver(), _team_builder())
    config = _thread("team")
    for turn in range(2):
        await d.invoke({"messages": [HumanMessage(f"task {turn}", id=f"h{turn}")]}, config)
        # Paused inside the subgraph, before "summarize".
        s_ours, s_ref = await d.state(config, subgraphs=True)
        assert s_ours.next == ("team",)
        sub_ours, sub_ref = s_ours.tasks[0].state, s_ref.tasks[0].state
        assert isinstance(sub_ours, StateSnapshot)
        assert isinstance(sub_ref, StateSnapshot)
        assert sub_ours.next == ("summarize",)
        assert sub_ours.values["notes"][-1] == f"research {4 * turn + 1}"
        ns_ours = sub_ours.config["configurable"]["checkpoint_ns"]
        ns_ref = sub_ref.config["configurable"]["checkpoint_ns"]
        assert ns_ours.startswith("team:")

        sub_config_ours = {"configurable": {**config["configurable"], "checkpoint_ns": ns_ours}}
        sub_config_ref = {"configurable": {**config["configurable"], "checkpoint_ns": ns_ref}}
        t_ours, _ = await d.tuples("list(subgraph ns)", sub_config_ours, sub_config_ref)
        _newest_first(t_ours)
        assert all(t.config["configurable"]["checkpoint_ns"] == ns_ours for t in t_ours)
        assert t_ours[0].checkpoint["id"] == sub_ours.config["configurable"]["checkpoint_id"]
        assert t_ours[0].metadata["parents"] == {"": s_ours.config["configurable"]["checkpoint_id"]}

        await d.invoke(None, config)  # resume: summarize, then finish
        s_ours, _ = await d.state(config, subgraphs=True)
        assert s_ours.next == ()
        assert s_ours.values["messages"][-1].id == f"final-{4 * turn + 3}"

    await d.history(config)
    root = {"configurable": {**config["configurable"], "checkpoint_ns": ""}}
    t_root, _ = await d.tuples("list(root ns)", root)
    assert all(t.config["configurable"]["checkpoint_ns"] == "" for t in t_root)

    everything_ours = await d.run.tuples(d.ours, config)
    everything_ref = await d.run.tuples(d.ref, config)
    groups_ours = _by_namespace(everything_ours)
    groups_ref = _by_namespace(everything_ref)
    assert len(groups_ours) == 3  # the root and one subgraph namespace per turn
    assert len(groups_ref) == len(groups_ours)
    assert [t.config for t in groups_ours[0]] == [t.config for t in t_root]
    for i, (g_ours, g_ref) in enumerate(zip(groups_ours, groups_ref, strict=True)):
        d.same_tuples(f"list(all namespaces)[ns {i}]", g_ours, g_ref)


# --- c. interrupt and resume ----------------------------------------------------------


class ReviewState(TypedDict, total=False):
    topic: str
    draft: str
    answers: Annotated[list[str], operator.add]
    published: str


def _review_builder() -> StateGraph:
    def write(state: ReviewState) -> dict[str, Any]:
        return {"draft": f"{'d' * 1500} about {state['topic']}"}

    def review(state: ReviewState) -> dict[str, Any]:
        approved = interrupt({"question": "approve?", "draft_chars": len(state["draft"])})
        title = interrupt({"question": "title?", "big": "b" * 2000})
        return {"answers": [approved, title]}

    def publish(state: ReviewState) -> dict[str, Any]:
        return {"published": " / ".join(state["answers"])}

    builder = StateGraph(ReviewState)
    builder.add_node("write", write)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder


@LOCAL_BOTH_S3_ASYNC
async def test_interrupt_resume(mode: str, saver: ObjectStoreSaver) -> None:
    d = Differ(Runner(mode), saver, InMemorySaver(), _review_builder())
    config = _thread("review")
    out = await d.invoke({"topic": "storage"}, config)
    assert "__interrupt__" in out

    s_ours, _ = await d.state(config)
    assert s_ours.next == ("review",)
    assert len(s_ours.interrupts) == 1
    assert s_ours.interrupts[0].value["question"] == "approve?"
    assert len(s_ours.tasks) == 1 and s_ours.tasks[0].interrupts == s_ours.interrupts
    head_ours, _ = await d.tuples("list(after first interrupt)", config, limit=1, expect=1)
    assert any(w[1] == "__interrupt__" for w in head_ours[0].pending_writes or [])

    await d.invoke(Command(resume="approved"), config)
    s_ours, _ = await d.state(config)
    assert s_ours.next == ("review",)
    assert len(s_ours.interrupts) == 1
    assert s_ours.interrupts[0].value["question"] == "title?"
    head_ours, _ = await d.tuples("list(after second interrupt)", config, limit=1, expect=1)
    channels = [w[1] for w in head_ours[0].pending_writes or []]
    assert "__interrupt__" in channels and "__resume__" in channels
    # A task's resume write is replaced (special channel), not duplicated.
    resume_tasks = [w[0] for w in head_ours[0].pending_writes or [] if w[1] == "__resume__"]
    assert len(resume_tasks) == len(set(resume_tasks))

    out = await d.invoke(Command(resume="A title"), config)
    assert out["published"] == "approved / A title"
    s_ours, _ = await d.state(config)
    assert s_ours.next == () and s_ours.interrupts == () and s_ours.tasks == ()

    history, _ = await d.history(config)
    assert any(h.interrupts for h in history)
    await d.tuples("list(thread)", config, expect=len(history))


# --- d. Send fan-out ---------------------------------------------------------------------


class FanState(TypedDict, total=False):
    items: list[str]
    results: Annotated[list[str], operator.add]
    total: int


def _fan_builder() -> StateGraph:
    def plan(state: FanState) -> dict[str, Any]:
        return {"items": [f"item-{i}" for i in range(8)]}

    def route(state: FanState) -> list[Send]:
        return [Send("worker", {"item": item, "pos": i}) for i, item in enumerate(state["items"])]

    def worker(arg: dict[str, Any]) -> dict[str, Any]:
        time.sleep(random.uniform(0, 0.004))  # finish in a random order
        return {"results": [f"{arg['item']}@{arg['pos']}:{'w' * 300}"]}

    def collect(state: FanState) -> dict[str, Any]:
        return {"total": len(state["results"])}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("worker", worker)
    builder.add_node("collect", collect)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["worker"])
    builder.add_edge("worker", "collect")
    builder.add_edge("collect", END)
    return builder


@LOCAL_BOTH_S3_ASYNC
async def test_send_fan_out(mode: str, saver: ObjectStoreSaver) -> None:
    d = Differ(Runner(mode), saver, InMemorySaver(), _fan_builder())
    config = _thread("fan")
    for _ in range(2):
        out = await d.invoke({"results": []}, config)
    assert out["total"] == 16
    s_ours, _ = await d.state(config)
    assert len(s_ours.values["results"]) == 16

    history, _ = await d.history(config)
    t_ours, t_ref = await d.tuples("list(thread)", config, expect=len(history))
    # The checkpoint the 8 workers ran on holds their 8 writes, in the same order.
    fanned = [t for t in t_ours if sum(w[1] == "results" for w in t.pending_writes or []) == 8]
    fanned_ref = [t for t in t_ref if sum(w[1] == "results" for w in t.pending_writes or []) == 8]
    assert len(fanned) == 2 and len(fanned_ref) == 2
    for t, r in zip(fanned, fanned_ref, strict=True):
        values = [w[2] for w in t.pending_writes or [] if w[1] == "results"]
        assert values == [w[2] for w in r.pending_writes or [] if w[1] == "results"]
        assert len(set(map(tuple, values))) == 8
    sends = [w for t in t_ours for w in t.pending_writes or [] if isinstance(w[2], Send)]
    assert len(sends) == 16


# --- e. DeltaChannel ---------------------------------------------------------------------


def _delta_view(history: Any) -> dict[str, Any]:
    return {
        ch: {
            "writes": [(w[1], w[2]) for w in entry["writes"]],
            "has_seed": "seed" in entry,
            "seed": entry.get("seed"),
        }
        for ch, entry in history.items()
    }


@LOCAL_BOTH_S3_ASYNC
async def test_delta_channel(mode: str, saver: ObjectStoreSaver) -> None:
    d = Differ(Runner(mode), saver, InMemorySaver(), delta_builder())
    config = _thread("delta")
    await d.invoke({"log": ["start"], "count": 0}, config)  # 4 rounds
    await d.invoke({"log": ["more"]}, config)  # 4 more
    s_ours, _ = await d.state(config)
    assert s_ours.values["log"] == expected_log(8)

    history, _ = await d.history(config)
    t_ours, t_ref = await d.tuples("list(thread)", config, expect=len(history))
    # Some checkpoints hold a snapshot of the channel, others none (replayed).
    assert any("log" in t.checkpoint["channel_values"] for t in t_ours)
    assert any(
        "log" not in t.checkpoint["channel_values"] and "log" in t.checkpoint["channel_versions"]
        for t in t_ours
    )

    replayed = 0
    for i, (t, r) in enumerate(zip(t_ours, t_ref, strict=True)):
        h_ours = await d.run.delta_history(d.ours, t.config, ["log", "count"])
        h_ref = await d.run.delta_history(d.ref, r.config, ["log", "count"])
        assert set(h_ours) == {"log", "count"}
        assert _delta_view(h_ours) == _delta_view(h_ref), f"delta history of list[{i}] differs"
        cp = t.checkpoint
        if "log" in cp["channel_versions"] and "log" not in cp["channel_values"]:
            # Seed plus writes rebuild the value the graph saw at this checkpoint.
            seed = h_ours["log"].get("seed")
            base = list(seed.value) if seed is not None else []
            rebuilt = extend_log(base, [w[2] for w in h_ours["log"]["writes"]])
            assert rebuilt == history[i].values["log"], f"replay of list[{i}]"
            replayed += 1
    assert replayed > 3

    head_ours = await d.run.delta_history(d.ours, config, ["log"])
    head_ref = await d.run.delta_history(d.ref, config, ["log"])
    assert _delta_view(head_ours) == _delta_view(head_ref)
    assert head_ours["log"]["writes"] or "seed" in head_ours["log"]


# --- put_writes: a task's repeated special write ------------------------------------------


@LOCAL_BOTH_S3_ASYNC
async def test_put_writes_repeated_special_channel_last_wins(
    mode: str, saver: ObjectStoreSaver
) -> None:
    """A task that finishes after resumes sends every ``__resume__`` write in one call.

    LangGraph does that (see ``test_interrupt_resume``): ``[(RESUME, [a]),
    (RESUME, [a, b]), ...]``. Both map to the same write index (special
    channel), and InMemorySaver keeps the last one. Repeated, so a race
    between the two writes cannot pass by luck.
    """
    runner = Runner(mode)
    ref = InMemorySaver()
    writes = [("__resume__", ["a"]), ("__resume__", ["a", "b"]), ("answer", "x" * 2000)]
    for attempt in range(20):
        seen = []
        for s in (saver, ref):
            config: RunnableConfig = {
                "configurable": {"thread_id": f"dup-{attempt}", "checkpoint_ns": ""}
            }
            checkpoint = empty_checkpoint()
            if mode == "sync":
                stored = await asyncio.to_thread(s.put, config, checkpoint, {}, {})
                await asyncio.to_thread(s.put_writes, stored, writes, "task-1", "~path")
            else:
                stored = await s.aput(config, checkpoint, {}, {})
                await s.aput_writes(stored, writes, "task-1", "~path")
            tup = await runner.get_tuple(s, stored)
            assert tup is not None
            seen.append(tup.pending_writes)
        assert seen[1] == [("task-1", "__resume__", ["a", "b"]), ("task-1", "answer", "x" * 2000)]
        assert seen[0] == seen[1], f"attempt {attempt}: the last __resume__ write must win"
