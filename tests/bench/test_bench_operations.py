"""Workload 7 (operator jobs at scale): its seed data, its child processes, one small run.

The run goes through the benchmark's metering proxy to the tests' moto
server, with PostgreSQL when it can start (else the row says why the
migration is missing), at a few threads: counts and the row's shape, no rates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from repo_root import ROOT

from bench.report.operations import duration
from bench.savers import Env
from bench.workloads import operations, ops_seed
from bench.workloads.sizes import FULL, QUICK
from objstore_saver import ops


def test_the_seed_is_a_chat_graph_turn_and_the_source_ten_checkpoints() -> None:
    turn = ops_seed.chat_calls(3)
    assert [c.kind for c in turn] == ["put", "writes", "put", "writes", "put"]
    source = ops_seed.chat_calls(10)
    assert sum(c.kind == "put" for c in source) == 10
    assert source[-1].kind == "writes"  # the writes made on the last checkpoint kept
    last_put = None
    for c in source:
        if c.kind == "put":
            last_put = c.args[0]["id"]
        else:  # pending writes belong to the checkpoint just put
            assert c.configurable["checkpoint_id"] == last_put
    cfg = turn[2].config("t-1")["configurable"]
    assert cfg["thread_id"] == "t-1" and cfg["checkpoint_id"] and "__pregel_runtime" not in cfg


def test_thread_ids_are_stable_distinct_uuids() -> None:
    ids = ops_seed.thread_ids(50)
    assert ids == ops_seed.thread_ids(50) and len(set(ids)) == 50
    assert set(ids).isdisjoint(ops_seed.thread_ids(50, "pg"))
    assert all(len(t) == 36 and t.count("-") == 4 for t in ids)


def test_sizes_follow_the_run_mode() -> None:
    assert operations.ops_sizes(FULL) == operations.OPS_FULL
    assert operations.ops_sizes(QUICK) == operations.OPS_QUICK
    assert operations.OPS_QUICK.threads < operations.OPS_FULL.threads
    assert duration(45) == "45 s" and duration(1020) == "17 min" and duration(9000) == "2.5 h"


def test_cloned_threads_verify_and_the_memory_child_reads_them(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    ops_seed.seed_directory(root, ops_seed.chat_calls(3), ops_seed.thread_ids(5, "mem"))
    url = f"file://{root}"
    report = ops.verify(config=ops.OpsConfig(url=url))
    assert report["ok"], report["problems"][:3]
    assert report["threads"] == 5 and report["manifests"] == 15 and report["writes"] == 10
    listed = ops.threads(ops.OpsConfig(url=url))
    assert sorted(r["thread_id"] for r in listed["threads"]) == sorted(
        ops_seed.thread_ids(5, "mem")
    )
    for job in operations.MEMORY_JOBS:
        done = subprocess.run(
            [*operations.CHILD, "memory", job, url],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        got = json.loads(done.stdout.splitlines()[-1])
        assert got["threads"] == 5, job
        assert got["peak_kib"] >= got["rss_before_kib"] > 0


@pytest.fixture
def pg_env(env: Env) -> Iterator[Env]:
    """:func:`env` (the metering proxy) with a PostgreSQL server, if one can start here."""
    try:
        from bench.postgres import PostgresServer

        env.postgres = PostgresServer()
    except Exception:  # noqa: BLE001 -- the row then carries the migration's error
        env.postgres = None
    try:
        yield env
    finally:
        if env.postgres is not None:
            env.postgres.stop()


def test_a_small_run_fills_every_part_of_the_row(pg_env: Env) -> None:
    env = pg_env
    sizes = operations.OpsSizes(
        threads=6,
        migrate_threads=3,
        memory_factor=2,
        store_namespaces=3,
        store_items=4,
        store_expired=1,
    )
    row = operations.measure_operations(env, sizes, delay_ms=0.0)
    jobs = row["jobs"]
    assert list(jobs) == [
        "threads",
        "verify",
        "verify_no_delay",
        "du",
        "store_sweep",
        "prune_dry_run",
        "prune_apply",
        "delete_threads",
    ]
    for name, job in jobs.items():
        # store-sweep's rows are the long-term store's items: 3 namespaces of 4
        assert job["threads"] == (12 if name == "store_sweep" else 6), name
        assert job["projected_s"] == pytest.approx(1e6 / job["threads_per_second"])
    # Every object of a thread is read once: 3 manifests, 2 write objects, its values.
    assert jobs["verify"]["requests_per_thread"]["GetObject"] == pytest.approx(
        row["keys_per_thread"]
    )
    assert jobs["prune_apply"]["totals"]["checkpoints_deleted"] == 12
    # The threads in flight share DeleteObjects (spec §6.12): at least one, at
    # most the three a thread sends alone.
    assert 1 <= jobs["delete_threads"]["requests"]["DeleteObjects"] <= 3 * 6
    two = row["two_prune"]
    assert two["threads"] == 6 and len(two["shards"]) == 2
    assert two["exactly_once"] == {"ok": True, "figure": "6 of 6 threads, 0 twice"}
    assert jobs["verify"]["depth"] == "default"
    assert sum(s["totals"]["checkpoints_deleted"] for s in two["shards"]) == 12
    mem = row["memory"]["jobs"]
    assert set(mem) == set(operations.MEMORY_JOBS)
    assert all(set(by) == {"6", "12"} for by in mem.values())
    migrate = row["migrate"]
    if env.postgres is None:
        assert "error" in migrate
        return
    one, pair = migrate["one"], migrate["two"]
    assert one["checkpoints"] == 30 and one["threads"] == 3
    assert one["writes"] == 3 * sum(
        len(c.args[0]) for c in ops_seed.chat_calls(10) if c.kind == "writes"
    )
    assert pair["checkpoints"] == 30 and pair["threads"] == 3
    assert sum(s["run"]["threads_skipped_other_shards"] for s in pair["shards"]) == 3
    assert pair["exactly_once"] == {"ok": True, "figure": "3 of 3 threads, 0 found present"}
    assert one["projected_s"] == pytest.approx(3e6 / one["checkpoints_per_second"])


def test_a_failing_shard_is_an_error_not_a_hang(env: Env) -> None:
    probe = operations.Probe(env, 0.0)
    missing = f"s3://no-such-bucket-here/?endpoint_url={env.proxy_url}"
    with pytest.raises(RuntimeError, match="shard of prune failed"):
        operations.two_shards(probe, "prune", missing, 1)


def test_exactly_once_finds_a_thread_handled_twice_or_missed() -> None:
    def pruned(*ids: str) -> dict[str, Any]:
        return {"thread_ids": list(ids)}

    assert operations.exactly_once("prune", [pruned("a", "b"), pruned("c")], 3)["ok"]
    twice = operations.exactly_once("prune", [pruned("a", "b"), pruned("b", "c")], 3)
    assert twice == {"ok": False, "figure": "3 of 3 threads, 1 twice"}
    assert not operations.exactly_once("prune", [pruned("a"), pruned("c")], 3)["ok"]

    def migrated(done: int, present: int) -> dict[str, Any]:
        return {"threads": {"done": done}, "checkpoints": {"present": present}}

    assert operations.exactly_once("migrate", [migrated(2, 0), migrated(1, 0)], 3)["ok"]
    assert not operations.exactly_once("migrate", [migrated(2, 0), migrated(1, 4)], 3)["ok"]
    assert not operations.exactly_once("migrate", [migrated(2, 0), migrated(2, 0)], 3)["ok"]


def test_the_child_refuses_an_unknown_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.workloads.ops_child", "sideways"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode != 0 and "shard or memory" in done.stderr
