"""Workload 7: the operator jobs at production scale (``objstore_saver.ops``), on S3.

A bucket of many small threads (one chat turn each: 3 checkpoints, 2 calls
of pending writes), seeded with no injected round trip, then each job run
in this process through the jobs API with its defaults (``concurrency`` 64)
and the proxy's round trip: ``threads``, ``verify`` (then again with no
round trip, a control: what the server and this process allow when waiting
costs nothing), ``du``, ``prune --keep-last 1`` as a dry run and applied,
then ``delete_threads`` of every thread (the pruned ones). Each job's row:
threads per second, requests per thread by operation, this process's CPU,
the S3 server's own time per request, the requests in flight and the CPU of
the server's processes, and its duration projected to 1,000,000 threads at
the measured rate.

Then ``migrate --apply`` from a real PostgreSQL (threads of 10 checkpoints
written by LangGraph's ``PostgresSaver``) into a new bucket, in checkpoints
per second, projected to 3,000,000 checkpoints; two shards in two processes
let go at once against one shard, for the applied prune and the migration,
each on a fresh copy of the data; and the peak memory of ``verify`` and
``threads`` in a child process at N and at 10 x N threads, with the store's
listing alone as a control, on a local directory store (seeding 10 x N
threads on the S3 server would take longer than the whole workload).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.meters import ProxyMeter, Reading, set_proxy_delay
from bench.savers import REGION, Env, SaverSpec
from bench.workloads import ops_seed
from bench.workloads.common import Delay, describe, settle, task_children
from bench.workloads.ops_child import PRUNE
from bench.workloads.sizes import QUICK, Sizes
from objstore_saver import ops
from objstore_saver.ops import OpsConfig
from objstore_saver.ops.fanout import DEFAULT_CONCURRENCY

ROOT = Path(__file__).resolve().parents[2]
#: The command of a child process (:mod:`bench.workloads.ops_child`), run in ``ROOT``.
CHILD = (sys.executable, "-m", "bench.workloads.ops_child")

#: The memory measurement's runs: two jobs, and the store's listing alone (a control).
MEMORY_JOBS = ("verify", "threads", "list")
#: What ``verify``'s report counts as read (content objects: ``objects``), kept with its figures.
VERIFY_READS = ("manifests", "writes", "objects", "store_items", "store_index_objects")
#: The scale the projections are for.
PROJECTED_THREADS = 1_000_000
PROJECTED_CHECKPOINTS = 3_000_000


@dataclass(frozen=True)
class OpsSizes:
    """Counts of workload 7."""

    threads: int
    """N: threads of the bucket the jobs run on."""
    migrate_threads: int
    """Threads of the PostgreSQL database ``migrate`` reads."""
    checkpoints: int = 3
    """Checkpoints per thread of the bucket (one chat turn)."""
    migrate_checkpoints: int = 10
    """Checkpoints per thread of the database."""
    memory_factor: int = 10
    """The memory measurement's second size: this many times N threads."""
    store_namespaces: int = 100
    """Long-term store namespaces ``store-sweep`` sweeps."""
    store_items: int = 10
    """Items per namespace, :attr:`store_expired` of them expired."""
    store_expired: int = 2


OPS_FULL = OpsSizes(threads=1000, migrate_threads=500)
OPS_QUICK = OpsSizes(threads=200, migrate_threads=100)


def ops_sizes(sizes: Sizes) -> OpsSizes:
    """Workload 7's counts for a run's sizes (``--quick`` or not)."""
    return OPS_QUICK if sizes.chat_turns == QUICK.chat_turns else OPS_FULL


def store_url(env: Env, bucket: str) -> str:
    """The jobs' URL of a bucket behind the metering proxy."""
    return f"s3://{bucket}/?endpoint_url={env.proxy_url}&region={REGION}"


_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by ``pid``'s process tree, by command name.

    A process's own time and that of its children that exited (PostgreSQL's
    backends end with their connections, before the reading after a job).
    """
    out: dict[str, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            out[name] = out.get(name, 0.0) + ticks / _TICK
            todo += task_children(p)
        except FileNotFoundError:  # the process exited meanwhile
            continue
    return out


def service_pids() -> list[int]:
    """This process's children that serve the benchmark: ``bench.server`` and PostgreSQL."""
    found = []
    for pid in task_children(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except FileNotFoundError:
            continue
        if b"bench.server" in words or any(w.endswith(b"/postgres") for w in words):
            found.append(pid)
    return found


class Probe:
    """Readings around a job: the proxy's counters, this process's CPU, the server's CPU."""

    def __init__(self, env: Env, delay_ms: float) -> None:
        self.meter = ProxyMeter(env.proxy_url)
        self.pids = service_pids()
        self.delay_ms = delay_ms

    def server_cpu(self) -> dict[str, float]:
        """CPU seconds so far of the S3 server (``weed``), the proxy (``python``) and PostgreSQL."""
        out: dict[str, float] = {}
        for pid in self.pids:
            for name, seconds in tree_cpu(pid).items():
                out[name] = out.get(name, 0.0) + seconds
        return out

    def costs(
        self,
        reading: Reading,
        s0: dict[str, float],
        s1: dict[str, float],
        wall: float,
        delay_ms: float | None = None,
    ) -> dict[str, Any]:
        """What the S3 side did in ``wall`` seconds: requests, server time and CPU.

        ``in_flight`` is the mean number of requests inside the proxy (its
        injected round trip or the server's answer), by Little's law: a figure
        near the client's connection cap (64) says the client's pool bounds
        the rate.
        """
        n = max(1, reading.total_requests)
        delay_s = (self.delay_ms if delay_ms is None else delay_ms) / 1000
        return {
            "requests": dict(reading.requests),
            "server_ms_per_request": reading.server_s / n * 1000,
            "in_flight": (reading.total_requests * delay_s + reading.server_s) / wall,
            "server_cpu_s": {k: v - s0.get(k, 0.0) for k, v in s1.items()},
        }

    def measure(
        self, fn: Callable[[], Any], count: Callable[[Any], int], delay_ms: float | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Run ``fn`` (a job); return its report and its row, per ``count(report)`` threads.

        ``delay_ms``: the proxy's round trip meanwhile, when not the probe's.
        """
        settle()
        r0, s0 = self.meter.begin(), self.server_cpu()
        cpu0, t0 = time.process_time(), time.perf_counter()
        report = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        reading, s1 = self.meter.snapshot() - r0, self.server_cpu()
        n = count(report)
        row = self.costs(reading, s0, s1, wall, delay_ms) | {
            "threads": n,
            "seconds": wall,
            "threads_per_second": n / wall,
            "requests_per_thread": {op: k / n for op, k in reading.requests.items()},
            "total_requests_per_thread": reading.total_requests / n,
            "cpu_s": cpu,
            "cpu_ms_per_thread": cpu / n * 1000,
        }
        if isinstance(report, dict) and "run" in report:
            row["run"] = report["run"]
        return report, row


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(f"workload 7: {what}")


def _threads_done(report: dict[str, Any]) -> int:
    return int(report["run"]["threads_done"])


def two_shards(
    probe: Probe, job: str, url: str, expected: int, postgres: str | None = None
) -> dict[str, Any]:
    """``job`` as shards 0/2 and 1/2 in two processes, let go at once; what they did together.

    ``expected``: the threads of the store (or the migration's source).
    """
    procs = [
        subprocess.Popen(
            [*CHILD, "shard", job, f"{k}/2", url, *([postgres] if postgres else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for k in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            _expect(p.stdout.readline().strip() == "ready", f"shard of {job} did not start")
        settle()
        r0, s0 = probe.meter.begin(), probe.server_cpu()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            _expect(bool(line), f"shard of {job} failed (exit status {p.wait()})")
            outs.append(json.loads(line))
        reading, s1 = probe.meter.snapshot() - r0, probe.server_cpu()
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
    seconds = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    done = sum(o["run"]["threads_done"] for o in outs)
    row: dict[str, Any] = probe.costs(reading, s0, s1, seconds) | {
        "threads": done,
        "seconds": seconds,
        "threads_per_second": done / seconds,
        "start_skew_s": abs(outs[0]["start"] - outs[1]["start"]),
        "shards": outs,
        "cpu_s": sum(o["cpu_s"] for o in outs),
    }
    if job == "migrate":
        copied = sum(o["checkpoints"]["copied"] for o in outs)
        row["checkpoints"] = copied
        row["checkpoints_per_second"] = copied / seconds
    row["exactly_once"] = exactly_once(job, outs, expected)
    return row


def exactly_once(job: str, outs: list[dict[str, Any]], expected: int) -> dict[str, Any]:
    """Whether the shards together handled each of the ``expected`` threads exactly once.

    A prune's shards name the threads they handled: none may be named twice,
    and together they name ``expected``. A migration's shards count them: the
    threads done add up to ``expected`` and no checkpoint was already present
    in the new bucket (a thread migrated by both shards would find its
    checkpoints there).
    """
    if job == "migrate":
        done = sum(o["threads"]["done"] for o in outs)
        present = sum(o["checkpoints"]["present"] for o in outs)
        ok = done == expected and present == 0
        return {"ok": ok, "figure": f"{done:,} of {expected:,} threads, {present} found present"}
    names = [t for o in outs for t in o["thread_ids"]]
    twice = len(names) - len(set(names))
    ok = twice == 0 and len(names) == expected
    return {"ok": ok, "figure": f"{len(set(names)):,} of {expected:,} threads, {twice} twice"}


def _bucket_jobs(env: Env, probe: Probe, o: OpsSizes, delay_ms: float) -> dict[str, Any]:
    """Seed two buckets of N threads; every job on the first; the two-shard prune on the second."""
    calls = ops_seed.chat_calls(o.checkpoints)
    ids = ops_seed.thread_ids(o.threads)
    buckets = [env.new_bucket("ops-jobs"), env.new_bucket("ops-shards")]
    t0 = time.perf_counter()
    for bucket in buckets:
        ops_seed.seed_s3(bucket, env.proxy_url, calls, ids)
    ops_seed.seed_store_items(
        buckets[0], env.proxy_url, o.store_namespaces, o.store_items, o.store_expired
    )
    seed_s = time.perf_counter() - t0
    main, shards = (OpsConfig(url=store_url(env, b)) for b in buckets)
    jobs: dict[str, Any] = {}
    n = o.threads
    with Delay(env, delay_ms):
        rep, jobs["threads"] = probe.measure(lambda: ops.threads(main), _threads_done)
        _expect(rep["count"] == n, f"threads found {rep['count']} of {n} threads")
        rep, jobs["verify"] = probe.measure(lambda: ops.verify(config=main), _threads_done)
        _expect(rep["ok"] and rep["manifests"] == n * o.checkpoints, "verify: not ok")
        jobs["verify"]["depth"] = rep["depth"]
        jobs["verify"]["read"] = {k: rep[k] for k in VERIFY_READS}
        # The same verify with no injected round trip: what the server and this
        # process allow when waiting costs nothing.
        set_proxy_delay(env.proxy_url, 0)
        _, jobs["verify_no_delay"] = probe.measure(
            lambda: ops.verify(config=main), _threads_done, delay_ms=0.0
        )
        set_proxy_delay(env.proxy_url, delay_ms)
        rep, jobs["du"] = probe.measure(lambda: ops.du(main), lambda r: len(r["by_thread"]))
        _expect(len(rep["by_thread"]) == n, "du did not count every thread")
        keys = rep["total"]["objects"] / n
        items = o.store_namespaces * o.store_items
        rep, jobs["store_sweep"] = probe.measure(
            lambda: ops.store_sweep(apply=True, config=main), lambda _: items
        )
        expired = o.store_namespaces * o.store_expired
        _expect(rep["totals"]["deleted"] == expired, f"store-sweep: {rep['totals']}")
        jobs["store_sweep"]["unit"] = "item"
        rep, jobs["prune_dry_run"] = probe.measure(
            lambda: ops.prune(**PRUNE, config=main), _threads_done
        )
        rep, jobs["prune_apply"] = probe.measure(
            lambda: ops.prune(**PRUNE, apply=True, config=main), _threads_done
        )
        old = n * (o.checkpoints - 1)
        _expect(rep["totals"].get("checkpoints_deleted") == old, f"prune: {rep['totals']}")
        jobs["prune_apply"]["totals"] = rep["totals"]
        rep, jobs["delete_threads"] = probe.measure(
            lambda: ops.delete_threads(ids, apply=True, config=main), _threads_done
        )
        _expect(all(r["deleted"] for r in rep["threads"]), "delete_threads left a thread")
        two = two_shards(probe, "prune", shards.require_url(), n)
        _expect(two["threads"] == n, f"two shards pruned {two['threads']} of {n} threads")
    return {
        "seed_s": seed_s,
        "seed_buckets": len(buckets),
        "keys_per_thread": keys,
        "jobs": jobs,
        "two_prune": two,
    }


def _migration(env: Env, probe: Probe, o: OpsSizes, delay_ms: float) -> dict[str, Any]:
    """Seed PostgreSQL; migrate it into a new bucket in one shard, then into another in two."""
    if env.postgres is None:
        raise RuntimeError("PostgreSQL did not start")
    calls = ops_seed.chat_calls(o.migrate_checkpoints)
    ids = ops_seed.thread_ids(o.migrate_threads, "pg")
    conninfo = env.postgres.create_database(env.name("ops-migrate"))
    t0 = time.perf_counter()
    ops_seed.seed_postgres(conninfo, calls, ids)
    seed_s = time.perf_counter() - t0
    urls = [store_url(env, env.new_bucket(f"ops-migrate-{k}")) for k in (1, 2)]
    one = OpsConfig(url=urls[0], postgres_url=conninfo)
    total = o.migrate_threads * o.migrate_checkpoints
    writes = sum(len(c.args[0]) for c in calls if c.kind == "writes") * o.migrate_threads
    with Delay(env, delay_ms):
        rep, row = probe.measure(
            lambda: ops.migrate("postgres", config=one, apply=True), _threads_done
        )
        _expect(rep["checkpoints"]["copied"] == total, f"migrate: {rep['checkpoints']}")
        _expect(rep["writes"]["copied"] == writes, f"migrate: {rep['writes']}")
        pair = two_shards(probe, "migrate", urls[1], o.migrate_threads, conninfo)
        _expect(pair["checkpoints"] == total, f"two shards copied {pair['checkpoints']}")
    row |= {
        "checkpoints": total,
        "writes": writes,
        "checkpoints_per_second": total / row["seconds"],
        "requests_per_checkpoint": {op: k / total for op, k in row["requests"].items()},
    }
    return {"seed_s": seed_s, "source_threads": o.migrate_threads, "one": row, "two": pair}


def _scratch(env: Env) -> str:
    """Where the memory measurement's directories go: tmpfs if there is one (fast to fill)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else env.tmp


def _memory(env: Env, o: OpsSizes) -> dict[str, Any]:
    """Peak memory of ``verify`` and ``threads`` at N and at 10 x N threads (local directory)."""
    calls = ops_seed.chat_calls(o.checkpoints)
    where = _scratch(env)
    out: dict[str, Any] = {"store": f"local directory in {where}", "jobs": {}}
    seed_s = 0.0
    for count in (o.threads, o.threads * o.memory_factor):
        with tempfile.TemporaryDirectory(prefix="bench-ops-memory-", dir=where) as root:
            t0 = time.perf_counter()
            ops_seed.seed_directory(root, calls, ops_seed.thread_ids(count, "mem"))
            seed_s += time.perf_counter() - t0
            # One process per run, all at once: only their memory is read.
            procs = {
                job: subprocess.Popen(
                    [*CHILD, "memory", job, f"file://{root}"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                )
                for job in MEMORY_JOBS
            }
            for job, p in procs.items():
                stdout, stderr = p.communicate()
                _expect(p.returncode == 0, f"memory of {job}: {stderr[-400:]}")
                got = json.loads(stdout.splitlines()[-1])
                _expect(got["threads"] == count, f"memory of {job}: {got['threads']} threads")
                out["jobs"].setdefault(job, {})[str(count)] = got
    out["seed_s"] = seed_s
    return out


def run_operations(spec: SaverSpec, env: Env, sizes: Sizes, _: Any = None) -> dict[str, Any]:
    """Workload 7 on objstore-saver on S3 (``spec`` names it; the jobs open their own store)."""
    return measure_operations(env, ops_sizes(sizes), sizes.delay_ms)


def measure_operations(env: Env, o: OpsSizes, delay_ms: float) -> dict[str, Any]:
    """Every measurement of workload 7 at the counts ``o``; the saver's row."""
    probe = Probe(env, delay_ms)
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "sizes": asdict(o),
        "delay_ms": delay_ms,
        "concurrency": DEFAULT_CONCURRENCY,
        "load_average_before": os.getloadavg()[0],
    }
    row |= _bucket_jobs(env, probe, o, delay_ms)
    try:
        row["migrate"] = _migration(env, probe, o, delay_ms)
    except Exception as exc:  # noqa: BLE001 -- the rest of the row stands; the report says why
        row["migrate"] = {"error": describe(exc)}
    row["memory"] = _memory(env, o)
    for job in row["jobs"].values():
        job["projected_s"] = PROJECTED_THREADS / job["threads_per_second"]
    mig = row["migrate"]
    if "one" in mig:
        mig["one"]["projected_s"] = PROJECTED_CHECKPOINTS / mig["one"]["checkpoints_per_second"]
    row["projected_threads"] = PROJECTED_THREADS
    row["projected_checkpoints"] = PROJECTED_CHECKPOINTS
    row["load_average_after"] = os.getloadavg()[0]
    row["workload_s"] = time.perf_counter() - t0
    return row
