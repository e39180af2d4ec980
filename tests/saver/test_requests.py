"""Request and byte counts, measured through MeteredStore (never timed)."""

from __future__ import annotations

import base64
import os
import random
from typing import Any

import msgpack
import pytest
from backends import Backend
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, MessagesState, StateGraph
from layout import is_manifest, is_write
from payloads import incompressible_text
from standalone_values import parts_value

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec
from objstore_saver.format.codec import ELEMENT_INLINE_MAX, PART_SIZE, Ref, make_payload
from objstore_saver.storage import LocalStore, MeteredStore

TWO_MIB = 2 * 1024 * 1024


pytestmark = pytest.mark.backends("local", "s3-boto3")


@pytest.fixture
def metered(backend: Backend) -> MeteredStore:
    return MeteredStore(backend.store("req/"), log=True)


def _chat_graph(saver: ObjectStoreSaver) -> Any:
    def bot(state: MessagesState) -> dict:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer {n} " + "a" * 800, id=f"ai-{n}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def _put_chain(saver: ObjectStoreSaver, thread: str, n: int) -> dict:
    config: dict = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"counter": i}
        cp["channel_versions"] = {"counter": i + 1}
        config = saver.put(config, cp, {"source": "loop", "step": i}, {"counter": i + 1})
    return config


def test_latest_lookup_costs_the_same_at_1000_checkpoints_as_at_3(
    metered: MeteredStore,
) -> None:
    costs = {}
    for n in (3, 1000):
        thread = f"thread-{n}"
        with ObjectStoreSaver(metered) as writer:
            head = _put_chain(writer, thread, n)
        # A fresh saver: nothing is remembered, every read goes to the store.
        with ObjectStoreSaver(metered) as reader:
            metered.reset()
            tup = reader.get_tuple({"configurable": {"thread_id": thread}})
            costs[n] = metered.snapshot()
        assert tup is not None
        assert tup.config["configurable"]["checkpoint_id"] == head["configurable"]["checkpoint_id"]
        assert tup.checkpoint["channel_values"] == {"counter": n - 1}
    assert costs[3].requests == costs[1000].requests
    # One LIST of the namespace (the head and its writes), one GET of the head.
    assert costs[1000].requests == {"put": 0, "get": 1, "list": 1, "delete": 0}


def test_appended_message_writes_bounded_objects_and_bytes(metered: MeteredStore) -> None:
    per_turn = []
    with ObjectStoreSaver(metered) as saver:
        graph = _chat_graph(saver)
        config = {"configurable": {"thread_id": "chat"}}
        for turn in range(45):  # seals five 16-element chunks
            metered.reset()
            graph.invoke(
                {"messages": [HumanMessage(f"question {turn} " + "q" * 200, id=f"h{turn}")]},
                config,
            )
            per_turn.append(metered.snapshot())
        messages = graph.get_state(config).values["messages"]
    assert len(messages) == 90

    puts = [m.put_requests for m in per_turn]
    sent = [m.bytes_sent for m in per_turn]
    # Objects written per turn do not grow with the conversation (90 messages by
    # the end). 5 per turn: 3 manifests (the messages list's root and tail
    # inline in each, format version 2) and 2 writes (the input task's two
    # writes are one write group, spec §4.7); these messages compress to
    # under 128 bytes and sit inline in the list's tail; every 8th message
    # seals a segment, embedded in the manifest (no object of its own).
    # LangGraph's background put and put_writes may both write an object
    # they share before either knows it is stored (+1 or 2).
    assert max(puts[2:]) <= 9, puts
    assert sorted(puts[2:])[len(puts[2:]) // 2] == 5, puts
    # Bytes written per turn stay flat: the history is never rewritten.
    # Compared over whole seal cycles (2 messages a turn, a segment of 8 every
    # 4 turns): each manifest carries the list's segment references, one per
    # size (two of one size merge), 54 bytes each with its location: 1.5 on
    # average in turns 4-7, 2.5 in turns 40-43 (10 and 11 runs of 8: 0b1010,
    # 0b1011), about 160 bytes a turn more over 3 manifests; the merges'
    # copies come on top. Rewriting the history would be many times more.
    early, late = sum(sent[4:8]) / 4, sum(sent[40:44]) / 4
    assert late < early * 1.2, (early, late, sent)
    assert max(sent[2:]) < 8 * 1024, sent
    total_history_bytes = sum(len(str(m.content)) for m in messages)
    assert sent[-1] < total_history_bytes / 5
    # The read at the start of each turn is constant too: one LIST names the
    # newest manifest and its pending writes; its bytes are the ones this
    # saver wrote at the end of the previous turn, so no GET.
    assert {m.get_requests for m in per_turn[1:]} == {0}
    assert {m.list_requests for m in per_turn[1:]} == {1}


@pytest.mark.parametrize(
    ("text", "as_list", "objects"),
    [
        # 1.3 KiB serialized, well under 1 KiB compressed: inline in the write,
        # alone or as a list that spec §4.4 would store element by element.
        ("answer " + "a" * 1200, False, 0),
        ("answer " + "a" * 1200, True, 0),
        # 12 KiB that does not compress (9 KiB compressed): inline too, alone
        # or as a list (a tool's result: no object of its own).
        (incompressible_text(12_000, 5), False, 0),
        (incompressible_text(12_000, 5), True, 0),
        # 30 KB that does not compress: over 16 KiB compressed, a value object
        # of its own, or, in a list (its root inline in the write), its
        # element's object.
        (incompressible_text(30_000, 5), False, 1),
        (incompressible_text(30_000, 5), True, 1),
    ],
    ids=[
        "compressible",
        "compressible-list",
        "incompressible",
        "incompressible-list",
        "over-the-limit",
        "over-the-limit-list",
    ],
)
def test_pending_write_keeps_a_value_inline_when_it_compresses_to_the_inline_limit(
    metered: MeteredStore, text: str, as_list: bool, objects: int
) -> None:
    reply = AIMessage(text, id="ai-1")
    value: Any = [reply] if as_list else reply
    config = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
    with ObjectStoreSaver(metered) as saver:
        config = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        metered.reset()
        saver.put_writes(config, [("reply", value)], "task-1")
        puts = [e.key for e in metered.log if e.op == "put"]
        # Spec §6.5 step 2: one object for the write, plus objects of the value
        # only when its compressed payload exceeds the inline limit.
        assert len([k for k in puts if is_write(k)]) == 1, puts
        assert len([k for k in puts if "/objects/" in k]) == objects, puts
        assert len(saver.serde.dumps_typed(value)[1]) > 1024
    # A fresh saver (no memory of these bytes) reads the write back.
    with ObjectStoreSaver(metered) as reader:
        stored = reader.get_tuple(config)
        assert stored is not None
        assert stored.pending_writes == [("task-1", "reply", value)]


def test_reply_written_inline_is_stored_by_the_next_put_that_lists_it(
    metered: MeteredStore,
) -> None:
    # The write no longer stores the reply's element object (spec §6.5 step
    # 2), so the checkpoint that appends the reply must: a fresh saver reads
    # the list back from the store alone.
    text = "answer " + " ".join(f"word{i}" for i in range(300))
    graph_config = {"configurable": {"thread_id": "chat-inline"}}
    with ObjectStoreSaver(metered) as saver:
        # Too large to sit inline in the list (spec §4.4): an object of its own.
        element = saver.serde.dumps_typed(AIMessage(text, id="ai-1"))
        assert len(make_payload(*element).data) > ELEMENT_INLINE_MAX
        graph = _chat_graph_replying(saver, text)
        graph.invoke({"messages": [HumanMessage("q", id="h0")]}, graph_config)
        bodies = [
            msgpack.unpackb(metered.get(e.key))
            for e in metered.log
            if e.op == "put" and is_write(e.key)
        ]
        replies = [b["v"] for b in bodies if b["k"] == "write" and b["channel"] == "messages"]
        assert [entry[0] for entry in replies] == ["i"], bodies
    with ObjectStoreSaver(metered) as reader:
        messages = _chat_graph_replying(reader, text).get_state(graph_config).values["messages"]
        assert [m.content for m in messages] == ["q", text]


def _chat_graph_replying(saver: ObjectStoreSaver, text: str) -> Any:
    def bot(state: MessagesState) -> dict:
        return {"messages": [AIMessage(text, id=f"ai-{len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def test_20_mib_tool_result_round_trips_with_no_body_over_2_mib(
    metered: MeteredStore,
) -> None:
    rng = random.Random(7)
    content = base64.b64encode(rng.randbytes(15 * 1024 * 1024)).decode()  # 20 MiB of text
    assert len(content) == 20 * 1024 * 1024
    with ObjectStoreSaver(metered) as saver:
        config = {"configurable": {"thread_id": "tool", "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        message = ToolMessage(content, tool_call_id="call-1", id="tool-1")
        cp["channel_values"] = {"messages": [HumanMessage("fetch", id="h"), message]}
        cp["channel_versions"] = {"messages": 1}
        metered.reset()
        stored = saver.put(config, cp, {"source": "loop", "step": 0}, {"messages": 1})
        written = metered.snapshot()
    with ObjectStoreSaver(metered) as reader:
        metered.reset()
        tup = reader.get_tuple(stored)
        read = metered.snapshot()
    assert tup is not None
    assert tup.checkpoint["channel_values"]["messages"][1].content == content
    assert written.largest_request_body <= TWO_MIB
    assert read.largest_response_body <= TWO_MIB
    assert written.largest_request_body <= PART_SIZE + 1024
    parts = [e for e in metered.log if e.op == "get" and e.nbytes > PART_SIZE // 2]
    assert len(parts) >= (len(content) * 3 // 4) // PART_SIZE  # it really was split


@pytest.mark.parametrize("where", ["embedded", "alone"])
def test_identical_values_are_stored_once_per_thread(metered: MeteredStore, where: str) -> None:
    # 1-256 KiB serialized: embedded in a manifest; over 256 KiB compressed: parts, alone.
    prompt = "You are Chat. " + "rule " * 300 if where == "embedded" else parts_value(1)
    with ObjectStoreSaver(metered) as saver:
        config: dict = {"configurable": {"thread_id": "dedupe", "checkpoint_ns": ""}}
        for i in range(3):
            cp = empty_checkpoint()
            cp["channel_values"] = {"system": prompt, "turn": i}
            cp["channel_versions"] = {"system": i + 1, "turn": i + 1}
            # A new version each time: the value is re-emitted, not carried over.
            config = saver.put(config, cp, {"step": i}, {"system": i + 1, "turn": i + 1})
    object_puts = [e for e in metered.log if e.op == "put" and "/objects/" in e.key]
    manifests = [e.key for e in metered.log if e.op == "put" and is_manifest(e.key)]
    assert len(manifests) == 3
    decoded = [codec.decode_manifest(metered.inner.get(key), key) for key in manifests]
    first = decoded[0]
    if where == "alone":
        assert len(object_puts) == 3  # the parts object and its two parts, once
        assert all(m.channels["system"] == first.channels["system"] for m in decoded)
        return
    # Embedded by the first put only; the others locate it there (spec §6.1 step 3).
    assert object_puts == []
    entry = first.channels["system"]
    assert entry == Ref("b", entry.digest, first.checkpoint_id)
    assert [entry.digest in codec.embedded_objects(m) for m in decoded] == [True, False, False]
    assert all(m.channels["system"] == entry for m in decoded)


def test_unchanged_channel_is_reused_without_serializing(tmp_path: Any) -> None:
    calls = []

    class Counting:
        def __init__(self, value: str) -> None:
            self.value = value

        def __reduce__(self) -> Any:  # pragma: no cover - never pickled
            raise AssertionError("serialized")

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    class SpySerde(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            calls.append(obj)
            return super().dumps_typed(obj)

    with ObjectStoreSaver(LocalStore(tmp_path), serde=SpySerde()) as saver:
        big = "x" * 5000
        config: dict = {"configurable": {"thread_id": "reuse", "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        cp["channel_values"] = {"big": big, "n": 0}
        cp["channel_versions"] = {"big": 1, "n": 1}
        config = saver.put(config, cp, {}, {"big": 1, "n": 1})
        calls.clear()
        cp2 = empty_checkpoint()
        cp2["channel_values"] = {"big": big, "n": 1}
        cp2["channel_versions"] = {"big": 1, "n": 2}
        config = saver.put(config, cp2, {}, {"n": 2})
        assert big not in calls
        assert saver.get_tuple(config).checkpoint["channel_values"] == {"big": big, "n": 1}


def test_restarted_saver_learns_the_parent_and_skips_stored_chunks(
    metered: MeteredStore,
) -> None:
    with ObjectStoreSaver(metered) as saver:
        graph = _chat_graph(saver)
        config = {"configurable": {"thread_id": "restart"}}
        for turn in range(40):
            graph.invoke(
                {"messages": [HumanMessage(f"q{turn} " + "q" * 300, id=f"h{turn}")]}, config
            )
        head = saver.get_tuple(config)
    assert head is not None
    with ObjectStoreSaver(metered) as fresh:
        metered.reset()
        messages = head.checkpoint["channel_values"]["messages"] + [
            HumanMessage("one more " + "m" * 300, id="extra")
        ]
        cp = dict(head.checkpoint)
        cp["id"] = empty_checkpoint()["id"]
        cp["channel_values"] = {"messages": messages}
        versions = dict(cp["channel_versions"])
        versions["messages"] = fresh.get_next_version(versions["messages"], None)
        cp["channel_versions"] = versions
        fresh.put(head.config, cp, {"step": 999}, {"messages": versions["messages"]})
        stats = metered.snapshot()
    object_puts = [e for e in metered.log if e.op == "put" and "/objects/" in e.key]
    # The new element, the new tail chunk and the new list object — not 80 elements.
    assert len(object_puts) <= 3, object_puts
    assert stats.get_requests <= 4


def test_random_history_is_not_rewritten(metered: MeteredStore) -> None:
    rng = random.Random(3)
    with ObjectStoreSaver(metered) as saver:
        graph = _chat_graph(saver)
        config = {"configurable": {"thread_id": "random"}}
        sent = []
        for turn in range(12):
            text = " ".join(
                rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(60)
            )
            metered.reset()
            graph.invoke({"messages": [HumanMessage(text, id=f"h{turn}")]}, config)
            sent.append(metered.snapshot().bytes_sent)
    assert max(sent[6:]) < 2 * max(sent[1:4]), sent
    assert os.path.sep  # keep os import used on every platform


def test_a_write_call_past_the_budget_stores_its_values_alone(metered: MeteredStore) -> None:
    # 150 values of 12 KB that do not compress: each fits inline (spec §6.5
    # step 2), all together would pass 1 MiB, so they stand alone instead.
    writes = [(f"c{i}", incompressible_text(12_000, 100 + i)) for i in range(150)]
    config = {"configurable": {"thread_id": "budget", "checkpoint_ns": ""}}
    with ObjectStoreSaver(metered) as saver:
        config = saver.put(config, empty_checkpoint(), {"step": 0}, {})
        metered.reset()
        saver.put_writes(config, writes, "task-1")
        puts = [e for e in metered.log if e.op == "put"]
        [write] = [e for e in puts if is_write(e.key)]
        assert 0 < write.nbytes <= 1024 * 1024
        assert len([e for e in puts if "/objects/" in e.key]) == 150
    with ObjectStoreSaver(metered) as reader:
        stored = reader.get_tuple(config)
        assert stored is not None
        assert stored.pending_writes == [("task-1", c, v) for c, v in writes]
