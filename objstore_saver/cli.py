"""``objstore-saver``: the operator's command line, a thin shell over :mod:`objstore_saver.ops`.

Every command takes ``--url`` (default ``$OBJSTORE_SAVER_URL``) and ``--json``;
long work shows a progress bar on stderr; commands that write or delete are
dry runs unless ``--apply``. Exit codes: 0 success, 1 the command found a
problem (``verify`` corruption, ``migrate`` diverged threads), 2 bad usage
or configuration, 3 an error while running.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from objstore_saver import ops
from objstore_saver.backend_choice import OBJSTORE_SAVER_URL, POSTGRES_URL
from objstore_saver.errors import ConfigurationError, ObjstoreSaverError
from objstore_saver.ops import longterm as store_ops
from objstore_saver.ops._common import OpsConfig, redact
from objstore_saver.ops.maintain import DEFAULT_KEEP_LAST, DEFAULT_MIN_AGE, parse_duration
from objstore_saver.ops.migration import SOURCES
from objstore_saver.storage.base import StorageError
from objstore_saver.storage.urls import store_from_url

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_ERROR = 3


class ProgressBar:
    """A plain-text progress bar on a stream (redrawn in place on a terminal)."""

    def __init__(self, stream: TextIO, label: str, enabled: bool = True) -> None:
        self.stream = stream
        self.label = label
        self.enabled = enabled
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, done: int, total: int | None, item: str) -> None:
        if not self.enabled:
            return
        if total:
            filled = int(30 * done / total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}"
        else:
            bar = f"{done}"
        line = f"{self.label} {bar} {item}"[:120]
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.enabled and self.drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --- text output ------------------------------------------------------------------------


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _text_threads(r: dict[str, Any]) -> str:
    rows = [
        [
            t["thread_id"] or t["prefix"],
            t["checkpoints"],
            t["writes"],
            t["objects"],
            _size(t["bytes"]),
            t["last_update"],
        ]
        for t in r["threads"]
    ]
    head = f"{r['count']} threads in {r['store']}"
    return (
        head
        + "\n"
        + _table(rows, ["THREAD", "CHECKPOINTS", "WRITES", "OBJECTS", "SIZE", "LAST UPDATE"])
    )


def _text_history(r: dict[str, Any]) -> str:
    rows = [
        [
            c["checkpoint_id"],
            c["checkpoint_ns"] or "-",
            c["step"],
            c["source"],
            c["parent_checkpoint_id"] or "-",
            _size(c["manifest_bytes"]),
        ]
        for c in r["checkpoints"]
    ]
    return f"thread {r['thread_id']!r}: {len(rows)} checkpoints, newest first\n" + _table(
        rows, ["CHECKPOINT", "NS", "STEP", "SOURCE", "PARENT", "SIZE"]
    )


def _text_show(r: dict[str, Any]) -> str:
    lines = [
        f"thread {r['thread_id']!r} checkpoint {r['checkpoint_id']} "
        f"(namespace {r['checkpoint_ns']!r}, parent {r['parent_checkpoint_id']})",
        f"manifest {r['key']} ({_size(r['manifest_bytes'])})",
        "metadata: " + json.dumps(r["metadata"], sort_keys=True),
        "channels:",
    ]
    for name, value in r["channel_values"].items():
        where = r["storage"][name]["stored"]
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) and "role" in v for v in value)
        ):
            lines.append(f"  {name} ({where}, {len(value)} messages):")
            lines += [f"    {m['role']:>6}: {m['content']}" for m in value]
        else:
            lines.append(f"  {name} ({where}): {json.dumps(value)[:200]}")
    if r["pending_writes"]:
        lines.append("pending writes:")
        lines += [
            f"  {w['task_id']} {w['channel']}[{w['idx']}]: {json.dumps(w['value'])[:200]}"
            for w in r["pending_writes"]
        ]
    return "\n".join(lines)


def _text_du(r: dict[str, Any]) -> str:
    lines = [
        f"{r['total']['objects']} objects, {_size(r['total']['bytes'])} in {r['store']}",
        "by kind:",
    ]
    lines += [
        f"  {k:<12} {v['objects']:>7} objects {_size(v['bytes']):>11}"
        for k, v in sorted(r["by_kind"].items())
    ]
    lines.append("by thread:")
    rows = []
    for t in r["by_thread"]:
        kinds = ", ".join(f"{k} {v['objects']}" for k, v in sorted(t["by_kind"].items()))
        rows.append([t["thread_id"] or t["prefix"], t["objects"], _size(t["bytes"]), kinds])
    lines.append(_table(rows, ["THREAD", "OBJECTS", "SIZE", "BY KIND"]))
    return "\n".join(lines)


def _text_dict(r: dict[str, Any]) -> str:
    return json.dumps(r, indent=2, sort_keys=False)


def _text_migrate(r: dict[str, Any]) -> str:
    c, w = r["checkpoints"], r["writes"]
    mode = "copied" if r["apply"] else "dry run (add --apply to copy)"
    lines = [
        f"migrate {r['source']} -> {r['target']}: {mode}"
        + (" [cancelled]" if r["cancelled"] else ""),
        f"threads:     {r['threads']['done']}/{r['threads']['source']}",
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


def _text_prune(r: dict[str, Any]) -> str:
    mode = "applied" if r["apply"] else "dry run (add --apply to delete)"
    rules = f"keep_last={r['keep_last']} min_age={r['min_age']}s"
    if r.get("older_than") is not None:
        rules += f" older_than={r['older_than']:g}s"
    if r.get("idle_for") is not None:
        rules += f" idle_for={r['idle_for']:g}s idle_action={r['idle_action']}"
    lines = [f"prune {r['store']} {rules}: {mode}" + (" [cancelled]" if r["cancelled"] else "")]
    if r.get("idle_for") is not None:
        idle = r.get("threads_idle") or []
        lines.append(
            f"idle threads: {len(idle)}" + (f" ({', '.join(map(repr, idle))})" if idle else "")
        )
    lines += [
        f"  {t['thread_id']!r}: " + ", ".join(f"{k}={v}" for k, v in t.items() if k != "thread_id")
        for t in r["threads"]
    ]
    lines.append("totals: " + ", ".join(f"{k}={v}" for k, v in r["totals"].items()))
    return "\n".join(lines)


def _text_verify(r: dict[str, Any]) -> str:
    status = "OK" if r.get("ok") else "CORRUPT"
    lines = [f"verify {r.get('store', '')}: {status}"]
    for name, value in r.items():
        if name not in ("ok", "problems", "store") and not isinstance(value, list | dict):
            lines.append(f"  {name}: {value}")
    for p in r.get("problems", []):
        lines.append(f"  PROBLEM {p.get('kind')}: {p.get('key')}: {p.get('detail')}")
    return "\n".join(lines)


def _text_delete(r: dict[str, Any]) -> str:
    verb = "deleted" if r["deleted"] else "would delete (add --apply to delete)"
    return (
        f"thread {r['thread_id']!r} in {r['store']}: {verb} {r['checkpoints']} checkpoints, "
        f"{r['writes']} writes, {r['objects']} objects, {r['run_markers']} run markers "
        f"({_size(r['bytes'])})"
    )


# --- commands ---------------------------------------------------------------------------------


def _cmd_threads(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return ops.threads(c, progress=bar), _text_threads, EXIT_OK


def _cmd_history(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return ops.history(a.thread, c), _text_history, EXIT_OK


def _cmd_show(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    r = ops.show(a.thread, a.checkpoint, checkpoint_ns=a.ns, config=c)
    return r, _text_show, EXIT_OK


def _cmd_cat(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return ops.cat(a.key, c), _text_dict, EXIT_OK


def _cmd_du(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return ops.du(c, progress=bar), _text_du, EXIT_OK


def _cmd_verify(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    r = ops.verify(a.thread, config=c)
    return r, _text_verify, EXIT_OK if r.get("ok") else EXIT_FOUND


def _cmd_delete(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return ops.delete_thread(a.thread, apply=a.apply, config=c), _text_delete, EXIT_OK


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _cmd_prune(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    keep_last = a.keep_last
    if keep_last is None:
        # --idle-for alone touches only idle threads; otherwise the daily default.
        keep_last = None if a.idle_for is not None and a.older_than is None else DEFAULT_KEEP_LAST
    r = ops.prune(
        a.thread or None,
        keep_last=keep_last,
        min_age=a.min_age,
        older_than=a.older_than,
        idle_for=a.idle_for,
        idle_action=a.idle_action.replace("-", "_"),
        apply=a.apply,
        config=c,
        progress=bar,
    )
    return r, _text_prune, EXIT_OK


def _cmd_migrate(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    source = a.source
    if a.source_kind == "postgres":
        source = None  # the database URL is configuration: --source-url or POSTGRES_URL
    elif a.source_url is not None:
        raise ConfigurationError("--source-url is for --from postgres; give the source as SOURCE")
    r = ops.migrate(
        a.source_kind, source, config=c, thread_ids=a.thread or None, apply=a.apply, progress=bar
    )
    return r, _text_migrate, EXIT_FOUND if r["diverged"] else EXIT_OK


def _cmd_serve(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    try:
        from objstore_saver.viewer.app import TOKEN_ENV, serve
    except ImportError as exc:
        raise ConfigurationError(
            f"serve needs the ui extra ({exc}): pip install 'objstore-saver[ui]'"
        ) from exc
    token = a.token or os.environ.get(TOKEN_ENV) or None
    try:
        serve(store_from_url(c.require_url()), a.host, a.port, token, c.secrets())
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    return {"served": f"{a.host}:{a.port}"}, _text_dict, EXIT_OK


# --- long-term store ------------------------------------------------------------------


def _ns(labels: Sequence[str]) -> str:
    return json.dumps(list(labels), ensure_ascii=False)


def _text_store_ls(r: dict[str, Any]) -> str:
    lines = [f"{len(r['namespaces'])} namespaces under {_ns(r['prefix'])} in {r['store']}"]
    lines += [
        f"  {_ns(n['namespace'])}: {n['items']} items"
        + (f", {n['expired']} expired" if n["expired"] else "")
        for n in r["namespaces"]
    ]
    end = r["offset"] + len(r["items"])
    lines.append(f"items {r['offset'] + 1 if r['items'] else 0}-{end} of {r['total']}:")
    rows = [
        [
            _ns(i["namespace"]),
            json.dumps(i["key"], ensure_ascii=False),
            "-" if i["size"] is None else _size(i["size"]),
            i["updated_at"],
            (i["expires_at"] or "-") + (" (expired)" if i["expired"] else ""),
        ]
        for i in r["items"]
    ]
    lines.append(_table(rows, ["NAMESPACE", "KEY", "SIZE", "UPDATED", "EXPIRES"]))
    if r["next_offset"] is not None:
        lines.append(f"more: --offset {r['next_offset']}")
    return "\n".join(lines)


def _text_store_du(r: dict[str, Any]) -> str:
    t = r["total"]
    lines = [f"{t['objects']} store objects, {_size(t['bytes'])} in {r['store']}", "by kind:"]
    lines += [
        f"  {k:<14} {v['objects']:>7} objects {_size(v['bytes']):>11}"
        for k, v in r["by_kind"].items()
    ]
    rows = []
    for n in r["by_namespace"]:
        kinds = ", ".join(f"{k} {v['objects']}" for k, v in n["by_kind"].items())
        label = n["namespace"] if isinstance(n["namespace"], str) else _ns(n["namespace"])
        rows.append([label, n["objects"], _size(n["bytes"]), kinds])
    lines.append(_table(rows, ["NAMESPACE", "OBJECTS", "SIZE", "BY KIND"]))
    return "\n".join(lines)


def _text_store_sweep(r: dict[str, Any]) -> str:
    mode = "applied" if r["apply"] else "dry run (add --apply to delete)"
    head = f"store-sweep {r['store']} {_ns(r['prefix'])}: {mode}"
    lines = [head + (" [cancelled]" if r["cancelled"] else "")]
    lines += [
        f"  {_ns(i['namespace'])} {json.dumps(i['key'], ensure_ascii=False)}: "
        f"expired {i['expires_at']}, {i['action']}"
        for i in r["items"]
    ]
    lines += [f"  UNREADABLE {u['key']}: {u['detail']}" for u in r["unreadable"]]
    lines.append("totals: " + ", ".join(f"{k}={v}" for k, v in r["totals"].items()))
    return "\n".join(lines)


def _cmd_store_ls(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    r = store_ops.store_ls(a.labels, limit=a.limit, offset=a.offset, config=c)
    return r, _text_store_ls, EXIT_OK


def _cmd_store_get(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    r = store_ops.store_get(a.labels[:-1], a.labels[-1], config=c)
    return r, _text_dict, EXIT_OK


def _cmd_store_du(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    return store_ops.store_du(a.labels, config=c), _text_store_du, EXIT_OK


def _cmd_store_sweep(a: argparse.Namespace, c: OpsConfig, bar: ProgressBar) -> Any:
    r = store_ops.store_sweep(a.labels, apply=a.apply, config=c, progress=bar)
    return r, _text_store_sweep, EXIT_OK


def _add_store_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """``store ls|get|du`` and ``store-sweep``; a namespace is one argument per label."""
    labels = "namespace labels, one argument each (labels may hold dots and slashes)"
    p = sub.add_parser("store", help="inspect the long-term memory store (BaseStore)")
    ssub = p.add_subparsers(dest="store_command", required=True, metavar="STORE_COMMAND")
    q = ssub.add_parser("ls", parents=[common], help="namespaces and items under a prefix")
    q.add_argument("labels", nargs="*", metavar="LABEL", help=labels + "; none: every namespace")
    q.add_argument("--limit", type=int, default=store_ops.DEFAULT_PAGE, help="items per page")
    q.add_argument("--offset", type=int, default=0, help="items skipped (the page's start)")
    q.set_defaults(func=_cmd_store_ls)
    q = ssub.add_parser("get", parents=[common], help="one item, its value decoded as JSON")
    q.add_argument(
        "labels", nargs="+", metavar="LABEL... KEY", help=labels + "; the last is the key"
    )
    q.set_defaults(func=_cmd_store_get)
    q = ssub.add_parser("du", parents=[common], help="objects and bytes by kind and namespace")
    q.add_argument("labels", nargs="*", metavar="LABEL", help=labels + "; none: everything")
    q.set_defaults(func=_cmd_store_du)
    p = sub.add_parser(
        "store-sweep", parents=[common], help="delete expired store items (needs --apply)"
    )
    p.add_argument("labels", nargs="*", metavar="LABEL", help=labels + "; none: every namespace")
    p.add_argument("--apply", action="store_true", help="really delete")
    p.set_defaults(func=_cmd_store_sweep)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``objstore-saver``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        help=f"object store URL (default ${OBJSTORE_SAVER_URL}): "
        "s3://bucket/prefix?endpoint_url=...&region=... or file:///dir",
    )
    common.add_argument("--json", action="store_true", help="print the report as JSON")
    common.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    parser = argparse.ArgumentParser(
        prog="objstore-saver",
        description="Inspect, migrate, prune and verify LangGraph checkpoints in an object store.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("threads", parents=[common], help="list threads with counts and sizes")
    p.set_defaults(func=_cmd_threads)

    p = sub.add_parser("history", parents=[common], help="checkpoints of a thread, newest first")
    p.add_argument("thread")
    p.set_defaults(func=_cmd_history)

    p = sub.add_parser(
        "show", parents=[common], help="a checkpoint decoded to JSON (no unpickling)"
    )
    p.add_argument("thread")
    p.add_argument("checkpoint", nargs="?", help="checkpoint id (default: the latest)")
    p.add_argument("--ns", default="", help="checkpoint namespace (default: the root graph)")
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("cat", parents=[common], help="any stored object, decoded")
    p.add_argument("key", help="key relative to the store's prefix, e.g. threads/_t/objects/<hash>")
    p.set_defaults(func=_cmd_cat)

    p = sub.add_parser("du", parents=[common], help="objects and bytes by thread and by kind")
    p.set_defaults(func=_cmd_du)

    p = sub.add_parser(
        "verify", parents=[common], help="fsck: exit code 1 on any corruption, naming the key"
    )
    p.add_argument("thread", nargs="?")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser(
        "delete-thread", parents=[common], help="delete every object of a thread (needs --apply)"
    )
    p.add_argument("thread")
    p.add_argument("--apply", action="store_true", help="really delete")
    p.set_defaults(func=_cmd_delete)

    p = sub.add_parser(
        "prune",
        parents=[common],
        help="keep the newest N root checkpoints per thread, delete idle threads (needs --apply)",
    )
    p.add_argument(
        "--keep-last",
        type=int,
        metavar="N",
        help=f"root checkpoints kept per thread (default {DEFAULT_KEEP_LAST}; with --idle-for "
        "alone, threads that are not idle are left alone)",
    )
    p.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="delete root checkpoints beyond the newest N only when this old (e.g. 7d)",
    )
    p.add_argument(
        "--idle-for",
        type=_duration,
        metavar="DURATION",
        help="threads with no write for this long (e.g. 30d, 12h, 2w) are idle",
    )
    p.add_argument(
        "--idle-action",
        choices=["delete", "keep-latest"],
        default="delete",
        help="what idle threads get: deleted (default) or reduced to their latest checkpoint",
    )
    p.add_argument(
        "--min-age",
        type=float,
        default=DEFAULT_MIN_AGE,
        metavar="SECONDS",
        help="never delete objects younger than this",
    )
    p.add_argument("--thread", action="append", help="a thread to prune (repeatable; default all)")
    p.add_argument("--apply", action="store_true", help="really delete")
    p.set_defaults(func=_cmd_prune)

    p = sub.add_parser(
        "migrate",
        parents=[common],
        help="copy threads from another saver into the store (needs --apply)",
    )
    p.add_argument("--from", dest="source_kind", required=True, choices=SOURCES)
    p.add_argument(
        "source", nargs="?", help="sqlite: file path; saver: module:factory; objstore: source URL"
    )
    p.add_argument(
        "--source-url", help=f"PostgreSQL URL for --from postgres (default ${POSTGRES_URL})"
    )
    p.add_argument("--thread", action="append", help="a thread to migrate (repeatable)")
    p.add_argument("--apply", action="store_true", help="really copy")
    p.set_defaults(func=_cmd_migrate)

    p = sub.add_parser("serve", parents=[common], help="read-only web viewer (extra: ui)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    p.add_argument("--token", help="require this token (default $OBJSTORE_SAVER_VIEWER_TOKEN)")
    p.set_defaults(func=_cmd_serve)
    _add_store_commands(sub, common)
    return parser


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line; returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        config = OpsConfig.from_env(url=args.url, postgres_url=getattr(args, "source_url", None))
    except (TypeError, ValueError) as exc:
        print(f"objstore-saver: error: {exc}", file=err)
        return EXIT_USAGE
    secrets = config.secrets()
    bar = ProgressBar(err, args.command, enabled=not args.no_progress)
    func: Callable[..., Any] = args.func
    try:
        report, render, code = func(args, config, bar)
    except ConfigurationError as exc:
        bar.close()
        print(f"objstore-saver: error: {redact(str(exc), secrets)}", file=err)
        return EXIT_USAGE
    except (ObjstoreSaverError, StorageError) as exc:
        bar.close()
        print(f"objstore-saver: error: {redact(str(exc), secrets)}", file=err)
        return EXIT_ERROR
    bar.close()
    if args.json:
        out.write(redact(json.dumps(report, indent=2), secrets) + "\n")
    else:
        out.write(redact(render(report), secrets) + "\n")
    return code


def entry_point() -> None:
    """Console-script entry point."""
    sys.exit(main())
