"""Client CPU of a chat turn and of a saver call on the lean S3 transport, and a before/after.

``python -m bench.probes.turn_cpu`` starts ``bench.server`` (moto behind the
metering proxy, no injected delay, in another process so the server's CPU is
not counted), then plays the seed chat on ``LeanS3Store`` through LangGraph,
blocking (``invoke``) and on an event loop (``ainvoke``), in clear and with
client-side encryption. After a warm-up it reports, per measured turn, the
process's CPU (``time.process_time``: the graph, the saver, serialization and
the transport) and the requests the proxy counted; then, over three more
turns under a profile hook, the Python function calls a turn makes, all and
the package's (counts that do not move with the machine's load).

``--compare TREE`` measures another checkout's package (``git worktree add
--detach /tmp/before <commit>``) and this tree's in alternating rounds
against one server, and prints the median of each and their ratio: a
before/after that a drifting machine load does not bias towards either.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
import uuid
from typing import Any

from bench.probes import add_compare_arguments, attached_round, compare_rounds

VARIANTS = ("sync", "async", "sync-encrypted", "async-encrypted")
FIELDS = ("cpu_ms_per_turn", "requests_per_turn", "python_calls_per_turn", "package_calls_per_turn")
#: A frame of the measured package: its files are under a folder of this name.
PACKAGE = "/objstore_saver/"


def _requests(proxy: str) -> int:
    with urllib.request.urlopen(proxy.rstrip("/") + "/__bench__/counters") as answer:
        counters: dict[str, Any] = json.load(answer)
    return int(sum(counters["requests"].values()))


COUNTED_TURNS = 3


class _Calls:
    """A profile hook counting Python function calls, and those of the package."""

    def __init__(self) -> None:
        self.all = self.package = 0

    def __call__(self, frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            self.all += 1
            if PACKAGE in frame.f_code.co_filename:
                self.package += 1

    def __enter__(self) -> _Calls:
        threading.setprofile(self)  # the store's worker threads, too
        sys.setprofile(self)
        return self

    def __exit__(self, *_: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _play(graph: Any, config: dict[str, Any], warmup: int, turns: int, proxy: str) -> Any:
    """Warm up, then play ``turns`` turns; (CPU seconds, requests) of those, on one thread."""
    from bench.graphs import SEED

    for t in range(warmup):
        graph.invoke({"messages": SEED.inputs(t)}, config)
    requests, cpu = _requests(proxy), time.process_time()
    for t in range(warmup, warmup + turns):
        graph.invoke({"messages": SEED.inputs(t)}, config)
    cpu, requests = time.process_time() - cpu, _requests(proxy) - requests
    with _Calls() as calls:
        for t in range(warmup + turns, warmup + turns + COUNTED_TURNS):
            graph.invoke({"messages": SEED.inputs(t)}, config)
    return cpu, requests, calls


async def _aplay(graph: Any, config: dict[str, Any], warmup: int, turns: int, proxy: str) -> Any:
    """:func:`_play` on one event loop (the transport's connections belong to it)."""
    from bench.graphs import SEED

    for t in range(warmup):
        await graph.ainvoke({"messages": SEED.inputs(t)}, config)
    requests, cpu = _requests(proxy), time.process_time()
    for t in range(warmup, warmup + turns):
        await graph.ainvoke({"messages": SEED.inputs(t)}, config)
    cpu, requests = time.process_time() - cpu, _requests(proxy) - requests
    with _Calls() as calls:
        for t in range(warmup + turns, warmup + turns + COUNTED_TURNS):
            await graph.ainvoke({"messages": SEED.inputs(t)}, config)
    return cpu, requests, calls


def _measure(proxy: str, bucket: str, turns: int, warmup: int) -> dict[str, Any]:
    """CPU ms and requests per measured turn of each variant (a fresh thread each)."""
    from bench.graphs import SEED, chat_graph
    from objstore_saver import ObjectStoreSaver
    from objstore_saver.crypto import ClientEncryption
    from objstore_saver.crypto.master_keys import LocalMasterKey

    out: dict[str, Any] = {}
    for variant in VARIANTS:
        options: dict[str, Any] = {}
        if variant.endswith("encrypted"):
            options["client_encryption"] = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
        url = f"s3://{bucket}/{variant}?endpoint_url={proxy}&region=us-east-1"
        with ObjectStoreSaver.from_url(url, **options) as saver:
            graph = chat_graph(saver, SEED)
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            if variant.startswith("async"):
                cpu, requests, calls = asyncio.run(_aplay(graph, config, warmup, turns, proxy))
            else:
                cpu, requests, calls = _play(graph, config, warmup, turns, proxy)
            out[variant] = {
                "cpu_ms_per_turn": cpu * 1000 / turns,
                "requests_per_turn": requests / turns,
                "python_calls_per_turn": calls.all / COUNTED_TURNS,
                "package_calls_per_turn": calls.package / COUNTED_TURNS,
            }
    return out


def _compare(args: argparse.Namespace, server: dict[str, Any]) -> None:
    options = ["--turns", str(args.turns), "--warmup", str(args.warmup)]
    trees, rounds = compare_rounds("bench.probes.turn_cpu", args, server, options)
    print(f"| variant | measure | before ({trees['before']}) | now | now / before |")
    print("| --- | --- | --- | --- | --- |")
    for variant in VARIANTS:
        for field in FIELDS:
            before, now = (
                statistics.median(r[variant][field] for r in rounds[label]) for label in trees
            )
            print(f"| {variant} | {field} | {before:.3f} | {now:.3f} | {now / before:.3f} |")


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="measured turns of each variant")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--json", help="write the results here too")
    add_compare_arguments(parser)
    args = parser.parse_args()
    attached = attached_round(args)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "OBJSTORE_SAVER_ENCRYPTION_KEY"):
        os.environ.pop(name, None)
    if attached is not None:
        results = _measure(attached["proxy"], attached["bucket"], args.turns, args.warmup)
    else:
        import boto3

        from bench.server import ServerProcess

        with ServerProcess(delay_ms=0, s3_server="moto") as server:
            access, secret = server.keys
            os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
            bucket = f"turn-cpu-{uuid.uuid4().hex[:8]}"
            boto3.client(
                "s3",
                endpoint_url=server.s3_url,
                region_name="us-east-1",
                aws_access_key_id=access,
                aws_secret_access_key=secret,
            ).create_bucket(Bucket=bucket)
            if args.compare:
                _compare(args, {"proxy": server.proxy_url, "bucket": bucket, "keys": server.keys})
                return
            results = _measure(server.proxy_url, bucket, args.turns, args.warmup)
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
