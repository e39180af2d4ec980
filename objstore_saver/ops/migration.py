"""``migrate``: copy threads from another LangGraph saver into the object store (spec §6.13).

Sources: :mod:`.migration_sources`; a rerun resumes at the cursor (:mod:`.job_cursor`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from objstore_saver import plans
from objstore_saver.driver import Driver
from objstore_saver.fallback import put_writes_calls
from objstore_saver.format import codec, keys
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    aopen_saver,
    never_cancel,
    no_progress,
    secrets_kept_out,
)
from objstore_saver.ops.fanout import DEFAULT_CONCURRENCY, Fanout, blocking, check_concurrency
from objstore_saver.ops.job_cursor import Cursor, for_each_resumable
from objstore_saver.ops.migration_sources import SOURCES, open_source
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.requests import Get, list_all, run_batch
from objstore_saver.saver import ObjectStoreSaver

__all__ = ["SOURCES", "amigrate", "migrate"]


def _tally() -> dict[str, int]:
    return {"source": 0, "present": 0, "missing": 0, "copied": 0}


@dataclass
class _Counts:
    checkpoints: dict[str, int] = field(default_factory=_tally)
    writes: dict[str, int] = field(default_factory=_tally)
    diverged: list[dict[str, Any]] = field(default_factory=list)


def _stored_checkpoints(thread_id: str) -> SubPlan:
    """Sub-plan: {(namespace token, checkpoint id)} of the target, in key order."""
    found = yield from list_all(keys.manifests_prefix(thread_id))
    listed = (keys.namespace_of_manifest_key(k) for k in plans.checkpoint_manifests(found))
    return [(ns_tok, keys.unreverse_id(seg)) for ns_tok, seg in listed]


def _stored_write_slots(thread_id: str, ns: str, cid: str) -> SubPlan:
    found = yield from list_all(keys.checkpoint_writes_prefix(thread_id, ns, cid))
    found += yield from list_all(keys.writes_prefix(thread_id, ns, cid))
    slots: set[tuple[str, int]] = set()
    hashed: list[str] = []
    for k in found:
        task, idxs = keys.write_slots(k)
        if idxs is None:
            hashed.append(k)  # a group named by the hash of its indexes: they are inside
        else:
            slots.update((task, i) for i in idxs)
    bodies = yield from run_batch(*(Get(k) for k in hashed))
    for k, body in zip(hashed, bodies, strict=True):
        if body is not None:
            task = keys.write_slots(k)[0]
            slots.update((task, w.idx) for w in codec.decode_writes(body, k))
    return slots


def _ancestors_reach(thread_id: str, ns: str, head: str, wanted: str, known: set[str]) -> SubPlan:
    """Sub-plan: whether the target's parent chain from ``head`` reaches ``wanted``, stopping
    at the first checkpoint the source also holds (``known``)."""
    cursor: str | None = head
    while cursor is not None:
        if cursor in known:
            return cursor == wanted
        found = yield from plans.read_checkpoint_manifest(thread_id, ns, cursor)
        if found is None:
            return False
        cursor = found[1].parent_checkpoint_id
    return False


def _conf(tup: CheckpointTuple) -> tuple[str, str]:
    c = tup.config["configurable"]
    return c.get("checkpoint_ns", "") or "", c["checkpoint_id"]


async def _migrate_thread(
    thread_id: str,
    tuples: list[CheckpointTuple],
    target: ObjectStoreSaver,
    driver: Driver,
    counts: _Counts,
    apply: bool,
) -> None:
    tuples.sort(key=lambda t: _conf(t)[1])  # checkpoint ids are time-ordered: oldest first
    stored = await driver.arun(_stored_checkpoints(thread_id))
    by_id: dict[tuple[str, str], CheckpointTuple] = {_conf(t): t for t in tuples}

    # Divergence (spec §6.13 step 3).
    source_heads = dict(map(_conf, tuples))  # oldest first: a namespace's last is its head
    target_heads = dict(reversed(stored))  # a namespace's first listed is its newest
    for ns, src_head in source_heads.items():
        tgt_head = target_heads.get(keys.token("checkpoint_ns", ns))
        known = {cid for (n, cid) in by_id if n == ns}
        if tgt_head is None or tgt_head in known:
            continue
        if not await driver.arun(_ancestors_reach(thread_id, ns, tgt_head, src_head, known)):
            counts.diverged.append(
                {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "target_head": tgt_head,
                    "source_head": src_head,
                }
            )

    copy = _ThreadCopy(thread_id, by_id, set(stored), target, driver, counts, apply)
    chains: dict[str, list[CheckpointTuple]] = {}
    for tup in tuples:
        chains.setdefault(_conf(tup)[0], []).append(tup)
    root = chains.pop("", [])
    root_head = root.pop() if root else None
    try:
        # Subgraph namespaces are chains of their own: at once, then the root's.
        await asyncio.gather(*(copy.chain(part) for part in chains.values()))
        await copy.chain(root)
        # Every pending write is stored before the root head: a stored head
        # means a complete thread.
        await copy.writes_stored()
        if root_head is not None:
            await copy.chain([root_head])
        await copy.writes_stored()
    finally:
        await copy.writes_stored(raising=False)


@dataclass
class _ThreadCopy:
    """The copy of one thread's checkpoints and writes into the target (spec §6.13 step 4)."""

    thread_id: str
    by_id: dict[tuple[str, str], CheckpointTuple]
    stored: set[tuple[str, str]]
    target: ObjectStoreSaver
    driver: Driver
    counts: _Counts
    apply: bool
    writing: list[asyncio.Task[None]] = field(default_factory=list)

    async def chain(self, part: list[CheckpointTuple]) -> None:
        """One namespace's checkpoints, oldest first (a put reads its parent)."""
        for tup in part:
            await self.checkpoint(tup)

    async def writes_stored(self, *, raising: bool = True) -> None:
        writing, self.writing = self.writing, []
        await asyncio.gather(*writing, return_exceptions=not raising)

    async def checkpoint(self, tup: CheckpointTuple) -> None:
        """Put one checkpoint if the target lacks it; its missing writes go on meanwhile."""
        counts = self.counts
        ns, cid = _conf(tup)
        counts.checkpoints["source"] += 1
        present = (keys.token("checkpoint_ns", ns), cid) in self.stored
        if present:
            counts.checkpoints["present"] += 1
        else:
            counts.checkpoints["missing"] += 1
            if self.apply:
                await put_checkpoint(self.thread_id, tup, self.by_id, self.target)
                counts.checkpoints["copied"] += 1
        writes = list(tup.pending_writes or [])
        counts.writes["source"] += len(writes)
        if not writes:
            return
        slots: set[tuple[str, int]] = set()
        if present:
            slots = await self.driver.arun(_stored_write_slots(self.thread_id, ns, cid))
        missing = put_writes_calls(writes, slots)
        n_missing = sum(len(w) for _, w in missing)
        counts.writes["present"] += len(writes) - n_missing
        counts.writes["missing"] += n_missing
        if self.apply and missing:
            config = keys.checkpoint_config(self.thread_id, ns, cid)
            self.writing.append(asyncio.create_task(self._put_writes(config, missing)))

    async def _put_writes(
        self, config: RunnableConfig, missing: list[tuple[str, list[tuple[str, Any]]]]
    ) -> None:
        for task_id, task_writes in missing:
            await self.target.aput_writes(config, task_writes, task_id)
            self.counts.writes["copied"] += len(task_writes)


async def put_checkpoint(
    thread_id: str,
    tup: CheckpointTuple,
    by_id: dict[tuple[str, str], CheckpointTuple],
    target: ObjectStoreSaver,
) -> None:
    ns, _ = _conf(tup)
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    versions = dict(tup.checkpoint.get("channel_versions", {}))
    new_versions = versions
    if tup.parent_config is not None:
        parent_id = tup.parent_config["configurable"].get("checkpoint_id")
        if parent_id:
            conf["checkpoint_id"] = parent_id
            parent = by_id.get((ns, parent_id))
            if parent is not None:
                before = parent.checkpoint.get("channel_versions", {})
                new_versions = {c: v for c, v in versions.items() if before.get(c) != v}
    await target.aput({"configurable": conf}, tup.checkpoint, tup.metadata, new_versions)


async def amigrate(
    source_kind: str,
    source: str | None = None,
    *,
    config: OpsConfig | None = None,
    thread_ids: list[str] | None = None,
    apply: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    restart: bool = False,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Copy threads from a LangGraph saver into the configured object store (spec §6.13).

    ``source_kind``: ``postgres`` (the database of ``config.postgres_url``), ``sqlite``
    (``source`` is the file), ``saver`` (``source`` is ``module:factory`` returning a
    saver or a context manager of one) or ``objstore`` (``source`` is a store URL);
    ``source`` is never a database URL with a password. ``restart`` ignores the
    cursor a previous run left.

    Returns:
        ``threads``, ``checkpoints`` (source, present, missing, copied), ``writes``
        (same), ``diverged`` threads, ``cancelled``, ``apply``, ``resumed_after``,
        ``cursor`` and ``run`` (rates).

    Raises:
        JobError: the source or target cannot be used, or a thread failed (no
            secret in the message); the cursor is stored: the same command goes on.
    """
    check_concurrency(concurrency)
    config = config or OpsConfig.from_env()
    counts = _Counts()
    run = Fanout()
    with secrets_kept_out("migration", config.secrets(), kept=(JobError,)):
        async with (
            aopen_saver(config) as target,
            open_source(source_kind, source, config, concurrency) as src,
        ):
            cursor = Cursor.of("migrate", src.description, shard)
            with contextlib.closing(Driver(target.store, max_workers=16)) as driver:

                async def one(item: tuple[str, str]) -> None:
                    tuples = await src.checkpoints(item[1])
                    await _migrate_thread(item[1], tuples, target, driver, counts, apply)

                complete = await for_each_resumable(
                    cursor,
                    driver,
                    src.threads,
                    one,
                    lambda _item, _none: None,
                    named=None if thread_ids is None else ((t, t) for t in thread_ids),
                    position=lambda item: item[0],
                    token=lambda item: keys.token("thread_id", item[1]),
                    shard=shard,
                    restart=restart,
                    apply=apply,
                    stats=run,
                    concurrency=concurrency,
                    name=lambda item: item[1],
                    progress=progress,
                    should_cancel=should_cancel,
                )
    return {
        "source": src.description,
        "target": target.store.location,
        "apply": apply,
        "cancelled": run.cancelled,
        "shard": str(shard),
        "resumed_after": cursor.after,
        "cursor": cursor.key if thread_ids is None else None,
        "complete": complete,
        "threads": {"source": run.found - run.skipped, "done": run.done},
        "checkpoints": counts.checkpoints,
        "writes": counts.writes,
        "diverged": sorted(counts.diverged, key=lambda d: (d["thread_id"], d["checkpoint_ns"])),
        "run": {
            **run.to_dict(),
            "checkpoints_per_second": round(
                counts.checkpoints["source"] / run.seconds if run.seconds else 0.0, 1
            ),
        },
    }


migrate = blocking(amigrate)
