"""The targets for objstore-saver on S3: each met or not, with its figure.

A target is a row of the report's targets table: its label (with its
threshold), whether the run met it, the figure, and a note. A target not met
also names the reason paragraph of ``template.md`` that explains it
(``reason.<key>``) and the figures that paragraph quotes, taken from the same
run; they are computed only for a target not met.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report import operations
from bench.report.results import MIB, OURS, Results

Reason = tuple[str, dict[str, Any]] | None
"""A reason paragraph's key in the template and its figures; None: no paragraph."""


def targets(d: Results) -> list[dict[str, Any]]:
    """Each target for objstore-saver on S3: met or not, with the figure.

    Every item has ``target``, ``met`` (None: not measurable in this run),
    ``figure`` and ``note``; one not met also has ``reason`` (a :data:`Reason`).
    """
    out: list[dict[str, Any]] = []

    def add(
        name: str,
        met: bool | None,
        figure: str,
        note: str = "",
        reason: Callable[[], Reason] | None = None,
    ) -> None:
        out.append({"target": name, "met": met, "figure": figure, "note": note})
        if met is False:
            out[-1]["reason"] = reason() if reason is not None else None

    w1 = d.ok("1", OURS)
    if w1:
        add("W1 total bytes ≤ 0.16 MiB", w1["total_mib"] <= 0.16, f"{w1['total_mib']:.4f} MiB")
        fl = w1.get("flatness")
        add(
            "W1 flatness ≤ 1.1",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
            "needs 30 turns" if fl is None else "",
            reason=lambda: ("w1_flat", {}),
        )
    w1b = d.ok("1b", OURS)
    if w1b:
        add(
            "W1b bytes ≤ 4x raw new-message bytes",
            w1b["bytes_over_raw"] <= 4,
            f"{w1b['bytes_over_raw']:.2f}x",
            reason=lambda: _w1b_bytes(d),
        )
        fl = w1b.get("flatness")
        add(
            "W1b flat across turns (turns 25-29 / 5-9 ≤ 1.1)",
            None if fl is None else fl <= 1.1,
            "-" if fl is None else f"{fl:.3f}",
            reason=lambda: ("w1_flat", {}),
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
            reason=lambda: _w3_peak(d),
        )
    w6b = d.ok("6b", OURS)
    if w6b and "1" in w6b and "64" in w6b:
        r = w6b["64"]["turns_per_s"] / w6b["1"]["turns_per_s"]
        add(
            "W6 64 async conversations ≥ 20x one",
            r >= 20,
            f"{r:.1f}x",
            _repeats_note(w6b),
            reason=lambda: _w6_async(d),
        )
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
            reason=lambda: (
                "w6_local",
                {
                    "rate_64": local6b["64"]["turns_per_s"],
                    "rate_1": local6b["1"]["turns_per_s"],
                    "cpu_ms_64": local6b["64"]["cpu_s_per_turn"] * 1000,
                },
            ),
        )
    us, pg = cpu_per_turn(d, "6a", OURS), cpu_per_turn(d, "6a", "postgres")
    if us and pg:
        add(
            "W6 CPU per turn ≤ 1.0x PostgresSaver (8 OS threads)",
            us / pg <= 1.0,
            f"{us / pg:.2f}x",
            _rounds_note(d.ok("6a", OURS), d.ok("6a", "postgres")),
            reason=lambda: _w6_cpu(d, "6a"),
        )
    us, pg = cpu_per_turn(d, "6b", OURS), cpu_per_turn(d, "6b", "postgres")
    if us and pg:
        add(
            "W6 CPU per turn ≤ 1.0x PostgresSaver (64 async)",
            us / pg <= 1.0,
            f"{us / pg:.2f}x",
            reason=lambda: _w6_cpu(d, "6b"),
        )
    operations.add_targets(d, add)
    return out


def cpu_per_turn(d: Results, w: str, name: str) -> float | None:
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
                reason=lambda: (
                    "w2_latency",
                    {
                        "requests_first": pts[first]["invoke"]["total_requests"],
                        "requests_last": pts[last]["invoke"]["total_requests"],
                        "server_ms_first": sa * 1000,
                        "server_ms_last": sb * 1000,
                        "moto": server.startswith("moto"),
                        "rest_ms_first": (ia - sa) * 1000,
                        "rest_ms_last": (ib - sb) * 1000,
                        "kib_first": w2["bytes_per_turn"][first - 1] / 1024,
                        "kib_last": w2["bytes_per_turn"][last - 1] / 1024,
                    },
                ),
            )


def _w1b_bytes(d: Results) -> Reason:
    a, b = d.ok("1", OURS), d.ok("1b", OURS)
    if not (a and b):
        return None
    return (
        "w1b_bytes",
        {
            "kib_per_turn": b["total_bytes_written"] / len(b["turns"]) / 1024,
            "raw_kib_per_turn": b["raw_new_message_bytes"] / len(b["turns"]) / 1024,
            "seed_kib_per_turn": a["total_bytes_written"] / len(a["turns"]) / 1024,
        },
    )


def _w3_peak(d: Results) -> Reason:
    pg = d.ok("3", "postgres")
    return ("w3_peak", {"postgres_peak": pg["peak_over_payload"] if pg else None})


def _w6_async(d: Results) -> Reason:
    r = d.ok("6b", OURS)
    if not (r and "64" in r and "1" in r):
        return None
    one, many = r["1"], r["64"]
    server = None
    if one.get("server_s_per_request") and many.get("server_s_per_request"):
        server = {
            "s3_server": d.s3_server,
            "ms_1": one["server_s_per_request"] * 1000,
            "ms_64": many["server_s_per_request"] * 1000,
        }
    return (
        "w6_async",
        {
            "cores": many["cpu_s_per_turn"] * many["turns_per_s"],
            "cpu_ms": many["cpu_s_per_turn"] * 1000,
            "server": server,
            "cpus": d.doc["machine"]["cpus"],
        },
    )


def _w6_cpu(d: Results, w: str) -> Reason:
    w1 = d.ok("1", OURS)
    us, pg, mem = (cpu_per_turn(d, w, name) for name in (OURS, "postgres", "inmemory"))
    return (
        "w6_cpu",
        {
            "requests_per_turn": w1["total_requests"] / len(w1["turns"]) if w1 else None,
            "costs": (
                {"ours_ms": us * 1000, "postgres_ms": pg * 1000, "inmemory_ms": mem * 1000}
                if us and pg and mem
                else None
            ),
        },
    )
