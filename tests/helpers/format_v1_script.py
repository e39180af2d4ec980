"""The saver calls behind ``tests/fixtures/format-v1``: a bucket as format version 1 wrote it.

:func:`play` makes the same calls on any saver, with fixed checkpoint ids and
deterministic values, so a test can compare what the stored fixture reads
back as with what ``InMemorySaver`` answers for the same calls. It covers
what version 1 stores: a chat whose messages list sealed chunks and a node,
pending writes of every form (a group, a single write, special writes), a
subgraph namespace, a value stored in parts, run markers and a thread id
that needs percent-encoding.

``python tests/helpers/format_v1_script.py DIR`` wrote the fixture (with
the saver of format version 1); the files are kept as they were written.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint

#: Threads of the fixture.
CHAT, ODD = "chat-1", "user/é 1"
#: Turns of the chat: 2 messages each, 40 messages in all (5 chunks, one node).
TURNS = 20
#: A value stored in parts (over 256 KiB once compressed: random bytes).
LARGE = random.Random(7).randbytes(270 * 1024)


def _id(n: int) -> str:
    """Checkpoint id ``n``: fixed, time-ordered like LangGraph's."""
    return f"1f0c5a00-0000-6000-8000-{n:012d}"


def _config(thread: str, ns: str = "", checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def _checkpoint(n: int, values: dict[str, Any], versions: dict[str, int]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = _id(n)
    cp["ts"] = f"2026-12-05T12:{n // 60:02d}:{n % 60:02d}+00:00"
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def _messages(upto: int) -> list[Any]:
    out: list[Any] = []
    for t in range(upto):
        out.append(HumanMessage(f"question {t} " + "q" * 150, id=f"h{t}"))
        out.append(AIMessage(f"answer {t} " + "a" * (300 + 40 * t), id=f"a{t}"))
    return out


def play(saver: BaseCheckpointSaver) -> None:
    """Make the fixture's calls on ``saver``."""
    parent: dict[str, Any] = _config(CHAT)
    for t in range(TURNS):
        values: dict[str, Any] = {"messages": _messages(t + 1), "turn": t}
        if t == 5:
            values["report"] = LARGE
        versions = {"messages": t + 1, "turn": t + 1, "report": 1 if t >= 5 else 0}
        if t < 5:
            del versions["report"]
        new = {"messages": t + 1, "turn": t + 1} | ({"report": 1} if t == 5 else {})
        metadata = {"step": t, "source": "loop", "run_id": f"run-{t // 5}"}
        parent = saver.put(parent, _checkpoint(t, values, versions), metadata, new)
    saver.put_writes(parent, [("messages", [HumanMessage("pending", id="p")]), ("turn", 99)], "t1")
    saver.put_writes(parent, [("summary", "one regular write")], "t2", task_path="~x")
    saver.put_writes(parent, [("__error__", "failed once")], "t3")
    saver.put_writes(parent, [("__error__", "failed twice")], "t3")

    sub = _config(CHAT, "inner:7b1e")
    for i in range(2):
        cp = _checkpoint(100 + i, {"inner": i}, {"inner": i + 1})
        sub = saver.put(sub, cp, {"step": i, "source": "loop"}, {"inner": i + 1})
    saver.put_writes(sub, [("inner", 5)], "s1")

    odd = _config(ODD)
    cp = _checkpoint(200, {"messages": _messages(1)}, {"messages": 1})
    saver.put(odd, cp, {"step": 0, "source": "input"}, {"messages": 1})


if __name__ == "__main__":
    from objstore_saver import LocalStore, ObjectStoreSaver

    with ObjectStoreSaver(LocalStore(sys.argv[1], fsync=False)) as written:
        play(written)
