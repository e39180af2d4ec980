"""Read-only jobs: ``threads``, ``history``, ``show``, ``du`` (``cat`` is in ``object_views``).

Values are decoded structurally (:mod:`objstore_saver.ops.decode`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from objstore_saver import plans
from objstore_saver.crypto.names import KEY_PREFIX
from objstore_saver.format import codec, keys, store_keys
from objstore_saver.longterm.plans import list_infos
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    aopen_store,
    never_cancel,
    no_progress,
    open_store,
    tally,
)
from objstore_saver.ops.checkpoint_reading import (
    checkpoint_plan,
    manifest_context,
    resolve_entries,
)
from objstore_saver.ops.fanout import (
    DEFAULT_CONCURRENCY,
    Target,
    blocking,
    check_concurrency,
    for_each_thread,
)
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.requests import Get, ListKeys, run_batch, run_one
from objstore_saver.storage.base import ObjectInfo

#: Manifests read in parallel by a history.
READ_AHEAD = 16


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _summary(thread_id: str | None, listing: plans.ThreadListing) -> dict[str, Any]:
    every: list[ObjectInfo] = listing.manifests + listing.writes + listing.objects + listing.runs
    last = max((o.last_modified for o in every), default=None)
    namespaces = {keys.namespace_of_manifest_key(o.key)[0] for o in listing.manifests}
    return {
        "thread_id": thread_id,
        "prefix": listing.pfx,
        "checkpoints": len(listing.manifests),
        "namespaces": len(namespaces),
        "writes": len(listing.writes),
        "objects": len(every),
        "bytes": sum(o.size for o in every),
        "last_update": _iso(last),
    }


async def athreads(
    config: OpsConfig | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """List threads with checkpoint counts, sizes and last update, newest first.

    One flat listing of the store finds every thread and its keys; only a thread with
    a hashed token costs a GET.

    Returns:
        ``{"threads": [{"thread_id", "checkpoints", "writes", "objects", "bytes",
        "last_update", ...}], "count", "cancelled", "shard", "run": {rate...}}``.
    """
    check_concurrency(concurrency)
    rows: list[dict[str, Any]] = []
    async with aopen_store(config) as (store, driver):

        async def summary(target: Target) -> dict[str, Any]:
            assert target.listing is not None  # a scan
            return _summary(await driver.arun(plans.thread_id_of(target.listing)), target.listing)

        def keep(_target: Target, row: dict[str, Any]) -> None:
            # A deleted thread holds only its tombstones (spec §4.11): not listed.
            if row["objects"]:
                rows.append(row)

        run = await for_each_thread(
            driver,
            summary,
            keep,
            concurrency=concurrency,
            shard=shard,
            progress=progress,
            should_cancel=should_cancel,
        )
    rows.sort(key=lambda r: r["last_update"] or "", reverse=True)
    return {
        "threads": rows,
        "count": len(rows),
        "cancelled": run.cancelled,
        "shard": str(shard),
        "store": store.location,
        "run": run.to_dict(),
    }


threads = blocking(athreads)


def history_plan(thread_id: str) -> SubPlan:
    """Plan of :func:`history`."""
    pfx = keys.thread_prefix(thread_id)
    page_keys = yield from list_infos(keys.manifests_prefix(thread_id))
    chosen = set(plans.checkpoint_manifests(o.key for o in page_keys))
    page_keys = [o for o in page_keys if o.key in chosen]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(page_keys), READ_AHEAD):
        group = page_keys[start : start + READ_AHEAD]
        bodies = yield from run_batch(*(Get(o.key) for o in group))
        for info, body in zip(group, bodies, strict=True):
            if body is None:
                continue  # deleted since listed
            m = codec.decode_manifest(body, info.key)
            ctx = manifest_context(m, info.key)  # its own embedded objects cost no request
            md = (yield from resolve_entries(pfx, {"m": m.metadata}, info.key, ctx=ctx))["m"]
            md = md if isinstance(md, dict) else {}
            rows.append(
                {
                    "checkpoint_id": m.checkpoint_id,
                    "checkpoint_ns": m.checkpoint_ns,
                    "parent_checkpoint_id": m.parent_checkpoint_id,
                    "step": md.get("step"),
                    "source": md.get("source"),
                    "channels": len(m.channels),
                    "manifest_bytes": info.size,
                    # Objects the manifest carries (format version 2), in its bytes.
                    "embedded_objects": len(m.embedded),
                    "embedded_bytes": sum(len(b) for b in m.embedded),
                    "written": _iso(info.last_modified),
                    "key": info.key,
                }
            )
    rows.sort(key=lambda r: r["checkpoint_id"], reverse=True)
    return rows


def history(thread_id: str, config: OpsConfig | None = None) -> dict[str, Any]:
    """Checkpoints of a thread, newest first, with step, source, parent and size.

    Raises:
        JobError: the thread has no checkpoint.
    """
    with open_store(config) as (store, driver):
        rows = driver.run(history_plan(thread_id))
    if not rows:
        raise JobError(f"thread {thread_id!r} has no checkpoint in {store.location}")
    return {"thread_id": thread_id, "store": store.location, "checkpoints": rows}


def show(
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
    config: OpsConfig | None = None,
) -> dict[str, Any]:
    """A checkpoint (the latest by default) decoded to JSON: manifest, values, writes.

    Nothing is unpickled; LangChain messages are ``{"role", "content"}``. ``JobError``
    when there is no such checkpoint.
    """
    with open_store(config) as (store, driver):
        report = driver.run(checkpoint_plan(thread_id, checkpoint_id, checkpoint_ns))
    if report is None:
        what = f"no checkpoint {checkpoint_id!r}" if checkpoint_id else "no checkpoint"
        raise JobError(
            f"thread {thread_id!r} (namespace {checkpoint_ns!r}) has {what} in {store.location}"
        )
    report["store"] = store.location
    return report


def _kind_of(rest: str) -> str:
    section, _, inner = rest.partition("/")
    if section == "checkpoints" and keys.V2_WRITES_SUFFIX in inner:
        return "writes"  # a version-2 pending write, under its checkpoint's key
    if section == "checkpoints" and inner.partition("/")[2].startswith(keys.TOMBSTONE_MARK):
        return "tombstones"  # spec §4.11
    names = {"checkpoints": "manifests", "runs": "run-markers"}
    return names.get(section, section)


def du_plan(progress: ProgressCallback, should_cancel: CancelCheck, shard: Shard = ALL) -> SubPlan:
    """Plan of :func:`du`. A thread's keys count in the shard that owns it, the keys
    outside threads in shard 0: the shards' totals add up."""
    by_thread: dict[str, dict[str, Any]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    total = {"objects": 0, "bytes": 0}
    after: str | None = None
    cancelled = False
    while True:
        if should_cancel():
            cancelled = True
            break
        page = yield from run_one(ListKeys("", after))
        for info in page.objects:
            if info.key.startswith(keys.THREADS):
                pfx, rest = keys.split_thread_key(info.key)
                if not shard.owns(pfx[len(keys.THREADS) : -1]):
                    continue
                kind = _kind_of(rest)
                row = tally(by_thread, pfx, info.size)
                tally(row.setdefault("by_kind", {}), kind, info.size)
            elif shard.index != 0:
                continue
            elif info.key.startswith(keys.RUNS):
                kind = "run-index"
            elif info.key.startswith(store_keys.ROOT):
                kind = "store " + store_keys.classify(info.key)[1]
            elif info.key.startswith(KEY_PREFIX):
                kind = "encryption keys"  # key objects of encrypted threads (docs/encryption.md)
            else:
                kind = "foreign"
            tally(by_kind, kind, info.size)
            total["objects"] += 1
            total["bytes"] += info.size
        progress(total["objects"], None, "objects listed")
        if not page.truncated or not page.objects:
            break
        after = page.objects[-1].key
    rows = [
        {"thread_id": keys.untoken(pfx[len(keys.THREADS) : -1]), "prefix": pfx, **row}
        for pfx, row in by_thread.items()
    ]
    rows.sort(key=lambda r: r["bytes"], reverse=True)
    return {
        "total": total,
        "by_kind": by_kind,
        "by_thread": rows,
        "cancelled": cancelled,
        "shard": str(shard),
    }


def du(
    config: OpsConfig | None = None,
    *,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Objects and bytes of the store, in total, by kind and by thread (largest first).

    One flat listing (no GET); objects embedded in manifests count within their
    manifests' bytes. Progress and cancellation are by LIST page.
    """
    with open_store(config) as (store, driver):
        report = driver.run(du_plan(progress, should_cancel, shard))
        report["store"] = store.location
        return report


__all__ = [
    "athreads",
    "du",
    "history",
    "show",
    "threads",
]
