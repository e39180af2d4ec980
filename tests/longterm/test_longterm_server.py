"""The real LangGraph dev server with ObjectStoreStore as its store (``langgraph.json``
``"store": {"path": "objstore_saver.config.langgraph_store"}``) and ObjectStoreSaver
as its checkpointer, on one directory: a graph writes memories in one thread and
reads them in another, the server's store API reads and writes the same items,
and everything is in the directory afterwards (read back by a fresh store). Once
in clear, once with a master key in the project's ``.env``: then no stored byte
holds a memory, and only the key reads them back."""

from __future__ import annotations

import base64
import json
import os
import textwrap
from pathlib import Path

import pytest
from dev_server import dev_server, server_env, server_log
from langgraph_sdk import get_client

from objstore_saver import ObjectStoreStore
from objstore_saver.crypto.names import KEY_ENV
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.errors import EncryptedObjectError
from objstore_saver.format import store_keys

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


def _project(tmp_path: Path, root: Path, master_key: str | None) -> Path:
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
    env = f"OBJSTORE_SAVER_URL={root.as_uri()}\n"
    if master_key is not None:
        env += f"{KEY_ENV}={master_key}\n"
    (project / ".env").write_text(env)
    return project


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
async def test_memory_across_threads_through_the_real_server(
    tmp_path: Path, encrypted: bool
) -> None:
    root = tmp_path / "memory"
    master_key = base64.b64encode(os.urandom(32)).decode() if encrypted else None
    project = _project(tmp_path, root, master_key)
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
    setting: ClientEncryption | bool = False
    if master_key is not None:
        setting = ClientEncryption.from_env({KEY_ENV: master_key}) or False
        assert setting
    with ObjectStoreStore.from_directory(root, client_encryption=setting) as store:
        assert [i.value["fact"] for i in store.search(("memories", "ada"))] == [
            "tea",
            "Turin",
            "cats",
        ]
    assert (root / store_keys.item_key(("memories", "ada"), "m2")).is_file()
    assert any((root / "threads").iterdir())
    stored = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert (b"Turin" in stored) is not encrypted
    assert (root / "keys").is_dir() is encrypted
    if encrypted:  # without the key, the store says so
        clear = ObjectStoreStore.from_directory(root, client_encryption=False)
        with clear, pytest.raises(EncryptedObjectError, match="store/ix/_memories/_ada/x/"):
            clear.search(("memories", "ada"))
