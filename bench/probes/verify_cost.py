"""Requests and client CPU per thread of ``verify`` at each depth, on workload 7's threads.

``python -m bench.probes.verify_cost [--threads 300] [--store s3|local] [--values-alone 0]``
seeds ``--threads`` threads as workload 7 does (one chat turn each: 3
checkpoints and 2 calls of pending writes, :mod:`bench.workloads.ops_seed`),
each with ``--values-alone`` more values stored at ``objects/<H>`` (a
checkpoint of incompressible 300 KB values, each a parts index over 2 parts),
on a bucket of a moto server in a child process (its CPU is not counted here)
or a local directory. Then it runs
the ``verify`` job (``objstore_saver.ops.verify``, its default concurrency) at
each depth it knows: the default, ``--read-data`` and ``--read-data-subset
1/4``, each after a warm-up run, through a :class:`~objstore_saver.MeteredStore`
under the job: requests per thread by operation, GETs of content objects per
thread, and this process's CPU per thread (``time.process_time``, the median of
``--rounds`` runs). On a tree whose ``verify`` has no depth it measures the one
``verify`` there is (a before/after: copy this file into the other tree).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from bench.workloads import ops_seed
from objstore_saver import MeteredStore, ObjectStoreSaver, ops
from objstore_saver.driver import Driver
from objstore_saver.ops import maintain
from objstore_saver.ops._common import OpsConfig

#: The depths measured, as ``ops.verify`` arguments.
DEPTHS: dict[str, dict[str, Any]] = {
    "default": {},
    "read-data": {"read_data": True},
    "read-data-subset 1/4": {"read_data_subset": "1/4"},
}


def _depths() -> dict[str, dict[str, Any]]:
    """The depths this tree's ``ops.verify`` takes (only ``verify`` on an older tree)."""
    if "read_data" in inspect.signature(ops.verify).parameters:
        return DEPTHS
    return {"verify (one depth)": {}}


@contextlib.contextmanager
def _bucket(kind: str) -> Iterator[tuple[str, str | None]]:
    """The store's URL, and the S3 endpoint (None for a local directory)."""
    if kind == "local":
        with tempfile.TemporaryDirectory(prefix="verify-cost-") as root:
            yield f"file://{root}", None
        return
    import boto3

    from bench.probes.profile_turn import moto_server

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "testing")
    with moto_server() as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="verify-cost")
        yield f"s3://verify-cost/?endpoint_url={endpoint}&region=us-east-1", endpoint


def _seed(url: str, endpoint: str | None, threads: int, values_alone: int) -> None:
    """Workload 7's threads, each with ``values_alone`` values stored alone at the end."""
    calls = ops_seed.chat_calls(3)
    ids = ops_seed.thread_ids(threads, "verify-cost")
    if endpoint is not None:
        ops_seed.seed_s3("verify-cost", endpoint, calls, ids)
    else:
        ops_seed.seed_directory(url.removeprefix("file://"), calls, ids)
    if not values_alone:
        return
    with ObjectStoreSaver.from_url(url, client_encryption=False) as saver:
        for t in ids:
            cfg = {"configurable": {"thread_id": t, "checkpoint_ns": ""}}
            head = saver.get_tuple(cfg)
            assert head is not None
            cp = dict(head.checkpoint)
            rnd = random.Random(t)
            big = {f"big{i}": rnd.randbytes(300_000) for i in range(values_alone)}
            cp["id"] = f"{cp['id'][:-12]}{'f' * 12}"  # after the head's id
            cp["channel_values"] = {**cp.get("channel_values", {}), **big}
            versions = dict.fromkeys(big, "1")
            cp["channel_versions"] = {**cp["channel_versions"], **versions}
            saver.put(head.config, cp, {"step": 9}, versions)


@contextlib.asynccontextmanager
async def _metered(meter_box: list[MeteredStore], opened: Any, config: OpsConfig) -> AsyncIterator:
    """The job's store under a meter (the one it opens, wrapped)."""
    async with opened(config) as (store, _driver):
        meter = MeteredStore(store, log=True)
        meter_box.append(meter)
        driver = Driver(meter, max_workers=16)
        try:
            yield meter, driver
        finally:
            driver.close()


def _run(url: str, depth: dict[str, Any]) -> tuple[dict[str, Any], MeteredStore, float]:
    box: list[MeteredStore] = []
    opened = maintain.aopen_store
    maintain.aopen_store = lambda config: _metered(box, opened, config)  # type: ignore[assignment]
    try:
        cpu = time.process_time()
        report = ops.verify(config=OpsConfig(url=url), **depth)
        cpu = time.process_time() - cpu
    finally:
        maintain.aopen_store = opened  # type: ignore[assignment]
    return report, box[0], cpu


def measure(url: str, rounds: int) -> dict[str, Any]:
    """Each depth on the seeded store: requests and CPU per thread."""
    out: dict[str, Any] = {}
    for name, depth in _depths().items():
        _run(url, depth)  # warm: imports, pools, the thread keys
        cpus, report, meter = [], None, None
        for _ in range(rounds):
            report, meter, cpu = _run(url, depth)
            cpus.append(cpu)
        assert report is not None and meter is not None
        n = report["threads"]
        m = meter.snapshot()
        content = sum(1 for e in meter.log if e.op == "get" and "/objects/" in e.key)
        out[name] = {
            "ok": report["ok"],
            "threads": n,
            "requests_per_thread": {op: k / n for op, k in m.requests.items() if k},
            "total_requests_per_thread": m.total_requests / n,
            "content_object_gets_per_thread": content / n,
            "cpu_ms_per_thread": statistics.median(cpus) / n * 1000,
            "cpu_ms_per_thread_runs": [c / n * 1000 for c in cpus],
        }
    return out


def run(threads: int, store: str, values_alone: int, rounds: int) -> dict[str, Any]:
    """Seed, then measure every depth."""
    with _bucket(store) as (url, endpoint):
        _seed(url, endpoint, threads, values_alone)
        return {
            "store": store,
            "threads": threads,
            "values_alone_per_thread": values_alone,
            "depths": measure(url, rounds),
        }


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=300)
    ap.add_argument("--store", choices=("s3", "local"), default="s3")
    ap.add_argument("--values-alone", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps(run(a.threads, a.store, a.values_alone, a.rounds), indent=1))


if __name__ == "__main__":
    main()
