"""A real graph with the saver and the long-term store on one bucket, and the
store's configuration entry points (create_store, langgraph.json)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, TypedDict

import pytest
from backends import Backend
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.config import create_store, langgraph_store


class State(TypedDict, total=False):
    said: str
    recalled: list[str]


def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> State:
    user = config["configurable"]["user_id"]
    if state.get("said", "").startswith("remember "):
        fact = state["said"].removeprefix("remember ")
        store.put(("memories", user), uuid.uuid4().hex, {"fact": fact})
    found = store.search(("memories", user), limit=10)
    return {"recalled": [m.value["fact"] for m in found]}


def _graph(saver: ObjectStoreSaver, store: ObjectStoreStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder.compile(checkpointer=saver, store=store)


def test_memories_cross_threads_on_one_bucket(s3_endpoint: Any, s3_bucket: str) -> None:
    saver = ObjectStoreSaver(s3_endpoint.lean_store(s3_bucket, "app/"))
    store = ObjectStoreStore(s3_endpoint.lean_store(s3_bucket, "app/"))
    with saver, store:
        graph = _graph(saver, store)
        one = {"configurable": {"thread_id": "t-1", "user_id": "ada"}}
        two = {"configurable": {"thread_id": "t-2", "user_id": "ada"}}
        other = {"configurable": {"thread_id": "t-3", "user_id": "bob"}}
        graph.invoke({"said": "remember likes cats"}, one)
        graph.invoke({"said": "remember lives in Turin"}, one)
        out = graph.invoke({"said": "what do you know?"}, two)
        assert out["recalled"] == ["likes cats", "lives in Turin"]
        assert graph.invoke({"said": "hello"}, other)["recalled"] == []
        # each thread's state is in the saver, the memories in the store, one bucket
        assert graph.get_state(two).values["recalled"] == ["likes cats", "lives in Turin"]
        client = s3_endpoint.client()
        keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]]
        assert any(k.startswith("app/threads/_t-1/") for k in keys)
        assert any(k.startswith("app/store/it/_memories/_ada/i/") for k in keys)
        assert store.list_namespaces() == [("memories", "ada")]


def test_memories_async_graph(tmp_path: Any) -> None:
    saver = ObjectStoreSaver.from_directory(tmp_path)
    store = ObjectStoreStore.from_directory(tmp_path)

    async def node(state: State, config: RunnableConfig, *, store: BaseStore) -> State:
        user = config["configurable"]["user_id"]
        if state.get("said", "").startswith("remember "):
            await store.aput(("memories", user), "k", {"fact": state["said"][9:]})
        return {"recalled": [m.value["fact"] for m in await store.asearch(("memories", user))]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=saver, store=store)

    async def run() -> list[str]:
        await graph.ainvoke(
            {"said": "remember tea"}, {"configurable": {"thread_id": "a", "user_id": "u"}}
        )
        out = await graph.ainvoke(
            {"said": "?"}, {"configurable": {"thread_id": "b", "user_id": "u"}}
        )
        return out["recalled"]

    with saver, store:
        assert asyncio.run(run()) == ["tea"]


def test_create_store_precedence(tmp_path: Any) -> None:
    mine = InMemoryStore()
    assert create_store(mine, environ={"OBJSTORE_SAVER_URL": "file:///nowhere"}) is mine
    found = create_store(environ={"OBJSTORE_SAVER_URL": f"file://{tmp_path}"})
    assert isinstance(found, ObjectStoreStore)
    found.close()
    assert isinstance(create_store(environ={}), InMemoryStore)


def test_langgraph_store_reads_url_and_ttl(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_URL", f"file://{tmp_path}")
    monkeypatch.setenv("LANGGRAPH_STORE", '{"path": "x", "ttl": {"default_ttl": 5}}')

    async def run() -> None:
        async with langgraph_store() as store:
            assert isinstance(store, ObjectStoreStore)
            assert store.ttl_config == {"default_ttl": 5}
            await store.aput(("n",), "k", {"v": 1})
            item = await store.aget(("n",), "k")
            assert item is not None and item.value == {"v": 1}

    asyncio.run(run())
    monkeypatch.delenv("OBJSTORE_SAVER_URL")
    with pytest.raises(Exception, match="OBJSTORE_SAVER_URL is not set"):
        asyncio.run(run())


# --- memory across threads on every backend and mode (get_store() / the runtime) ------


class Turn(TypedDict, total=False):
    said: str
    recalled: list[str]


def _remember_sync(state: Turn, config: RunnableConfig) -> Turn:
    store = get_store()
    user = config["configurable"]["user_id"]
    if state["said"].startswith("remember "):
        store.put(
            ("memories", user),
            f"m{len(store.search(('memories', user)))}",
            {"fact": state["said"].removeprefix("remember ")},
        )
    return {"recalled": [m.value["fact"] for m in store.search(("memories", user))]}


async def _remember_async(state: Turn, config: RunnableConfig, runtime: Any) -> Turn:
    store = runtime.store
    user = config["configurable"]["user_id"]
    if state["said"].startswith("remember "):
        n = len(await store.asearch(("memories", user)))
        await store.aput(("memories", user), f"m{n}", {"fact": state["said"][9:]})
    return {"recalled": [m.value["fact"] for m in await store.asearch(("memories", user))]}


@pytest.mark.backends("local", "s3-lean")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_memory_across_threads_every_backend(backend: Backend, mode: str) -> None:
    """Saver and store on ONE root: memories written in one thread are read in another,
    the threads' states are the saver's, and a fresh process-like pair sees them too."""
    root = backend.store()

    def build(saver: ObjectStoreSaver, store: ObjectStoreStore) -> Any:
        builder = StateGraph(Turn)
        if mode == "sync":
            builder.add_node("remember", _remember_sync)
        else:

            async def node(state: Turn, config: RunnableConfig, runtime: Runtime) -> Turn:
                return await _remember_async(state, config, runtime)

            builder.add_node("remember", node)
        builder.add_edge(START, "remember")
        return builder.compile(checkpointer=saver, store=store)

    def cfg(thread: str, user: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread, "user_id": user}}

    def invoke(graph: Any, said: str, config: RunnableConfig) -> list[str]:
        if mode == "sync":
            return graph.invoke({"said": said}, config)["recalled"]
        return asyncio.run(graph.ainvoke({"said": said}, config))["recalled"]

    with ObjectStoreSaver(root) as saver, ObjectStoreStore(root) as store:
        graph = build(saver, store)
        assert invoke(graph, "remember tea", cfg("t-1", "ada")) == ["tea"]
        assert invoke(graph, "remember Turin", cfg("t-1", "ada")) == ["tea", "Turin"]
        assert invoke(graph, "hello", cfg("t-2", "ada")) == ["tea", "Turin"]
        assert invoke(graph, "hello", cfg("t-3", "bob")) == []
    with ObjectStoreSaver(root) as saver, ObjectStoreStore(root) as store:
        graph = build(saver, store)  # new instances: everything came from the root
        assert graph.get_state(cfg("t-2", "ada")).values == {
            "said": "hello",
            "recalled": ["tea", "Turin"],
        }
        assert graph.get_state(cfg("t-1", "ada")).values["said"] == "remember Turin"
        assert [i.value for i in store.search(("memories", "ada"))] == [
            {"fact": "tea"},
            {"fact": "Turin"},
        ]
        assert saver.get_tuple(cfg("t-3", "bob")) is not None
        assert store.list_namespaces() == [("memories", "ada")]


_LOADER = """
import asyncio
from langgraph_api.store import _load_store, _yield_store
from objstore_saver import ObjectStoreStore

async def run():
    value = _load_store("objstore_saver.config.langgraph_store")
    async with _yield_store(value) as store:
        assert isinstance(store, ObjectStoreStore), type(store)
        assert store.ttl_config == {"default_ttl": 3}, store.ttl_config
        await store.aput(("server",), "k", {"v": 1})
        print([i.key for i in await store.asearch(("server",))])

asyncio.run(run())
"""


def test_langgraph_server_loader_takes_the_dotted_path(tmp_path: Any) -> None:
    """langgraph-api's own loader (in a process configured as ``langgraph dev`` does):
    the path splits at the last dot, the factory is entered as an async context
    manager, and the store it yields is ours, with the block's TTL."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "OBJSTORE_SAVER_URL": f"file://{tmp_path}",
        "LANGGRAPH_STORE": json.dumps(
            {"path": "objstore_saver.config.langgraph_store", "ttl": {"default_ttl": 3}}
        ),
        "DATABASE_URI": ":memory:",
        "REDIS_URI": "fake",
        "MIGRATIONS_PATH": "__inmem",
    }
    done = subprocess.run(
        [sys.executable, "-c", _LOADER], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "['k']"
