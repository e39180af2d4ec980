"""Where the CPU of workload 6b's 64 async conversations on the local store goes.

``python -m bench.probes.profile_async_local --conversations 64 --turns 4 [--yappi]
[--no-fsync] [--cold]``

Runs the chat graph of workload 1 as ``--conversations`` concurrent async
conversations against the local directory store, wrapped as in workload 6b
(``DelayedStore`` over ``MeteredStore``, ``--delay-ms`` awaited before each
request), after one warm-up turn each (``--cold``: none, so the measured turns
are the conversations' first, as in workload 6b). Prints the process CPU per turn split
into user and system time (``getrusage``), the requests per turn, and with
``--yappi`` the CPU of every thread by component. The store's directory is
under ``--dir`` (default: the system's temporary directory).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from types import SimpleNamespace
from typing import Any

from bench.graphs import SEED, chat_graph
from bench.probes.profile_turn import component_totals
from bench.savers import DelayedStore
from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def _run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    env = SimpleNamespace(local_delay_s=args.delay_ms / 1000)
    metered = MeteredStore(LocalStore(root, fsync=not args.no_fsync))
    with ObjectStoreSaver(DelayedStore(metered, env)) as saver:
        graph = chat_graph(saver, SEED)

        async def conversation(i: int, turns: range) -> None:
            config = {"configurable": {"thread_id": f"c{i}"}}
            for t in turns:
                await graph.ainvoke({"messages": SEED.inputs(t)}, config)

        n = args.conversations
        first = 0 if args.cold else 1
        if not args.cold:
            await asyncio.gather(*(conversation(i, range(1)) for i in range(n)))
        if args.yappi:
            import yappi

            yappi.clear_stats()
            yappi.set_clock_type("cpu")
            yappi.start(builtins=True, profile_threads=True)
        requests0 = metered.snapshot().total_requests
        (u0, s0), w0 = _cpu(), time.perf_counter()
        await asyncio.gather(*(conversation(i, range(first, first + args.turns)) for i in range(n)))
        (u1, s1), wall = _cpu(), time.perf_counter() - w0
        turns = n * args.turns
        report: dict[str, Any] = {
            "turns": turns,
            "turns_per_s": round(turns / wall, 1),
            "user_ms_per_turn": round(1000 * (u1 - u0) / turns, 2),
            "sys_ms_per_turn": round(1000 * (s1 - s0) / turns, 2),
        }
        requests = metered.snapshot().total_requests - requests0
        report["requests_per_turn"] = round(requests / turns, 2)
        if args.yappi:
            yappi.stop()
            by_component = component_totals(yappi.get_func_stats())
            report["yappi_ms_per_turn"] = {
                k: round(1000 * v / turns, 3)
                for k, v in sorted(by_component.items(), key=lambda kv: -kv[1])
            }
            yappi.clear_stats()
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=64)
    parser.add_argument("--turns", type=int, default=4, help="measured turns per conversation")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--yappi", action="store_true")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no warm-up turn: measure the conversations' first turns, as workload 6b does",
    )
    parser.add_argument("--dir", default=None, help="parent of the store's directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        report = asyncio.run(_run(args, root))
    for key, value in report.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
