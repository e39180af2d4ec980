"""``migrate``: copy threads from another saver (PostgreSQL, SQLite, any saver, a bucket)."""

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
    resumed_note,
)
from objstore_saver.config import POSTGRES_URL
from objstore_saver.errors import ConfigurationError
from objstore_saver.ops._common import OpsConfig
from objstore_saver.ops.migration import SOURCES


def _add_migrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source_kind", required=True, choices=SOURCES)
    parser.add_argument(
        "source", nargs="?", help="sqlite: file path; saver: module:factory; objstore: source URL"
    )
    # Dest ``source_url``: the runner reads the job's PostgreSQL URL from it by that name.
    parser.add_argument(
        "--source-url", help=f"PostgreSQL URL for --from postgres (default ${POSTGRES_URL})"
    )
    parser.add_argument("--thread", action="append", help="a thread to migrate (repeatable)")
    add_resumable_job_options(parser, apply_help="really copy", unit="thread")


def _run_migrate(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    source = args.source
    if args.source_kind == "postgres":
        source = None  # the database URL is configuration: --source-url or POSTGRES_URL
    elif args.source_url is not None:
        raise ConfigurationError("--source-url is for --from postgres; give the source as SOURCE")
    report = ops.migrate(
        args.source_kind,
        source,
        config=config,
        thread_ids=args.thread or None,
        **job_options(args, progress),
    )
    return report, EXIT_FOUND if report["diverged"] else EXIT_OK


def _render_migrate(r: dict[str, Any]) -> str:
    c, w = r["checkpoints"], r["writes"]
    mode = "copied" if r["apply"] else "dry run (add --apply to copy)"
    lines = [
        f"migrate {r['source']} -> {r['target']}: {mode}" + cancelled_mark(r),
        f"threads:     {r['threads']['done']}/{r['threads']['source']}" + resumed_note(r),
        f"checkpoints: {c['source']} in source, {c['present']} present, {c['missing']} missing, "
        f"{c['copied']} copied",
        f"writes:      {w['source']} in source, {w['present']} present, {w['missing']} missing, "
        f"{w['copied']} copied",
        f"diverged:    {len(r['diverged'])}",
    ]
    lines += [
        f"  {d['thread_id']!r} (ns {d['checkpoint_ns']!r}): target head {d['target_head']} "
        f"is not in the source (source head {d['source_head']})"
        for d in r["diverged"]
    ]
    return "\n".join(lines)


MIGRATE = Command(
    name="migrate",
    help="copy threads from another saver into the store (needs --apply)",
    add_arguments=_add_migrate_arguments,
    run=_run_migrate,
    render=_render_migrate,
)
