"""The real LangGraph dev server with ObjectStoreStore as its store (``langgraph.json``
``"store": {"path": "objstore_saver.config.langgraph_store"}``) and ObjectStoreSaver
as its checkpointer, on one directory: a graph writes memories in one thread and
reads them in another, the server's store API reads and writes the same items,
and everything is in the directory afterwards (read back by a fresh store)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from dev_server import dev_server, server_env, server_log
from langgraph_sdk import get_client

from objstore_saver import ObjectStoreStore
from objstore_saver.longterm import layout

GRAPH = textwrap.dedent(
    """
    from typing import TypedDict

    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime


    class State(TypedDict, total=False):
        user: str
        said: str
        recalled: list[str]


    async def remember(state: State, runtime: Runtime) -> State:
        ns = ("memories", state["user"])
        if state["said"].startswith("remember "):
            n = len(await runtime.store.asearch(ns, limit=100))
            await runtime.store.aput(ns, f"m{n}", {"fact": state["said"][9:]})
        return {"recalled": [m.value["fact"] for m in await runtime.store.asearch(ns)]}


    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    graph = builder.compile()
    """
)


def _project(tmp_path: Path, root: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "graph.py").write_text(GRAPH)
    config = {
        "dependencies": ["."],
        "graphs": {"memo": "./graph.py:graph"},
        "env": ".env",
        "checkpointer": {"path": "objstore_saver.config.langgraph_checkpointer"},
        "store": {"path": "objstore_saver.config.langgraph_store"},
    }
    (project / "langgraph.json").write_text(json.dumps(config))
    (project / ".env").write_text(f"OBJSTORE_SAVER_URL={root.as_uri()}\n")
    return project


async def test_memory_across_threads_through_the_real_server(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    project = _project(tmp_path, root)
    with dev_server(project, server_env({})) as (server, log_path):
        try:
            client = get_client(url=server)
            one = (await client.threads.create())["thread_id"]
            two = (await client.threads.create())["thread_id"]
            for said in ("remember tea", "remember Turin"):
                await client.runs.wait(one, "memo", input={"user": "ada", "said": said})
            out = await client.runs.wait(two, "memo", input={"user": "ada", "said": "hi"})
            assert out["recalled"] == ["tea", "Turin"]
            # the server's store API is the same store
            found = await client.store.search_items(["memories", "ada"])
            assert [i["value"] for i in found["items"]] == [{"fact": "tea"}, {"fact": "Turin"}]
            await client.store.put_item(["memories", "ada"], "m2", {"fact": "cats"})
            out = await client.runs.wait(two, "memo", input={"user": "ada", "said": "hi"})
            assert out["recalled"] == ["tea", "Turin", "cats"]
            state = await client.threads.get_state(one)
            assert state["values"]["recalled"] == ["tea", "Turin"]
        except BaseException as exc:
            raise AssertionError(f"{exc!r}\n--- server log ---\n{server_log(log_path)}") from exc
    # after the server stopped: memories and checkpoints are in the one directory
    with ObjectStoreStore.from_directory(root) as store:
        assert [i.value["fact"] for i in store.search(("memories", "ada"))] == [
            "tea",
            "Turin",
            "cats",
        ]
    assert (root / layout.item_key(("memories", "ada"), "m2")).is_file()
    assert any((root / "threads").iterdir())
