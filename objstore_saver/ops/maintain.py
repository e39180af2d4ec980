"""Jobs that keep a store healthy: ``prune``, ``verify``, ``delete_thread``.

Thin wrappers: the work is the core saver's (``ObjectStoreSaver.prune``,
``verify``, ``delete_thread``); the jobs choose threads, report progress,
stop between threads when cancelled and return JSON-serializable reports.
"""

from __future__ import annotations

import re
from typing import Any

from objstore_saver import plans
from objstore_saver.driver import Driver
from objstore_saver.format import codec, keys
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    never_cancel,
    no_progress,
    open_saver,
)
from objstore_saver.ops.views import thread_prefixes
from objstore_saver.plans.requests import Get, ListKeys, run_one

#: Defaults of the daily retention job (issue 4 §2b).
DEFAULT_KEEP_LAST = 20
DEFAULT_MIN_AGE = 60.0

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``30d``, ``12h``, ``90m``, ``2w`` or ``1d12h``.

    Units: ``s``, ``m`` (minutes), ``h``, ``d``, ``w``. A unit is required, so
    that ``30`` cannot silently mean 30 seconds where 30 days was meant.

    Raises:
        ValueError: The text is not such a duration, or it is zero.
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


def _all_thread_ids(driver: Driver) -> list[str]:
    """Every thread of the store: one LIST per thread (skip scan); a hashed
    thread token (ids over 200 quoted characters) costs one LIST and GET more."""

    def plan():  # type: ignore[no-untyped-def]
        ids = []
        for pfx in (yield from thread_prefixes()):
            tid = keys.untoken(pfx[len(keys.THREADS) : -1])
            if tid is None:
                page = yield from run_one(ListKeys(pfx + "checkpoints/", limit=1))
                if page.objects:
                    key = page.objects[0].key
                    body = yield from run_one(Get(key))
                    if body is not None:
                        tid = codec.decode_manifest(body, key).thread_id
            if tid is not None:
                ids.append(tid)
        return ids

    return driver.run(plan())


def prune(
    thread_ids: list[str] | None = None,
    *,
    keep_last: int | None = DEFAULT_KEEP_LAST,
    min_age: float = DEFAULT_MIN_AGE,
    older_than: float | None = None,
    idle_for: float | None = None,
    idle_action: str = "delete",
    apply: bool = False,
    config: OpsConfig | None = None,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Keep each thread's newest ``keep_last`` root checkpoints; delete the rest.

    Deletes the older checkpoints (with the subgraph checkpoints that belong
    to them) and their writes, then sweeps values no kept checkpoint
    references and that are older than ``min_age`` seconds. Safe while agents
    write: the core sweep is two-phase. With ``idle_for``, threads nobody
    wrote to for that long are deleted (or reduced to their latest
    checkpoint); deciding it costs one LIST per thread (spec §6.9).

    Args:
        thread_ids: Threads to prune; default every thread of the store.
        keep_last: Root checkpoints kept per thread (at least 1); None, only
            with ``idle_for``, leaves threads that are not idle alone.
        min_age: Objects younger than this many seconds are never deleted.
        older_than: Seconds; root checkpoints beyond the ``keep_last`` newest
            go only when at least this old.
        idle_for: Seconds without a write after which a thread is idle.
        idle_action: ``"delete"`` or ``"keep_latest"``: what idle threads get.
        apply: Delete; without it the job reports what it would delete.
        config: The store; default from ``OBJSTORE_SAVER_URL``.
        progress: Called after each thread.
        should_cancel: Polled between threads; True stops cleanly.

    Returns:
        ``{"threads": [per-thread reports], "totals": {...}, "threads_idle",
        "apply", "cancelled", ...}``.
    """
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
    rules: dict[str, Any] = {}
    if older_than is not None or idle_for is not None:
        rules = {"older_than": older_than, "idle_for": idle_for, "idle_action": idle_action}
    config = config or OpsConfig.from_env()
    with open_saver(config) as saver:
        driver = Driver(saver.store, max_workers=4)
        try:
            ids = list(thread_ids) if thread_ids else _all_thread_ids(driver)
            rows: list[dict[str, Any]] = []
            cancelled = False
            for i, tid in enumerate(ids):
                if should_cancel():
                    cancelled = True
                    break
                result = saver.prune(
                    [tid], keep_last=keep_last, min_age=min_age, dry_run=not apply, **rules
                )
                rows += result.get("threads") or [{"thread_id": tid}]
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
            "older_than": older_than,
            "idle_for": idle_for,
            "idle_action": idle_action,
            "cancelled": cancelled,
            "threads_idle": [r["thread_id"] for r in rows if r.get("idle")],
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
        report = saver.verify(thread_id).to_dict()
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
