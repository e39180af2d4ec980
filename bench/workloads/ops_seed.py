"""Workload 7's data: many small threads, written fast and outside the measurement.

Every thread holds what a real chat graph makes. :func:`chat_calls` runs
:func:`bench.graphs.chat_graph` on a recording saver and keeps the ``put`` and
``put_writes`` calls it received (one turn: 3 checkpoints and 2 calls of
pending writes); the seeders replay those calls for each thread id:

- :func:`seed_s3`: through objstore-saver's async API, many threads at once
  (the caller sets the proxy's injected round trip to 0 first);
- :func:`seed_postgres`: through LangGraph's ``PostgresSaver`` (the migration's
  source), one connection without synchronous commit;
- :func:`seed_directory`: one thread through objstore-saver on a local
  directory, then its files cloned for every other thread, each manifest
  re-encoded for its thread (:func:`objstore_saver.format.codec.replace_thread_id`,
  what ``copy_thread`` does): the cheap seed of the memory measurement.
"""

from __future__ import annotations

import asyncio
import copy
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from bench import graphs
from bench.savers import REGION

#: Thread ids are UUIDs, as a LangGraph server makes them; a fixed namespace keeps them stable.
_IDS = uuid.UUID("6f8c3c1e-2a1b-4d5e-9f00-0b5e4c7a0d17")


def thread_ids(count: int, stem: str = "ops") -> list[str]:
    """``count`` stable thread ids (UUIDs) for ``stem``."""
    return [str(uuid.uuid5(_IDS, f"{stem}-{i}")) for i in range(count)]


@dataclass(frozen=True)
class Call:
    """One call a graph made to its checkpointer, without the thread id."""

    kind: str
    """``put`` or ``writes``."""
    configurable: dict[str, Any]
    """``checkpoint_ns`` and (a parent's or the checkpoint's) ``checkpoint_id``."""
    args: tuple[Any, ...]
    """``(checkpoint, metadata, new_versions)`` or ``(writes, task_id, task_path)``."""

    def config(self, thread_id: str) -> dict[str, Any]:
        """The call's config for ``thread_id``."""
        return {"configurable": {"thread_id": thread_id, **self.configurable}}


class _Recorder(InMemorySaver):
    """An in-memory saver that keeps a copy of every ``put`` and ``put_writes``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    @staticmethod
    def _conf(config: Any) -> dict[str, Any]:
        c = config["configurable"]
        return {k: c[k] for k in ("checkpoint_ns", "checkpoint_id") if k in c}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        args = (copy.deepcopy(checkpoint), copy.deepcopy(metadata), dict(new_versions))
        self.calls.append(Call("put", self._conf(config), args))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        args = (copy.deepcopy(list(writes)), task_id, task_path)
        self.calls.append(Call("writes", self._conf(config), args))
        super().put_writes(config, writes, task_id, task_path)


def chat_calls(checkpoints: int) -> list[Call]:
    """The calls of a scripted chat up to its ``checkpoints``-th checkpoint.

    The chat (workload 1's script) runs as many turns as it takes (a turn
    makes 3 checkpoints); the calls end with the pending writes made on the
    last checkpoint kept, as a thread stopped there would hold them.
    """
    rec = _Recorder()
    graph = graphs.chat_graph(rec)
    turns = -(-checkpoints // 3) + 1
    for t in range(turns):
        graph.invoke({"messages": graphs.SEED.inputs(t)}, {"configurable": {"thread_id": "seed"}})
    out: list[Call] = []
    puts = 0
    for call in rec.calls:
        if call.kind == "put":
            if puts == checkpoints:
                break
            puts += 1
        out.append(call)
    return out


async def _replay(saver: Any, calls: Sequence[Call], thread_id: str) -> None:
    for call in calls:
        if call.kind == "put":
            await saver.aput(call.config(thread_id), *call.args)
        else:
            await saver.aput_writes(call.config(thread_id), *call.args)


async def _seed_async(saver: Any, calls: Sequence[Call], ids: Sequence[str], window: int) -> None:
    gate = asyncio.Semaphore(window)

    async def one(thread_id: str) -> None:
        async with gate:
            await _replay(saver, calls, thread_id)

    await asyncio.gather(*(one(t) for t in ids))


def seed_s3(bucket: str, endpoint_url: str, calls: Sequence[Call], ids: Sequence[str]) -> None:
    """Write ``calls`` for every thread of ``ids`` into ``bucket``, 128 threads at once."""
    from objstore_saver import ObjectStoreSaver
    from objstore_saver.storage import LeanS3Store

    store = LeanS3Store(bucket, endpoint_url=endpoint_url, region_name=REGION)
    with ObjectStoreSaver(store, client_encryption=False) as saver:
        asyncio.run(_seed_async(saver, calls, ids, 128))


def seed_store_items(
    bucket: str, endpoint_url: str, namespaces: int, per_namespace: int, expired: int
) -> None:
    """Long-term store items in ``bucket``: ``namespaces`` of ``per_namespace`` each.

    The first ``expired`` of each namespace were put an hour ago with a TTL of
    one minute, so a sweep deletes them; the others have no TTL.
    """
    import time

    from objstore_saver import ObjectStoreStore
    from objstore_saver.storage import LeanS3Store

    inner = LeanS3Store(bucket, endpoint_url=endpoint_url, region_name=REGION)
    with (
        ObjectStoreStore(inner, clock=lambda: time.time() - 3600) as past,
        ObjectStoreStore(inner) as now,
    ):
        for n in range(namespaces):
            ns = ("users", f"u{n:04d}", "memories")
            past.batch([_item_put(ns, f"m{i:03d}", i, ttl=1.0) for i in range(expired)])
            now.batch([_item_put(ns, f"m{i:03d}", i) for i in range(expired, per_namespace)])


def _item_put(namespace: tuple[str, ...], key: str, i: int, ttl: float | None = None) -> Any:
    from langgraph.store.base import PutOp

    value = {"text": f"memory {i} of {namespace[1]}", "i": i}
    return PutOp(namespace, key, value, index=False, ttl=ttl)


def seed_postgres(conninfo: str, calls: Sequence[Call], ids: Sequence[str]) -> None:
    """Write ``calls`` for every thread of ``ids`` with LangGraph's ``PostgresSaver``."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(
        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        # Seeding is not measured: no flush to disk at each commit.
        conn.execute("SET synchronous_commit = off")
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        for thread_id in ids:
            for call in calls:
                if call.kind == "put":
                    saver.put(call.config(thread_id), *call.args)  # type: ignore[arg-type]
                else:
                    saver.put_writes(call.config(thread_id), *call.args)  # type: ignore[arg-type]


def seed_directory(root: str, calls: Sequence[Call], ids: Sequence[str]) -> None:
    """Every thread of ``ids`` in a local directory store at ``root``, cloned from the first.

    The first thread is written by objstore-saver; the others are its files
    copied under their own thread's prefix (a ``LocalStore`` key is its path
    below the root), each manifest re-encoded with its thread id.
    """
    from objstore_saver import LocalStore, ObjectStoreSaver
    from objstore_saver.format import codec, keys

    store = LocalStore(root, fsync=False)
    first = ids[0]
    with ObjectStoreSaver(store, client_encryption=False) as saver:
        asyncio.run(_seed_async(saver, calls, [first], 1))
    pfx = keys.thread_prefix(first)
    files: list[tuple[str, bytes]] = []
    after: str | None = None
    while True:
        page = store.list(pfx, start_after=after)
        files += [(o.key[len(pfx) :], store.get(o.key)) for o in page.objects]
        if not page.truncated or not page.objects:
            break
        after = page.objects[-1].key
    folders = sorted({os.path.dirname(rest) for rest, _ in files})
    for thread_id in ids[1:]:
        base = os.path.join(root, keys.thread_prefix(thread_id))
        for folder in folders:
            os.makedirs(os.path.join(base, folder), exist_ok=True)
        for rest, body in files:
            manifest = rest.startswith("checkpoints/") and keys.V2_WRITES_SUFFIX not in rest
            if manifest:  # a manifest names its thread; writes and objects do not
                body = codec.replace_thread_id(body, pfx + rest, thread_id)
            with open(os.path.join(base, rest), "wb") as f:
                f.write(body)
