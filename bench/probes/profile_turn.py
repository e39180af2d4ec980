"""Where the CPU of a chat turn goes: cProfile over a conversation, by component.

``python -m bench.probes.profile_turn --turns 100 --store local|s3|s3-boto3
--api sync|async|threads``
drives workload 1's chat graph (the seed conversation) through one saver
(``threads``: 8 conversations on 8 OS threads, one saver, ``--turns`` each),
profiles the turns after a warm-up, and prints CPU per turn split by component
(LangGraph itself, the saver's plans, serialization, compression, hashing,
MessagePack, the storage client) and the saver functions that cost most.

The S3 store talks to a moto server started in another process (its CPU is not
counted here). Figures are CPU seconds from the profiler; they vary between
machines, so compare rows of one run.

``--long N`` (no profiler) grows one conversation to ``N`` turns on the local
store and measures turns 10-19 and the last ten with ``--delay-ms`` slept per
request (workload 2's question, without a server): the median whole-turn wall
time, the median wall time of each saver call, and the CPU of the saver calls
against the rest of the process (LangGraph's own per-turn work).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.graphs import SEED, chat_graph
from objstore_saver import Boto3S3Store, LocalStore, ObjectStoreSaver
from objstore_saver.storage import LeanS3Store, ObjectStore

#: Components, by where a function's code lives (first match wins).
COMPONENTS: list[tuple[str, tuple[str, ...]]] = [
    ("storage client (botocore, urllib3, http)", ("botocore", "urllib3", "http/client", "ssl")),
    ("zstandard", ("zstandard",)),
    ("hashlib", ("hashlib", "_hashlib")),
    ("msgpack", ("msgpack", "ormsgpack")),
    ("objstore_saver storage", ("objstore_saver/storage",)),
    ("objstore_saver codec and memories", ("objstore_saver/codec", "objstore_saver/memory")),
    ("objstore_saver plans and driver", ("objstore_saver/",)),
    ("LangGraph serializer", ("langgraph/checkpoint/serde",)),
    ("LangGraph and LangChain", ("langgraph", "langchain_core", "pydantic")),
    ("threads and asyncio", ("threading", "concurrent/futures", "asyncio", "queue")),
]


def component_of(filename: str, funcname: str) -> str:
    """The component a profiled function belongs to."""
    where = filename.replace("\\", "/")
    if where == "~":  # built-ins: name them by what they are
        where = funcname
    for name, needles in COMPONENTS:
        if any(n in where for n in needles):
            return name
    return "other"


def component_totals(stats: Any) -> dict[str, float]:
    """Self CPU seconds of yappi's function stats, summed by :func:`component_of`."""
    totals: dict[str, float] = {}
    for stat in stats:
        comp = component_of((stat.module or "~").replace("\\", "/"), stat.name)
        totals[comp] = totals.get(comp, 0.0) + stat.tsub
    return totals


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server in a child process; yields its endpoint URL."""
    code = (
        "import sys\n"
        "from moto.server import ThreadedMotoServer\n"
        "s = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False)\n"
        "s.start()\n"
        "h, p = s.get_host_and_port()\n"
        "print(f'http://{h}:{p}', flush=True)\n"
        "sys.stdin.read()\n"
        "s.stop()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def open_store(kind: str, root: str, endpoint: str | None) -> ObjectStore:
    """An empty store of the given kind: ``local``, ``s3`` (lean transport), ``s3-boto3``."""
    if kind == "local":
        return LocalStore(root, fsync=False)
    import boto3

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="profile")
    if kind == "s3-boto3":
        return Boto3S3Store.from_client(client, "profile", "p/")
    return LeanS3Store("profile", "p/", endpoint_url=endpoint, region_name="us-east-1")


#: Conversations (one OS thread each) of ``--api threads``.
THREADS = 8


def drive(saver: ObjectStoreSaver, turns: int, api: str) -> Callable[[range], None]:
    """A function running the given turns of one conversation through ``api``."""
    graph = chat_graph(saver, SEED)
    config = {"configurable": {"thread_id": "profiled"}}
    if api == "sync":

        def run(rng: range) -> None:
            for t in rng:
                graph.invoke({"messages": SEED.inputs(t)}, config)

        return run
    if api == "threads":

        def run_threads(rng: range) -> None:
            def conversation(i: int) -> None:
                cfg = {"configurable": {"thread_id": f"profiled-{i}"}}
                for t in rng:
                    graph.invoke({"messages": SEED.inputs(t)}, cfg)

            workers = [threading.Thread(target=conversation, args=(i,)) for i in range(THREADS)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()

        return run_threads
    loop = asyncio.new_event_loop()

    def run_async(rng: range) -> None:
        async def go() -> None:
            for t in rng:
                await graph.ainvoke({"messages": SEED.inputs(t)}, config)

        loop.run_until_complete(go())

    return run_async


def profile(turns: int, warmup: int, store_kind: str, api: str, top: int) -> dict[str, Any]:
    """Profile ``turns`` turns after ``warmup`` turns; return the breakdown.

    yappi measures CPU time in every thread (the saver's request pools
    included), which cProfile, bound to the calling thread, cannot.
    """
    import yappi

    with tempfile.TemporaryDirectory() as root, _endpoint(store_kind) as endpoint:
        store = open_store(store_kind, root, endpoint)
        with ObjectStoreSaver(store) as saver:
            run = drive(saver, turns, api)
            run(range(warmup))
            yappi.clear_stats()
            yappi.set_clock_type("cpu")
            cpu0 = time.process_time()
            yappi.start(builtins=True, profile_threads=True)
            run(range(warmup, warmup + turns))
            yappi.stop()
            cpu = time.process_time() - cpu0
    stats = yappi.get_func_stats()
    by_component = component_totals(stats)
    saver_functions: list[tuple[float, int, str]] = []
    for stat in stats:
        filename = (stat.module or "~").replace("\\", "/")
        if "objstore_saver/" in filename:
            short = filename.split("objstore_saver/")[-1]
            saver_functions.append((stat.ttot, stat.ncall, f"{short}:{stat.lineno}({stat.name})"))
    yappi.clear_stats()
    saver_functions.sort(reverse=True)
    if api == "threads":
        turns *= THREADS
    per_turn = 1000.0 / turns
    return {
        "store": store_kind,
        "api": api,
        "turns": turns,
        "warmup": warmup,
        "cpu_ms_per_turn": round(cpu * per_turn, 2),
        "by_component_ms_per_turn": {
            k: round(v * per_turn, 3)
            for k, v in sorted(by_component.items(), key=lambda kv: -kv[1])
        },
        "top_saver_functions_cumulative_ms_per_turn": [
            {
                "function": name,
                "calls_per_turn": round(nc / turns, 2),
                "ms": round(ct * per_turn, 3),
            }
            for ct, nc, name in saver_functions[:top]
        ],
    }


class _SlowLocal(LocalStore):
    """The local store with ``delay`` seconds slept per request (the GIL is free meanwhile)."""

    delay = 0.0

    def put(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(self.delay)
        super().put(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> bytes:
        time.sleep(self.delay)
        return super().get(*args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.delay)
        return super().list(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(self.delay)
        super().delete(*args, **kwargs)


def long_thread(turns: int, delay_ms: float, sample: int = 10) -> dict[str, Any]:
    """Turns 10.. and the last ``sample`` turns of a ``turns``-turn chat, measured."""
    walls: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    phase = [""]

    def timed(saver: ObjectStoreSaver, name: str) -> None:
        call = getattr(saver, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            w0, c0 = time.perf_counter(), time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                if phase[0]:
                    key = f"{phase[0]} {name}"
                    walls.setdefault(key, []).append(time.perf_counter() - w0)
                    cpu[key] = cpu.get(key, 0.0) + time.thread_time() - c0

        setattr(saver, name, wrapper)

    process_cpu: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as root:
        store = _SlowLocal(root, fsync=False)
        with ObjectStoreSaver(store) as saver:
            for name in ("get_tuple", "put", "put_writes"):
                timed(saver, name)
            graph = chat_graph(saver, SEED)
            config = {"configurable": {"thread_id": "long"}}
            for t in range(turns):
                n = t + 1
                phase[0] = f"turn {turns}" if n > turns - sample else ""
                if 10 <= n < 10 + sample:
                    phase[0] = "turn 10"
                store.delay = delay_ms / 1000 if phase[0] else 0.0
                w0, c0 = time.perf_counter(), time.process_time()
                graph.invoke({"messages": SEED.inputs(t)}, config)
                if phase[0]:
                    walls.setdefault(f"{phase[0]} invoke", []).append(time.perf_counter() - w0)
                    key = f"{phase[0]} process"
                    process_cpu[key] = process_cpu.get(key, 0.0) + time.process_time() - c0
    out: dict[str, Any] = {"turns": turns, "delay_ms": delay_ms, "sample": sample}
    for at in ("turn 10", f"turn {turns}"):
        saver_cpu = sum(v for k, v in cpu.items() if k.startswith(at + " "))
        out[at] = {
            "median_wall_ms": {
                k.split(" ", 2)[2]: round(statistics.median(v) * 1000, 1)
                for k, v in walls.items()
                if k.startswith(at + " ")
            },
            "cpu_ms_per_turn": {
                "saver calls": round(saver_cpu / sample * 1000, 1),
                "rest (LangGraph, request threads)": round(
                    (process_cpu[at + " process"] - saver_cpu) / sample * 1000, 1
                ),
            },
        }
    return out


@contextmanager
def _endpoint(kind: str) -> Iterator[str | None]:
    if kind.startswith("s3"):
        with moto_server() as url:
            yield url
    else:
        yield None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--store", choices=["local", "s3", "s3-boto3"], default="local")
    parser.add_argument("--api", choices=["sync", "async", "threads"], default="sync")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--long", type=int, default=0, help="measure a chat of this many turns")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    if args.long:
        print(json.dumps(long_thread(args.long, args.delay_ms), indent=2))
        return
    report = profile(args.turns, args.warmup, args.store, args.api, args.top)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['store']} store, {report['api']} API: {report['cpu_ms_per_turn']} ms CPU per "
        f"turn over {report['turns']} turns (after {report['warmup']})"
    )
    print("\nby component (self time, ms per turn):")
    for name, ms in report["by_component_ms_per_turn"].items():
        print(f"  {ms:8.3f}  {name}")
    print("\nobjstore_saver functions (cumulative ms per turn):")
    for row in report["top_saver_functions_cumulative_ms_per_turn"]:
        print(f"  {row['ms']:8.3f}  {row['calls_per_turn']:6.2f}/turn  {row['function']}")


if __name__ == "__main__":
    main()
