"""Request counts of retention by age (spec §6.9, the idle rule) on many threads.

Run ``python -m bench.probes.idle_prune`` (local directory) or ``python -m
bench.probes.idle_prune --s3`` (moto's server, started in this process on loopback).
Seeds ``--threads`` threads of three checkpoints each, then counts, through
:class:`~objstore_saver.MeteredStore`, what the daily job's steps cost:

* enumerating the store's threads (the jobs' one flat listing, 1,000 keys a LIST);
* the idle decision on every thread when none is idle (``keep_last=None``);
* a dry run and a real run ``--idle-fraction`` of the threads later found idle.

Counts, not timings: they are the same on every machine. The prune host's
clock is moved forward (``now``) to make threads idle; nothing sleeps.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.plans.scan import scan_threads
from objstore_saver.plans.threads import thread_id_of
from objstore_saver.storage import Boto3S3Store, ObjectStore

IDLE_FOR = timedelta(days=30)


@contextmanager
def _store(s3: bool) -> Iterator[ObjectStore]:
    if not s3:
        with tempfile.TemporaryDirectory() as root:
            yield LocalStore(root, fsync=False)
        return
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        client = boto3.client(
            "s3",
            endpoint_url=f"http://{host}:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        client.create_bucket(Bucket="idle-bench")
        yield Boto3S3Store("idle-bench", "bench/", client=client)
    finally:
        server.stop()


def _seed(saver: ObjectStoreSaver, thread: str, checkpoints: int) -> None:
    parent = None
    for i in range(checkpoints):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": f"{thread}/{i}/" + "x" * 4000}
        cp["channel_versions"] = {"v": i + 1}
        config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        if parent is not None:
            config["configurable"]["checkpoint_id"] = parent
        out = saver.put(config, cp, {"step": i}, {"v": i + 1})
        parent = out["configurable"]["checkpoint_id"]


def _thread_ids(driver: Driver) -> list[str]:
    """Every thread id of the store, found as the operator jobs find them (one flat listing)."""
    ids = []
    for listing in driver.iterate(scan_threads()):
        thread_id = driver.run(thread_id_of(listing))
        if thread_id is not None:
            ids.append(thread_id)
    return ids


def _counts(meter: MeteredStore) -> dict[str, int]:
    m = meter.snapshot()
    return {**m.requests, "total": m.total_requests, "bytes_received": m.bytes_received}


def run(threads: int, idle_fraction: float, s3: bool) -> dict[str, Any]:
    """Seed, then count each step; returns a JSON-serializable report."""
    with _store(s3) as inner:
        with ObjectStoreSaver(inner) as seeder:
            names = [f"thread-{i:05d}" for i in range(threads)]
            for name in names:
                _seed(seeder, name, 3)
        meter = MeteredStore(inner)
        out: dict[str, Any] = {"backend": "s3 (moto)" if s3 else "local", "threads": threads}
        with ObjectStoreSaver(meter) as saver:
            driver = Driver(meter, max_workers=4)
            try:
                meter.reset()
                ids = _thread_ids(driver)
                out["enumerate"] = _counts(meter)
            finally:
                driver.close()
            assert sorted(ids) == names

            meter.reset()
            report = saver.prune(ids, keep_last=None, idle_for=IDLE_FOR.total_seconds())
            assert report["threads_idle"] == []
            out["decide_none_idle"] = _counts(meter)

            # Make a fraction idle by moving the prune host's clock past idle_for
            # for them: the threads are cut at a chosen LastModified.
            listed = [
                (inner.list(f"threads/_{n}/checkpoints/_/", limit=1).objects[0].last_modified, n)
                for n in ids
            ]
            listed.sort()
            n_idle = int(len(listed) * idle_fraction)
            if n_idle:
                cut = listed[n_idle - 1][0]
                # Strictly: idle iff LastModified <= now - idle_for.
                later = cut + IDLE_FOR
                idle_set = {n for at, n in listed if at <= cut}
                for label, dry in (("dry_run", True), ("apply", False)):
                    meter.reset()
                    plan = saver._prune_plan(
                        ids,
                        "keep_latest",
                        None,
                        0.0,
                        dry,
                        now=later,
                        idle_for=IDLE_FOR.total_seconds(),
                    )
                    rep = saver._driver.run(plan)
                    assert set(rep["threads_idle"]) == idle_set
                    out[f"idle_delete_{label}"] = {
                        **_counts(meter),
                        "threads_idle": len(idle_set),
                        "checkpoints_deleted": rep["checkpoints_deleted"],
                        "objects_deleted": rep["objects_swept"],
                    }
        out["now"] = datetime.now(UTC).isoformat()
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1000)
    ap.add_argument("--idle-fraction", type=float, default=0.5)
    ap.add_argument("--s3", action="store_true", help="moto's S3 server on loopback")
    a = ap.parse_args()
    print(json.dumps(run(a.threads, a.idle_fraction, a.s3), indent=2))


if __name__ == "__main__":
    main()
