"""The long-term memory store (``BaseStore``): ``store ls|get|du``, ``store-sweep`` and
``store-delete``.

A namespace is given as one argument per label, so labels may hold dots and slashes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from objstore_saver.cli.common import (
    EXIT_FOUND,
    EXIT_OK,
    Command,
    CommandGroup,
    Outcome,
    ProgressBar,
    add_scale_options,
    cancelled_mark,
    duration,
    human_size,
    job_options,
    json_text,
    mode,
    pairs,
    table,
)
from objstore_saver.cli.reading import kind_lines
from objstore_saver.ops import longterm as store_ops, longterm_delete
from objstore_saver.ops._common import OpsConfig

_LABELS = "namespace labels, one argument each (labels may hold dots and slashes)"


def _ns(labels: Sequence[str] | str) -> str:
    """Namespace labels as JSON; a report's text in place of labels as it is."""
    return labels if isinstance(labels, str) else json.dumps(list(labels), ensure_ascii=False)


def _add_ls_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "labels", nargs="*", metavar="LABEL", help=_LABELS + "; none: every namespace"
    )
    parser.add_argument("--limit", type=int, default=store_ops.DEFAULT_PAGE, help="items per page")
    parser.add_argument("--offset", type=int, default=0, help="items skipped (the page's start)")


def _render_ls(r: dict[str, Any]) -> str:
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
            "-" if i["size"] is None else human_size(i["size"]),
            i["updated_at"],
            (i["expires_at"] or "-") + (" (expired)" if i["expired"] else ""),
        ]
        for i in r["items"]
    ]
    lines.append(table(rows, ["NAMESPACE", "KEY", "SIZE", "UPDATED", "EXPIRES"]))
    if r["next_offset"] is not None:
        lines.append(f"more: --offset {r['next_offset']}")
    return "\n".join(lines)


STORE_LS = Command(
    name="ls",
    help="namespaces and items under a prefix",
    add_arguments=_add_ls_arguments,
    run=lambda args, config, progress: (
        store_ops.store_ls(args.labels, limit=args.limit, offset=args.offset, config=config),
        EXIT_OK,
    ),
    render=_render_ls,
)


STORE_GET = Command(
    name="get",
    help="one item, its value decoded as JSON",
    add_arguments=lambda parser: parser.add_argument(
        "labels", nargs="+", metavar="LABEL... KEY", help=_LABELS + "; the last is the key"
    ),
    run=lambda args, config, progress: (
        store_ops.store_get(args.labels[:-1], args.labels[-1], config=config),
        EXIT_OK,
    ),
    render=json_text,
)


def _render_du(r: dict[str, Any]) -> str:
    t = r["total"]
    lines = [f"{t['objects']} store objects, {human_size(t['bytes'])} in {r['store']}", "by kind:"]
    lines += kind_lines(r["by_kind"].items())
    rows = []
    for n in r["by_namespace"]:
        kinds = ", ".join(f"{k} {v['objects']}" for k, v in n["by_kind"].items())
        rows.append([_ns(n["namespace"]), n["objects"], human_size(n["bytes"]), kinds])
    lines.append(table(rows, ["NAMESPACE", "OBJECTS", "SIZE", "BY KIND"]))
    return "\n".join(lines)


STORE_DU = Command(
    name="du",
    help="objects and bytes by kind and namespace",
    add_arguments=lambda parser: parser.add_argument(
        "labels", nargs="*", metavar="LABEL", help=_LABELS + "; none: everything"
    ),
    run=lambda args, config, progress: (store_ops.store_du(args.labels, config=config), EXIT_OK),
    render=_render_du,
)

STORE = CommandGroup(
    name="store",
    help="inspect the long-term memory store (BaseStore)",
    commands=(STORE_LS, STORE_GET, STORE_DU),
    dest="store_command",
    metavar="STORE_COMMAND",
)


def _add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "labels", nargs="*", metavar="LABEL", help=_LABELS + "; none: every namespace"
    )
    parser.add_argument("--apply", action="store_true", help="really delete")
    parser.add_argument(
        "--tombstone-window",
        type=duration,
        metavar="DURATION",
        help="how long a deleted namespace's clear markers are kept before they are swept "
        "(default 30d; longer than any process could go on writing it unaware)",
    )
    add_scale_options(parser)


def _run_sweep(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = store_ops.store_sweep(
        args.labels,
        tombstone_window=args.tombstone_window,
        **job_options(args, config, progress),
    )
    return report, EXIT_OK


def _render_sweep(r: dict[str, Any]) -> str:
    scope = f"namespaces under {_ns(r['prefix'])}" if r["prefix"] else "every namespace"
    head = f"store-sweep {r['store']}, {scope}: {mode(r)}"
    lines = [head + cancelled_mark(r)]
    lines += [
        f"  {_ns(i['namespace'])} {json.dumps(i['key'], ensure_ascii=False)}: "
        f"expired {i['expires_at']}, {i['action']}"
        for i in r["items"]
    ]
    if not r["items"]:
        lines.append("  nothing expired")
    lines += [f"  UNREADABLE {u['key']}: {u['detail']}" for u in r["unreadable"]]
    lines += [
        f"  deleted namespace {_ns(c['namespace'])} (last delete {c['cleared_at']}): "
        + ", ".join(
            [f"{c['markers']} clear markers"] * bool(c["markers"])
            + [f"{c['ended']} ended index objects"] * bool(c["ended"])
        )
        + f", {c['action']}"
        for c in r["clears"]
    ]
    lines.append("totals: " + pairs(r["totals"]))
    if r["clear_totals"]["namespaces"]:
        lines.append("deleted namespaces: " + pairs(r["clear_totals"]))
    return "\n".join(lines)


STORE_SWEEP = Command(
    name="store-sweep",
    help="delete expired store items (needs --apply)",
    add_arguments=_add_sweep_arguments,
    run=_run_sweep,
    render=_render_sweep,
)


def _add_delete_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("labels", nargs="+", metavar="LABEL", help=_LABELS + "; at least one")
    parser.add_argument("--apply", action="store_true", help="really delete")


def _run_delete(args: argparse.Namespace, config: OpsConfig, progress: ProgressBar) -> Outcome:
    report = longterm_delete.store_delete(args.labels, **job_options(args, config, progress))
    # A namespace none of whose objects tells its labels was found and left alone.
    unreadable = any(n["action"] == "unreadable" for n in report["namespaces"])
    return report, EXIT_FOUND if unreadable else EXIT_OK


def _render_delete(r: dict[str, Any]) -> str:
    head = f"store-delete {r['store']}, {_ns(r['prefix'])} and the namespaces below it"
    lines = [f"{head}: {mode(r)}" + cancelled_mark(r)]
    rows = [
        [
            _ns(n["namespace"]),
            n["items"],
            n["index_objects"],
            len(n["rewritten"]),
            "yes" if n["shredded"] else "-",
            n["action"] + (f": {n['detail']}" if n.get("detail") else ""),
        ]
        for n in r["namespaces"]
    ]
    if rows:
        header = ["NAMESPACE", "ITEMS", "INDEX OBJECTS", "REWRITTEN", "KEYS SHREDDED", "ACTION"]
        lines.append(table(rows, header))
    else:
        lines.append("  nothing to delete")
    lines.append("totals: " + pairs(r["totals"]))
    return "\n".join(lines)


STORE_DELETE = Command(
    name="store-delete",
    help="delete a store namespace and those below it (needs --apply)",
    add_arguments=_add_delete_arguments,
    run=_run_delete,
    render=_render_delete,
)
