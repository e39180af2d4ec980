"""Jobs that keep a store healthy: ``prune``, ``verify``, ``delete_thread``.

The work is the saver's own plans (spec §6.6, §6.9, §6.11) run on many threads at
once (:mod:`.fanout`); ``prune`` and ``delete_threads`` share DeleteObjects requests
between threads (:mod:`.delete_coalescing`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from objstore_saver import plans
from objstore_saver.format import keys
from objstore_saver.longterm.verify import verify_store
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    aopen_saver,
    aopen_store,
    never_cancel,
    no_progress,
)
from objstore_saver.ops.delete_coalescing import coalescing_driver
from objstore_saver.ops.fanout import (
    DEFAULT_CONCURRENCY,
    Target,
    blocking,
    check_concurrency,
    for_each_thread,
)
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.verify import verify_thread
from objstore_saver.plans.verify_report import Depth, VerifyReport
from objstore_saver.storage.base import in_thread, sealing_layer
from objstore_saver.verify import arriving_since

#: Defaults of the daily retention job (docs/runbooks.md).
DEFAULT_KEEP_LAST = 20
DEFAULT_MIN_AGE = 60.0

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``30d``, ``12h``, ``90m``, ``2w`` or ``1d12h``.

    A unit (``s``, ``m``, ``h``, ``d``, ``w``) is required, so ``30`` cannot silently
    mean 30 seconds; a ``ValueError`` for anything else, or zero.
    """
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise ValueError(
            f"invalid duration {text!r}: use a number and a unit s, m, h, d or w "
            "(e.g. 30d, 12h, 1d12h)"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: must be longer than zero")
    return seconds


def _check_prune_arguments(
    keep_last: int | None,
    min_age: float,
    older_than: float | None,
    idle_for: float | None,
    idle_action: str,
) -> None:
    if keep_last is None:
        if idle_for is None:
            raise JobError("keep_last may be left out only with idle_for (the idle rule alone)")
    elif keep_last < 1:
        raise JobError(f"keep_last must be at least 1, got {keep_last}")
    if min_age < 0:
        raise JobError(f"min_age must be 0 or more seconds, got {min_age}")
    for name, value in (("older_than", older_than), ("idle_for", idle_for)):
        if value is not None and value <= 0:
            raise JobError(f"{name} must be more than 0 seconds, got {value}")
    if idle_action not in plans.IDLE_ACTIONS:
        raise JobError(f"unknown idle_action {idle_action!r}: use 'delete' or 'keep_latest'")


def _seconds(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


async def aprune(
    thread_ids: list[str] | None = None,
    *,
    keep_last: int | None = DEFAULT_KEEP_LAST,
    min_age: float = DEFAULT_MIN_AGE,
    older_than: float | None = None,
    idle_for: float | None = None,
    idle_action: str = "delete",
    tombstone_window: float | None = None,
    apply: bool = False,
    config: OpsConfig | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Keep each thread's newest ``keep_last`` root checkpoints; delete the rest.

    Deletes the older checkpoints (with the subgraph checkpoints that belong
    to them) and their writes, then sweeps values no kept checkpoint
    references and that are older than ``min_age`` seconds. Safe while agents
    write: the sweep is two-phase (spec §6.9). One flat listing of the store
    finds every thread and decides the idle and age rules.

    Args:
        thread_ids: Threads to prune; default every thread of the store.
        keep_last: Root checkpoints kept per thread (at least 1); None, only
            with ``idle_for``, leaves threads that are not idle alone.
        min_age: Objects younger than this many seconds are never deleted.
        older_than: Seconds; no checkpoint younger than this is deleted, in
            any namespace: root checkpoints beyond the ``keep_last`` newest,
            and subgraph checkpoints other than a kept run's last state of
            their namespace, go only when at least this old.
        idle_for: Seconds without a write after which a thread is idle.
        idle_action: ``"delete"`` or ``"keep_latest"``: what idle threads get.
        tombstone_window: Seconds a deleted thread's tombstones are kept
            (default 30 days; spec §4.11).

    Returns:
        The report of spec §6.9 (``threads``, ``totals``, ``threads_idle``,
        ``threads_deferred``...) with ``cancelled``, ``shard`` and ``run``; a thread left
        alone says why in ``left_alone``: ``"deferred"``, ``"arriving"`` (a replica's
        thread written within the lag) or ``"not_idle"``.
    """
    _check_prune_arguments(keep_last, min_age, older_than, idle_for, idle_action)
    check_concurrency(concurrency)
    rows: list[dict[str, Any]] = []
    async with aopen_saver(config) as saver, coalescing_driver(saver.store) as driver:
        ctx = saver.plan_context
        rules = plans.prune_rules(
            ctx,
            keep_last=keep_last,
            min_age=timedelta(seconds=min_age),
            sweep_delay=saver.sweep_delay,
            dry_run=not apply,
            older_than=_seconds(older_than),
            idle_for=_seconds(idle_for),
            idle_action=idle_action,
            tombstone_window=_seconds(tombstone_window),
        )

        async def one(target: Target) -> dict[str, Any] | None:
            thread_id = target.thread_id
            if thread_id is None:
                assert target.listing is not None  # a scanned thread
                thread_id = await driver.arun(plans.thread_id_of(target.listing))
                if thread_id is None:
                    return None  # a hashed token and no manifest: nothing a prune keeps
            return await driver.arun(
                plans.prune_thread(ctx, thread_id, "keep_latest", rules, target.listing)
            )

        run = await for_each_thread(
            driver,
            one,
            lambda _target, row: row is None or rows.append(row),
            thread_ids=thread_ids or None,
            concurrency=concurrency,
            shard=shard,
            progress=progress,
            should_cancel=should_cancel,
        )
        # Versions left of destroyed key objects (a key store that keeps
        # versions): counted, and deleted with --apply, by shard 0 only.
        whole = not thread_ids and shard.index == 0 and not run.cancelled
        key_versions = await _key_versions(saver.store, apply) if whole else {}
        rows.sort(key=lambda r: r["thread_id"])  # threads finish in any order
        totals: dict[str, int] = {}
        for row in rows:
            for name, value in row.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[name] = totals.get(name, 0) + value
        return {
            "store": saver.store.location,
            "apply": apply,
            "keep_last": keep_last,
            "min_age": min_age,
            "older_than": older_than,
            "idle_for": idle_for,
            "idle_action": idle_action,
            "tombstone_window": rules.tombstone_window.total_seconds(),
            "cancelled": run.cancelled,
            "shard": str(shard),
            "threads_idle": [r["thread_id"] for r in rows if r.get("idle")],
            "threads_deferred": [r["thread_id"] for r in rows if r.get("deferred")],
            **key_versions,
            "totals": totals,
            "threads": rows,
            "run": run.to_dict(),
        }


prune = blocking(aprune)


async def averify(
    thread_id: str | None = None,
    *,
    config: OpsConfig | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
    read_data: bool = False,
    read_data_subset: str | tuple[int, int] | None = None,
) -> dict[str, Any]:
    """An fsck of the store (or one thread), as a dict (spec §6.11).

    By default every reference resolves against the listing, reading no content
    object; ``read_data`` re-hashes every content object (and counts orphans),
    ``read_data_subset`` (``"K/N"``, K from 1) share K of N. ``report["ok"]`` is False
    on any corruption. Without ``thread_id``, shard 0 also checks the long-term store.
    """
    check_concurrency(concurrency)
    report = VerifyReport(depth=Depth.of(read_data, read_data_subset))
    config = config or OpsConfig.from_env()
    since = arriving_since(config.replica_lag)
    async with aopen_store(config) as (store, driver):

        async def one(target: Target) -> None:
            await driver.arun(verify_thread(target.pfx, report, target.listing, since))

        run = await for_each_thread(
            driver,
            one,
            lambda _target, _none: None,
            thread_ids=None if thread_id is None else [thread_id],
            concurrency=concurrency,
            shard=shard,
            progress=progress,
            should_cancel=should_cancel,
        )
        key_versions: dict[str, Any] = {}
        # The long-term store's objects (spec §8) are checked once: by shard 0.
        if thread_id is None and shard.index == 0 and not run.cancelled:
            await driver.arun(verify_store(report, round(time.time() * 1e6)))
            key_versions = await _key_versions(store, apply=False)
    out = report.to_dict()
    out.update(key_versions)
    out.update(store=store.location, shard=str(shard), cancelled=run.cancelled, run=run.to_dict())
    return out


verify = blocking(averify)


async def _key_versions(store: Any, apply: bool) -> dict[str, Any]:
    """The versions left of destroyed key objects (deleted with ``apply``), if encrypted."""
    layer = sealing_layer(store)
    if layer is None:
        return {}
    return dict(await in_thread(layer.key_versions.sweep_retained, apply))


#: What a thread holds, as ``delete_thread`` reports it (the bytes last).
_HELD = ("checkpoints", "writes", "objects", "run_markers", "bytes")


def _holdings(listing: plans.ThreadListing) -> dict[str, int]:
    every = listing.manifests + listing.writes + listing.objects + listing.runs
    return {
        "checkpoints": len(listing.manifests),
        "writes": len(listing.writes),
        "objects": len(listing.objects),
        "run_markers": len(listing.runs),
        "bytes": sum(o.size for o in every),
    }


async def adelete_threads(
    thread_ids: Sequence[str],
    *,
    apply: bool = False,
    config: OpsConfig | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Delete every object of each named thread, ``concurrency`` at once (dry run unless ``apply``).

    Each thread is one LIST and its deletes (spec §6.6): manifests first, then the rest.
    Returns one row per thread (what it holds, whether deleted), totals and ``run``; a
    thread holding nothing is named in ``threads_holding_nothing``, not an error.
    """
    check_concurrency(concurrency)
    for thread_id in thread_ids:
        keys.thread_prefix(thread_id)  # a bad id is refused before anything is deleted
    rows: list[dict[str, Any]] = []
    async with aopen_saver(config) as saver, coalescing_driver(saver.store) as driver:
        ctx = saver.plan_context

        async def one(target: Target) -> dict[str, Any]:
            assert target.thread_id is not None  # named threads
            listing = await driver.arun(plans.list_thread(target.pfx))
            row = {"thread_id": target.thread_id, **_holdings(listing)}
            held = any(row[k] for k in _HELD[:-1])
            if apply and held:
                await driver.arun(plans.delete_listing(ctx, target.thread_id, listing))
            return {**row, "held": held, "deleted": apply and held}

        run = await for_each_thread(
            driver,
            one,
            lambda _target, row: rows.append(row),
            thread_ids=thread_ids,
            concurrency=concurrency,
            shard=shard,
            progress=progress,
            should_cancel=should_cancel,
        )
        rows.sort(key=lambda r: r["thread_id"])  # threads finish in any order
        return {
            "store": saver.store.location,
            "apply": apply,
            "cancelled": run.cancelled,
            "shard": str(shard),
            "threads": rows,
            "threads_holding_nothing": [r["thread_id"] for r in rows if not r["held"]],
            "totals": {name: sum(r[name] for r in rows) for name in _HELD},
            "run": run.to_dict(),
        }


delete_threads = blocking(adelete_threads)


def delete_thread(
    thread_id: str, *, apply: bool = False, config: OpsConfig | None = None
) -> dict[str, Any]:
    """Delete every object of a thread (dry run unless ``apply``): what it holds and whether
    it was deleted. ``JobError`` when it holds nothing."""
    report = delete_threads([thread_id], apply=apply, config=config)
    row = report["threads"][0]
    if not row["held"]:
        raise JobError(f"thread {thread_id!r} holds nothing in {report['store']}")
    return {
        "thread_id": thread_id,
        "store": report["store"],
        "apply": apply,
        "deleted": row["deleted"],
        **{k: row[k] for k in _HELD},
    }
