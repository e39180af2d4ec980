"""``rekey``: rewrap data keys under the current master key (docs/encryption.md)."""

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


def _add_rekey_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drop-old",
        action="store_true",
        help="keep the current master key's wrapping alone: the old keys then open nothing",
    )
    add_resumable_job_options(
        parser, apply_help="really rewrite the key objects", unit="key object"
    )


def _run_rekey(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = ops.rekey(config, drop_old=args.drop_old, **job_options(args, progress))
    return report, EXIT_FOUND if report["errors"] else EXIT_OK


def _render_rekey(r: dict[str, Any]) -> str:
    k = r["key_objects"]
    target = f"wrapped by {r['current_master_key']}" + (" alone" if r["drop_old"] else "")
    rewrapped = "rewrapped" if r["apply"] else "to rewrap"
    lines = [
        f"rekey {r['store']} (key objects in {r['key_store']}), {target}: {mode(r, 'rewrite')}"
        + cancelled_mark(r),
        f"key objects: {k['scanned']} scanned, {k['rewrapped']} {rewrapped}, "
        f"{k['current']} current, {k['failed']} failed" + resumed_note(r),
    ]
    if k["dropped_deleted"] or k["vanished"]:
        lines.append(
            f"deleted:     {k['dropped_deleted']} of threads deleted while rewrapped "
            f"(deleted again), {k['vanished']} deleted since listed"
        )
    lines += [f"  FAILED {e['key']!r}: {e['error']}" for e in r["errors"]]
    return "\n".join(lines)


REKEY = Command(
    name="rekey",
    help="rewrap data keys under the current master key (needs --apply)",
    add_arguments=_add_rekey_arguments,
    run=_run_rekey,
    render=_render_rekey,
)
