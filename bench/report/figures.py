"""The figures of ``docs/benchmarks.md``, computed from a results document.

:func:`figures` returns everything the report quotes, by section: numbers
for the template's placeholders, and the rows of each table (cells as
values; :mod:`bench.report.render` formats them). A section is None when the
run has no rows for it. No sentence is written here: the text is
``template.md``'s.
"""

from __future__ import annotations

from typing import Any

from bench.report import costs, operations, replicas
from bench.report.results import MIB, OURS, Results, ops, server_flag
from bench.report.targets import targets


def figures(d: Results) -> dict[str, Any]:
    """Every figure of the report, by section (see the module's docstring)."""
    return {
        "intro": _intro(d),
        "headlines": _headlines(d),
        "targets": targets(d),
        "costs": costs.section(d),
        "chat": {w: _chat(d, w) for w in ("1", "1b")},
        "long_thread": _long_thread(d),
        "large_value": _large_value(d),
        "agent": _agent(d),
        "delete": _delete(d),
        "concurrency": _concurrency(d),
        "operations": operations.section(d),
        "replicas": replicas.section(d),
        "failures": (
            ["workload", "saver", "error"],
            [[w, d.labels.get(s, s), e.replace("|", "\\|")] for w, s, e in d.errors()],
        ),
        "versions": _versions(d),
    }


def _intro(d: Results) -> dict[str, Any]:
    doc = d.doc
    return {
        "mode": doc["mode"],
        "generated_at": doc["generated_at"],
        "elapsed_min": doc["elapsed_s"] / 60,
        "cpus": doc["machine"]["cpus"],
        "reruns": [
            {
                "workloads": ", ".join(r["workloads"]),
                "generated_at": r["generated_at"],
                "elapsed_min": r["elapsed_s"] / 60,
                "reason": r["reason"],
            }
            for r in doc.get("reruns", [])
        ],
        "s3_server": d.s3_server,
        "flag": server_flag(d.s3_server),
        "delay_ms": d.sizes["delay_ms"],
    }


def _headlines(d: Results) -> dict[str, Any]:
    """The figures people compare first; a headline is None when the run lacks them."""
    out: dict[str, Any] = dict.fromkeys(("w1", "w1b", "w2", "w3", "w5"))
    out["w7"] = operations.headline(d)
    w1 = {s: r for s in d.savers if (r := d.ok("1", s))}
    if OURS in w1:
        others = {s: r["total_mib"] for s, r in w1.items() if not s.startswith("objstore")}
        if others:
            ours, lo, hi = w1[OURS]["total_mib"], min(others.values()), max(others.values())
            out["w1"] = {
                "ours_mib": ours,
                "lo_mib": lo,
                "hi_mib": hi,
                "lo_times": lo / ours,
                "hi_times": hi / ours,
            }
    w1b = d.ok("1b", OURS)
    if w1b:
        out["w1b"] = {"bytes_over_raw": w1b["bytes_over_raw"]}
    w2 = {s: r for s in d.savers if (r := d.ok("2", s))}
    if OURS in w2 and w2[OURS]["points"]:
        last = max(w2[OURS]["points"], key=int)
        p = w2[OURS]["points"][last]
        out["w2"] = {
            "last": last,
            "lookup_requests": p["lookup"]["total_requests"],
            "turn_requests": p["invoke"]["total_requests"] if "invoke" in p else "-",
            "capped": [
                {"saver": d.labels[s], "turns": r["turns_done"]}
                for s, r in w2.items()
                if r["stopped_by_cap"]
            ],
        }
    w3 = {s: r for s in d.savers if (r := d.ok("3", s))}
    if OURS in w3:
        big = max((r["largest_body"] for s, r in w3.items() if s != OURS), default=0)
        out["w3"] = {
            "payload_mib": w3[OURS]["payload_bytes"] / MIB,
            "largest_mib": w3[OURS]["largest_body"] / MIB,
            "others_largest_mib": big / MIB,
            "written_mib": w3[OURS]["write"]["bytes_sent"] / MIB,
        }
    w5 = d.ok("5", OURS)
    if w5:
        out["w5"] = {
            "turns": w5["deleted_thread_turns"],
            "requests": w5["delete"]["total_requests"],
            "left": w5.get("objects_left_of_thread", "-"),
            "untouched": bool(w5.get("neighbours_unchanged"))
            and not w5.get("neighbour_objects_changed"),
        }
    return out


def _chat(d: Results, w: str) -> dict[str, Any] | None:
    """Workload 1 or 1b: a row per saver, and objstore-saver's requests at turn 11."""
    if not d.rows(w):
        return None
    rows = []
    for s in d.savers:
        r = d.ok(w, s)
        if not r:
            continue
        n = len(r["turns"])
        lat = sum(t["wall_s"] for t in r["turns"]) / n * 1000
        rows.append(
            [
                d.labels[s],
                f"{r['total_mib']:.3f}",
                r.get("flatness"),
                r["bytes_over_raw"],
                r["total_requests"] / n,
                sum(t["objects_written"] for t in r["turns"]) / n,
                f"{lat:.0f}",
                r["meter"],
            ]
        )
    header = [
        "saver",
        "total MiB",
        "flatness (25-29 / 5-9)",
        "bytes / raw new bytes",
        "requests / turn",
        "objects / turn",
        "latency / turn (ms)",
        "meter",
    ]
    ours_turn = None
    r = d.ok(w, OURS)
    if r and r["turns"]:
        t = r["turns"][min(10, len(r["turns"]) - 1)]
        ours_turn = {
            "turn": t["turn"] + 1,
            "requests": ops(t["requests"]),
            "saver_calls": ops(t["saver_calls"]),
        }
    return {"chat_turns": d.sizes["chat_turns"], "table": (header, rows), "ours_turn": ours_turn}


def _long_thread(d: Results) -> dict[str, Any] | None:
    """Workload 2: lookup and turn at each measured point, and the separate long run."""
    rows = d.rows("2")
    if not rows:
        return None
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
            d.labels[s],
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
    sizes = d.sizes
    return {
        "long_turns": sizes["long_turns"],
        "long_cap_s": sizes["long_cap_s"],
        "delay_ms": sizes["delay_ms"],
        "table": (header, table),
    }


def _large_value(d: Results) -> dict[str, Any] | None:
    """Workload 3: bodies, requests, bytes and peak memory of the large turn."""
    rows = d.rows("3")
    if not rows:
        return None
    size = next((r["payload_bytes"] for r in rows.values() if "payload_bytes" in r), 0)
    table = []
    for s in d.savers:
        r = d.ok("3", s)
        if not r:
            continue
        largest_response = max(
            r["write"]["largest_response_body"], r["read"]["largest_response_body"]
        )
        table.append(
            [
                d.labels[s],
                f"{r['write']['largest_request_body'] / MIB:.2f}",
                f"{largest_response / MIB:.2f}",
                r["write"]["total_requests"],
                r["read"]["total_requests"],
                f"{r['write']['bytes_sent'] / MIB:.1f}",
                f"{r['peak_over_payload']:.2f}x",
                r["round_trip_equal"],
                r["meter"],
            ]
        )
    header = [
        "saver",
        "largest request MiB",
        "largest response MiB",
        "turn requests",
        "read-back requests",
        "MiB written",
        "peak memory / value",
        "round trip equal",
        "meter",
    ]
    return {"payload_mib": size / MIB, "table": (header, table)}


def _agent(d: Results) -> dict[str, Any] | None:
    """Workload 4: checkpoints, writes, requests and bytes per turn of the agent."""
    if not d.rows("4"):
        return None
    table = []
    for s in d.savers:
        r = d.ok("4", s)
        if not r:
            continue
        table.append(
            [
                d.labels[s],
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
    header = [
        "saver",
        "turns",
        "checkpoints (super-steps) / turn",
        "put_writes calls / turn",
        "writes / turn",
        "requests / turn",
        "KiB / turn (mean)",
        "KiB last turn",
        "state complete",
    ]
    r = d.ok("4", OURS)
    by_op = None
    if r:
        by_op = ", ".join(f"{k} {v:.1f}" for k, v in r["requests_by_op_per_turn"].items())
    return {
        "agent_turns": d.sizes["agent_turns"],
        "agent_cap_s": d.sizes.get("agent_cap_s", 0),
        "delay_ms": d.sizes["delay_ms"],
        "table": (header, table),
        "ours_by_op": by_op,
    }


def _delete(d: Results) -> dict[str, Any] | None:
    """Workload 5: the long thread's delete, its neighbours, the prune, ``verify()``."""
    if not d.rows("5"):
        return None
    table = []
    for s in d.savers:
        r = d.ok("5", s)
        if not r:
            continue
        p = r.get("prune", {})
        table.append(
            [
                d.labels[s],
                r["deleted_thread_turns"],
                r["delete"]["total_requests"],
                ops(r["delete"]["requests"]),
                r.get("objects_of_thread"),
                r.get("objects_left_of_thread"),
                r["thread_gone"],
                r["neighbours_unchanged"],
                r.get("storage_identical_to_before_thread", "not listable"),
                p.get("error") or f"{p.get('checkpoints_before')} → {p.get('checkpoints_after')}",
                p.get("prune", {}).get("total_requests"),
                p.get("continues_after_prune"),
            ]
        )
    verified = []
    for s in d.savers:
        v = (d.ok("5", s) or {}).get("verify")
        if v:
            verified.append({"saver": d.labels[s]} | v)
    header = [
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
    ]
    return {
        "prune_turns": d.sizes["prune_turns"],
        "verified": verified,
        "table": (header, table),
    }


def _concurrency(d: Results) -> dict[str, Any] | None:
    """Workload 6: turn rates and CPU per turn as ratios to InMemorySaver and PostgresSaver."""
    if not (d.rows("6a") or d.rows("6b")):
        return None
    sizes = d.sizes
    conversations = sizes["async_conversations"]
    table = []
    for s in d.savers:
        ra = d.ok("6a", s)
        rb = d.ok("6b", s) or {}
        row: list[Any] = [d.labels[s]]
        row += _ratios(d, "6a", ra)
        for n in map(str, conversations):
            row += _ratios(d, "6b", rb.get(n), key=n)[:2]
        one = rb.get("1", {}).get("turns_per_s")
        many = rb.get(str(conversations[-1]), {}).get("turns_per_s")
        row.append(f"{many / one:.1f}x" if one and many else "-")
        # One conversation alone: a turn's sequential round trips at the
        # injected delay (in-process savers have none).
        row.append(f"{1000 / one:.0f}" if one else "-")
        table.append(row)
    header = ["saver", "threads turns/s ÷ InMem", "÷ PG", "CPU/turn ÷ InMem", "÷ PG"]
    for n in conversations:
        header += [f"async {n}: turns/s ÷ PG", "CPU/turn ÷ PG"]
    header.append(f"async {conversations[-1]} ÷ async 1")
    header.append("turn latency, async 1 (ms)")
    return {
        "os_threads": sizes["os_threads"],
        "thread_turns": sizes["thread_turns"],
        "thread_rounds": sizes.get("thread_rounds", 1),
        "conversations": ", ".join(map(str, conversations)),
        "repeats": sizes.get("async_repeats", 1),
        "turns_each": [
            max(sizes.get("async_min_turns", 1), sizes.get("async_total_turns", 0) // n)
            for n in conversations
        ],
        "delay_ms": sizes["delay_ms"],
        "table": (header, table),
    }


def _ratios(d: Results, w: str, r: dict[str, Any] | None, key: str | None = None) -> list[Any]:
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


def _versions(d: Results) -> dict[str, Any]:
    doc = d.doc
    return {
        "table": (["package", "version"], [[k, v] for k, v in doc["versions"].items()]),
        "python": doc["machine"]["python"],
        "postgres": doc["machine"]["postgres"],
        "s3_server": d.s3_server,
        "platform": doc["machine"]["platform"],
    }
