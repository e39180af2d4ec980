"""fsck for a store (spec §6.11): :func:`verify` joins the threads' check
(:mod:`objstore_saver.plans.verify`) and the long-term store's
(:mod:`objstore_saver.longterm.verify`).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from objstore_saver.longterm.verify import verify_store
from objstore_saver.plans.requests import Batch
from objstore_saver.plans.verify import verify_thread, verify_threads
from objstore_saver.plans.verify_report import Depth, Problem, VerifyReport

__all__ = ["Depth", "Problem", "VerifyReport", "verify", "verify_store", "verify_thread"]


def arriving_since(replica_lag: float | None) -> datetime | None:
    """On a replica, the time after which a thread's objects may still be arriving."""
    return None if replica_lag is None else datetime.now(UTC) - timedelta(seconds=replica_lag)


def verify(
    thread_ids: Sequence[str] | None = None,
    *,
    now_us: int | None = None,
    read_data: bool = False,
    read_data_subset: str | tuple[int, int] | None = None,
    replica_lag: float | None = None,
) -> Generator[Batch, list[Any] | None, VerifyReport]:
    """Plan: check the named threads, or every thread and the long-term store's objects.

    ``read_data`` (or share K of N: ``read_data_subset``) reads and re-hashes content
    objects; on a replica, what a thread written within the lag misses is ``arriving``.
    """
    depth = Depth.of(read_data, read_data_subset)
    since = arriving_since(replica_lag)
    report = yield from verify_threads(thread_ids, VerifyReport(depth=depth), since)
    if thread_ids is None:
        yield from verify_store(report, round(time.time() * 1e6) if now_us is None else now_us)
    return report
