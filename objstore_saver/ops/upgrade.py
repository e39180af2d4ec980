"""``upgrade``: rewrite the format-version-1 threads of a bucket in version 2.

The algorithm and its order: docs/runbooks.md, "Upgrade", and docs/format-v2.md.
A conflict fails that thread alone, which keeps all its keys.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from objstore_saver import plans
from objstore_saver.driver import Driver
from objstore_saver.errors import (
    CorruptObjectError,
    MissingObjectError,
    ObjstoreSaverError,
)
from objstore_saver.fallback import put_writes_calls
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Manifest, WriteObj
from objstore_saver.format.keys import checkpoint_config
from objstore_saver.ops._common import (
    CancelCheck,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    aopen_saver,
    never_cancel,
    no_progress,
    redact_error,
    secrets_kept_out,
)
from objstore_saver.ops.delete_coalescing import coalescing_driver
from objstore_saver.ops.fanout import (
    DEFAULT_CONCURRENCY,
    Fanout,
    Target,
    blocking,
    check_concurrency,
    counted,
)
from objstore_saver.ops.job_cursor import Cursor, for_each_resumable, resumable_fields
from objstore_saver.ops.migration import put_checkpoint
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.requests import Get, ListKeys, list_all, run_batch
from objstore_saver.plans.threads import delete_keys
from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage.base import ListPage

__all__ = ["LEFT_FOR_PRUNE", "aupgrade", "upgrade"]

#: What the cursor reads: the bucket itself, whatever URL names it.
SOURCE = "version-1 threads of this bucket"
#: Said in every report: what the job does not delete.
LEFT_FOR_PRUNE = (
    "version-1 list, node, chunk and value objects stay; those no checkpoint reaches "
    "any more are marked and swept by later prune runs"
)


def _is_v1_manifest(key: str) -> bool:
    try:
        parts = keys.parse_checkpoint_key(key)
    except ValueError:
        return False
    return parts.kind == "manifest" and parts.version == 1


def _past(pfx: str) -> str:
    return pfx[:-1] + "0"  # after every key of the thread: "0" is the character after "/"


def _oldest_first(manifests: list[str]) -> list[str]:
    """Version-1 manifests (listing order), each namespace oldest first, the root's last."""
    by_ns: dict[str, list[str]] = {}
    for k in manifests:
        by_ns.setdefault(keys.namespace_of_manifest_key(k)[0], []).append(k)
    root = by_ns.pop(keys.token("checkpoint_ns", ""), [])
    # A namespace lists newest first (reversed ids).
    return [k for chain in [*by_ns.values(), root] for k in reversed(chain)]


@dataclass
class _Old:
    """A version-1 checkpoint and its pending writes (of both versions) as stored."""

    mkey: str
    manifest: Manifest
    write_keys: list[str]
    bodies: dict[str, bytes | None]
    effective: list[WriteObj]
    v2_slots: set[tuple[str, int]]  # those ``<R>.w/`` holds: put_writes_calls stores the others


def _rest(prefix: str, page: ListPage) -> SubPlan:
    got = [o.key for o in page.objects]
    if page.truncated and got:
        got += yield from list_all(prefix, got[-1])
    return got


def _read_old(mkey: str) -> SubPlan:
    """Sub-plan: the version-1 checkpoint ``mkey``; None once it has ``<R>.2`` or is gone."""
    parts = keys.parse_checkpoint_key(mkey)
    old_pfx = f"{parts.thread_pfx}writes/{parts.ns_token}/{parts.checkpoint_token}/"
    body, own, old = yield from run_batch(Get(mkey), ListKeys(mkey), ListKeys(old_pfx))
    mine = yield from _rest(mkey, own)
    if body is None or mkey + keys.V2_MANIFEST_SUFFIX in mine:
        return None
    manifest = plans.decode_checked_manifest(body, mkey)
    new_writes = [k for k in mine if k.startswith(mkey + keys.V2_WRITES_SUFFIX)]
    # Version 1's first, as the readers list them (the order breaks sequence ties).
    write_keys = (yield from _rest(old_pfx, old)) + new_writes
    got = yield from run_batch(*(Get(k) for k in write_keys))
    bodies = dict(zip(write_keys, got, strict=True))
    decoded: dict[str, list[WriteObj]] = {}
    for k, b in bodies.items():
        if b is None:
            raise MissingObjectError(k, "the listing of its checkpoint's writes")
        decoded[k] = codec.decode_writes(b, k)
    slots = {(keys.token("task_id", w.task_id), w.idx) for k in new_writes for w in decoded[k]}
    effective = plans.effective_writes(w for k in write_keys for w in decoded[k])
    return _Old(mkey, manifest, write_keys, bodies, effective, slots)


def _delete_v1(pfx: str) -> SubPlan:
    """Sub-plan: once every ``<R>`` has its ``<R>.2``, delete them, then ``writes/``."""
    listed = yield from list_all(pfx + "checkpoints/")
    present = set(listed)
    old = [k for k in listed if _is_v1_manifest(k)]
    lacking = [k for k in old if k + keys.V2_MANIFEST_SUFFIX not in present]
    if lacking:
        raise ObjstoreSaverError(
            f"{lacking[0]}: a version-1 manifest without a version-2 one after the rewrite "
            "(is a writer of an older release still running?); nothing of the thread deleted"
        )
    yield from delete_keys(old[::-1])  # oldest first
    writes = yield from list_all(pfx + "writes/")
    yield from delete_keys(writes)
    return len(old) + len(writes)


@dataclass
class _Row:
    """What the job did (or, in a dry run, would do) to one thread."""

    thread_id: str
    status: str = "current"  # "upgraded", "failed"
    checkpoints: int = 0
    writes: int = 0
    deleted: int = 0
    error: str | None = None


@dataclass
class _Job:
    saver: ObjectStoreSaver
    driver: Driver
    apply: bool
    secrets: list[str] = field(default_factory=list)

    async def thread(self, target: Target) -> _Row:
        row = _Row(target.name)
        try:
            listing = target.listing or await self.driver.arun(plans.list_thread(target.pfx))
            if listing.unknown:  # nothing is acted on beside a key the format does not define
                raise CorruptObjectError(listing.unknown[0].key, "unknown key in the thread")
            todo = [o.key for o in listing.manifests if _is_v1_manifest(o.key)]
            old_writes = [o.key for o in listing.writes if o.key.startswith(target.pfx + "writes/")]
            stale = len(listing.superseded) + len(todo) + len(old_writes)
            if not stale:
                return row
            row.status = "upgraded"
            for mkey in _oldest_first(todo):
                await self.checkpoint(mkey, row)
            row.deleted = await self.driver.arun(_delete_v1(target.pfx)) if self.apply else stale
        except ObjstoreSaverError as exc:
            row.status, row.error = "failed", redact_error(exc, self.secrets)
        return row

    async def checkpoint(self, mkey: str, row: _Row) -> None:
        """Rewrite one checkpoint: its missing writes, then its manifest ``<R>.2``."""
        old: _Old | None = await self.driver.arun(_read_old(mkey))
        if old is None:
            return  # upgraded already (a killed run, another worker) or pruned meanwhile
        row.thread_id = old.manifest.thread_id
        if not self.apply:
            calls = put_writes_calls(
                [(w.task_id, w.channel, w.value) for w in old.effective], old.v2_slots
            )
            row.checkpoints += 1
            row.writes += sum(len(writes) for _, writes in calls)
            return
        (tup,) = await self.driver.arun(
            plans.read_tuples(
                self.saver.plan_context,
                [(mkey, old.manifest)],
                write_keys=[old.write_keys],
                write_bodies=old.bodies,
            )
        )
        # pending_writes are the effective writes, in the same order.
        paths = {w.task_id: w.task_path for w in old.effective}
        m = old.manifest
        config = checkpoint_config(m.thread_id, m.checkpoint_ns, m.checkpoint_id)
        for task_id, writes in put_writes_calls(list(tup.pending_writes or []), old.v2_slots):
            await self.saver.aput_writes(config, writes, task_id, paths.get(task_id, ""))
            row.writes += len(writes)
        # Every channel version is new: the values are written as they read.
        await put_checkpoint(old.manifest.thread_id, tup, {}, self.saver)
        row.checkpoints += 1


async def aupgrade(
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
    """Rewrite the format-version-1 threads of the store in version 2.

    ``thread_ids``: default every thread; ``restart`` ignores the cursor a previous run
    left. Without ``apply`` the job only LISTs and GETs.

    Returns:
        ``threads`` (scanned, upgraded, current, failed), ``checkpoints_rewritten``,
        ``writes_rewritten``, ``v1_keys_deleted`` (in a dry run: what an apply would
        do), ``errors`` (thread id and error of each failed thread), ``dry_run``,
        ``cancelled``, ``complete``, ``resumed_after``, ``cursor``, ``run``.

    Raises:
        JobError: the store cannot be used or a request failed (no secret in
            the message); the cursor is stored: the same command goes on.
    """
    check_concurrency(concurrency)
    config = config or OpsConfig.from_env()
    rows: list[_Row] = []
    run = Fanout()
    named = None if thread_ids is None else (Target(keys.thread_prefix(t), t) for t in thread_ids)
    with secrets_kept_out("upgrade", config.secrets()):
        async with aopen_saver(config) as saver, coalescing_driver(saver.store) as driver:
            job = _Job(saver, driver, apply, config.secrets())
            cursor = Cursor.of("upgrade", SOURCE, shard)

            async def targets(after: str | None) -> AsyncGenerator[Target, None]:
                start = None if after is None else _past(after)
                # One flat listing, in key order: the cursor's mark needs it.
                async for listing in driver.aiterate(counted(plans.scan_threads(start), run)):
                    yield Target(listing.pfx, listing=listing)

            complete = await for_each_resumable(
                cursor,
                driver,
                targets,
                job.thread,
                lambda _target, row: rows.append(row),
                named=named,
                position=lambda target: target.pfx,
                token=lambda target: target.token,
                shard=shard,
                restart=restart,
                apply=apply,
                stats=run,
                failed=lambda row: row.status == "failed",
                concurrency=concurrency,
                name=lambda target: target.name,
                progress=progress,
                should_cancel=should_cancel,
            )
    status = [r.status for r in rows]
    failed = sorted((r for r in rows if r.error is not None), key=lambda r: r.thread_id)
    return {
        "store": saver.store.location,
        "apply": apply,
        "dry_run": not apply,
        **resumable_fields(run, complete, shard, cursor, thread_ids is None),
        "threads": {
            "scanned": len(rows),
            **{name: status.count(name) for name in ("upgraded", "current", "failed")},
        },
        "checkpoints_rewritten": sum(r.checkpoints for r in rows),
        "writes_rewritten": sum(r.writes for r in rows),
        "v1_keys_deleted": sum(r.deleted for r in rows),
        "errors": [{"thread_id": r.thread_id, "error": r.error} for r in failed],
        "left_for_prune": LEFT_FOR_PRUNE,
        "run": run.to_dict(),
    }


upgrade = blocking(aupgrade)
