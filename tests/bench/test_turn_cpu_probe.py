"""bench/probes/turn_cpu.py: CPU and requests of a chat turn, and a before/after of two trees."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.probes import attached_round, turn_cpu

ROOT = Path(turn_cpu.__file__).resolve().parents[2]


def _probe(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "bench.probes.turn_cpu", "--turns", "2", "--warmup", "1", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_variant_reports_a_turns_cpu_and_its_six_requests(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    _probe("--json", str(out))
    results = json.loads(out.read_text())
    assert set(results) == set(turn_cpu.VARIANTS)
    for row in results.values():
        assert row["requests_per_turn"] == 6.0  # 5 PUT + 1 LIST, in clear and sealed
        assert row["cpu_ms_per_turn"] > 0
        # LangGraph's calls and the package's: the package's are a share of all.
        assert 0 < row["package_calls_per_turn"] < row["python_calls_per_turn"]


def test_compare_prints_each_trees_median_and_their_ratio() -> None:
    table = _probe("--compare", str(ROOT), "--rounds", "1")
    rows = [line for line in table.splitlines() if line.startswith("| sync | requests")]
    assert rows == ["| sync | requests_per_turn | 6.000 | 6.000 | 1.000 |"]
    for field in turn_cpu.FIELDS:
        assert table.count(f"| {field} |") == len(turn_cpu.VARIANTS)


def test_a_round_refuses_a_package_from_another_tree_than_its_own(tmp_path: Path) -> None:
    # This process imported the package from this checkout: a round meant to
    # measure tmp_path's must not measure it instead.
    args = argparse.Namespace(package_from=str(tmp_path), attach=None)
    with pytest.raises(SystemExit, match=f"not {tmp_path}"):
        attached_round(args)
    assert attached_round(argparse.Namespace(package_from=str(ROOT), attach=None)) is None
