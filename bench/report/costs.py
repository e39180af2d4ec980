"""The report's cost figures: class A and B requests per turn, and dollars per million turns.

Rows come from the workloads that record requests by operation for each
turn (1 and 1b, per turn; 4, as a mean per turn) and from workload 1's
durability runs. Only savers measured at the metering proxy (``meter`` "s3")
are priced: their counts are HTTP requests as a provider bills them.
"""

from __future__ import annotations

from typing import Any

from bench.pricing import PRICE_LISTS, PRICES_AS_OF, by_class, per_million_turns
from bench.report.results import Results

#: Workloads priced, with how the report names them.
PRICED = {"1": "1 seed chat", "1b": "1b realistic chat", "4": "4 agent"}


def _mean_turn(w: str, r: dict[str, Any]) -> tuple[dict[str, float], float, float]:
    """Requests by operation, bytes sent and received, per turn of a workload's row."""
    if w == "4":
        return dict(r["requests_by_op_per_turn"]), float(r["bytes_per_turn"]), 0.0
    turns = r["turns"]
    n = len(turns)
    requests: dict[str, float] = {}
    for t in turns:
        for op, k in t["requests"].items():
            requests[op] = requests.get(op, 0) + k / n
    sent = sum(t["bytes_written"] for t in turns) / n
    received = sum(t["bytes_read"] for t in turns) / n
    return requests, sent, received


def _row(label: str, what: str, requests: dict[str, float], sent: float, received: float) -> list:
    a, b = by_class(requests)
    dollars = per_million_turns(requests, sent, received)
    return [label, what, a, b, *(f"{dollars[p.name]:.2f}" for p in PRICE_LISTS)]


def section(d: Results) -> dict[str, Any] | None:
    """The cost tables, or None when no S3 saver has a priced row."""
    header = [
        "saver",
        "workload",
        "class A / turn",
        "class B / turn",
        *(f"$ / million turns, {p.name}" for p in PRICE_LISTS),
    ]
    rows = []
    for w, name in PRICED.items():
        for s in d.savers:
            r = d.ok(w, s)
            if r and r.get("meter") == "s3":
                rows.append(_row(d.labels[s], name, *_mean_turn(w, r)))
    if not rows:
        return None
    modes = []
    for s in d.savers:
        r = d.ok("1", s)
        if not r or r.get("meter") != "s3":
            continue
        for mode, m in r.get("durability", {}).items():
            requests = m["requests_per_turn"]
            row = _row(
                d.labels[s],
                f"`{mode}`",
                requests,
                m["bytes_sent_per_turn"],
                m["bytes_received_per_turn"],
            )
            by_op = ", ".join(f"{op} {k:.2f}" for op, k in sorted(requests.items()))
            modes.append([*row[:4], by_op, row[4]])
    prices = [
        [p.name, p.class_a_per_million, p.class_b_per_million, p.upload_per_gb, p.source]
        for p in PRICE_LISTS
    ]
    return {
        "as_of": PRICES_AS_OF,
        "table": (header, rows),
        "durability": (
            [
                "saver",
                "durability",
                "class A / turn",
                "class B / turn",
                "requests / turn",
                f"$ / million turns, {PRICE_LISTS[0].name}",
            ],
            modes,
        )
        if modes
        else None,
        "prices": (
            ["price list", "$ / million class A", "$ / million class B", "$ / GB sent", "source"],
            prices,
        ),
    }
