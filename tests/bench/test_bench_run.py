"""The workload registry and how ``python -m bench`` runs it: rows, errors and times."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bench import run
from bench.workloads.registry import BY_ID, IDS, WORKLOADS, Workload


def test_registry_declares_each_workload_once_with_one_runner() -> None:
    assert IDS == ("1", "1b", "2", "3", "4", "6a", "6b", "7", "8")
    assert len({w.id for w in WORKLOADS}) == len(WORKLOADS)
    for w in WORKLOADS:
        assert (w.each_saver is None) != (w.all_savers is None), w.id
        assert w.title and w.measures, w.id
    assert [w.id for w in WORKLOADS if w.all_savers] == ["6a", "6b"]
    assert BY_ID["2"].sections == ("2", "5")
    assert BY_ID["3"].prepare is not None
    assert BY_ID["7"].savers == ("objstore-s3",) and BY_ID["7"].each_saver is not None
    assert BY_ID["8"].savers == ("objstore-s3",) and BY_ID["8"].each_saver is not None
    with pytest.raises(ValueError, match="exactly one"):
        Workload("x", "t", "m")


def test_a_workload_runs_on_the_savers_it_names() -> None:
    specs = [SimpleNamespace(name=n, workloads=()) for n in ("a", "b", "c")]
    every = Workload("x", "t", "m", all_savers=lambda specs, env, sizes: {})
    some = Workload("y", "t", "m", all_savers=lambda specs, env, sizes: {}, savers=("c", "a"))
    assert every.runs_on(specs) == specs  # type: ignore[arg-type]
    assert [s.name for s in some.runs_on(specs)] == ["a", "c"]  # type: ignore[arg-type]
    # A saver that names its workloads runs in those alone.
    only_y = SimpleNamespace(name="c", workloads=("y",))
    assert every.runs_on([*specs[:2], only_y]) == specs[:2]  # type: ignore[list-item]
    assert some.runs_on([*specs[:2], only_y]) == [specs[0], only_y]  # type: ignore[list-item]


def _runner(spec: Any, env: Any, sizes: Any, prepared: Any) -> dict[str, Any]:
    if spec.name == "bad":
        raise RuntimeError("boom\nsecond line")
    return {"saver": spec.name, "prepared": prepared}


def test_each_saver_rows_errors_and_times() -> None:
    specs = [SimpleNamespace(name=n) for n in ("good", "bad", "postgres")]
    results: dict[str, dict[str, Any]] = {"x": {}}
    log: list[str] = []
    w = Workload("x", "t", "m", each_saver=_runner)
    pg_down = ConnectionError("no PostgreSQL")
    run._run_each_saver(w, specs, None, None, "made", results, pg_down, log.append)  # type: ignore[arg-type]
    good = results["x"]["good"]
    assert good["saver"] == "good" and good["prepared"] == "made" and good["run_s"] >= 0
    assert results["x"]["bad"] == {"error": "RuntimeError: boom"}  # one line, no time
    assert results["x"]["postgres"] == {"error": "ConnectionError: no PostgreSQL"}
    assert [line.split()[2] for line in log] == ["good", "bad", "postgres"]
    assert log[1].endswith("RuntimeError: boom") and log[0].endswith(" ok")


def test_a_workload_with_further_sections_files_each_row() -> None:
    def both(spec: Any, env: Any, sizes: Any, prepared: Any) -> dict[str, Any]:
        if spec.name == "bad":
            raise RuntimeError("boom")
        return {"y": {"own": spec.name}, "z": {"other": spec.name}}

    specs = [SimpleNamespace(name=n) for n in ("good", "bad")]
    results: dict[str, dict[str, Any]] = {"y": {}, "z": {}}
    w = Workload("y", "t", "m", each_saver=both, also=("z",))
    run._run_each_saver(w, specs, None, None, None, results, None, lambda m: None)  # type: ignore[arg-type]
    assert results["y"]["good"]["own"] == "good" and "run_s" in results["y"]["good"]
    assert results["z"]["good"] == {"other": "good"}
    # A failed saver gets the error in both sections; its own row keeps its time.
    assert results["y"]["bad"]["error"] == "RuntimeError: boom" and "run_s" in results["y"]["bad"]
    assert results["z"]["bad"] == {"error": "RuntimeError: boom"}


def test_all_savers_at_once_and_postgres_down() -> None:
    seen: list[list[str]] = []

    def together(specs: Any, env: Any, sizes: Any) -> dict[str, dict[str, Any]]:
        seen.append([s.name for s in specs])
        return {s.name: {"ran": True} for s in specs}

    specs = [SimpleNamespace(name=n) for n in ("postgres", "a")]
    out: dict[str, Any] = {}
    log: list[str] = []
    w = Workload("6z", "t", "m", all_savers=together)
    run._run_all_savers(w, specs, None, None, out, OSError("down"), log.append)  # type: ignore[arg-type]
    assert seen == [["a"]]
    assert out == {"postgres": {"error": "OSError: down"}, "a": {"ran": True}}
    assert list(out) == ["postgres", "a"]
    assert log[0].startswith("workload 6z 1 savers interleaved") and "postgres failed" in log[0]


def test_unknown_workload_is_refused_with_the_known_ids(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run.main(["--workloads", "1,9", "--report-only"])
    assert "unknown workload(s) ['9']; known: ['1', '1b', '2', '3', '4', '6a', '6b', '7', '8']" in (
        capsys.readouterr().err
    )
