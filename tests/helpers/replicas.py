"""What the replication tests share: savers on two regions, and checks.

A graph writes in one region (``east/`` of the test's bucket or directory);
a replicator copies its objects to the other (``west/``); a saver there is
told the bucket is a replica (``replica_lag``). The chat is the benchmark's
(:func:`bench.graphs.noisy_chat_graph`): answers that do not compress.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from bench.workloads.replicas import same_checkpoint
from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey


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
    assert same_checkpoint(replica, source), (replica, source)


def ids(saver: ObjectStoreSaver, thread: str) -> set[str]:
    """The checkpoint ids of ``thread`` that ``saver`` lists."""
    return {t.config["configurable"]["checkpoint_id"] for t in saver.list(cfg(thread))}


def messages(tup: Any) -> list[str]:
    """The ids of a checkpoint's messages."""
    return [m.id for m in tup.checkpoint["channel_values"].get("messages", [])]
