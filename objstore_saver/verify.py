"""fsck for a store: every manifest parses, every reference resolves (spec §6.11).

The plans live with their layers: the checkpoint threads' walk in
:mod:`objstore_saver.plans.verify` (with :mod:`~objstore_saver.plans.verify_walk`,
:mod:`~objstore_saver.plans.verify_objects` and
:mod:`~objstore_saver.plans.verify_report`), the long-term store's objects (§8.4.8)
in :mod:`objstore_saver.longterm.verify`. This module joins them in
:func:`verify`, the check of a whole store, and keeps the public names
importable from here.
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
    """Plan: spec §6.11. Check the named threads, or every thread and the
    long-term store's objects (§8) in the store.

    By default no content object (``objects/<H>``) is read: references are
    checked against the listing. ``read_data`` reads and re-hashes them all;
    ``read_data_subset`` (``"K/N"``, K from 1) those of share K of N. On a
    replica (``replica_lag`` seconds) what a thread written within the lag
    misses is counted as ``arriving`` (spec §6.16).
    """
    depth = Depth.of(read_data, read_data_subset)
    since = arriving_since(replica_lag)
    report = yield from verify_threads(thread_ids, VerifyReport(depth=depth), since)
    if thread_ids is None:
        yield from verify_store(report, round(time.time() * 1e6) if now_us is None else now_us)
    return report
