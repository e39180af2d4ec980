"""Python function calls per thread of ``prune --keep-last 1`` (dry run) and ``verify``.

``python -m bench.probes.job_calls [--threads 1000] [--rounds 3]`` seeds workload 7's
threads (one chat turn each: 3 checkpoints and 2 calls of pending writes,
:func:`bench.workloads.ops_seed.seed_directory`) in a local directory, then runs
each job once to warm up and once under :mod:`cProfile`, and prints the calls it
made per thread: a count that does not move with the machine's load, unlike the
process CPU per thread printed beside it (the median of ``--rounds`` unprofiled
runs). For a before/after, run this file with the other tree first on the path:
``PYTHONPATH=/tmp/before python bench/probes/job_calls.py`` measures that tree's
package with this probe (its ``bench.workloads.ops_seed`` seeds the threads).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.workloads import ops_seed
from objstore_saver import ops
from objstore_saver.ops import OpsConfig


def _jobs(config: OpsConfig) -> dict[str, Callable[[], dict[str, Any]]]:
    return {
        "prune --keep-last 1 (dry run)": lambda: ops.prune(
            keep_last=1, min_age=0.0, apply=False, config=config
        ),
        "verify": lambda: ops.verify(config=config),
    }


def measure(threads: int, rounds: int) -> dict[str, Any]:
    """Calls and CPU per thread of each job on ``threads`` seeded threads."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="job-calls-") as root:
        ids = ops_seed.thread_ids(threads, "job-calls")
        ops_seed.seed_directory(root, ops_seed.chat_calls(3), ids)
        for name, job in _jobs(OpsConfig(url=f"file://{root}")).items():
            report = job()  # warm: imports, pools
            done = report["run"]["threads_done"]
            if done != threads:
                raise SystemExit(f"{name}: handled {done} of {threads} threads")
            profile = cProfile.Profile()
            profile.runcall(job)
            calls = pstats.Stats(profile).total_calls
            cpus = []
            for _ in range(rounds):
                cpu = time.process_time()
                job()
                cpus.append(time.process_time() - cpu)
            out[name] = {
                "calls_per_thread": round(calls / threads, 1),
                "cpu_ms_per_thread": round(statistics.median(cpus) * 1000 / threads, 3),
            }
    return out


def main() -> None:
    """Command-line entry point: prints one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure(args.threads, args.rounds), indent=1))


if __name__ == "__main__":
    main()
