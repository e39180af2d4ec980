"""The real LangGraph dev server with objstore-saver as its checkpointer.

Each case starts ``langgraph dev`` (langgraph-cli, in-memory runtime) on
127.0.0.1 in a subprocess, with the ``langgraph.json``, graph and ``.env`` of
``docs/langgraph-server.md`` written out as the page gives them, and drives a
thread through the server's HTTP API with ``langgraph_sdk``: create, run, read
state and history, run again, copy, prune, delete. It checks the answers and
that the objects are where the saver keeps them, on a local directory and on
the S3 endpoint of the test session. Other cases run the page's own-factory
example, check that a bad TTL setting or a missing bucket stops the server
with a message naming it, and call the server's prune path (its
custom-checkpointer adapter) on the saver.

It runs ``langgraph dev`` itself rather than the server's ASGI app under
uvicorn: that is the command users run, and it is what sets the environment
the app reads at import (``LANGGRAPH_CHECKPOINTER``, the runtime edition).
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import Backend
from deleted import not_tombstones, the_tombstone
from dev_server import (
    START_TIMEOUT_S,
    dev_server,
    free_port,
    server_env,
    server_log,
    spawn_server,
    stop_server,
)
from langgraph_sdk import get_client
from layout import is_manifest
from repo_root import ROOT

from objstore_saver import LocalStore
from objstore_saver.format import keys
from objstore_saver.storage import ObjectStore

DOC = ROOT / "docs" / "langgraph-server.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def _documented_project() -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The page's ``langgraph.json``, graph file and ``checkpointer.ttl`` example."""
    configs = [json.loads(b) for b in _blocks("json") if b.lstrip().startswith("{")]
    (project,) = [c for c in configs if "graphs" in c]
    (with_ttl,) = [c for c in configs if "ttl" in c.get("checkpointer", {})]
    (graph,) = [b for b in _blocks("python") if "StateGraph" in b]
    return project, graph, with_ttl["checkpointer"]["ttl"]


def test_every_documented_checkpointer_path_is_one_the_server_loads() -> None:
    """The server splits a path at its last ``:`` only when it has ``/`` or
    ``.py:`` (a file); otherwise at its last ``.`` (``_load_checkpointer``)."""
    texts = [DOC.read_text(), (ROOT / "README.md").read_text()]
    paths = [p for t in texts for p in re.findall(r'"path": "([^"]+)"', t)]
    paths += re.findall(r"`(objstore_saver\.[\w.:]+langgraph_checkpointer)`", texts[1])
    assert "objstore_saver.config.langgraph_checkpointer" in paths
    for path in paths:
        if "/" in path or ".py:" in path:
            assert path.count(":") == 1 and path.split(":")[0].endswith(".py"), path
            continue
        module, name = path.rsplit(".", 1)
        imported = __import__(module, fromlist=[name])
        assert callable(getattr(imported, name)), path


def _write_project(tmp_path: Path, url: str, ttl: object) -> Path:
    """The page's project, with ``checkpointer.ttl`` set to ``ttl`` and ``url`` in ``.env``."""
    project_json, graph, _ = _documented_project()
    project = tmp_path / "project"
    (project / "src" / "agent").mkdir(parents=True)
    (project / "src" / "agent" / "graph.py").write_text(graph)
    if ttl is not None:
        project_json["checkpointer"]["ttl"] = ttl
    (project / "langgraph.json").write_text(json.dumps(project_json))
    # Where the checkpoints go, in the .env file the page's langgraph.json names.
    assert project_json["env"] == ".env"
    (project / ".env").write_text(f"OBJSTORE_SAVER_URL={url}\n")
    return project


def _keys(store: ObjectStore, prefix: str) -> list[str]:
    out: list[str] = []
    after = None
    while True:
        page = store.list(prefix, start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _stored_checkpoint_ids(store: ObjectStore, thread_id: str) -> list[str]:
    """Checkpoint ids of the thread's root namespace, newest first, from the store."""
    prefix = keys.manifests_prefix(thread_id, "")
    return [keys.checkpoint_id_of_manifest_key(k) for k in _keys(store, prefix) if is_manifest(k)]


def _texts(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"]]


# The server opens its URL over the default transport: S3 is LeanS3Store's.
@pytest.mark.backends("local", "s3-lean")
async def test_a_thread_through_the_real_server_lands_in_the_store(
    backend: Backend, tmp_path: Path
) -> None:
    *_, ttl = _documented_project()
    env_extra: dict[str, str] = {}
    url = backend.url("agents/dev/")
    store = backend.store("agents/dev/")
    if backend.endpoint is not None:
        if backend.endpoint.access_key is not None:
            env_extra["AWS_ACCESS_KEY_ID"] = backend.endpoint.access_key
        if backend.endpoint.secret_key is not None:
            env_extra["AWS_SECRET_ACCESS_KEY"] = backend.endpoint.secret_key
    # The page's TTL example on top of its langgraph.json: the factory checks
    # and reports it (the in-memory runtime does not sweep).
    project = _write_project(tmp_path, url, ttl)
    with dev_server(project, server_env(env_extra)) as (server, log_path):
        try:
            await _drive_a_thread(server, store)
        except BaseException as exc:
            raise AssertionError(f"{exc!r}\n--- server log ---\n{server_log(log_path)}") from exc
        log = server_log(log_path)
    assert "Using custom checkpointer: AsyncObjectStoreSaver" in log, log
    # No fallback or degraded feature: the server found every optional method.
    assert "Custom checkpointer missing" not in log, log
    assert (
        "checkpointer.ttl: strategy=keep_latest, default_ttl=10080.0 min, "
        "sweep_interval_minutes=60.0; the in-memory runtime (langgraph dev) never sweeps"
    ) in log, log


async def _drive_a_thread(server: str, store: ObjectStore) -> None:
    client = get_client(url=server)
    thread_id = (await client.threads.create())["thread_id"]

    out = await client.runs.wait(
        thread_id, "agent", input={"messages": [{"role": "user", "content": "hello"}]}
    )
    assert _texts(out) == ["hello", "You said: hello"]
    state = await client.threads.get_state(thread_id)
    assert _texts(state["values"]) == ["hello", "You said: hello"]
    history = await client.threads.get_history(thread_id, limit=100)
    stored = _stored_checkpoint_ids(store, thread_id)
    # The server's history is the saver's: every checkpoint, newest first.
    assert [h["checkpoint"]["checkpoint_id"] for h in history] == stored
    assert stored[0] == state["checkpoint"]["checkpoint_id"]

    out = await client.runs.wait(
        thread_id, "agent", input={"messages": [{"role": "user", "content": "again"}]}
    )
    expected = ["hello", "You said: hello", "again", "You said: again"]
    assert _texts(out) == expected
    state = await client.threads.get_state(thread_id)
    assert _texts(state["values"]) == expected
    history = await client.threads.get_history(thread_id, limit=100)
    stored = _stored_checkpoint_ids(store, thread_id)
    assert [h["checkpoint"]["checkpoint_id"] for h in history] == stored
    assert len(stored) > 3 and stored[0] == state["checkpoint"]["checkpoint_id"]

    copied = await client.threads.copy(thread_id)
    copy_id = copied["thread_id"]  # type: ignore[index]  # the server answers with the thread
    assert copy_id != thread_id
    assert _texts((await client.threads.get_state(copy_id))["values"]) == expected
    assert _stored_checkpoint_ids(store, copy_id) == stored

    # The server's prune endpoint: "delete" deletes the thread through the
    # saver; the in-memory runtime refuses "keep_latest".
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.threads.prune([copy_id], strategy="keep_latest")
    assert refused.value.response.status_code == 422
    assert _stored_checkpoint_ids(store, copy_id) == stored
    assert (await client.threads.prune([copy_id], strategy="delete")) == {"pruned_count": 1}
    assert not_tombstones(_keys(store, keys.thread_prefix(copy_id))) == []
    assert _stored_checkpoint_ids(store, thread_id) == stored

    await client.threads.delete(thread_id)
    assert not_tombstones(_keys(store, keys.thread_prefix(thread_id))) == []
    with pytest.raises(httpx.HTTPStatusError) as gone:
        await client.threads.get_state(thread_id)
    assert gone.value.response.status_code == 404


def _refused_start(project: Path, env: dict[str, str]) -> str:
    """Start the server, expect it to exit non-zero by itself; return its log."""
    proc = spawn_server(project, env, free_port())
    try:
        proc.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server kept running:\n{server_log(project / 'server.log')}")
    finally:
        stop_server(proc)
    log = server_log(project / "server.log")
    assert proc.returncode != 0, log
    return log


def test_a_bad_ttl_setting_stops_the_real_server_naming_it(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    # The server accepts a negative TTL (its schema says only "a number"); the
    # factory refuses it at startup, before it touches the store.
    project = _write_project(tmp_path, memory.as_uri(), {"strategy": "delete", "default_ttl": -5})
    log = _refused_start(project, server_env({}))
    assert (
        "ConfigurationError: checkpointer.ttl.default_ttl must be a positive number of "
        "minutes or null, not -5"
    ) in log, log
    assert not memory.exists(), "the store was opened before the settings were checked"


def test_a_missing_bucket_stops_the_real_server_naming_it(tmp_path: Path, s3_endpoint: Any) -> None:
    url = f"s3://no-such-bucket-here/agents?endpoint_url={s3_endpoint.url}&region=us-east-1"
    project = _write_project(tmp_path, url, None)
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    if s3_endpoint.access_key is not None and s3_endpoint.secret_key is not None:
        env = {
            "AWS_ACCESS_KEY_ID": s3_endpoint.access_key,
            "AWS_SECRET_ACCESS_KEY": s3_endpoint.secret_key,
        }
    log = _refused_start(project, server_env(env))
    assert (
        f"StoreUnavailableError: S3 bucket 'no-such-bucket-here' at {s3_endpoint.url} "
        "is unavailable"
    ) in log, log


def test_the_documented_own_factory_file_runs_in_the_real_server(tmp_path: Path) -> None:
    """The page's ``./src/agent/checkpointer.py:make_checkpointer`` example, as written."""
    (factory,) = [b for b in _blocks("python") if "def make_checkpointer" in b]
    (fragment,) = [json.loads(b) for b in _blocks("json") if "make_checkpointer" in b]
    memory = tmp_path / "memory"
    project = _write_project(tmp_path, memory.as_uri(), None)
    (project / "src" / "agent" / "checkpointer.py").write_text(factory)
    config = json.loads((project / "langgraph.json").read_text())
    config["checkpointer"] = fragment["checkpointer"]
    (project / "langgraph.json").write_text(json.dumps(config))
    store = LocalStore(memory)

    async def one_turn(server: str) -> None:
        client = get_client(url=server)
        thread_id = (await client.threads.create())["thread_id"]
        out = await client.runs.wait(
            thread_id, "agent", input={"messages": [{"role": "user", "content": "hi"}]}
        )
        assert _texts(out) == ["hi", "You said: hi"]
        state = await client.threads.get_state(thread_id)
        assert _stored_checkpoint_ids(store, thread_id)[0] == state["checkpoint"]["checkpoint_id"]

    with dev_server(project, server_env({})) as (server, log_path):
        try:
            asyncio.run(one_turn(server))
        except BaseException as exc:
            raise AssertionError(f"{exc!r}\n--- server log ---\n{server_log(log_path)}") from exc


# The server's prune and TTL sweep reach a custom checkpointer through its
# adapter (langgraph_api._checkpointer._adapter); with the PostgreSQL runtime's
# core behind it, which is not installable here, the adapter is run on its own
# in a subprocess (langgraph_api.config reads its environment at import).
_ADAPTER_SCRIPT = """
import asyncio, json, sys
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph_api._checkpointer._adapter import (
    CheckpointerCapabilities,
    _CustomCheckpointerAdapter,
)
from objstore_saver import ObjectStoreSaver
from objstore_saver.format import keys


def bot(state):
    return {"messages": [AIMessage("ok")]}


async def main(path, strategy):
    saver = ObjectStoreSaver.from_directory(path)
    caps = CheckpointerCapabilities.from_type(type(saver))
    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for said in ("a", "b"):
        await graph.ainvoke({"messages": [("user", said)]}, config)
    before = [c.config async for c in saver.alist(config)]
    await _CustomCheckpointerAdapter(saver, caps).aprune(["t"], strategy=strategy)
    after = [c.config async for c in saver.alist(config)]
    print(json.dumps({
        "caps": {name: getattr(caps, name) for name in caps.__slots__},
        "before": len(before),
        "after": [c["configurable"]["checkpoint_id"] for c in after],
        "newest": before[0]["configurable"]["checkpoint_id"],
        "keys_left": [o.key for o in saver.store.list(keys.thread_prefix("t")).objects],
    }))


asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize(
    "strategy",
    ["keep_latest", "delete_all"],
)
def test_the_servers_prune_calls_reach_the_saver(strategy: str, tmp_path: Path) -> None:
    script = tmp_path / "adapter.py"
    script.write_text(_ADAPTER_SCRIPT)
    env = server_env(
        {"REDIS_URI": "fake", "DATABASE_URI": ":memory:", "MIGRATIONS_PATH": "__inmem"}
    )
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "memory"), strategy],
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    # The server calls the saver's own methods, not its generic fallbacks.
    assert {k: v for k, v in result["caps"].items() if k != "has_aget_iter"} == {
        "has_adelete_thread": True,
        "has_adelete_for_runs": True,
        "has_acopy_thread": True,
        "has_aprune": True,
    }
    assert result["before"] > 2
    if strategy == "keep_latest":
        assert result["after"] == [result["newest"]]
    else:
        # Its tombstone alone is left (spec §4.11).
        assert result["after"] == []
        the_tombstone(result["keys_left"])
