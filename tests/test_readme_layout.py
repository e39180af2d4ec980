"""The README's "What is stored" is the layout a realistic run stores, no more, no less.

One run on a local directory does what an application and its operator do:
an encrypted chat with a large tool result and pending writes in a run, a
delete and a new conversation on the same thread id, a prune, long-term
memories past a compaction, and a master key rotation. Every key it leaves
must match one line of the README's list, and every line must match a key.
"""

from __future__ import annotations

import base64
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV, KEYS_URL_ENV
from objstore_saver.ops import OpsConfig, rekey
from objstore_saver.storage import LocalStore

README = Path(__file__).resolve().parent.parent / "README.md"

#: What each placeholder of the README's list stands for.
_TOKEN = r"(?:_[A-Za-z0-9._~%-]{0,200}|~[0-9a-f]{64})"
_PLACES = {
    "T": _TOKEN,
    "N": _TOKEN,
    "K": _TOKEN,
    "U": _TOKEN,
    "R": r"[0-9a-f]+~",
    "L": r"(?:\d+(?:~\d+)*|h[0-9a-f]{16}|-\d+\.\d{26})",
    "D": r"\d{10}",
    "H": r"(?:[0-9a-f]{64}|[0-9a-f]{96})",
    "S": r"\d{20}",
    "X": r"[0-9a-f]{8}",
    "P": rf"{_TOKEN}(?:/{_TOKEN})*",
    "V": r"\d{20}-[0-9a-f]{8}",
    "h": r"[0-9a-f]{16}",
    "o": r"[ptd]",
    "n": r"\d+",
    "J": r"[a-z][a-z-]*",
    "F": r"[0-9a-f]{16}",
    "k": r"\d+",
}


def _layout() -> list[tuple[str, re.Pattern[str]]]:
    """The README's stored keys: (pattern as written, regex)."""
    text = README.read_text()
    block = re.search(r"## What is stored\n\n```\n(.*?)```", text, flags=re.S)
    assert block is not None, "README.md has no 'What is stored' list"
    out = []
    for line in block.group(1).splitlines():
        pattern = line.split()[0]
        regex = re.sub(r"<([A-Za-z])>", lambda m: _PLACES[m.group(1)], re.escape(pattern))
        out.append((pattern, re.compile(regex)))
    return out


def _keys(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _put(
    saver: ObjectStoreSaver, thread: str, parent: Any, values: dict[str, Any], step: int
) -> Any:
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    cp["channel_values"] = values
    cp["channel_versions"] = dict.fromkeys(values, step + 1)
    metadata = {"step": step, "source": "loop", "run_id": f"run-{thread}"}
    return saver.put(config, cp, metadata, dict.fromkeys(values, step + 1))


def _run(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = LocalMasterKey(os.urandom(32)), LocalMasterKey(os.urandom(32))
    settings = ClientEncryption.of(old)
    store = LocalStore(root)
    tool_result = random.Random(3).randbytes(300_000).hex()  # parts stored apart
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        for thread in ("alice", "bob"):
            first = _put(
                saver,
                thread,
                None,
                {
                    "messages": [
                        HumanMessage("look it up"),
                        ToolMessage(tool_result, tool_call_id="1"),
                    ]
                },
                0,
            )
            saver.put_writes(first, [("messages", [AIMessage("found it")]), ("x", 1)], "task-1")
            last = _put(saver, thread, first, {"messages": [HumanMessage("thanks")]}, 1)
            saver.put_writes(last, [("messages", [AIMessage("you're welcome")])], "task-2")
        saver.delete_thread("alice")  # and alice begins again: a new epoch, a new key
        _put(saver, "alice", None, {"messages": [HumanMessage("hello again")]}, 2)
        report = saver.prune(["bob"], keep_last=1, min_age=0)  # bob's tool result: marked
        assert report["objects_marked"] > 0
    with ObjectStoreStore(store, client_encryption=settings) as memories:
        for i in range(40):  # past a compaction: records and a snapshot
            memories.put(("memories", "bob"), f"fact-{i}", {"text": f"bob likes {i}"})
            memories.put(("memories", "carol"), f"fact-{i}", {"text": f"carol likes {i}"})
        # carol's memories deleted, then new ones past a compaction: a clear
        # marker, a snapshot built after it, the namespace's next key
        memories.delete_namespace(("memories", "carol"))
        for i in range(40):
            memories.put(("memories", "carol"), f"new-{i}", {"text": f"carol now likes {i}"})
    spec = ",".join(base64.b64encode(k.key).decode() for k in (new, old))
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEYS_URL_ENV, raising=False)
    monkeypatch.setenv(KEYS_ENV, spec)
    # A rotation stopped after its first key object: its cursor stays for the rerun.
    polls = iter([False, True])
    stopped = rekey(
        OpsConfig(url=store.location), apply=True, should_cancel=lambda: next(polls, True)
    )
    assert stopped["cancelled"] and stopped["key_objects"]["rewrapped"] == 1


def test_the_readme_lists_every_key_a_realistic_run_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    _run(root, monkeypatch)
    layout = _layout()
    stored = _keys(root)
    unlisted = [k for k in stored if not any(rx.fullmatch(k) for _, rx in layout)]
    assert unlisted == [], "keys the README does not list"
    unused = [p for p, rx in layout if not any(rx.fullmatch(k) for k in stored)]
    assert unused == [], "README lines no key of the run matches"
