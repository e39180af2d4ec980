"""The probes' busy cores: spinners at the lowest priority, gone when the block ends."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from bench.probes import busy_cores, cpu_wait, idle_gap


def _cpu_ticks(pid: int) -> int:
    """User and system clock ticks a process has used (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_busy_cores_spin_at_nice_19_and_end_with_the_block() -> None:
    with busy_cores(2) as spinners:
        assert len(spinners) == 2
        deadline = time.monotonic() + 30
        # Each spinner lowers its own priority first, then burns CPU.
        while time.monotonic() < deadline and not all(
            os.getpriority(os.PRIO_PROCESS, p.pid) == 19 and _cpu_ticks(p.pid) > 0 for p in spinners
        ):
            time.sleep(0.05)
        for proc in spinners:
            assert proc.poll() is None
            assert os.getpriority(os.PRIO_PROCESS, proc.pid) == 19
            assert _cpu_ticks(proc.pid) > 0
    assert all(proc.returncode is not None for proc in spinners)


def test_no_busy_core_starts_nothing() -> None:
    with busy_cores(0) as spinners:
        assert spinners == []


@pytest.mark.parametrize("probe", [cpu_wait, idle_gap], ids=["cpu_wait", "idle_gap"])
@pytest.mark.parametrize("count", ["-1", str((os.cpu_count() or 1) + 1), "two"])
def test_busy_cores_beyond_the_machine_are_refused_naming_the_flag(
    probe: Any, count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        probe.main(["--busy-cores", count])
    assert exc.value.code == 2
    assert "--busy-cores" in capsys.readouterr().err


def test_the_table_says_how_many_cores_were_kept_busy() -> None:
    row = {
        "cpu_ms_per_turn": 8.0,
        "user_ms_per_turn": 7.0,
        "system_ms_per_turn": 1.0,
        "saver_calls_ms_per_turn": 4.0,
        "involuntary_switches_per_turn": 50.0,
    }
    report = {
        "turns": 30,
        "threads": 8,
        "s3_server": "seaweedfs",
        "busy_cores": 2,
        "postgres": row,
        "objstore_s3": [
            {
                "delay_ms": 20.0,
                **row,
                "cpu_ratio_to_postgres": 1.0,
                "cpu_ratio_to_postgres_same_trip": 1.0,
            }
        ],
        "postgres_same_trip": [{"delay_ms": 20.0, **row}],
    }
    assert "2 cores kept busy at nice 19" in cpu_wait.render(report)
    assert "kept busy" not in cpu_wait.render({**report, "busy_cores": 0})
