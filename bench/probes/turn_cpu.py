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
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

VARIANTS = ("sync", "async", "sync-encrypted", "async-encrypted")
FIELDS = ("cpu_ms_per_turn", "requests_per_turn", "python_calls_per_turn", "package_calls_per_turn")
HERE = Path(__file__).resolve().parents[2]
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


def _compare(args: argparse.Namespace, proxy: str, bucket: str, keys: tuple[str, str]) -> None:
    trees = {"before": os.path.abspath(args.compare), "now": str(HERE)}
    rounds: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    attach = json.dumps({"proxy": proxy, "bucket": bucket, "keys": list(keys)})
    for number in range(args.rounds):
        for label, tree in trees.items():
            out = os.path.join(tempfile.mkdtemp(prefix="turn-cpu-"), "r.json")
            command = [sys.executable, "-m", "bench.probes.turn_cpu", "--attach", attach]
            command += ["--package-from", tree, "--json", out]
            command += ["--turns", str(args.turns), "--warmup", str(args.warmup)]
            subprocess.run(command, check=True, cwd=HERE, stdout=subprocess.DEVNULL)
            with open(out) as f:
                rounds[label].append(json.load(f))
            print(f"round {number + 1}/{args.rounds}: {label} measured", flush=True)
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
    parser.add_argument(
        "--compare",
        metavar="TREE",
        help="another checkout: its objstore_saver and this tree's, in alternating rounds",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --compare")
    parser.add_argument("--attach", help=argparse.SUPPRESS)  # a --compare round: the server
    parser.add_argument("--package-from", help=argparse.SUPPRESS)  # ...and the tree measured
    args = parser.parse_args()
    if args.package_from:
        sys.path.insert(0, args.package_from)
        import objstore_saver  # from that tree, before anything imports it

        sys.path.pop(0)
        if not objstore_saver.__file__.startswith(os.path.abspath(args.package_from)):
            raise SystemExit(
                f"objstore_saver came from {objstore_saver.__file__}, not {args.package_from}"
            )
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "OBJSTORE_SAVER_ENCRYPTION_KEY"):
        os.environ.pop(name, None)
    if args.attach:
        attached = json.loads(args.attach)
        access, secret = attached["keys"]
        os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
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
                _compare(args, server.proxy_url, bucket, server.keys)
                return
            results = _measure(server.proxy_url, bucket, args.turns, args.warmup)
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
