"""Is the S3 server the bottleneck? Workload 6b's shape, with the server watched.

``python -m bench.probes.saturation --s3-server seaweedfs`` runs objstore-saver's
async saver on 1 and then 64 concurrent chat conversations (16 and 8 turns each,
as workload 6b) through the metering proxy with 20 ms injected per request, and
prints for each: turns per second, the server's own time per request by S3
operation (measured by the proxy, after the injected delay) and the CPU cores
used by the saver's process, the proxy and the S3 server's processes, and the
time the saver's process spent in Python's cyclic garbage collector per turn
(LangGraph and the saver together). A server that is not the bottleneck keeps
its time per request near the one-conversation figure and uses well under a
core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

from bench import graphs
from bench.savers import ALL_SAVERS, Env
from bench.server import BACKENDS, DEFAULT_BACKEND, ServerProcess
from bench.workloads.common import cfg, settle, task_children
from bench.workloads.sizes import FULL

_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by ``pid`` and its descendants, by command name."""
    out: dict[str, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
            todo += task_children(p)
        except FileNotFoundError:  # the process exited meanwhile
            continue
    return out


def _counters(proxy_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(proxy_url + "/__bench__/counters") as resp:
        return json.loads(resp.read())


class GcTimer:
    """Wall time spent in the cyclic garbage collector, while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1

    @contextlib.contextmanager
    def installed(self) -> Iterator[GcTimer]:
        """Time every collection inside the ``with`` block."""
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)


async def measure(
    server: ServerProcess, env: Env, conversations: int, turns: int
) -> dict[str, Any]:
    """Run ``conversations`` concurrent conversations of ``turns`` turns; return the figures."""
    spec = next(s for s in ALL_SAVERS if s.name == "objstore-s3")
    async with spec.open_async(env) as h:
        graph = graphs.chat_graph(h.saver, graphs.SEED)

        async def convo(i: int) -> None:
            for t in range(turns):
                config = cfg(f"sat{conversations}-{i}")
                await graph.ainvoke({"messages": graphs.SEED.inputs(t)}, config)

        c0, p0, s0 = _counters(server.proxy_url), tree_cpu(server.pid), time.process_time()
        w0 = time.perf_counter()
        with GcTimer().installed() as collector:
            await asyncio.gather(*(convo(i) for i in range(conversations)))
        wall = time.perf_counter() - w0
        c1, p1, saver_cpu = _counters(server.proxy_url), tree_cpu(server.pid), time.process_time()
    requests = {k: v - c0["requests"].get(k, 0) for k, v in c1["requests"].items()}
    requests = {k: v for k, v in requests.items() if v}
    by_op = c1["server_s_by_op"]
    total = sum(requests.values())
    return {
        "conversations": conversations,
        "turns_per_s": conversations * turns / wall,
        "gc_ms_per_turn": collector.seconds / (conversations * turns) * 1000,
        "gc_collections": collector.collections,
        "requests": total,
        "server_ms_per_request": (c1["server_s"] - c0["server_s"]) / total * 1000,
        "server_ms_by_op": {
            op: (by_op[op] - c0["server_s_by_op"].get(op, 0.0)) / n * 1000
            for op, n in sorted(requests.items())
        },
        "cores": {"saver": (saver_cpu - s0) / wall}
        | {f"server:{k}": (v - p0.get(k, 0.0)) / wall for k, v in p1.items()},
    }


async def main_async(
    s3_server: str, delay_ms: float, turns: int | None = None
) -> list[dict[str, Any]]:
    """Start the server, measure 1 then 64 conversations, stop it.

    ``turns`` per conversation for both; by default workload 6b's counts.
    """
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-sat-") as tmp,
        ServerProcess(delay_ms, s3_server) as server,
    ):
        env = Env(server.proxy_url, server.s3_url, tmp, None, keys=server.keys)
        print(f"S3 server: {server.server_version}, {delay_ms:.0f} ms injected per request")
        for n in (1, 64):
            settle()
            row = await measure(server, env, n, FULL.async_turns(n) if turns is None else turns)
            rows.append(row)
            ops = ", ".join(f"{op} {ms:.1f}" for op, ms in row["server_ms_by_op"].items())
            cores = ", ".join(f"{k} {v:.2f}" for k, v in row["cores"].items())
            print(
                f"{n:>3} conversations: {row['turns_per_s']:5.1f} turns/s, "
                f"{row['requests']} requests, server {row['server_ms_per_request']:.1f} ms/request "
                f"({ops}); cores used: {cores}; cyclic GC {row['gc_ms_per_turn']:.2f} ms/turn "
                f"({row['gc_collections']} collections)"
            )
    return rows


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.probes.saturation", description=__doc__)
    parser.add_argument("--s3-server", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    parser.add_argument("--delay-ms", type=float, default=FULL.delay_ms)
    parser.add_argument(
        "--turns",
        type=int,
        default=None,
        help="turns of every conversation, at 1 and at 64 (default: workload 6b's, 16 and 8)",
    )
    args = parser.parse_args()
    if args.turns is not None and args.turns < 1:
        parser.error(f"--turns must be at least 1, got {args.turns}")
    asyncio.run(main_async(args.s3_server, args.delay_ms, args.turns))


if __name__ == "__main__":
    main()
