"""``upgrade``: rewrite the format-version-1 threads of the store in version 2."""

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
    add_resumable_job_options,
    cancelled_mark,
    job_options,
    mode,
    resumed_note,
)
from objstore_saver.ops._common import OpsConfig


def _add_upgrade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thread", action="append", help="a thread to upgrade (repeatable)")
    add_resumable_job_options(parser, apply_help="really rewrite and delete", unit="thread")


def _run_upgrade(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = ops.upgrade(
        config=config, thread_ids=args.thread or None, **job_options(args, progress)
    )
    return report, EXIT_FOUND if report["errors"] else EXIT_OK


def _render_upgrade(r: dict[str, Any]) -> str:
    t = r["threads"]
    if r["apply"]:
        upgraded, rewritten, deleted = "upgraded", "rewritten", "deleted"
    else:
        upgraded, rewritten, deleted = "to upgrade", "to rewrite", "to delete"
    lines = [
        f"upgrade {r['store']} to format version 2: {mode(r, 'rewrite')}" + cancelled_mark(r),
        f"threads:     {t['scanned']} scanned, {t['upgraded']} {upgraded}, "
        f"{t['current']} current, {t['failed']} failed" + resumed_note(r),
        f"checkpoints: {r['checkpoints_rewritten']} {rewritten}",
        f"writes:      {r['writes_rewritten']} {rewritten}",
        f"v1 keys:     {r['v1_keys_deleted']} {deleted}",
        f"note:        {r['left_for_prune']}",
    ]
    lines += [f"  FAILED {e['thread_id']!r}: {e['error']}" for e in r["errors"]]
    return "\n".join(lines)


UPGRADE = Command(
    name="upgrade",
    help="rewrite format-version-1 threads in version 2 (needs --apply)",
    add_arguments=_add_upgrade_arguments,
    run=_run_upgrade,
    render=_render_upgrade,
)
