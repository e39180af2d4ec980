"""The benchmark report: figures from the results, the words from its template.

No plots here (matplotlib is in the ``bench`` extra only): only the text of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from repo_root import ROOT

from bench.report.figures import figures
from bench.report.render import Template, render
from bench.report.results import OURS, Results

LATEST = json.loads((ROOT / "bench" / "results" / "latest.json").read_text())


def _reader(probes: int, errors: int = 0, **more: Any) -> dict[str, Any]:
    row = {
        "probes": probes,
        "errors": errors,
        "wrong": 0,
        "empty": 3,
        "behind_mean": 0.25,
        "behind_max": 3,
        "at_head": probes - 40,
        "ms_per_probe": 12.5,
        "first_error": "MissingObjectError: gone" if errors else "",
    }
    return row | more


#: A workload 8 row as ``bench.workloads.replicas`` writes it.
W8 = {
    "lag_s": 900.0,
    "clear": _reader(2112, turns=30, checkpoints=90, converged=True, copied=400, conflicts=0),
    "encrypted": _reader(2112, turns=30, checkpoints=90, converged=True, copied=410, conflicts=0),
    "failover": {
        "written": 42,
        "lost": 0,
        "heads_agree": True,
        "verify_clean": True,
        "conflicts": 0,
    },
    "failover_encrypted": {
        "written": 42,
        "lost": 0,
        "heads_agree": True,
        "verify_clean": True,
        "conflicts": 0,
    },
    "rclone": _reader(60, lost=0),
    "agent": {
        mode: {kind: _reader(704) for kind in ("root", "subgraphs", "state")}
        | {
            "turns": 10,
            "checkpoints": 120,
            "subgraph_checkpoints": 80,
            "namespaces": 10,
            "interrupts": 10,
            "parallel_writes": 3,
            "converged": True,
            "copied": 500,
            "conflicts": 0,
        }
        for mode in ("clear", "encrypted")
    },
}


def _page(doc: dict[str, Any], template: Template | None = None) -> str:
    return render(figures(Results(copy.deepcopy(doc))), template)


def _miss_every_target(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    r = doc["results"]
    r["1"][OURS] |= {"total_mib": 1.0, "flatness": 2.0}
    r["1b"][OURS] |= {"bytes_over_raw": 5.0, "flatness": 2.0}
    w2 = r["2"][OURS]  # as if it played all 1,000 turns, whatever the run's cap allowed
    w2["points"]["1000"] = copy.deepcopy(w2["points"][max(w2["points"], key=int)])
    w2 |= {"turns_done": 1000, "stopped_by_cap": False}
    w2["bytes_per_turn"] = (w2["bytes_per_turn"] * 2)[:1000]
    far = w2["points"]["1000"]
    far["lookup"]["total_requests"] = 3
    far["invoke"]["wall_s"] = 1.0
    written = r["2"][OURS]["bytes_per_turn"]
    written[950:1000] = [2 * max(written[10:60])] * 50
    written[700] = 300_000
    for name, cpu in ((OURS, 0.01), ("inmemory", 0.002)):
        points = r["2"][name]["points"]
        points["10"]["invoke"]["cpu_s"], points["1000"]["invoke"]["cpu_s"] = cpu, 2 * cpu
    r["2"][OURS]["points"]["1000"]["invoke"]["cpu_s"] = 0.1
    r["3"][OURS] |= {"largest_body": 3 * 2**20, "peak_over_payload": 4.0}
    for name in (OURS, "objstore-local"):
        one = r["6b"][name]["1"]["cpu_s_per_turn"]
        r["6b"][name]["64"]["cpu_s_per_turn"] = 2 * max(
            one, r["6b"]["postgres-rtt"]["64"]["cpu_s_per_turn"]
        )
    r["6a"][OURS]["cpu_s_per_turn"] *= 3
    w7 = r["7"][OURS]
    for job in ("threads", "verify", "prune_apply", "delete_threads"):
        w7["jobs"][job]["cpu_ms_per_thread"] = 5.0
    w7["jobs"]["du"]["threads_per_second"] = 100.0
    n = w7["jobs"]["verify"]["threads"]
    w7["jobs"]["verify"]["read"] = {
        "manifests": 3 * n,
        "writes": 2 * n,
        "objects": n,
        "store_items": 0,
        "store_index_objects": 0,
    }
    w7["migrate"]["one"]["cpu_s"] *= 10
    w7["two_prune"]["cpu_s"] = w7["jobs"]["prune_apply"]["cpu_s"] * 3
    w7["migrate"]["two"]["cpu_s"] = w7["migrate"]["one"]["cpu_s"] * 3
    return doc


def test_the_committed_page_is_the_committed_results_rendered() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert _page(LATEST) == page, "regenerate it: python -m bench --report-only"


def test_a_missed_target_is_explained_from_the_same_run() -> None:
    page = _page(_miss_every_target(LATEST))
    notes = [line for line in page.splitlines() if line.startswith("- **") and "not met" in line]
    # every target of the run (10 of them workload 7's, 4 workload 6's, 4 workload 2's)
    assert len(notes) == 24
    by_target = {n.split(": not met")[0][4:]: n for n in notes}
    assert "saw-tooth" in by_target["W1 flatness ≤ 1.1"]
    assert "KiB of new text" in by_target["W1b bytes ≤ 4x raw new-message bytes"]
    assert by_target["W3 no body over 2 MiB"].endswith("(largest 3.00 MiB).")  # no reason given
    assert (
        "PostgresSaver's peak in the same run: 3.00x." in by_target["W3 peak memory < 3x the value"]
    )
    flat = by_target["W2 bytes a turn over turns 951-1000 ≤ 1.1x turns 11-60"]
    assert "a merge copies its elements" in flat and "701: 300.0 KB" in flat
    assert "(largest 300.0 KB (turn 701))" in by_target["W2 no turn writes more than 256 KB"]
    # 0.1 s against InMemorySaver's 4 ms at turn 1000, 10 ms against 2 ms at turn 10
    assert (
        "(5.00x (25.00x vs 5.00x))"
        in by_target["W2 CPU a turn over InMemorySaver's at turn 1000 ≤ 1.2x at turn 10"]
    )
    # The target is against PostgresSaver with the S3 requests' round trip;
    # PostgresSaver on loopback is reported beside it.
    cpu = by_target["W6 CPU per turn ≤ 1.0x PostgresSaver with the same round trip (8 OS threads)"]
    w1 = LATEST["results"]["1"][OURS]
    per_turn = w1["total_requests"] / len(w1["turns"])
    assert "A turn cost objstore-saver" in cpu and f"about {per_turn:.0f} HTTP requests" in cpu
    same = LATEST["results"]["6a"]["postgres-rtt"]["cpu_s_per_turn"] * 1000
    assert f"PostgresSaver with the same round trip: {same:.2f} ms." in cpu
    ours = LATEST["results"]["6a"][OURS]["cpu_s_per_turn"] * 3 * 1000
    assert f"** ({ours / same:.2f}x)" in cpu, cpu
    assert "W6 CPU per turn ≤ 1.0x PostgresSaver (8 OS threads)" not in page
    assert "against PostgresSaver on loopback: " in page
    assert "interpreter lock" in by_target["W6 CPU per turn at 64 async conversations ≤ 1.2x one"]
    assert (
        "with 64"
        in by_target["W6 CPU per turn at 64 async conversations ≤ 1.2x one (local directory)"]
    )
    assert "LISTs for" in by_target["W7 `threads` ≤ 0.2 ms client CPU a thread"]
    assert "LISTs for" in by_target["W7 `du` ≥ 131 threads/s (its rate before the jobs' fan-out)"]
    n = LATEST["results"]["7"][OURS]["jobs"]["verify"]["threads"]
    assert by_target["W7 `verify` reads no content object"].endswith(f"({n:,} read).")
    for label in (
        "`verify` ≤ 3.1 requests a thread for its checkpoints",
        "`verify` ≤ 0.5 ms client CPU a thread",
    ):
        verify = by_target[f"W7 {label}"]
        assert "requests a thread" in verify and "With no injected round trip" in verify
    for job in ("prune --keep-last 1 --apply", "delete_threads --apply"):
        row = by_target[f"W7 `{job}` ≤ 0.8 ms client CPU a thread"]
        assert "5.00 ms of this process's CPU a thread" in row
        assert "With no injected round trip" not in row
    assert (
        "a put reads its parent"
        in by_target["W7 `migrate --apply` ≤ 0.7 ms client CPU a checkpoint"]
    )
    shards = by_target[
        "W7 two shards' client CPU a checkpoint ≤ 1.1x one shard's (`migrate --apply`)"
    ]
    assert "** (3.00x)" in shards and "ran together" in shards
    prune = by_target[
        "W7 two shards' client CPU a thread ≤ 1.1x one shard's (`prune --keep-last 1 --apply`)"
    ]
    assert "a thread together against" in prune
    assert "{" not in page.replace("{t}", "")  # every placeholder filled


def test_the_report_leaves_out_what_the_run_lacks() -> None:
    doc = copy.deepcopy(LATEST)
    for w in ("2", "5", "6a", "6b", "7", "8"):
        doc["results"].pop(w, None)
    page = _page(doc)
    assert "## Workload 1: seed chat, 30 turns" in page and "## Workload 3:" in page
    assert "## Workload 2" not in page and "## Workload 6" not in page
    assert "W6 " not in page and "separate run" not in page
    assert "Workload 7" not in page and "W7 " not in page
    assert "Workload 8" not in page and "W8 " not in page


def test_workload_7_without_its_migration_keeps_the_rest() -> None:
    doc = copy.deepcopy(LATEST)
    doc["results"]["7"][OURS]["migrate"] = {"error": "RuntimeError: PostgreSQL did not start"}
    page = _page(doc)
    assert "## Workload 7" in page and "W7 `verify`" in page
    assert "`migrate --from postgres --apply`" not in page and "W7 `migrate" not in page
    assert "| 7 (migrate) | objstore-saver (S3) | RuntimeError: PostgreSQL did not start |" in page


def test_every_block_of_the_template_is_used() -> None:
    template = Template.load()
    used: set[str] = set()
    fill = template.fill

    def recording(name: str, **figures: Any) -> str:
        used.add(name)
        return fill(name, **figures)

    template.fill = recording  # type: ignore[method-assign]
    _page(LATEST, template)
    other = _miss_every_target(LATEST)
    other["machine"]["s3_server"] = "moto 5.2.5"
    other["reruns"] = [
        {"workloads": ["6a"], "generated_at": "then", "elapsed_s": 60.0, "reason": "a reason"}
    ]
    other["results"]["1"][OURS]["durability"] = {
        mode: {
            "turns": 10,
            "requests_per_turn": {"PutObject": puts, "ListObjectsV2": 1.0},
            "bytes_sent_per_turn": 3000.0,
            "bytes_received_per_turn": 800.0,
        }
        for mode, puts in (("sync", 5.0), ("async", 5.0), ("exit", 2.0))
    }
    r5 = other["results"]["5"][OURS]
    r5["storage_identical_to_before_thread"] = False
    r5["neighbours_unchanged"] = False
    r5["verify"]["ok"] = False
    other["results"]["8"] = {OURS: copy.deepcopy(W8)}
    other["results"]["8"][OURS]["clear"] = _reader(2112, errors=1, turns=30, checkpoints=90)
    _page(other, template)
    assert used == set(template.blocks)


def test_workload_8_reports_its_probes_failovers_and_targets() -> None:
    doc = copy.deepcopy(LATEST)
    doc["results"]["8"] = {OURS: copy.deepcopy(W8)}
    page = _page(doc)
    assert "## Workload 8: a replicated bucket (30 turns, 90 checkpoints)" in page
    assert "| replicator, in clear | 2,112 | 0 | 0 | 3 | 2,072 | 0.25 | 3 | 12.5 |" in page
    assert "| encrypted | 42 | 0 | yes | yes | 0 |" in page
    assert "over an agent (10 turns, 120 root checkpoints,\n80 more in 10 subgraph" in page
    assert "| `get_state(subgraphs=True)`, encrypted | 704 | 0 | 0 | 3 | 664 |" in page
    met = [line for line in page.splitlines() if line.startswith("| W8") and "| met |" in line]
    assert len(met) == 7, met
    doc["results"]["8"][OURS]["failover"]["lost"] = 2
    doc["results"]["8"][OURS]["encrypted"] = _reader(1500, turns=30, checkpoints=90)
    page = _page(doc)
    assert (
        "- **W8 failover and heal, in clear: 0 checkpoints lost: not met** (2 lost of 42)" in page
    )
    assert "over ≥ 2,000 probes: not met** (0 errors, 0 wrong, 1,500 probes)" in page
    doc["results"]["8"][OURS]["agent"]["clear"]["state"] = _reader(704, errors=1)
    page = _page(doc)
    assert (
        "parallel writes), in clear: 0 errors and 0 wrong answers over ≥ 2,000 probes: not met** "
        "(1 errors, 0 wrong, 2,112 probes)" in page
    )
    assert "The first error: MissingObjectError: gone." in page
    del doc["results"]["8"][OURS]["agent"]
    assert "over an agent" not in _page(doc)


def test_a_template_names_each_block_once() -> None:
    with pytest.raises(ValueError, match="twice"):
        Template("<!-- block: a -->\nx\n<!-- block: a -->\ny\n")
    t = Template("preamble\n<!-- block: a -->\n\nA {n:.1f}\n\n<!-- block: b -->\nB\n")
    assert t.fill("a", n=2) == "A 2.0" and t.fill("b") == "B"


def test_the_costs_price_each_s3_saver_and_each_durability_mode() -> None:
    doc = copy.deepcopy(LATEST)
    doc["results"]["1"][OURS]["durability"] = {
        "exit": {
            "turns": 10,
            "requests_per_turn": {"PutObject": 2.0, "ListObjectsV2": 1.0, "GetObject": 0.5},
            "bytes_sent_per_turn": 3000.0,
            "bytes_received_per_turn": 800.0,
        }
    }
    page = _page(doc)
    costs = page.split("## What a turn costs")[1].split("\n## ")[0]
    # 3 class A and 0.5 class B a turn: $15.20 per million turns at S3 Standard.
    assert (
        "| objstore-saver (S3) | `exit` | 3 | 0.5 | GetObject 0.50, ListObjectsV2 1.00, "
        "PutObject 2.00 | 15.20 |" in costs
    )
    # Savers without object storage have no S3 bill to price.
    assert "PostgresSaver" not in costs and "InMemorySaver" not in costs
    assert "| objstore-saver (S3) | 1 seed chat |" in costs


def test_no_history_in_the_generated_page() -> None:
    assert not re.search(r"\b([Ss]ession|[Ii]ssue) [0-9]+\b", _page(_miss_every_target(LATEST)))


def test_a_cold_resume_of_the_long_thread_is_reported_with_its_requests() -> None:
    doc = copy.deepcopy(LATEST)
    doc["results"]["2"][OURS].pop("cold_resume", None)
    assert "W2 cold resume" not in _page(doc)  # a run that did not measure it
    doc["results"]["2"][OURS]["cold_resume"] = {
        "requests": {"GetObject": 5, "ListObjectsV2": 1},
        "total_requests": 6,
        "bytes_received": 40 * 1024,
        "wall_s": 0.09,
    }
    row = next(line for line in _page(doc).splitlines() if "W2 cold resume" in line)
    assert "6 requests (GetObject 5, ListObjectsV2 1), 40 KiB read, 90 ms" in row


def test_verify_requests_are_split_into_the_threads_checkpoints_writes_and_store_records() -> None:
    doc = copy.deepcopy(LATEST)
    verify = doc["results"]["7"][OURS]["jobs"]["verify"]
    n = verify["threads"]
    verify["requests_per_thread"] = {"GetObject": 7.0, "ListObjectsV2": 0.034}
    verify["read"] = {
        "manifests": 3 * n,
        "writes": 2 * n,
        "objects": 0,
        "store_items": n,
        "store_index_objects": n,
    }
    rows = {line.split(" | ")[0]: line for line in _page(doc).splitlines() if "W7 `verify`" in line}
    assert rows["| W7 `verify` reads no content object"].startswith(
        "| W7 `verify` reads no content object | met | 0 read |"
    )
    checkpoints = rows["| W7 `verify` ≤ 3.1 requests a thread for its checkpoints"]
    assert "| met | 3.03 (LIST 0.034, GET of manifests 3.0) |" in checkpoints
    assert "pending writes: GET 2.0" in checkpoints and "records: GET 2.0 a thread" in checkpoints
