"""Threads for the viewer tests, written by real compiled graphs, and a served viewer."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import uvicorn
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt
from ops_helpers import chat, subgraph_chat

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import MeteredStore
from objstore_saver.storage.base import ObjectStore
from objstore_saver.viewer.app import create_app

#: A thread id with a "/", non-ASCII text and a literal "%2F": links must keep them apart.
ODD = "bob/ü %2F x"
#: A message that would run script, bold text and flip direction if not escaped.
HOSTILE = "<script>window.pwned=1</script><b>bold</b> \u202eevil rtl\u202c " + "x" * 50_000
#: The argument of the tool call: markup that must show as text in the call's arguments.
TOOL_ARG = "A-17<img src=x>"
#: The question the approval graph interrupts with, and the answer it resumes with.
QUESTION, ANSWER = "approve the refund of 42 EUR?", "approved by Dana"


class Server:
    """A viewer served by uvicorn in a thread on 127.0.0.1, port 0."""

    def __init__(self, store: ObjectStore, **options: Any) -> None:
        self.metered = MeteredStore(store)
        config = uvicorn.Config(
            create_app(self.metered, **options), host="127.0.0.1", port=0, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            assert self.thread.is_alive(), "uvicorn stopped while starting"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        self.client = httpx.Client(base_url=self.base, timeout=30)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.get(path, **kw)

    def requests_for(self, path: str) -> tuple[httpx.Response, Any]:
        """One GET and what it cost the store."""
        self.metered.reset()
        r = self.get(path)
        return r, self.metered.snapshot()

    def close(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(20)


def fork(saver: ObjectStoreSaver, thread_id: str) -> None:
    """Time travel: a new turn from the thread's first completed turn."""
    builder = StateGraph(MessagesState)
    builder.add_node("bot", lambda s: {"messages": [AIMessage("forked answer")]})
    builder.add_edge(START, "bot")
    graph = builder.compile(checkpointer=saver)
    history = list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))
    old = [h for h in history if len(h.values.get("messages", [])) == 2][-1]
    graph.invoke({"messages": [("user", "the other way")]}, old.config)


def approval(saver: ObjectStoreSaver, thread_id: str) -> None:
    """A graph that interrupts for a human's answer, then is resumed with it."""

    def ask(state: MessagesState) -> dict:
        answer = interrupt(QUESTION)
        return {"messages": [AIMessage(f"refund: {answer}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"messages": [("user", "refund me")]}, config)
    graph.invoke(Command(resume=ANSWER), config)


def tool_use(saver: ObjectStoreSaver, thread_id: str) -> None:
    """A model that calls a tool (run by LangGraph's ToolNode), then answers with its result."""

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    def model(state: MessagesState) -> dict:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage(f"done: {state['messages'][-1].content}")]}
        call = {"name": "lookup_order", "args": {"order_id": TOOL_ARG}, "id": "call_7"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([lookup_order]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=saver)
    graph.invoke(
        {"messages": [("user", "where is my order?")]}, {"configurable": {"thread_id": thread_id}}
    )


def nested_subgraphs(saver: ObjectStoreSaver, thread_id: str) -> None:
    """A supervisor whose node ``team`` is a subgraph whose node ``worker`` is another."""

    def work(state: MessagesState) -> dict:
        return {"messages": [AIMessage(f"worker did: {state['messages'][-1].content}")]}

    worker = StateGraph(MessagesState)
    worker.add_node("work", work)
    worker.add_edge(START, "work")
    team = StateGraph(MessagesState)
    team.add_node("worker", worker.compile())
    team.add_edge(START, "worker")
    sup = StateGraph(MessagesState)
    sup.add_node("team", team.compile())
    sup.add_edge(START, "team")
    graph = sup.compile(checkpointer=saver)
    graph.invoke(
        {"messages": [("user", "file the report")]}, {"configurable": {"thread_id": thread_id}}
    )


class Noted(MessagesState):
    """Messages and a running summary: two channels."""

    summary: str


def noted_chat(saver: ObjectStoreSaver, thread_id: str, questions: list[str]) -> None:
    """A chat bot that also keeps a summary channel."""

    def bot(state: Noted) -> dict:
        q = state["messages"][-1].content
        return {"messages": [AIMessage(f"noted: {q[:20]}")], "summary": f"{len(q)} characters"}

    builder = StateGraph(Noted)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    graph = builder.compile(checkpointer=saver)
    for q in questions:
        graph.invoke({"messages": [("user", q)]}, {"configurable": {"thread_id": thread_id}})


def populate(saver: ObjectStoreSaver) -> None:
    """The threads of viewer/test_viewer.py: a chat with a fork, a subgraph, odd and hostile ids."""
    chat(saver, "alice", ["hello", "how are you?", "bye"])
    fork(saver, "alice")
    subgraph_chat(saver, "sup", ["delegate this"])
    chat(saver, ODD, ["a" * 5000])
    chat(saver, "hostile", [HOSTILE])
    latest = saver.get_tuple({"configurable": {"thread_id": "hostile"}})
    assert latest is not None
    saver.put_writes(latest.config, [("blob", b"\x00\xff<script>x</script>")], "task-b")
    sup = saver.get_tuple({"configurable": {"thread_id": "sup"}})
    assert sup is not None
    saver.put_writes(sup.config, [("__interrupt__", {"value": "ask the user"})], "task-i")
