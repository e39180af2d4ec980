"""What a prune is asked and what it answers (spec §6.9): its rules, checked, and its report."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from objstore_saver.plans.context import Context

#: How long a deleted thread's tombstones are kept by default: far longer than
#: any run that could still write to the deleted epoch.
TOMBSTONE_WINDOW = timedelta(days=30)


@dataclass
class PruneStats:
    """What a prune did (or, in a dry run, would do) to one thread (spec §6.9)."""

    thread_id: str
    checkpoints_kept: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    orphan_writes_deleted: int = 0
    """Writes left by an interrupted delete or prune, whose checkpoint is gone."""
    objects_extracted: int = 0
    """Objects embedded in deleted manifests, stored alone at ``objects/<H>`` first."""
    objects_marked: int = 0
    bytes_marked: int = 0
    objects_swept: int = 0
    bytes_swept: int = 0
    marks_executed: int = 0
    deferred: bool = False
    """True when a mark younger than the sweep delay, or a replica's lag, left it alone."""
    left_alone: str | None = None
    """Why nothing was read or deleted: ``"deferred"``, ``"arriving"`` or ``"not_idle"``."""
    idle: bool = False
    """True when the idle rule found the thread idle and gave it the idle action."""
    newest_root_at: str | None = None
    """``LastModified`` (ISO 8601) of the newest root checkpoint the idle rule listed."""
    tombstones_swept: int = 0
    """Tombstones of a deleted thread deleted once their window passed (spec §4.11)."""
    tombstones_restored: int = 0
    """Tombstones stored again: the thread was written while they were swept."""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


PRUNE_STRATEGIES = ("keep_latest", "delete", "delete_all")
"""Accepted ``strategy`` names; ``"delete_all"`` is another name of ``"delete"``."""
IDLE_ACTIONS = ("delete", "keep_latest")
"""What the idle rule does to an idle thread (spec §6.9 "The idle rule" step 4)."""


@dataclass(frozen=True)
class Rules:
    """The retention rules of one prune run (spec §6.9)."""

    keep_last: int | None
    older_than: timedelta | None
    idle_for: timedelta | None
    idle_action: str
    min_age: timedelta
    sweep_delay: timedelta
    dry_run: bool
    now: datetime
    tombstone_window: timedelta = TOMBSTONE_WINDOW


def check_rules(ctx: Context, strategy: str, r: Rules) -> None:
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(
            f"unknown prune strategy {strategy!r}: use one of "
            + ", ".join(repr(x) for x in PRUNE_STRATEGIES)
        )
    if r.keep_last is None:
        if r.idle_for is None:
            raise ValueError("keep_last may be None only with idle_for (the idle rule alone)")
    elif isinstance(r.keep_last, bool) or not isinstance(r.keep_last, int) or r.keep_last < 1:
        raise ValueError(f"keep_last must be an integer of at least 1, got {r.keep_last!r}")
    if strategy != "keep_latest" and (r.idle_for is not None or r.older_than is not None):
        raise ValueError(
            f"idle_for and older_than apply to strategy 'keep_latest', not {strategy!r}"
        )
    for name in ("older_than", "idle_for"):
        value = getattr(r, name)
        if value is not None and value <= timedelta(0):
            raise ValueError(f"{name} must be a positive duration, got {value.total_seconds()} s")
    if r.idle_action not in IDLE_ACTIONS:
        raise ValueError(f"unknown idle_action {r.idle_action!r}: use 'delete' or 'keep_latest'")
    if r.min_age < timedelta(0):
        raise ValueError(f"min_age must not be negative, got {r.min_age.total_seconds()} s")
    if r.tombstone_window < r.sweep_delay:
        raise ValueError(
            f"tombstone window {r.tombstone_window.total_seconds():g} s is shorter than the "
            f"sweep delay {r.sweep_delay.total_seconds():g} s: it must outlast any run "
            "that could still write to a deleted thread (spec §4.11)"
        )
    if r.sweep_delay.total_seconds() < ctx.reuse_window:
        raise ValueError(
            f"sweep delay {r.sweep_delay.total_seconds():g} s is shorter than the reuse window "
            f"{ctx.reuse_window:g} s: a concurrent put could lose an object (spec §6.9)"
        )


#: The counts a prune report totals over its threads: the stats' integer fields.
PRUNE_TOTALS = tuple(f.name for f in dataclasses.fields(PruneStats) if f.type == "int")


def _seconds(d: timedelta | None) -> float | None:
    return None if d is None else d.total_seconds()


def prune_rules(
    ctx: Context,
    strategy: str = "keep_latest",
    *,
    keep_last: int | None = 1,
    min_age: timedelta = timedelta(seconds=60),
    sweep_delay: timedelta = timedelta(hours=1),
    dry_run: bool = False,
    now: datetime | None = None,
    older_than: timedelta | None = None,
    idle_for: timedelta | None = None,
    idle_action: str = "delete",
    tombstone_window: timedelta | None = None,
) -> Rules:
    """The rules of one prune, checked (spec §6.9); a ValueError names the rule at fault."""
    rules = Rules(
        keep_last=keep_last,
        older_than=older_than,
        idle_for=idle_for,
        idle_action=idle_action,
        min_age=min_age,
        sweep_delay=sweep_delay,
        dry_run=dry_run,
        now=now or datetime.now(UTC),
        tombstone_window=TOMBSTONE_WINDOW if tombstone_window is None else tombstone_window,
    )
    check_rules(ctx, strategy, rules)
    return rules


def prune_report(strategy: str, rules: Rules, threads: list[dict[str, Any]]) -> dict[str, Any]:
    """A prune's report: its rules, totals, deferred and idle threads, and its rows."""
    return {
        "strategy": strategy,
        "dry_run": rules.dry_run,
        "keep_last": rules.keep_last,
        "min_age_seconds": rules.min_age.total_seconds(),
        "sweep_delay_seconds": rules.sweep_delay.total_seconds(),
        "tombstone_window_seconds": rules.tombstone_window.total_seconds(),
        "older_than_seconds": _seconds(rules.older_than),
        "idle_for_seconds": _seconds(rules.idle_for),
        "idle_action": rules.idle_action,
        "threads_deferred": [t["thread_id"] for t in threads if t["deferred"]],
        "threads_idle": [t["thread_id"] for t in threads if t["idle"]],
        **{name: sum(t[name] for t in threads) for name in PRUNE_TOTALS},
        "threads": threads,
    }
