"""How much of workload 6a's CPU gap to PostgresSaver the injected round trip makes.

``python -m bench.probes.cpu_wait [--turns 30] [--delays 0,20] [--s3-server seaweedfs]``
plays workload 6a's conversations (8 OS threads, one saver, the seed chat; 5
warm-up turns each, then ``--turns``) on PostgresSaver without any injected
round trip (workload 6a's baseline), then, once per injected round trip of
``--delays`` (milliseconds, set on the bench's metering proxy), on
objstore-saver's S3 saver and on PostgresSaver whose queries wait the same
round trip (``postgres-rtt``, its connection through the server
process's :class:`~bench.tcp_relay.DelayRelay`). For each it prints the
process CPU per turn (``time.process_time``, split into user and system
time), the CPU the saver calls themselves take in the threads that make them
(``time.thread_time`` around ``get_tuple``, ``put`` and ``put_writes``), and
objstore-saver's ratio to PostgresSaver without and with the same round trip.

``--busy-cores N`` runs every measurement beside ``N`` processes that spin at
the lowest priority (nice 19): a thread that wakes takes their core at once,
so no core idles while a saver waits, and their CPU is not this process's.
Comparing a run with and without them separates what an idle core costs a
thread waking on it from what waiting costs anyway.

Workload 6a's first comparison is objstore-saver with a 20 ms round trip on
every request against PostgreSQL with none: a thread that waits for an
answer wakes up and takes the interpreter lock back from seven others, which
costs CPU that a query answered at once does not; its second gives
PostgreSQL the same round trip. Run with ``--delays 0,20``
to see both conditions side by side (``--delays 0,20,0`` repeats the first
to show the run's drift). CPU figures vary between runs and machines (a
2-core machine is noisy): compare rows of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench import graphs
from bench.meters import set_proxy_delay
from bench.postgres import PostgresServer
from bench.probes import busy_core_count, busy_cores, write_json
from bench.savers import Env, ObjstoreS3, Postgres, PostgresSameTrip, SaverSpec
from bench.server import ServerProcess
from bench.workloads.common import cfg

THREADS = 8
WARMUP_TURNS = 5
SAVER_CALLS = ("get_tuple", "put", "put_writes")


class _CallClock:
    """CPU of the saver calls in the threads that make them (outermost calls only)."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self._lock = threading.Lock()
        self._depth = threading.local()

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._depth, "n", 0)
            self._depth.n = depth + 1
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth.n = depth
                if depth == 0:
                    spent = time.thread_time() - start
                    with self._lock:
                        self.cpu_s += spent

        return timed


def _play(saver: Any, first: int, turns: int) -> None:
    graph = graphs.chat_graph(saver, graphs.SEED)

    def worker(i: int) -> None:
        for t in range(first, first + turns):
            graph.invoke({"messages": graphs.SEED.inputs(t)}, cfg(f"os-{i}"))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def measure(spec: SaverSpec, env: Env, turns: int) -> dict[str, Any]:
    """Workload 6a's turns on one saver: CPU per turn, whole process and in the saver calls."""
    clock = _CallClock()
    with spec.open_sync(env) as handle:
        saver = handle.saver
        for name in SAVER_CALLS:  # over the bench's counting wrappers, instance attributes too
            setattr(saver, name, clock.wrap(getattr(saver, name)))
        _play(saver, 0, WARMUP_TURNS)
        clock.cpu_s = 0.0
        before, cpu0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
        _play(saver, WARMUP_TURNS, turns)
        cpu = time.process_time() - cpu0
        after = resource.getrusage(resource.RUSAGE_SELF)
    n = THREADS * turns
    return {
        "cpu_ms_per_turn": cpu / n * 1e3,
        "user_ms_per_turn": (after.ru_utime - before.ru_utime) / n * 1e3,
        "system_ms_per_turn": (after.ru_stime - before.ru_stime) / n * 1e3,
        "saver_calls_ms_per_turn": clock.cpu_s / n * 1e3,
        "involuntary_switches_per_turn": (after.ru_nivcsw - before.ru_nivcsw) / n,
    }


@contextlib.contextmanager
def _servers(s3_server: str) -> Iterator[tuple[ServerProcess, PostgresServer]]:
    server = ServerProcess(20.0, s3_server)
    try:
        postgres = PostgresServer()
        try:
            yield server, postgres
        finally:
            postgres.stop()
    finally:
        server.stop()


def run(turns: int, delays: list[float], s3_server: str, spinners: int = 0) -> dict[str, Any]:
    """PostgresSaver with no delay once, then objstore-saver and PostgresSaver at each delay.

    Each objstore-saver row carries its ratios to both PostgresSaver rows;
    ``spinners`` processes keep the cores busy meanwhile (:func:`busy_cores`).
    """
    with (
        _servers(s3_server) as (server, postgres),
        tempfile.TemporaryDirectory() as tmp,
        busy_cores(spinners),
    ):
        env = Env(server.proxy_url, server.s3_url, tmp, postgres, keys=server.keys)
        report: dict[str, Any] = {
            "turns": turns,
            "threads": THREADS,
            "s3_server": s3_server,
            "busy_cores": spinners,
        }
        report["postgres"] = measure(Postgres(), env, turns)
        rows = []
        same_trip = []
        for ms in delays:
            set_proxy_delay(server.proxy_url, ms)
            row = {"delay_ms": ms, **measure(ObjstoreS3(), env, turns)}
            pg_row = {"delay_ms": ms, **measure(PostgresSameTrip(), env, turns)}
            row["cpu_ratio_to_postgres"] = (
                row["cpu_ms_per_turn"] / report["postgres"]["cpu_ms_per_turn"]
            )
            row["cpu_ratio_to_postgres_same_trip"] = (
                row["cpu_ms_per_turn"] / pg_row["cpu_ms_per_turn"]
            )
            rows.append(row)
            same_trip.append(pg_row)
        report["objstore_s3"] = rows
        report["postgres_same_trip"] = same_trip
    return report


def render(r: dict[str, Any]) -> str:
    """A markdown table: one row per saver and round trip."""
    lines = [
        f"workload 6a conditions: {r['threads']} OS threads, {r['turns']} turns each "
        f"after {WARMUP_TURNS} warm-up turns, {r['s3_server']} behind the bench proxy"
        + (f", {r['busy_cores']} cores kept busy at nice 19" if r.get("busy_cores") else ""),
        "",
        "| saver | injected round trip | CPU ms/turn (user + system) | in saver calls | "
        "involuntary switches/turn | ÷ PostgresSaver | ÷ PostgresSaver, same round trip |",
        "|---|---|---|---|---|---|---|",
    ]
    pg = r["postgres"]
    lines.append(_row("PostgresSaver", "none", pg, "1.00", "-"))
    for row, same in zip(r["objstore_s3"], r["postgres_same_trip"], strict=True):
        delay = f"{row['delay_ms']:g} ms"
        lines.append(
            _row(
                "objstore-saver (S3)",
                delay,
                row,
                f"{row['cpu_ratio_to_postgres']:.2f}",
                f"{row['cpu_ratio_to_postgres_same_trip']:.2f}",
            )
        )
        ratio = same["cpu_ms_per_turn"] / pg["cpu_ms_per_turn"]
        lines.append(_row("PostgresSaver, same round trip", delay, same, f"{ratio:.2f}", "1.00"))
    return "\n".join(lines)


def _row(name: str, delay: str, m: dict[str, Any], ratio: str, same_ratio: str) -> str:
    return (
        f"| {name} | {delay} | {m['cpu_ms_per_turn']:.2f} ({m['user_ms_per_turn']:.2f} + "
        f"{m['system_ms_per_turn']:.2f}) | {m['saver_calls_ms_per_turn']:.2f} | "
        f"{m['involuntary_switches_per_turn']:.1f} | {ratio} | {same_ratio} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the probe and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--delays", default="0,20", help="round trips in ms, comma-separated")
    parser.add_argument("--s3-server", default="seaweedfs")
    parser.add_argument(
        "--busy-cores",
        type=busy_core_count,
        default=0,
        help="processes spinning at nice 19 meanwhile, so that no core idles (0: none)",
    )
    parser.add_argument("--json", help="also write the report here (- for standard output)")
    args = parser.parse_args(argv)
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    report = run(args.turns, delays, args.s3_server, args.busy_cores)
    print(render(report))
    write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
