"""Helpers of the operator tests: a deterministic chat graph and saver comparisons."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph


def chat_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    """A one-node chat bot that echoes, compiled with ``saver``."""

    def bot(state: MessagesState) -> dict:
        turn = sum(1 for m in state["messages"] if m.type == "human")
        return {"messages": [AIMessage(f"(turn {turn}) echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def chat(saver: BaseCheckpointSaver[Any], thread_id: str, questions: list[str]) -> None:
    """Run one turn per question on ``thread_id``."""
    graph = chat_graph(saver)
    for q in questions:
        graph.invoke({"messages": [("user", q)]}, {"configurable": {"thread_id": thread_id}})


def add_pending_writes(saver: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """Pending writes on the thread's latest checkpoint: regular ones and a special one."""
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert latest is not None
    saver.put_writes(latest.config, [("messages", ["w0"]), ("notes", {"k": 1})], "task-a")
    saver.put_writes(latest.config, [("__interrupt__", {"value": "ask the user"})], "task-b")


def snapshot(saver: BaseCheckpointSaver[Any], thread_id: str) -> list[dict[str, Any]]:
    """Everything LangGraph reads of a thread, comparable across savers."""
    rows = []
    for tup in saver.list({"configurable": {"thread_id": thread_id}}):
        conf = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        cp = dict(tup.checkpoint)
        values = cp.pop("channel_values")
        rows.append(
            {
                "id": conf["checkpoint_id"],
                "ns": conf.get("checkpoint_ns", ""),
                "parent": parent,
                "metadata": dict(tup.metadata),
                "versions": {k: str(v) for k, v in cp["channel_versions"].items()},
                "versions_seen": repr(sorted(cp["versions_seen"].items())),
                "values": repr(sorted(values.items())),
                "writes": sorted(repr(w) for w in tup.pending_writes or []),
            }
        )
    rows.sort(key=lambda r: (r["ns"], r["id"]))
    return rows


#: The saver ``memory_source`` hands to ``migrate --from saver tests.ops_helpers:memory_source``.
MEMORY_SOURCE: dict[str, Any] = {}


def memory_source() -> BaseCheckpointSaver[Any]:
    """A source factory (``module:callable``) for in-process migration tests."""
    return MEMORY_SOURCE["saver"]


def subgraph_chat(saver: BaseCheckpointSaver[Any], thread_id: str, questions: list[str]) -> None:
    """Turns of a graph whose node is a subgraph: checkpoints in two namespaces."""
    inner = StateGraph(MessagesState)

    def bot(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"inner echo: {state['messages'][-1].content}")]}

    inner.add_node("bot", bot)
    inner.add_edge(START, "bot")
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "inner")
    graph = outer.compile(checkpointer=saver)
    for q in questions:
        graph.invoke({"messages": [("user", q)]}, {"configurable": {"thread_id": thread_id}})
