"""Jobs that keep a store healthy: ``prune``, ``verify``, ``delete_thread``.

Thin wrappers: the work is the core saver's (``ObjectStoreSaver.prune``,
``verify``, ``delete_thread``); the jobs choose threads, report progress,
stop between threads when cancelled and return JSON-serializable reports.
"""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

from objstore_saver import keys, plans
from objstore_saver.driver import Driver
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    never_cancel,
    no_progress,
    open_saver,
)
from objstore_saver.ops.views import _thread_id_of, thread_prefixes
from objstore_saver.saver import ObjectStoreSaver

#: Defaults of the daily retention job (issue 4 §2b).
DEFAULT_KEEP_LAST = 20
DEFAULT_MIN_AGE = 60.0


def _all_thread_ids(driver: Driver) -> list[str]:
    def plan():  # type: ignore[no-untyped-def]
        ids = []
        for pfx in (yield from thread_prefixes()):
            listing = yield from plans.list_thread(pfx)
            tid = yield from _thread_id_of(pfx, listing)
            if tid is not None:
                ids.append(tid)
        return ids

    return driver.run(plan())


def _core_prune_takes_keep_last(saver: ObjectStoreSaver) -> bool:
    params = inspect.signature(saver.prune).parameters
    return {"keep_last", "min_age", "dry_run"} <= set(params)


def _legacy_prune(
    saver: ObjectStoreSaver,
    driver: Driver,
    thread_id: str,
    keep_last: int,
    min_age: float,
    apply: bool,
) -> dict[str, Any]:
    """Prune through the core's older ``keep_latest`` signature (see the report's ``mode``)."""
    listing = driver.run(plans.list_thread(keys.thread_prefix(thread_id)))
    root = keys.manifests_prefix(thread_id, "")
    roots = [o for o in listing.manifests if o.key.startswith(root)]  # newest first
    doomed = roots[keep_last:]  # min_age protects values, not checkpoints
    report = {
        "thread_id": thread_id,
        "root_checkpoints": len(roots),
        "root_checkpoints_to_delete": len(doomed),
        "objects": len(listing.objects),
        "mode": "estimate from listing (core prune has no keep_last yet)",
    }
    if apply:
        if keep_last != 1:
            raise JobError(
                "this objstore-saver's core prune keeps only the latest checkpoint; "
                f"--keep-last {keep_last} needs the two-phase prune (keep_last/min_age)"
            )
        saver.prune_grace = timedelta(seconds=min_age)
        saver.prune([thread_id])
        report["applied"] = True
    return report


def prune(
    thread_ids: list[str] | None = None,
    *,
    keep_last: int = DEFAULT_KEEP_LAST,
    min_age: float = DEFAULT_MIN_AGE,
    apply: bool = False,
    config: OpsConfig | None = None,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Keep each thread's newest ``keep_last`` root checkpoints; delete the rest.

    Deletes the older checkpoints (with the subgraph checkpoints that belong
    to them) and their writes, then sweeps values no kept checkpoint
    references and that are older than ``min_age`` seconds. Safe while agents
    write: the core sweep is two-phase.

    Args:
        thread_ids: Threads to prune; default every thread of the store.
        keep_last: Root checkpoints kept per thread (at least 1).
        min_age: Objects younger than this many seconds are never deleted.
        apply: Delete; without it the job reports what it would delete.
        config: The store; default from ``OBJSTORE_SAVER_URL``.
        progress: Called after each thread.
        should_cancel: Polled between threads; True stops cleanly.

    Returns:
        ``{"threads": [per-thread reports], "totals": {...}, "apply", "cancelled"}``.
    """
    if keep_last < 1:
        raise JobError(f"keep_last must be at least 1, got {keep_last}")
    if min_age < 0:
        raise JobError(f"min_age must be 0 or more seconds, got {min_age}")
    config = config or OpsConfig.from_env()
    with open_saver(config) as saver:
        driver = Driver(saver.store, max_workers=4)
        try:
            ids = list(thread_ids) if thread_ids else _all_thread_ids(driver)
            core = _core_prune_takes_keep_last(saver)
            rows: list[dict[str, Any]] = []
            cancelled = False
            for i, tid in enumerate(ids):
                if should_cancel():
                    cancelled = True
                    break
                if core:
                    result = saver.prune(  # type: ignore[call-arg]
                        [tid], keep_last=keep_last, min_age=min_age, dry_run=not apply
                    )
                    rows += result.get("threads") or [{"thread_id": tid}]
                else:
                    rows.append(_legacy_prune(saver, driver, tid, keep_last, min_age, apply))
                progress(i + 1, len(ids), tid)
        finally:
            driver.close()
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
            "cancelled": cancelled,
            "totals": totals,
            "threads": rows,
        }


def verify(thread_id: str | None = None, *, config: OpsConfig | None = None) -> dict[str, Any]:
    """An fsck of the store (or one thread): the core ``verify`` report as a dict.

    Every manifest parses, every reference resolves, every content-addressed
    object hashes to its key; orphans are counted. ``report["ok"]`` is False
    on any corruption, each problem naming its key.
    """
    config = config or OpsConfig.from_env()
    with open_saver(config) as saver:
        run = getattr(saver, "verify", None)
        if run is None:
            raise JobError("this objstore-saver has no core verify (ObjectStoreSaver.verify)")
        report = run(thread_id).to_dict()
        report.setdefault("store", saver.store.location)
        return report


def delete_thread(
    thread_id: str, *, apply: bool = False, config: OpsConfig | None = None
) -> dict[str, Any]:
    """Delete every object of a thread (dry run unless ``apply``).

    Returns:
        What the thread holds (checkpoints, writes, objects, run markers,
        bytes) and whether it was deleted.

    Raises:
        JobError: the thread holds nothing.
    """
    config = config or OpsConfig.from_env()
    with open_saver(config) as saver:
        driver = Driver(saver.store, max_workers=1)
        try:
            listing = driver.run(plans.list_thread(keys.thread_prefix(thread_id)))
        finally:
            driver.close()
        every = listing.manifests + listing.writes + listing.objects + listing.runs
        if not every:
            raise JobError(f"thread {thread_id!r} holds nothing in {saver.store.location}")
        if apply:
            saver.delete_thread(thread_id)
        return {
            "thread_id": thread_id,
            "store": saver.store.location,
            "apply": apply,
            "deleted": apply,
            "checkpoints": len(listing.manifests),
            "writes": len(listing.writes),
            "objects": len(listing.objects),
            "run_markers": len(listing.runs),
            "bytes": sum(o.size for o in every),
        }
