"""Workload 7's child processes: one shard of a job, or one job's peak memory.

``python -m bench.workloads.ops_child shard JOB K/N URL [POSTGRES]`` imports
everything, prints ``ready``, waits for a line on its standard input, runs
``JOB`` (``prune`` or ``migrate``) on shard K/N of the store at ``URL`` and
prints one JSON line: the job's ``run`` block, the threads it handled (a
prune's thread ids, a migration's counts), its start and end
(``time.time()``, so the parent can tell when the shards ran together) and
the process's CPU seconds. The parent starts every shard, waits for each to
be ready, then lets them all go at once.

``python -m bench.workloads.ops_child memory JOB URL`` runs ``JOB``
(``verify``, ``threads``, or ``list``: the store's own listing of every
thread's keys, page by page, as the jobs' scan reads it, with no job) on the
whole store and prints the process's
resident set before the job and its peak after it, in KiB: ``VmRSS`` and
``VmHWM`` of ``/proc/self/status``. (``getrusage``'s ``ru_maxrss`` would do on
its own, but a child's starts at its parent's peak: the benchmark process's.)
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

from objstore_saver import ops
from objstore_saver.format import keys
from objstore_saver.ops import OpsConfig, Shard
from objstore_saver.ops.sharding import ALL
from objstore_saver.storage.urls import store_from_url

#: ``prune --keep-last 1`` with no minimum age: the seeded checkpoints are seconds old.
PRUNE = {"keep_last": 1, "min_age": 0.0}


async def _list_threads(url: str) -> int:
    """List every key under ``threads/`` a page at a time; the threads seen."""
    store = store_from_url(url)
    threads, last, after = 0, "", None
    while True:
        page = await store.alist(keys.THREADS, start_after=after)
        for info in page.objects:
            pfx = info.key[: info.key.index("/", len(keys.THREADS)) + 1]
            threads, last = threads + (pfx != last), pfx
        if not page.truncated or not page.objects:
            return threads
        after = page.objects[-1].key


def run_job(job: str, config: OpsConfig, shard: Shard = ALL) -> dict[str, Any]:
    """Run one of the jobs the workload spawns, with its defaults (``concurrency`` 64)."""
    if job == "list":
        count = asyncio.run(_list_threads(config.require_url()))
        return {"run": {"threads_done": count}}
    if job == "prune":
        return ops.prune(**PRUNE, apply=True, config=config, shard=shard)
    if job == "migrate":
        return ops.migrate("postgres", config=config, apply=True, shard=shard)
    if job == "verify":
        return ops.verify(config=config, shard=shard)
    if job == "threads":
        return ops.threads(config, shard=shard)
    raise ValueError(f"unknown job {job!r}")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def shard_main(job: str, shard: str, url: str, postgres: str | None) -> None:
    """One shard of ``job``, started when the parent says so."""
    config = OpsConfig(url=url, postgres_url=postgres)
    print("ready", flush=True)
    if not sys.stdin.readline():
        return  # the parent gave up before the start: run nothing
    cpu0, start = _cpu_s(), time.time()
    report = run_job(job, config, Shard.parse(shard))
    end = time.time()
    out = {"run": report["run"], "start": start, "end": end, "cpu_s": _cpu_s() - cpu0}
    if job == "migrate":
        out["checkpoints"] = report["checkpoints"]
        out["threads"] = report["threads"]
    else:
        out["totals"] = report["totals"]
        out["thread_ids"] = [row["thread_id"] for row in report["threads"]]
    print(json.dumps(out), flush=True)


def memory_kib() -> dict[str, int]:
    """``VmRSS`` (resident now) and ``VmHWM`` (peak resident) of this process, in KiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                out[name] = int(value.split()[0])
    return out


def memory_main(job: str, url: str) -> None:
    """Resident set before ``job`` on the whole store, and the peak after it."""
    before = memory_kib()
    t0 = time.perf_counter()
    report = run_job(job, OpsConfig(url=url))
    seconds = time.perf_counter() - t0
    after = memory_kib()
    out = {
        "threads": report["run"]["threads_done"],
        "rss_before_kib": before["VmRSS"],
        "peak_before_kib": before["VmHWM"],
        "peak_kib": after["VmHWM"],
        "seconds": seconds,
    }
    print(json.dumps(out), flush=True)


def main(argv: list[str]) -> None:
    """``shard JOB K/N URL [POSTGRES]`` or ``memory JOB URL``."""
    if argv[0] == "shard":
        shard_main(argv[1], argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    elif argv[0] == "memory":
        memory_main(argv[1], argv[2])
    else:
        raise SystemExit(f"unknown mode {argv[0]!r}: shard or memory")


if __name__ == "__main__":
    main(sys.argv[1:])
