"""Turn a results document into ``docs/benchmarks.md`` and the plots of ``docs/img/``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MIB = 2**20
OURS = "objstore-s3"
BASELINES = ("inmemory", "postgres")


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, float):
        if math.isnan(x):
            return "-"
        return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def _table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(_fmt(c) for c in r) + " |")
    return [*out, ""]


def _ops(requests: dict[str, int]) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(requests.items())) or "-"


def s3_server(doc: dict[str, Any]) -> str:
    """The S3 server a results document was measured on.

    Runs from before ``--s3-server`` do not record it: they all used moto.
    """
    recorded = doc.get("machine", {}).get("s3_server")
    return recorded or f"moto {doc.get('versions', {}).get('moto', '')}".strip()


def server_flag(server: str) -> str:
    """The ``--s3-server`` value that runs ``server`` (a :func:`s3_server` label)."""
    for flag, label in (("seaweedfs", "SeaweedFS"), ("ceph", "Ceph"), ("moto", "moto")):
        if server.startswith(label):
            return flag
    raise ValueError(f"no --s3-server value for S3 server {server!r}")


class Doc:
    """Accessors over a results document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.results = doc["results"]
        self.savers = list(doc["savers"])
        self.labels = {k: v["label"] for k, v in doc["savers"].items()}
        self.supplement: dict[str, Any] | None = None
        """Workload 2 of objstore-saver on S3 from a separate, longer run, if any."""
        self.s3_server = s3_server(doc)
        """The S3 server behind the metering proxy in this run."""
        self.supplement_server = ""
        """The S3 server of the separate workload 2 run."""

    def rows(self, workload: str) -> dict[str, Any]:
        return self.results.get(workload, {})

    def ok(self, workload: str, saver: str) -> dict[str, Any] | None:
        r = self.rows(workload).get(saver)
        return None if r is None or "error" in r else r

    def errors(self) -> list[tuple[str, str, str]]:
        out = []
        for w, rows in self.results.items():
            for s, r in rows.items():
                if "error" in r:
                    out.append((w, s, r["error"]))
                elif w == "5" and "error" in r.get("prune", {}):
                    out.append(("5 (prune)", s, r["prune"]["error"]))
        return out


# --- targets -------------------------------------------------------------------------


def targets(d: Doc) -> list[dict[str, Any]]:
    """Each target of issue 3 for objstore-saver on S3: met or not, with the figure."""
    out: list[dict[str, Any]] = []

    def add(
        name: str, met: bool | None, figure: str, note: str = "", reason: str | None = None
    ) -> None:
        out.append({"target": name, "met": met, "figure": figure, "note": note})
        if met is False:
            out[-1]["reason"] = reason if reason is not None else _reason(d, name)

    w1 = d.ok("1", OURS)
    if w1:
        add("W1 total bytes ≤ 0.16 MiB", w1["total_mib"] <= 0.16, f"{w1['total_mib']:.4f} MiB")
        fl = w1.get("flatness")
        add(
            "W1 flatness ≤ 1.1",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
            "needs 30 turns" if fl is None else "",
        )
    w1b = d.ok("1b", OURS)
    if w1b:
        add(
            "W1b bytes ≤ 4x raw new-message bytes",
            w1b["bytes_over_raw"] <= 4,
            f"{w1b['bytes_over_raw']:.2f}x",
        )
        fl = w1b.get("flatness")
        add(
            "W1b flat across turns (turns 25-29 / 5-9 ≤ 1.1)",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
        )
    _long_targets(d.ok("2", OURS), add, "", d.s3_server)
    if d.supplement is not None:
        server = d.supplement_server or d.s3_server
        _long_targets(
            d.supplement,
            add,
            f"separate run of workload 2 alone on {server}, cap {d.supplement['cap_s']:.0f} s",
            server,
        )
    w3 = d.ok("3", OURS)
    if w3:
        add(
            "W3 no body over 2 MiB",
            w3["largest_body"] <= 2 * MIB,
            f"largest {w3['largest_body'] / MIB:.2f} MiB",
        )
        add(
            "W3 peak memory < 3x the value",
            w3["peak_over_payload"] < 3,
            f"{w3['peak_over_payload']:.2f}x of {w3['payload_bytes'] / MIB:.0f} MiB",
            "tracemalloc peak of the turn",
        )
    w6b = d.ok("6b", OURS)
    if w6b and "1" in w6b and "64" in w6b:
        r = w6b["64"]["turns_per_s"] / w6b["1"]["turns_per_s"]
        add("W6 64 async conversations ≥ 20x one", r >= 20, f"{r:.1f}x", _repeats_note(w6b))
    local6b = d.ok("6b", "objstore-local")
    if local6b and "1" in local6b and "64" in local6b:
        r = local6b["64"]["turns_per_s"] / local6b["1"]["turns_per_s"]
        add(
            "W6 64 async conversations ≥ 20x one (local directory, same injected round trip)",
            r >= 20,
            f"{r:.1f}x",
            "; ".join(
                n
                for n in (
                    "no S3 server to saturate: measures the saver alone",
                    _repeats_note(local6b),
                )
                if n
            ),
            reason=(
                f"{local6b['64']['turns_per_s']:.1f} turns/s with 64 conversations against "
                f"{local6b['1']['turns_per_s']:.2f} with one; the process then spends "
                f"{local6b['64']['cpu_s_per_turn'] * 1000:.0f} ms of CPU per turn (LangGraph and "
                "the saver share one interpreter lock), so CPU, not waiting, bounds the rate."
            ),
        )
    us, pg = _cpu_per_turn(d, "6a", OURS), _cpu_per_turn(d, "6a", "postgres")
    if us and pg:
        add(
            "W6 CPU per turn ≤ 1.5x PostgresSaver (8 OS threads)",
            us / pg <= 1.5,
            f"{us / pg:.2f}x",
            _rounds_note(d.ok("6a", OURS), d.ok("6a", "postgres")),
        )
    us, pg = _cpu_per_turn(d, "6b", OURS), _cpu_per_turn(d, "6b", "postgres")
    if us and pg:
        add("W6 CPU per turn ≤ 1.5x PostgresSaver (64 async)", us / pg <= 1.5, f"{us / pg:.2f}x")
    return out


def _cpu_per_turn(d: Doc, w: str, name: str) -> float | None:
    """CPU seconds per turn of a saver in workload 6a, or in 6b at 64 conversations."""
    row = d.ok(w, name)
    if row is not None and w == "6b":
        row = row.get("64")
    return row.get("cpu_s_per_turn") if row else None


def _ratios_note(over: list[Any], under: list[Any], what: str, each: str) -> str:
    """``what`` then each pair's ratio (formatted by ``each``), when there are two or more."""
    ratios = [x / y for x, y in zip(over, under, strict=False) if x and y]
    if len(ratios) < 2:
        return ""
    return what.format(n=len(ratios)) + ", ".join(each.format(x) for x in ratios)


def _repeats_note(w6b: dict[str, Any]) -> str:
    """The 64-against-1 ratio of each repetition of workload 6b, when it was repeated."""
    return _ratios_note(
        w6b["64"].get("turns_per_s_repeats") or [],
        w6b["1"].get("turns_per_s_repeats") or [],
        "repeated {n} times, savers interleaved; each: ",
        "{:.1f}x",
    )


def _rounds_note(us: dict[str, Any], pg: dict[str, Any]) -> str:
    """The ratio of each round of workload 6a (savers interleaved), when it ran in rounds."""
    return _ratios_note(
        us.get("cpu_s_per_turn_rounds") or [],
        pg.get("cpu_s_per_turn_rounds") or [],
        "savers interleaved in {n} rounds; the rounds' ratios ",
        "{:.2f}",
    )


def _long_targets(w2: dict[str, Any] | None, add: Any, note: str, server: str) -> None:
    if w2 and len(w2["points"]) == 1:
        only = next(iter(w2["points"]))
        add(
            "W2 lookup requests and latency flat over the thread",
            None,
            "-",
            f"only turn {only} reached within the time cap ({w2['turns_done']} turns)",
        )
    if w2 and len(w2["points"]) >= 2:
        pts = {int(k): v for k, v in w2["points"].items()}
        first, last = min(pts), max(pts)
        la, lb = pts[first]["lookup"]["total_requests"], pts[last]["lookup"]["total_requests"]
        reached = f"turn {last}" + ("" if last >= 1000 else " (largest turn reached)")
        add(
            f"W2 lookup requests equal at turn {first} and {last}",
            la == lb,
            f"{la} vs {lb} at {reached}",
            note,
        )
        if "invoke" in pts[first] and "invoke" in pts[last]:
            ia, ib = pts[first]["invoke"]["wall_s"], pts[last]["invoke"]["wall_s"]
            sa, sb = pts[first]["invoke"]["server_s"], pts[last]["invoke"]["server_s"]
            add(
                f"W2 turn latency at {last} ≤ 1.2x turn {first}",
                ib <= 1.2 * ia,
                f"{ib * 1000:.0f} ms vs {ia * 1000:.0f} ms ({ib / ia:.2f}x)",
                note,
                reason=(
                    f"Same request count at both turns "
                    f"({pts[first]['invoke']['total_requests']} vs "
                    f"{pts[last]['invoke']['total_requests']}); the S3 server's own time for "
                    f"the turn's requests went from {sa * 1000:.0f} ms to {sb * 1000:.0f} ms"
                    + (
                        " (moto answers a prefix listing by scanning the whole bucket)"
                        if server.startswith("moto")
                        else ""
                    )
                    + "; the rest "
                    f"of the turn (the saver's CPU, queuing on this shared 2-core machine) "
                    f"went from {(ia - sa) * 1000:.0f} ms to {(ib - sb) * 1000:.0f} ms, and "
                    f"the bytes written per turn from "
                    f"{w2['bytes_per_turn'][first - 1] / 1024:.1f} KiB to "
                    f"{w2['bytes_per_turn'][last - 1] / 1024:.1f} KiB."
                ),
            )


# --- plots ---------------------------------------------------------------------------


def plots(d: Doc, img: Path) -> list[Path]:
    """Draw the PNG plots; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    styles = {
        OURS: {"linewidth": 2.6, "color": "black"},
        "objstore-local": {"linewidth": 1.6, "linestyle": "--", "color": "tab:cyan"},
    }

    def per_turn(
        workload: str,
        field: str,
        scale: float,
        ylabel: str,
        title: str,
        name: str,
        log: bool = False,
        savers: list[str] | None = None,
    ) -> None:
        if not any(d.ok(workload, s) for s in savers or d.savers):
            return
        fig, ax = plt.subplots(figsize=(9, 5.2), dpi=110)
        for s in savers or d.savers:
            r = d.ok(workload, s)
            if not r:
                continue
            xs = [t["turn"] + 1 for t in r["turns"]]
            ys = [t[field] * scale for t in r["turns"]]
            ax.plot(xs, ys, marker=".", label=d.labels[s], **styles.get(s, {"linewidth": 1.3}))
        ax.set_xlabel("turn")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        path = img / name
        fig.savefig(path)
        plt.close(fig)
        made.append(path)

    per_turn(
        "1",
        "bytes_written",
        1 / 1024,
        "bytes written per turn (KiB, log scale)",
        "Workload 1 (seed chat): bytes written per turn",
        "w1_bytes_per_turn.png",
        log=True,
    )
    per_turn(
        "1b",
        "bytes_written",
        1 / 1024,
        "bytes written per turn (KiB, log scale)",
        "Workload 1b (realistic words): bytes written per turn",
        "w1b_bytes_per_turn.png",
        log=True,
    )
    s3 = [s for s in d.savers if d.doc["savers"][s]["storage"] == "s3"]
    per_turn(
        "1",
        "total_requests",
        1,
        "S3 requests per turn",
        "Workload 1: S3 requests per turn (HTTP requests at the proxy)",
        "w1_requests_per_turn.png",
        savers=s3,
    )
    per_turn(
        "1",
        "wall_s",
        1000,
        "simulated latency per turn (ms)",
        f"Workload 1: turn latency with {d.doc['sizes']['delay_ms']:.0f} ms injected "
        "per S3 request",
        "w1_latency_per_turn.png",
        savers=s3,
    )

    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=110)
    for s in d.savers:
        r = d.ok("2", s)
        if not r or not r["bytes_per_turn"]:
            continue
        ys = [b / 1024 for b in r["bytes_per_turn"]]
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            label=f"{d.labels[s]} ({len(ys)} turns)",
            **styles.get(s, {"linewidth": 1.3}),
        )
    ax.set_xlabel("turn")
    ax.set_ylabel("bytes written per turn (KiB, log scale)")
    ax.set_yscale("log")
    ax.set_title("Workload 2 (long thread): bytes written per turn")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path = img / "w2_bytes_per_turn.png"
    fig.savefig(path)
    plt.close(fig)
    made.append(path)
    return made


# --- markdown ------------------------------------------------------------------------


def markdown(d: Doc) -> str:
    """The text of ``docs/benchmarks.md``."""
    doc = d.doc
    sizes = doc["sizes"]
    delay = sizes["delay_ms"]
    flag = server_flag(d.s3_server)
    L = d.labels
    out: list[str] = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench` from bench/results/latest.json: do not edit. -->",
        "",
        f"One run of every workload of issue 3 against every saver ({doc['mode']} mode, "
        f"{doc['generated_at']}, {doc['elapsed_s'] / 60:.1f} minutes on "
        f"{doc['machine']['cpus']} CPUs).",
        *[
            f"Workloads {', '.join(r['workloads'])} come from a later run of those workloads "
            f"against every saver ({r['generated_at']}, {r['elapsed_s'] / 60:.1f} minutes): "
            f"{r['reason']}."
            for r in doc.get("reruns", [])
        ],
        "",
        f"**How it is measured.** S3 savers talk to an S3 server, **{d.s3_server}**, on",
        "loopback through a metering reverse proxy (`bench/proxy.py`); `bench/server.py`",
        "runs both apart from the benchmark's process (`--s3-server` picks the server).",
        "The proxy counts every HTTP request by S3 operation, request and response body",
        f"bytes and the largest single body, and delays each request by {delay:.0f} ms, a",
        "typical in-region S3 round trip (requests a client sends in parallel overlap).",
        "So every S3 client (boto3, aiobotocore, s3fs) is metered the same way and the",
        "server's CPU is not charged to the saver. Each S3 saver writes into a bucket of",
        "its own, created and warmed by one write and delete on the server itself (SeaweedFS",
        "allocates a bucket's volumes at its first write, about 200 ms, which no saver",
        "should pay). The local-directory saver is metered by",
        "`objstore_saver.MeteredStore` (one request per store call). `InMemorySaver`,",
        "`SqliteSaver` and `PostgresSaver` have no object storage to bill: for them *bytes",
        "written* are the bytes their serializer produced and *requests* are saver calls",
        "(`get_tuple`, `put`, `put_writes`, ...), and their latency is local wall time",
        "(PostgreSQL on loopback, no injected delay). Wall-clock figures other than the",
        "simulated latency are given only as ratios between savers of this run.",
        "",
        *(
            [
                "On SeaweedFS a folder emptied by deletes stays visible to listings with a",
                "delimiter, as a zero-byte `folder/` key and a common prefix",
                "(`docs/s3-compatibility.md`); s3fs, under",
                "`langgraph-checkpoint-objectstorage`, then reads it back as a checkpoint key",
                "after a thread is deleted (workload 5's check that the thread is gone fails",
                "with `not a checkpoint key`). moto, like S3 itself, lists nothing there.",
                "",
            ]
            if flag == "seaweedfs"
            else []
        ),
        "Reproduce (see the README's benchmark section for the one-time venv setup):",
        "",
        "```sh",
        f"PYTHONPATH=$PWD /work/venv-bench/bin/python -m bench --s3-server {flag}  # full run",
        f"PYTHONPATH=$PWD /work/venv-bench/bin/python -m bench --s3-server {flag} --quick",
        "```",
        "",
    ]
    out += _headlines(d)
    out += ["## Targets for objstore-saver (on S3)", ""]
    out += _table(
        ["target", "met", "figure", "note"],
        [
            [
                t["target"],
                "-" if t["met"] is None else ("met" if t["met"] else "**not met**"),
                t["figure"],
                t["note"],
            ]
            for t in targets(d)
        ],
    )
    out += _notes_on_targets(d)

    # Workload 1 / 1b
    for w, title in (("1", "Workload 1: seed chat"), ("1b", "Workload 1b: realistic chat")):
        rows = d.rows(w)
        if not rows:
            continue
        out += [f"## {title}, {sizes['chat_turns']} turns", ""]
        if w == "1":
            out += [
                'System prompt `"You are Chat. " + "rule " * 300`, user',
                '`f"question {t} " + "q" * 200`, reply `f"answer {t} " + "a" * 800`.',
                "",
            ]
        else:
            out += [
                "Same lengths, texts drawn by a seeded generator from a 4,000-word",
                "vocabulary, so compression cannot hide the cost.",
                "",
            ]
        table = []
        for s in d.savers:
            r = d.ok(w, s)
            if not r:
                continue
            n = len(r["turns"])
            lat = sum(t["wall_s"] for t in r["turns"]) / n * 1000
            table.append(
                [
                    L[s],
                    f"{r['total_mib']:.3f}",
                    r.get("flatness"),
                    r["bytes_over_raw"],
                    r["total_requests"] / n,
                    sum(t["objects_written"] for t in r["turns"]) / n,
                    f"{lat:.0f}",
                    r["meter"],
                ]
            )
        out += _table(
            [
                "saver",
                "total MiB",
                "flatness (25-29 / 5-9)",
                "bytes / raw new bytes",
                "requests / turn",
                "objects / turn",
                "latency / turn (ms)",
                "meter",
            ],
            table,
        )
        r = d.ok(w, OURS)
        if r and r["turns"]:
            t = r["turns"][min(10, len(r["turns"]) - 1)]
            out += [
                f"objstore-saver on S3, turn {t['turn'] + 1}: {_ops(t['requests'])}; "
                f"saver calls: {_ops(t['saver_calls'])}.",
                "",
            ]
        out += [f"![bytes per turn](img/w{w}_bytes_per_turn.png)", ""]
        if w == "1":
            out += [
                "![requests per turn](img/w1_requests_per_turn.png)",
                "",
                "![latency per turn](img/w1_latency_per_turn.png)",
                "",
            ]

    # Workload 2
    rows = d.rows("2")
    if rows:
        out += [
            f"## Workload 2: long thread ({sizes['long_turns']:,} turns, at most "
            f"{sizes['long_cap_s']:.0f} s per saver)",
            "",
            "Turns run without injected delay except the measured ones: before each of",
            "turns N-2, N-1 and N the latest-checkpoint lookup (`get_tuple`) and that",
            f"turn's whole `invoke` run with {delay:.0f} ms per S3 request; the figures at N",
            "are those of the median lookup and the median turn of the three (one turn",
            "is one sample: a garbage collection over a long history or this shared",
            "machine moved single samples by up to 1.5x). A saver that reached the time",
            "cap stops there; the table says where.",
            "",
        ]
        pts = sorted({int(p) for r in rows.values() if "points" in r for p in r["points"]})
        header = ["saver", "turns done"]
        for p in pts:
            header += [f"lookup req @{p}", f"lookup ms @{p}", f"turn req @{p}", f"turn ms @{p}"]
        header += ["KiB/turn last vs turn 10"]
        table = []
        for s in d.savers:
            r = d.ok("2", s)
            if not r:
                continue
            row: list[Any] = [
                L[s],
                f"{r['turns_done']:,}" + (" (cap)" if r["stopped_by_cap"] else ""),
            ]
            for p in pts:
                v = r["points"].get(str(p))
                if v is None:
                    row += ["-"] * 4
                    continue
                inv = v.get("invoke")
                row += [
                    v["lookup"]["total_requests"],
                    f"{v['lookup']['wall_s'] * 1000:.0f}",
                    inv["total_requests"] if inv else "-",
                    f"{inv['wall_s'] * 1000:.0f}" if inv else "-",
                ]
            b = r["bytes_per_turn"]
            row.append(f"{b[-1] / 1024:.1f} vs {b[9] / 1024:.1f}" if len(b) >= 10 else "-")
            table.append(row)
        out += _table(header, table)
        out += ["![long thread bytes per turn](img/w2_bytes_per_turn.png)", ""]
        sup = d.supplement
        if sup is not None:
            out += [
                f"### objstore-saver on S3 to {sup['turns_done']:,} turns (separate run, "
                f"{d.supplement_server or d.s3_server})",
                "",
                "The full run's time cap stops every saver early on this shared machine, so",
                "workload 2 was also run alone for objstore-saver on S3 with a longer cap",
                f"({sup['cap_s']:.0f} s): `python -m bench --savers objstore-s3 --workloads 2",
                f"--long-cap {sup['cap_s']:.0f} --s3-server "
                f"{server_flag(d.supplement_server or d.s3_server)} --no-docs --out "
                "bench/results/long-objstore-s3.json`.",
                "",
            ]
            rows = []
            for p, v in sorted(sup["points"].items(), key=lambda kv: int(kv[0])):
                inv = v.get("invoke", {})
                rows.append(
                    [
                        p,
                        _ops(v["lookup"]["requests"]),
                        f"{v['lookup']['wall_s'] * 1000:.0f}",
                        inv.get("total_requests", "-"),
                        f"{inv['wall_s'] * 1000:.0f}" if inv else "-",
                        f"{inv['server_s'] * 1000:.0f}" if inv else "-",
                        f"{sup['bytes_per_turn'][int(p) - 1] / 1024:.1f}",
                    ]
                )
            out += _table(
                [
                    "turn",
                    "lookup requests",
                    "lookup ms",
                    "turn requests",
                    "turn ms",
                    "S3 server ms in turn",
                    "KiB written",
                ],
                rows,
            )

    # Workload 3
    rows = d.rows("3")
    if rows:
        size = next((r["payload_bytes"] for r in rows.values() if "payload_bytes" in r), 0)
        out += [
            f"## Workload 3: a {size / MIB:.0f} MiB ToolMessage",
            "",
            "One chat turn carrying a tool call and its result; then the latest",
            "checkpoint is read back. Peak memory is the tracemalloc peak of the process",
            "during the turn, above what was allocated before it.",
            "",
        ]
        table = []
        for s in d.savers:
            r = d.ok("3", s)
            if not r:
                continue
            table.append(
                [
                    L[s],
                    f"{r['write']['largest_request_body'] / MIB:.2f}",
                    f"{max(r['write']['largest_response_body'], r['read']['largest_response_body']) / MIB:.2f}",  # noqa: E501
                    r["write"]["total_requests"],
                    r["read"]["total_requests"],
                    f"{r['write']['bytes_sent'] / MIB:.1f}",
                    f"{r['peak_over_payload']:.2f}x",
                    r["round_trip_equal"],
                    r["meter"],
                ]
            )
        out += _table(
            [
                "saver",
                "largest request MiB",
                "largest response MiB",
                "turn requests",
                "read-back requests",
                "MiB written",
                "peak memory / value",
                "round trip equal",
                "meter",
            ],
            table,
        )

    # Workload 4
    rows = d.rows("4")
    if rows:
        out += [
            f"## Workload 4: supervisor, subgraph and `Send` fan-out to 8, "
            f"{sizes['agent_turns']} turns",
            "",
            f"At most {sizes.get('agent_cap_s', 0):.0f} s per saver"
            f" ({delay:.0f} ms per S3 request);",
            "a saver stopped by the cap shows the turns it ran.",
            "",
        ]
        table = []
        for s in d.savers:
            r = d.ok("4", s)
            if not r:
                continue
            table.append(
                [
                    L[s],
                    f"{r['turns']}" + (" (cap)" if r["turns"] < r.get("turns_target", 0) else ""),
                    r["checkpoints_per_turn"],
                    r["put_writes_calls_per_turn"],
                    r["writes_per_turn"],
                    r["requests_per_turn"],
                    f"{r['bytes_per_turn'] / 1024:.1f}",
                    f"{r['bytes_last_turn'] / 1024:.1f}",
                    r["results_stored"] == r["results_expected"],
                ]
            )
        out += _table(
            [
                "saver",
                "turns",
                "checkpoints (super-steps) / turn",
                "put_writes calls / turn",
                "writes / turn",
                "requests / turn",
                "KiB / turn (mean)",
                "KiB last turn",
                "state complete",
            ],
            table,
        )
        r = d.ok("4", OURS)
        if r:
            out += [
                f"objstore-saver on S3, requests per turn by operation: "
                f"{', '.join(f'{k} {v:.1f}' for k, v in r['requests_by_op_per_turn'].items())}.",
                "",
            ]

    # Workload 5
    rows = d.rows("5")
    if rows:
        out += [
            "## Workload 5: delete and retention",
            "",
            '`delete_thread("t")` on the long thread of workload 2, next to threads',
            "`t1` and `t10` (same key prefix `t`). *Storage identical* compares every",
            "stored object (key and ETag / content hash / table row) after the delete",
            "with the listing taken before thread `t` was written. Prune:",
            '`prune(["p"], keep_last=20, min_age=0)` where the saver offers it (objstore-saver),',
            'else LangGraph\'s `prune(["p"], strategy="keep_latest")`, on a '
            f"{sizes['prune_turns']}-turn thread, then one more turn on it.",
            "",
        ]
        table = []
        for s in d.savers:
            r = d.ok("5", s)
            if not r:
                continue
            p = r.get("prune", {})
            table.append(
                [
                    L[s],
                    r["deleted_thread_turns"],
                    r["delete"]["total_requests"],
                    _ops(r["delete"]["requests"]),
                    r.get("objects_of_thread"),
                    r.get("objects_left_of_thread"),
                    r["thread_gone"],
                    r["neighbours_unchanged"],
                    r.get("storage_identical_to_before_thread", "not listable"),
                    p.get("error")
                    or f"{p.get('checkpoints_before')} → {p.get('checkpoints_after')}",
                    p.get("prune", {}).get("total_requests"),
                    p.get("continues_after_prune"),
                ]
            )
        for s in d.savers:
            v = (d.ok("5", s) or {}).get("verify")
            if v:
                table_note = (
                    f"{L[s]}: `verify()` after the delete and the prune: "
                    f"{'ok' if v['ok'] else 'FAILED'}, {v['problems']} problems, "
                    f"{v['manifests']} manifests, {v['objects']} objects, "
                    f"{v['orphan_objects']} orphan objects."
                )
                out += [table_note, ""]
        out += _table(
            [
                "saver",
                "turns deleted",
                "delete requests",
                "by operation",
                "objects of t",
                "left",
                "t gone",
                "t1/t10 unchanged",
                "storage identical",
                "prune checkpoints",
                "prune requests",
                "continues",
            ],
            table,
        )

    # Workload 6
    a, b = d.rows("6a"), d.rows("6b")
    if a or b:
        out += [
            "## Workload 6: concurrency and overhead",
            "",
            f"{sizes['os_threads']} OS threads x {sizes['thread_turns']} turns through one",
            f"saver; async API with {', '.join(map(str, sizes['async_conversations']))}",
            "concurrent conversations, measured "
            f"{sizes.get('async_repeats', 1)} time(s) with the savers interleaved ("
            + ", ".join(
                f"{max(sizes.get('async_min_turns', 1), sizes.get('async_total_turns', 0) // n)}"
                " turns each"
                for n in sizes["async_conversations"]
            )
            + f"); {delay:.0f} ms per",
            "S3 request. Turns per second and the saver process's own CPU seconds per turn",
            "(`time.process_time()`; the S3 server runs in another process), as ratios to",
            "`InMemorySaver` and `PostgresSaver` of this run. The in-process savers",
            "(in-memory, SQLite, PostgreSQL on loopback) get no injected round trip, so",
            "turn-rate ratios against them mostly show the cost of the network. The",
            f"threads' {sizes['thread_turns']} turns run in "
            f"{sizes.get('thread_rounds', 1)} rounds with the savers interleaved (the",
            "order rotated each round), so a drift in the machine's speed meets every",
            "saver alike. CPU per turn is not the code's alone: work that follows an idle",
            "wait costs more CPU than the same work in a busy process (cold caches), and",
            "the savers with the injected round trip wait longer between bursts",
            "(docs/profile.md, session 9).",
            "",
        ]
        table = []
        for s in d.savers:
            ra = d.ok("6a", s)
            rb = d.ok("6b", s) or {}
            row: list[Any] = [L[s]]
            row += _ratios(d, "6a", s, ra)
            for n in map(str, sizes["async_conversations"]):
                row += _ratios(d, "6b", s, rb.get(n), key=n)[:2]
            one = rb.get("1", {}).get("turns_per_s")
            many = rb.get(str(sizes["async_conversations"][-1]), {}).get("turns_per_s")
            row.append(f"{many / one:.1f}x" if one and many else "-")
            table.append(row)
        header = ["saver", "threads turns/s ÷ InMem", "÷ PG", "CPU/turn ÷ InMem", "÷ PG"]
        for n in sizes["async_conversations"]:
            header += [f"async {n}: turns/s ÷ PG", "CPU/turn ÷ PG"]
        header.append(f"async {sizes['async_conversations'][-1]} ÷ async 1")
        out += _table(header, table)

    errs = d.errors()
    if errs:
        out += [
            "## Failures",
            "",
            "Rows a saver could not produce, with the exception it raised.",
            "",
        ]
        out += _table(
            ["workload", "saver", "error"],
            [[w, L.get(s, s), e.replace("|", "\\|")] for w, s, e in errs],
        )

    out += ["## Versions", ""]
    out += _table(["package", "version"], [[k, v] for k, v in doc["versions"].items()])
    out += [
        f"Python {doc['machine']['python']}, PostgreSQL {doc['machine']['postgres']}, "
        f"S3 server {d.s3_server}, {doc['machine']['platform']}.",
        "",
    ]
    out += [
        "`langgraph-checkpoint-s3` 0.1.3 calls `serde.dumps`/`serde.loads`, which current",
        "LangGraph serializers no longer have; it runs here with `bench/shims.py`'s",
        "`LegacySerdeShim` (LangGraph's serializer plus that pair).",
        "",
    ]
    return "\n".join(out)


def _ratios(d: Doc, w: str, s: str, r: dict[str, Any] | None, key: str | None = None) -> list[Any]:
    """turns/s ÷ InMemory, ÷ Postgres, CPU/turn ÷ InMemory, ÷ Postgres (6b: PG first)."""
    if not r:
        return ["-"] * 4

    def base(name: str) -> dict[str, Any] | None:
        b = d.ok(w, name)
        if b is not None and key is not None:
            b = b.get(key)
        return b

    im, pg = base("inmemory"), base("postgres")

    def ratio(a: float | None, b: dict[str, Any] | None, field: str) -> str:
        if a is None or not b or not b.get(field):
            return "-"
        return f"{a / b[field]:.2f}"

    if key is not None:
        return [
            ratio(r["turns_per_s"], pg, "turns_per_s"),
            ratio(r["cpu_s_per_turn"], pg, "cpu_s_per_turn"),
        ]
    return [
        ratio(r["turns_per_s"], im, "turns_per_s"),
        ratio(r["turns_per_s"], pg, "turns_per_s"),
        ratio(r["cpu_s_per_turn"], im, "cpu_s_per_turn"),
        ratio(r["cpu_s_per_turn"], pg, "cpu_s_per_turn"),
    ]


def _headlines(d: Doc) -> list[str]:
    """A few sentences with the figures people compare first."""
    out = ["## Headlines", ""]
    w1 = {s: r for s in d.savers if (r := d.ok("1", s))}
    if OURS in w1:
        others = {s: r["total_mib"] for s, r in w1.items() if not s.startswith("objstore")}
        if others:
            lo, hi = min(others.values()), max(others.values())
            out.append(
                f"- Workload 1 (30-turn chat): objstore-saver wrote "
                f"{w1[OURS]['total_mib']:.3f} MiB; the other savers {lo:.2f} to {hi:.2f} MiB "
                f"({lo / w1[OURS]['total_mib']:.0f}x to {hi / w1[OURS]['total_mib']:.0f}x more)."
            )
    w1b = d.ok("1b", OURS)
    if w1b:
        out.append(
            f"- Workload 1b (incompressible words): {w1b['bytes_over_raw']:.2f}x the raw bytes "
            "of the new messages."
        )
    w2 = {s: r for s in d.savers if (r := d.ok("2", s))}
    if OURS in w2 and w2[OURS]["points"]:
        last = max(w2[OURS]["points"], key=int)
        p = w2[OURS]["points"][last]
        out.append(
            f"- Workload 2 (long thread): at turn {last} objstore-saver's latest-checkpoint "
            f"lookup takes {p['lookup']['total_requests']} requests and a whole turn "
            f"{p['invoke']['total_requests'] if 'invoke' in p else '-'}; "
            + "; ".join(
                f"{d.labels[s]} reached {r['turns_done']:,} turns"
                for s, r in w2.items()
                if r["stopped_by_cap"]
            )
            + (" within the time cap." if any(r["stopped_by_cap"] for r in w2.values()) else "")
        )
    sup = d.supplement
    if sup is not None and sup["points"]:
        last = max(sup["points"], key=int)
        p = sup["points"][last]
        out.append(
            f"- Workload 2, objstore-saver on S3 alone to {sup['turns_done']:,} turns: the "
            f"lookup at turn {last} still takes {p['lookup']['total_requests']} requests and "
            f"the turn {p['invoke']['total_requests']}; it wrote "
            f"{sup['bytes_per_turn'][int(last) - 1] / 1024:.1f} KiB at turn {last} against "
            f"{sup['bytes_per_turn'][9] / 1024:.1f} KiB at turn 10."
        )
    w3 = {s: r for s in d.savers if (r := d.ok("3", s))}
    if OURS in w3:
        big = max((r["largest_body"] for s, r in w3.items() if s != OURS), default=0)
        out.append(
            f"- Workload 3 ({w3[OURS]['payload_bytes'] / MIB:.0f} MiB tool result): largest "
            f"single body {w3[OURS]['largest_body'] / MIB:.2f} MiB for objstore-saver, up to "
            f"{big / MIB:.1f} MiB for the others; objstore-saver wrote "
            f"{w3[OURS]['write']['bytes_sent'] / MIB:.1f} MiB for the turn."
        )
    w5 = d.ok("5", OURS)
    if w5:
        out.append(
            f"- Workload 5: deleting the {w5['deleted_thread_turns']:,}-turn thread took "
            f"{w5['delete']['total_requests']} requests, left "
            f"{w5.get('objects_left_of_thread', '-')} of its objects; neighbours `t1`/`t10` "
            + (
                "untouched (every stored object identical to before `t` was written)."
                if w5.get("storage_identical_to_before_thread")
                else "**changed** (see workload 5)."
            )
        )
    return [*out, ""] if len(out) > 2 else []


def _notes_on_targets(d: Doc) -> list[str]:
    out = [
        f"- **{t['target']}: not met** ({t['figure']}). {t.get('reason', '')}".rstrip()
        for t in targets(d)
        if t["met"] is False
    ]
    return [*out, ""] if out else []


def _reason(d: Doc, target: str) -> str:
    """What the same run measured that explains a missed target."""
    if target.startswith("W1 flatness") or target.startswith("W1b flat"):
        return (
            "The tail chunk of the messages list is rewritten each turn and grows until it "
            "is sealed (the saw-tooth of the bytes-per-turn plot); the lead is changing the "
            "core's tail-chunk layout for flatness. The workload is not tuned to hide it."
        )
    if target.startswith("W1b bytes"):
        a, b = d.ok("1", OURS), d.ok("1b", OURS)
        if a and b:
            per = b["total_bytes_written"] / len(b["turns"]) / 1024
            seed = a["total_bytes_written"] / len(a["turns"]) / 1024
            raw = b["raw_new_message_bytes"] / len(b["turns"]) / 1024
            return (
                f"{per:.1f} KiB written per turn for {raw:.1f} KiB of new text; with the "
                f"compressible text of workload 1 it is {seed:.1f} KiB. About 12 objects per "
                "turn (three checkpoint manifests, pending writes, channel values) carry a "
                "fixed overhead, and the growing tail chunk is rewritten each turn."
            )
    if target.startswith("W3 peak"):
        pg = d.ok("3", "postgres")
        extra = (
            f" PostgresSaver's peak in the same run: {pg['peak_over_payload']:.2f}x." if pg else ""
        )
        return (
            "LangGraph's serializer (ormsgpack) alone peaks at about 3x a value while it "
            "builds the bytes; the saver serializes one large value at a time (its large-value "
            "gate) and streams its parts, so the turn peaks at the serializer's own figure "
            "(docs/profile.md)." + extra
        )
    if target.startswith("W6 64 async"):
        r = d.ok("6b", OURS)
        if r and "64" in r and "1" in r:
            one, many = r["1"], r["64"]
            cores = many["cpu_s_per_turn"] * many["turns_per_s"]
            text = (
                f"At 64 conversations the saver process used {cores:.2f} CPU cores "
                f"({many['cpu_s_per_turn'] * 1000:.0f} ms CPU per turn)"
            )
            if one.get("server_s_per_request") and many.get("server_s_per_request"):
                text += (
                    f"; the S3 server's own time per request ({d.s3_server} behind the "
                    "proxy, on the same 2 cores) went from "
                    f"{one['server_s_per_request'] * 1000:.0f} ms with one conversation to "
                    f"{many['server_s_per_request'] * 1000:.0f} ms with 64"
                )
            cpus = d.doc["machine"]["cpus"]
            return text + (
                f". The S3 server, the metering proxy and the saver share the machine's {cpus} "
                "cores; when they are all busy the server bounds the rate (bench/README.md, "
                '"Is the server the bottleneck?").'
            )
    if target.startswith("W6 CPU"):
        w1 = d.ok("1", OURS)
        reqs = f"{w1['total_requests'] / len(w1['turns']):.0f}" if w1 else "about 10"
        w = "6a" if "threads" in target else "6b"
        us, pg, mem = (_cpu_per_turn(d, w, name) for name in (OURS, "postgres", "inmemory"))
        text = ""
        if us and pg and mem:
            text = (
                f"A turn cost objstore-saver {us * 1000:.2f} ms of CPU, PostgresSaver "
                f"{pg * 1000:.2f} ms and InMemorySaver (LangGraph alone) {mem * 1000:.2f} ms. "
            )
        return text + (
            f"objstore-saver sends about {reqs} HTTP requests per chat turn (lean transport: "
            "SigV4 and HTTP/1.1 of its own) plus hashing and compression of new values; "
            "PostgresSaver makes a handful of SQL round trips on one open connection. On this "
            "shared machine the ratio moves by tens of percent from run to run "
            "(docs/profile.md, session 9)."
        )
    return ""


SUPPLEMENT = Path("bench") / "results" / "long-objstore-s3.json"


def write(doc: dict[str, Any], root: Path) -> list[Path]:
    """Write ``docs/benchmarks.md`` and the plots under ``root``; return the paths.

    If ``bench/results/long-objstore-s3.json`` exists (workload 2 alone for
    objstore-saver on S3 with a longer cap), its long thread is reported too,
    labelled as a separate run.
    """
    d = Doc(doc)
    sup = root / SUPPLEMENT
    if sup.exists():
        extra = json.loads(sup.read_text())
        d.supplement = extra["results"]["2"].get(OURS)
        d.supplement_server = s3_server(extra)
        if d.supplement is not None and "error" in d.supplement:
            d.supplement = None
    made = plots(d, root / "docs" / "img")
    md = root / "docs" / "benchmarks.md"
    md.write_text(markdown(d))
    return [md, *made]
