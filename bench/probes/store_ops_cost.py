"""Request counts of the store's operator jobs on a local directory (``MeteredStore``).

``python -m bench.probes.store_ops_cost [--items 1000] [--expired 100]`` puts ``items``
memories into one namespace, ``expired`` of them already expired, then counts
what ``store ls``, ``store du`` and ``store-sweep`` (dry run, apply, and a
second apply that must find nothing) send. Counts, not timings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from objstore_saver import LocalStore, MeteredStore, ObjectStoreStore
from objstore_saver.driver import Driver
from objstore_saver.ops import longterm as store_ops
from objstore_saver.ops._common import OpsConfig


def run(items: int, expired: int) -> dict[str, Any]:
    """Seed a directory, then count each job's requests."""
    with tempfile.TemporaryDirectory(prefix="store-ops-") as root:
        inner = LocalStore(root, fsync=False)
        with (
            ObjectStoreStore(inner, clock=lambda: time.time() - 3600) as past,
            ObjectStoreStore(inner) as now,
        ):
            for i in range(expired):
                past.put(("bench",), f"e{i:05d}", {"i": i}, ttl=1)
            for i in range(items - expired):
                now.put(("bench",), f"l{i:05d}", {"i": i})
        meter = MeteredStore(inner)

        @contextlib.contextmanager
        def metered(config: OpsConfig) -> Iterator[tuple[Any, Driver]]:
            driver = Driver(meter, max_workers=16)
            try:
                yield meter, driver
            finally:
                driver.close()

        @contextlib.asynccontextmanager
        async def ametered(config: OpsConfig) -> AsyncIterator[tuple[Any, Driver]]:
            with metered(config) as opened:
                yield opened

        # The blocking jobs open their store with open_store, the sweep (a
        # coroutine job) with aopen_store: both must hand out the meter.
        store_ops.open_store = metered  # type: ignore[assignment]
        store_ops.aopen_store = ametered  # type: ignore[assignment]
        cfg = OpsConfig(url=f"file://{root}")
        jobs = {
            "ls": lambda: store_ops.store_ls(config=cfg)["total"],
            "du": lambda: store_ops.store_du(config=cfg)["total"]["objects"],
            "sweep_dry_run": lambda: store_ops.store_sweep(config=cfg)["totals"],
            "sweep_apply": lambda: store_ops.store_sweep(apply=True, config=cfg)["totals"],
            "sweep_again": lambda: store_ops.store_sweep(apply=True, config=cfg)["totals"],
        }
        out: dict[str, Any] = {"items": items, "expired": expired}
        for name, job in jobs.items():
            meter.reset()
            answer = job()
            m = meter.snapshot()
            out[name] = {"answer": answer, **m.requests, "total": m.total_requests}
        return out


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--expired", type=int, default=100)
    a = ap.parse_args()
    print(json.dumps(run(a.items, a.expired), indent=1))


if __name__ == "__main__":
    main()
