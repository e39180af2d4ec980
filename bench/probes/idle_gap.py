"""Does waiting make work dearer? CPU of the same work after idle gaps of growing length.

``python -m bench.probes.idle_gap`` answers two questions on this machine:

1. A fixed piece of pure-Python work (JSON of 300 small dicts, there and back),
   timed with ``time.thread_time()`` after sleeping 0, 1, 5, 20 and 50 ms: when
   a thread resumes after a wait, its caches (and the core's clock) are cold,
   and the same work costs more CPU.
2. objstore-saver's sync chat turn (workload 1's graph, one conversation, 30
   turns after a 5-turn warm-up) through the metering proxy with 0, 20 and 50
   ms injected per request: the saver's process CPU per turn as the waits
   between its requests grow.

``--busy-cores N`` runs both beside ``N`` processes spinning at nice 19
(:func:`bench.probes.busy_cores`), so that no core idles during a gap: what
the gap then still costs is not the idle core's.

Workload 6a compares CPU per turn of savers that wait 20 ms per request (on
S3 or the delayed local directory) with savers that never wait (in memory,
SQLite, PostgreSQL on loopback); this shows how much of a gap is the waiting.
Figures vary between machines and runs: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from bench import graphs
from bench.probes import busy_core_count, busy_cores
from bench.savers import Env, ObjstoreS3
from bench.server import BACKENDS, DEFAULT_BACKEND, ServerProcess
from bench.workloads.common import Delay, cfg

GAPS_MS = (0.0, 1.0, 5.0, 20.0, 50.0)
DELAYS_MS = (0.0, 20.0, 50.0)


def work_after_gaps(repeats: int = 200) -> dict[float, float]:
    """Median CPU microseconds of the fixed work after each idle gap (milliseconds)."""
    data = [{"k": i, "v": "x" * 50} for i in range(300)]
    out: dict[float, float] = {}
    for gap in GAPS_MS:
        samples = []
        for _ in range(repeats):
            if gap:
                time.sleep(gap / 1000)
            c0 = time.thread_time()
            json.loads(json.dumps(data))
            samples.append(time.thread_time() - c0)
        out[gap] = statistics.median(samples) * 1e6
    return out


def turn_cpu_by_delay(s3_server: str, turns: int = 30) -> dict[float, float]:
    """objstore-saver's process CPU milliseconds per sync chat turn, by injected delay."""
    out: dict[float, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-gap-") as tmp,
        ServerProcess(0.0, s3_server) as server,
    ):
        env = Env(server.proxy_url, server.s3_url, tmp, None, keys=server.keys)
        for delay in DELAYS_MS:
            with ObjstoreS3().open_sync(env) as handle:
                graph = graphs.chat_graph(handle.saver, graphs.SEED)
                for t in range(5):
                    graph.invoke({"messages": graphs.SEED.inputs(t)}, cfg("gap"))
                with Delay(env, delay):
                    c0 = time.process_time()
                    for t in range(5, 5 + turns):
                        graph.invoke({"messages": graphs.SEED.inputs(t)}, cfg("gap"))
                    out[delay] = (time.process_time() - c0) / turns * 1000
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.probes.idle_gap", description=__doc__)
    parser.add_argument("--s3-server", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    parser.add_argument("--turns", type=int, default=30, help="measured turns per delay")
    parser.add_argument(
        "--busy-cores",
        type=busy_core_count,
        default=0,
        help="processes spinning at nice 19 meanwhile, so that no core idles (0: none)",
    )
    args = parser.parse_args(argv)
    if args.turns < 1:
        parser.error(f"--turns must be at least 1, not {args.turns}")
    with busy_cores(args.busy_cores):
        work = work_after_gaps()
        print(
            "fixed work, CPU us after an idle gap: "
            + ", ".join(f"{gap:g} ms: {us:.0f}" for gap, us in work.items())
        )
        turns = turn_cpu_by_delay(args.s3_server, args.turns)
    print(
        "objstore-saver chat turn, process CPU ms by injected delay: "
        + ", ".join(f"{delay:g} ms: {ms:.2f}" for delay, ms in turns.items())
    )


if __name__ == "__main__":
    main()
