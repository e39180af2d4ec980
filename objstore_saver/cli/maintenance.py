"""Commands that check or shrink a store: ``verify``, ``delete-thread``, ``prune``."""

from __future__ import annotations

import argparse
from typing import Any

from objstore_saver import ops
from objstore_saver.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Command,
    Outcome,
    ProgressBar,
    add_scale_options,
    cancelled_mark,
    duration,
    human_size,
    job_options,
    mode,
    pairs,
)
from objstore_saver.errors import ConfigurationError
from objstore_saver.ops._common import OpsConfig
from objstore_saver.ops.maintain import DEFAULT_KEEP_LAST, DEFAULT_MIN_AGE
from objstore_saver.ops.sharding import ALL
from objstore_saver.plans.verify_report import parse_subset


def _add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", nargs="?")
    depth = parser.add_mutually_exclusive_group()
    depth.add_argument(
        "--read-data",
        action="store_true",
        help="also read and re-hash every content object (objects/<H>); "
        "by default they are checked against the listing, unread",
    )
    depth.add_argument(
        "--read-data-subset",
        type=_subset,
        metavar="K/N",
        help="read and re-hash the content objects of share K of N (K from 1): "
        "N runs with K=1..N read each object once",
    )
    add_scale_options(parser)


def _subset(text: str) -> tuple[int, int]:
    try:
        return parse_subset(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _run_verify(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = ops.verify(
        args.thread,
        read_data=args.read_data,
        read_data_subset=args.read_data_subset,
        **job_options(args, config, progress),
    )
    return report, EXIT_OK if report.get("ok") else EXIT_FOUND


def _render_verify(r: dict[str, Any]) -> str:
    status = "OK" if r.get("ok") else "CORRUPT"
    depth = r.get("depth", "default")
    if r.get("read_data_subset"):
        depth += f" {r['read_data_subset']}"
    lines = [f"verify {r.get('store', '')}: {status} ({depth})"]
    for name, value in r.items():
        shown = ("ok", "problems", "store", "run", "depth", "read_data_subset")
        if name not in shown and not isinstance(value, list | dict):
            lines.append(f"  {name}: {'not counted at this depth' if value is None else value}")
    for p in r.get("problems", []):
        lines.append(f"  PROBLEM {p.get('kind')}: {p.get('key')}: {p.get('detail')}")
    return "\n".join(lines)


VERIFY = Command(
    name="verify",
    help="fsck: exit code 1 on any corruption, naming the key",
    add_arguments=_add_verify_arguments,
    run=_run_verify,
    render=_render_verify,
)


def _add_delete_thread_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread", nargs="+", help="one thread or more")
    parser.add_argument("--apply", action="store_true", help="really delete")
    add_scale_options(parser)


def _run_delete_thread(
    args: argparse.Namespace, config: OpsConfig, progress: ProgressBar
) -> Outcome:
    if len(args.thread) == 1 and args.shard == ALL:
        return ops.delete_thread(args.thread[0], apply=args.apply, config=config), EXIT_OK
    report = ops.delete_threads(args.thread, **job_options(args, config, progress))
    return report, EXIT_FOUND if report["threads_holding_nothing"] else EXIT_OK


def _render_delete_thread(r: dict[str, Any]) -> str:
    rows = r.get("threads", [r])
    lines = []
    for t in rows:
        if not t.get("held", True):
            lines.append(f"thread {t['thread_id']!r} in {r['store']}: holds nothing")
            continue
        verb = "deleted" if t["deleted"] else "would delete (add --apply to delete)"
        lines.append(
            f"thread {t['thread_id']!r} in {r['store']}: {verb} {t['checkpoints']} checkpoints, "
            f"{t['writes']} writes, {t['objects']} objects, {t['run_markers']} run markers "
            f"({human_size(t['bytes'])})"
        )
    return "\n".join(lines)


DELETE_THREAD = Command(
    name="delete-thread",
    help="delete every object of threads (needs --apply)",
    add_arguments=_add_delete_thread_arguments,
    run=_run_delete_thread,
    render=_render_delete_thread,
)


def _add_prune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-last",
        type=int,
        metavar="N",
        help=f"root checkpoints kept per thread (default {DEFAULT_KEEP_LAST}; with --idle-for "
        "alone, threads that are not idle are left alone)",
    )
    parser.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="never delete a checkpoint younger than this, root or subgraph (e.g. 90d)",
    )
    parser.add_argument(
        "--idle-for",
        type=duration,
        metavar="DURATION",
        help="threads with no write for this long (e.g. 30d, 12h, 2w) are idle",
    )
    parser.add_argument(
        "--idle-action",
        choices=["delete", "keep-latest"],
        default="delete",
        help="what idle threads get: deleted (default) or reduced to their latest checkpoint",
    )
    parser.add_argument(
        "--tombstone-window",
        type=duration,
        metavar="DURATION",
        help="how long a deleted thread's tombstones are kept before they are swept "
        "(default 30d; longer than any run that could still write to it)",
    )
    parser.add_argument(
        "--min-age",
        type=float,
        default=DEFAULT_MIN_AGE,
        metavar="SECONDS",
        help="never delete objects younger than this",
    )
    parser.add_argument(
        "--thread", action="append", help="a thread to prune (repeatable; default all)"
    )
    parser.add_argument("--apply", action="store_true", help="really delete")
    add_scale_options(parser)


def _run_prune(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    keep_last = args.keep_last
    if keep_last is None:
        # --idle-for alone touches only idle threads; otherwise the daily default.
        only_idle = args.idle_for is not None and args.older_than is None
        keep_last = None if only_idle else DEFAULT_KEEP_LAST
    report = ops.prune(
        args.thread or None,
        keep_last=keep_last,
        min_age=args.min_age,
        older_than=args.older_than,
        idle_for=args.idle_for,
        idle_action=args.idle_action.replace("-", "_"),
        tombstone_window=args.tombstone_window,
        **job_options(args, config, progress),
    )
    return report, EXIT_OK


#: Why prune left a thread alone (its report's ``left_alone``): a name and the reason.
_LEFT_ALONE = {
    "deferred": (
        "deferred",
        "a sweep mark younger than the sweep delay; a run after it ripens prunes the thread",
    ),
    "not_idle": ("not idle", "written within --idle-for"),
    "arriving": ("arriving", "a replica's thread written within its replica lag"),
}


def _render_prune_row(t: dict[str, Any]) -> str:
    """One thread: why it was left alone, or its counts."""
    reason = t.get("left_alone")
    if reason is None:
        counts = {k: v for k, v in t.items() if k not in ("thread_id", "left_alone")}
        return f"  {t['thread_id']!r}: {pairs(counts)}"
    name, why = _LEFT_ALONE.get(reason, (reason, ""))
    if t.get("newest_root_at"):
        why += f"{'; ' if why else ''}newest root checkpoint {t['newest_root_at']}"
    return f"  {t['thread_id']!r}: left alone: {name}" + (f" ({why})" if why else "")


def _render_prune(r: dict[str, Any]) -> str:
    rules = f"keep_last={r['keep_last']} min_age={r['min_age']}s"
    if r.get("older_than") is not None:
        rules += f" older_than={r['older_than']:g}s"
    if r.get("idle_for") is not None:
        rules += f" idle_for={r['idle_for']:g}s idle_action={r['idle_action']}"
    lines = [f"prune {r['store']} {rules}: {mode(r)}" + cancelled_mark(r)]
    if r.get("idle_for") is not None:
        idle = r.get("threads_idle") or []
        lines.append(
            f"idle threads: {len(idle)}" + (f" ({', '.join(map(repr, idle))})" if idle else "")
        )
    deferred = r.get("threads_deferred") or []
    if deferred:
        lines.append(f"deferred threads: {len(deferred)} ({', '.join(map(repr, deferred))})")
    alone = [t["left_alone"] for t in r["threads"] if t.get("left_alone")]
    if alone:
        counts = {_LEFT_ALONE.get(w, (w,))[0]: alone.count(w) for w in dict.fromkeys(alone)}
        by_reason = ", ".join(f"{n} {name}" for name, n in counts.items())
        lines.append(f"threads left alone: {len(alone)} ({by_reason})")
    lines += [_render_prune_row(t) for t in r["threads"]]
    lines.append("totals: " + pairs(r["totals"]))
    return "\n".join(lines)


PRUNE = Command(
    name="prune",
    help="keep the newest N root checkpoints per thread, delete idle threads (needs --apply)",
    add_arguments=_add_prune_arguments,
    run=_run_prune,
    render=_render_prune,
)

#: In the order ``objstore-saver --help`` lists them.
COMMANDS = (VERIFY, DELETE_THREAD, PRUNE)
