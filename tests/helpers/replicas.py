"""What the replication tests share: a chat whose answers do not compress, and checks.

A graph writes in one region (``east/`` of the test's bucket or directory);
a replicator copies its objects to the other (``west/``); a saver there is
told the bucket is a replica (``replica_lag``).
"""

from __future__ import annotations

import base64
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey

#: Every fourth answer is a tool result too large to embed: objects of its own.
BIG_EVERY, BIG_BYTES = 4, 48 * 1024


def noise(n: int, rng: random.Random) -> str:
    """Text that does not compress: values travel as embedded or separate objects."""
    return base64.b64encode(rng.randbytes(n)).decode()[:n]


def noisy_chat(saver: ObjectStoreSaver, seed: int, big: int = BIG_BYTES) -> Any:
    rng = random.Random(seed)

    def bot(state: MessagesState) -> dict[str, Any]:
        n = len(state["messages"])
        size = big if n % (2 * BIG_EVERY) == 1 else 600
        return {"messages": [AIMessage(noise(size, rng), id=f"ai-{n}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver)


def cfg(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


@pytest.fixture(params=["clear", "encrypted"])
def encryption(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "clear":
        yield False
        return
    master = LocalMasterKey(os.urandom(32))
    yield lambda: ClientEncryption.of(master)


def open_saver(store: Any, encryption: Any, **options: Any) -> ObjectStoreSaver:
    return ObjectStoreSaver(
        store, client_encryption=encryption() if encryption else False, **options
    )


def same(replica: Any, source: Any) -> None:
    """The replica's tuple is the source's checkpoint; its pending writes a subset."""
    assert replica.checkpoint == source.checkpoint
    assert replica.metadata == source.metadata
    assert replica.parent_config == source.parent_config
    source_writes = {(w[0], w[1]) for w in source.pending_writes or []}
    assert {(w[0], w[1]) for w in replica.pending_writes or []} <= source_writes


def ids(saver: ObjectStoreSaver, thread: str) -> set[str]:
    """The checkpoint ids of ``thread`` that ``saver`` lists."""
    return {t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg(thread))}


def messages(tup: Any) -> list[str]:
    """The ids of a checkpoint's messages."""
    return [m.id for m in tup.checkpoint["channel_values"].get("messages", [])]
