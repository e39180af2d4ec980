"""Commands that only read: ``threads``, ``history``, ``show``, ``cat``, ``du``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from objstore_saver import ops
from objstore_saver.cli.common import (
    EXIT_OK,
    Command,
    add_scale_options,
    human_size,
    job_options,
    json_text,
    table,
)


def _render_threads(r: dict[str, Any]) -> str:
    rows = [
        [
            t["thread_id"] or t["prefix"],
            t["checkpoints"],
            t["writes"],
            t["objects"],
            human_size(t["bytes"]),
            t["last_update"],
        ]
        for t in r["threads"]
    ]
    header = ["THREAD", "CHECKPOINTS", "WRITES", "OBJECTS", "SIZE", "LAST UPDATE"]
    return f"{r['count']} threads in {r['store']}\n" + table(rows, header)


THREADS = Command(
    name="threads",
    help="list threads with counts and sizes",
    add_arguments=add_scale_options,
    run=lambda args, config, progress: (
        ops.threads(**job_options(args, config, progress)),
        EXIT_OK,
    ),
    render=_render_threads,
)


def _render_history(r: dict[str, Any]) -> str:
    rows = [
        [
            c["checkpoint_id"],
            c["checkpoint_ns"] or "-",
            c["step"],
            c["source"],
            c["parent_checkpoint_id"] or "-",
            human_size(c["manifest_bytes"]),
        ]
        for c in r["checkpoints"]
    ]
    return f"thread {r['thread_id']!r}: {len(rows)} checkpoints, newest first\n" + table(
        rows, ["CHECKPOINT", "NS", "STEP", "SOURCE", "PARENT", "SIZE"]
    )


HISTORY = Command(
    name="history",
    help="checkpoints of a thread, newest first",
    add_arguments=lambda parser: parser.add_argument("thread"),
    run=lambda args, config, progress: (ops.history(args.thread, config), EXIT_OK),
    render=_render_history,
)


def _add_show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("thread")
    parser.add_argument("checkpoint", nargs="?", help="checkpoint id (default: the latest)")
    parser.add_argument("--ns", default="", help="checkpoint namespace (default: the root graph)")


def _render_show(r: dict[str, Any]) -> str:
    lines = [
        f"thread {r['thread_id']!r} checkpoint {r['checkpoint_id']} "
        f"(namespace {r['checkpoint_ns']!r}, parent {r['parent_checkpoint_id']})",
        f"manifest {r['key']} ({human_size(r['manifest_bytes'])})",
        "metadata: " + json.dumps(r["metadata"], sort_keys=True),
        "channels:",
    ]
    for name, value in r["channel_values"].items():
        stored = r["storage"][name]
        where = stored["stored"]
        if stored.get("embedded_in"):  # a value embedded in a manifest: cat takes its address
            where += f" in {stored['key']}"
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, dict) and "role" in v for v in value)
        ):
            lines.append(f"  {name} ({where}, {len(value)} messages):")
            lines += [f"    {m['role']:>6}: {m['content']}" for m in value]
        else:
            lines.append(f"  {name} ({where}): {json.dumps(value)[:200]}")
        lines += [
            f"    {g.get('kind', 'segment')} of {g['elements']} "
            + (f"in {g['embedded_in']}#{g['digest']}" if g["embedded_in"] else f"at {g['key']}")
            for g in r["storage"][name].get("segments", [])
        ]
    if r["pending_writes"]:
        lines.append("pending writes:")
        lines += [
            f"  {w['task_id']} {w['channel']}[{w['idx']}]: {json.dumps(w['value'])[:200]}"
            for w in r["pending_writes"]
        ]
    return "\n".join(lines)


SHOW = Command(
    name="show",
    help="a checkpoint decoded to JSON (no unpickling)",
    add_arguments=_add_show_arguments,
    run=lambda args, config, progress: (
        ops.show(args.thread, args.checkpoint, checkpoint_ns=args.ns, config=config),
        EXIT_OK,
    ),
    render=_render_show,
)


def _add_cat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "key",
        help="key relative to the store's prefix, e.g. threads/_t/objects/<hash>; an object "
        "embedded in a manifest (a list segment or a value, format version 2) is "
        "<manifest key>#<hash>, as 'show' names them; when that manifest is gone, or does not "
        "embed it, the object stored alone at objects/<hash> is shown",
    )


CAT = Command(
    name="cat",
    help="any stored object, decoded",
    add_arguments=_add_cat_arguments,
    run=lambda args, config, progress: (ops.cat(args.key, config), EXIT_OK),
    render=json_text,
)


def kind_lines(by_kind: Iterable[tuple[str, dict[str, int]]]) -> list[str]:
    """``du``'s rows by kind: objects and size in columns, whatever the labels' length."""
    rows = [(k, str(v["objects"]), human_size(v["bytes"])) for k, v in by_kind]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
    return [
        f"  {k:<{widths[0]}}  {n:>{widths[1]}} objects  {size:>{widths[2]}}" for k, n, size in rows
    ]


def _render_du(r: dict[str, Any]) -> str:
    lines = [
        f"{r['total']['objects']} objects, {human_size(r['total']['bytes'])} in {r['store']}",
        "by kind:",
    ]
    lines += kind_lines(sorted(r["by_kind"].items()))
    lines.append("by thread:")
    rows = []
    for t in r["by_thread"]:
        kinds = ", ".join(f"{k} {v['objects']}" for k, v in sorted(t["by_kind"].items()))
        rows.append([t["thread_id"] or t["prefix"], t["objects"], human_size(t["bytes"]), kinds])
    lines.append(table(rows, ["THREAD", "OBJECTS", "SIZE", "BY KIND"]))
    return "\n".join(lines)


DU = Command(
    name="du",
    help="objects and bytes by thread and by kind (objects embedded in manifests count "
    "within their manifests' bytes)",
    add_arguments=lambda parser: add_scale_options(parser, concurrency=False),
    run=lambda args, config, progress: (ops.du(**job_options(args, config, progress)), EXIT_OK),
    render=_render_du,
)

#: In the order ``objstore-saver --help`` lists them.
COMMANDS = (THREADS, HISTORY, SHOW, CAT, DU)
