"""Jobs that go through a source in order and keep a cursor (``--restart``): ``migrate``
(copy threads from another saver: PostgreSQL, SQLite, any saver, a bucket), ``upgrade``
(rewrite format-version-1 threads in version 2) and ``rekey`` (rewrap data keys under the
current master key, docs/encryption.md)."""

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
        thread_ids=args.thread or None,
        **job_options(args, config, progress),
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


def _add_upgrade_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--thread", action="append", help="a thread to upgrade (repeatable)")
    add_resumable_job_options(parser, apply_help="really rewrite and delete", unit="thread")


def _run_upgrade(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = ops.upgrade(thread_ids=args.thread or None, **job_options(args, config, progress))
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
    report = ops.rekey(drop_old=args.drop_old, **job_options(args, config, progress))
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


#: In the order ``objstore-saver --help`` lists them.
COMMANDS = (MIGRATE, UPGRADE, REKEY)
