"""Workload 8's figures and targets: a replicated bucket read, failed over and healed.

:func:`section` gives the section's placeholders and tables, :func:`add_targets`
its targets (see :func:`bench.report.targets.targets`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report.results import OURS, Results

#: The targets' thresholds: probes of a replica, with no error.
PROBES = 2000
#: The probe runs of the section's first table, with their names on the page.
READERS = {
    "clear": "replicator, in clear",
    "encrypted": "replicator, encrypted",
    "rclone": "`rclone copy`, in clear",
}
FAILOVERS = {"failover": "in clear", "failover_encrypted": "encrypted"}
#: The agent's probe runs (the row's ``agent`` key) and what each kind of probe reads.
AGENT_MODES = {"clear": "in clear", "encrypted": "encrypted"}
AGENT_PROBES = {
    "root": "`get_tuple`, root namespace",
    "subgraphs": "`get_tuple`, a subgraph's namespace",
    "state": "`get_state(subgraphs=True)`",
}


def _reader_row(label: str, r: dict[str, Any]) -> list[Any]:
    if "error" in r:
        return [label, r["error"], *["-"] * 7]
    return [
        label,
        f"{r['probes']:,}",
        r["errors"],
        r["wrong"],
        r["empty"],
        f"{r['at_head']:,}",
        f"{r['behind_mean']:.2f}",
        r["behind_max"],
        f"{r['ms_per_probe']:.1f}",
    ]


def section(d: Results) -> dict[str, Any] | None:
    """Workload 8's placeholders and tables; None when the run has no row for it."""
    r = d.ok("8", OURS)
    if r is None:
        return None
    readers = (
        [
            "replica copied by",
            "probes",
            "errors",
            "wrong",
            "no checkpoint yet",
            "at the source's head",
            "checkpoints behind, mean",
            "max",
            "ms a probe",
        ],
        [_reader_row(label, r[k]) for k, label in READERS.items() if k in r],
    )
    failovers = (
        ["failover", "checkpoints written", "lost", "heads agree", "verify clean", "conflicts"],
        [
            [
                label,
                f["written"],
                f["lost"],
                "yes" if f["heads_agree"] else "no",
                "yes" if f["verify_clean"] else "no",
                f["conflicts"],
            ]
            for k, label in FAILOVERS.items()
            if (f := r.get(k))
        ],
    )
    clear = r["clear"]
    return {
        "lag_s": r["lag_s"],
        "turns": clear["turns"],
        "checkpoints": clear["checkpoints"],
        "readers": readers,
        "failovers": failovers,
        "agent": _agent(r.get("agent")),
    }


def _agent(a: dict[str, Any] | None) -> dict[str, Any] | None:
    """The agent's placeholders and table; None when the run has none."""
    if not a:
        return None
    first = a["clear"]
    rows = [
        _reader_row(f"{label}, {mode}", a[m][k])
        for m, mode in AGENT_MODES.items()
        if m in a
        for k, label in AGENT_PROBES.items()
    ]
    header = ["probe", "probes", "errors", "wrong", "no checkpoint yet", "at the source's head"]
    header += ["checkpoints behind, mean", "max", "ms a probe"]
    shape = ("turns", "checkpoints", "subgraph_checkpoints", "namespaces", "interrupts")
    return {k: first[k] for k in shape} | {
        "parallel_writes": first["parallel_writes"],
        "table": (header, rows),
    }


Add = Callable[..., None]


def add_targets(d: Results, add: Add) -> None:
    """Workload 8's targets, through ``add``."""
    r = d.ok("8", OURS)
    if r is None:
        return
    for key, label in READERS.items():
        p = r.get(key)
        if p is None:
            continue
        if "error" in p:
            add(f"W8 replica reads, {label}: no error", None, "not measured", p["error"])
            continue
        enough = key == "rclone" or p["probes"] >= PROBES
        add(
            f"W8 replica reads, {label}: 0 errors and 0 wrong answers"
            + ("" if key == "rclone" else f" over ≥ {PROBES:,} probes"),
            p["errors"] == 0 and p["wrong"] == 0 and enough and p.get("lost", 0) == 0,
            f"{p['errors']} errors, {p['wrong']} wrong, {p['probes']:,} probes"
            + (f", {p['lost']} lost" if "lost" in p else ""),
            f"{p['behind_mean']:.2f} checkpoints behind on average, at most {p['behind_max']}",
            reason=lambda p=p: ("w8_reads", {"first_error": p["first_error"] or "none"}),
        )
    for mode, label in AGENT_MODES.items():
        a = (r.get("agent") or {}).get(mode)
        if a is None:
            continue
        kinds = [a[k] for k in AGENT_PROBES]
        probes, errors, wrong = (sum(p[f] for p in kinds) for f in ("probes", "errors", "wrong"))
        first_error = next((p["first_error"] for p in kinds if p["first_error"]), "none")
        add(
            f"W8 replica reads of the agent (subgraph, interrupt, parallel writes), {label}: "
            f"0 errors and 0 wrong answers over ≥ {PROBES:,} probes",
            errors == 0 and wrong == 0 and probes >= PROBES,
            f"{errors} errors, {wrong} wrong, {probes:,} probes",
            f"at most {max(p['behind_max'] for p in kinds)} checkpoints behind",
            reason=lambda e=first_error: ("w8_reads", {"first_error": e}),
        )
    for key, label in FAILOVERS.items():
        f = r.get(key)
        if f is None:
            continue
        add(
            f"W8 failover and heal, {label}: 0 checkpoints lost",
            f["lost"] == 0 and f["heads_agree"] and f["verify_clean"],
            f"{f['lost']} lost of {f['written']}",
            "heads agree, verify clean in both"
            if f["heads_agree"] and f["verify_clean"]
            else "heads differ or verify found problems",
        )
