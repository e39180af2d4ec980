"""Every shell and Python block of README.md and docs/*.md runs as written, or says why not.

Each unmarked block runs in a fresh directory against the test session's S3
endpoint (moto on loopback): ``AWS_ENDPOINT_URL`` points there, every bucket
a doc names (``s3://<bucket>``) exists, ``OBJSTORE_SAVER_URL`` is the docs'
running example ``s3://agent-memory/prod/``, and ``python`` and
``objstore-saver`` are this interpreter's. A block must exit 0. Blocks that
cannot run here are marked in the doc itself (tests/helpers/doc_blocks.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import ROOT, Block, blocks, doc_files, every_block, python_programs, shell_script
from ops_helpers import chat_graph

pytestmark = pytest.mark.usefixtures("creds_env")

#: The bucket and prefix the docs' examples use when they set none.
RUNNING_EXAMPLE = "s3://agent-memory/prod/"
_BUCKET = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")
_TIMEOUT = 180

#: What a Python block may use without defining it: ``builder``, the docs' stand-in
#: for the reader's own graph (a LangGraph chat of one node that answers).
PRELUDE = """\
from langgraph.graph import START, MessagesState, StateGraph

def _answer(state):
    return {"messages": [("ai", "noted: " + str(state["messages"][-1].content))]}

builder = StateGraph(MessagesState)
builder.add_node("answer", _answer)
builder.add_edge(START, "answer")
del START, MessagesState, StateGraph
"""


def _programs() -> list[Any]:
    out = []
    for path in doc_files():
        for program in python_programs(blocks(path)):
            out.append(pytest.param(program, id=program[0].id))
    return out


def _shell_blocks() -> list[Any]:
    return [
        pytest.param(b, id=b.id) for b in every_block() if b.language != "python" and b.mark is None
    ]


@pytest.fixture
def doc_env(s3_endpoint: Any, tmp_path: Path) -> dict[str, str]:
    """The environment of a doc block: this interpreter first on PATH, the test endpoint."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OBJSTORE_", "AWS_", "POSTGRES_")) and k != "PYTHONPATH"
    }
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        PATH=bin_dir + os.pathsep + env.get("PATH", ""),
        PYTHONPATH=str(ROOT),
        HOME=str(tmp_path / "home"),
        AWS_ENDPOINT_URL=s3_endpoint.url,
        AWS_ACCESS_KEY_ID=s3_endpoint.access_key or "testing-access-key",
        AWS_SECRET_ACCESS_KEY=s3_endpoint.secret_key or "testing-secret-key",
        AWS_REGION=s3_endpoint.region,
        AWS_DEFAULT_REGION=s3_endpoint.region,
        OBJSTORE_SAVER_URL=RUNNING_EXAMPLE,
    )
    (tmp_path / "home").mkdir()
    return env


def _buckets_of(s3_endpoint: Any, text: str) -> None:
    client = s3_endpoint.client()
    have = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    for name in sorted(set(_BUCKET.findall(text + " " + RUNNING_EXAMPLE)) - have):
        client.create_bucket(Bucket=name)


def _run(args: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )
    assert done.returncode == 0, (
        f"{what} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )
    return done.stdout


def test_every_block_is_run_or_says_why_not() -> None:
    found = every_block()
    assert len(found) > 40  # the parser sees the docs' blocks
    for b in found:
        if b.mark == "skip":
            assert b.reason and len(b.reason) > 10, f"{b.id}: a skip says why"
        if b.mark == "elsewhere":
            assert b.reason, f"{b.id}: 'elsewhere' names the test"
            file, _, test = b.reason.partition("::")
            source = (ROOT / file).read_text()
            assert f"def {test}(" in source, f"{b.id}: {b.reason} is not a test"
            assert Path(b.doc).name in source, f"{b.id}: {file} never reads {b.doc}"
        if b.mark == "continues":
            assert b.language == "python", f"{b.id}: only Python blocks continue"


@pytest.mark.parametrize("program", _programs())
def test_python_block_runs(
    program: list[Block], doc_env: dict[str, str], s3_endpoint: Any, tmp_path: Path
) -> None:
    source = "\n\n".join(b.text for b in program)
    if "builder" in source:
        source = PRELUDE + "\n" + source
    _buckets_of(s3_endpoint, source)
    work = tmp_path / "work"
    work.mkdir()
    (work / "block.py").write_text(source)
    _run([sys.executable, "block.py"], doc_env, work, program[0].id)


@pytest.mark.parametrize("block", _shell_blocks())
def test_shell_block_runs(
    block: Block, doc_env: dict[str, str], s3_endpoint: Any, tmp_path: Path
) -> None:
    script = shell_script(block)
    _buckets_of(s3_endpoint, script)
    work = tmp_path / "work"
    work.mkdir()
    bash = shutil.which("bash")
    assert bash is not None
    _run([bash, "-eo", "pipefail", "-c", script], doc_env, work, block.id)


def test_the_key_rotation_runbook_runs_in_one_shell(
    doc_env: dict[str, str], s3_endpoint: Any, tmp_path: Path
) -> None:
    """docs/runbooks.md's rotation, its blocks in order in one shell, on threads the
    old key wrapped: the last block's verify with the new key alone must pass."""
    import base64
    import uuid

    from objstore_saver import ObjectStoreSaver
    from objstore_saver.crypto import ClientEncryption
    from objstore_saver.crypto.master_keys import LocalMasterKey

    old, new = os.urandom(32), os.urandom(32)
    url = f"s3://agent-memory/rotation-{uuid.uuid4().hex[:8]}/"
    _buckets_of(s3_endpoint, url)
    store_url = f"{url}?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    settings = ClientEncryption.of(LocalMasterKey(old))
    with ObjectStoreSaver.from_url(store_url, client_encryption=settings) as saver:
        for thread in ("alice", "bob"):
            graph = chat_graph(saver)
            graph.invoke(
                {"messages": [("user", "a secret")]}, {"configurable": {"thread_id": thread}}
            )
    rotation = [
        b
        for b in blocks(ROOT / "docs" / "runbooks.md")
        if "test_the_key_rotation" in (b.reason or "")
    ]
    assert len(rotation) == 4
    env = {
        **doc_env,
        "OBJSTORE_SAVER_URL": url,
        "OLD_KEY": base64.b64encode(old).decode(),
        "NEW_KEY": base64.b64encode(new).decode(),
    }
    work = tmp_path / "work"
    work.mkdir()
    script = "\n".join(b.text for b in rotation)
    _run(["bash", "-eo", "pipefail", "-c", script], env, work, "the key rotation runbook")
    with (
        ObjectStoreSaver.from_url(
            store_url, client_encryption=ClientEncryption.of(LocalMasterKey(new))
        ) as saver,
    ):
        for thread in ("alice", "bob"):
            assert saver.get_tuple({"configurable": {"thread_id": thread}}) is not None


def test_the_store_commands_run_on_a_store_with_items(
    doc_env: dict[str, str], s3_endpoint: Any, tmp_path: Path
) -> None:
    """docs/store.md's commands, on a store holding the item they name."""
    import uuid

    from objstore_saver import ObjectStoreStore

    url = f"s3://agent-memory/store-doc-{uuid.uuid4().hex[:8]}/"
    _buckets_of(s3_endpoint, url)
    with ObjectStoreStore.from_url(
        f"{url}?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    ) as store:
        store.put(("users", "a/b c"), "prefs", {"theme": "dark"})
        store.put(("users", "a/b c"), "brief", {"note": "expires"}, ttl=1)
    (block,) = [
        b
        for b in blocks(ROOT / "docs" / "store.md")
        if "test_the_store_commands" in (b.reason or "")
    ]
    work = tmp_path / "work"
    work.mkdir()
    out = _run(
        ["bash", "-eo", "pipefail", "-c", block.text],
        {**doc_env, "OBJSTORE_SAVER_URL": url},
        work,
        "docs/store.md's commands",
    )
    assert "dark" in out  # store get printed the item
