"""bench/probes/job_calls.py: Python calls and CPU per thread of prune and verify."""

from __future__ import annotations

from bench.probes import job_calls


def test_both_jobs_are_counted_on_every_seeded_thread() -> None:
    r = job_calls.measure(threads=8, rounds=1)
    assert set(r) == {"prune --keep-last 1 (dry run)", "verify"}
    # A job runs hundreds of calls a thread (listing, decoding, planning); a probe
    # that profiled nothing, or ran no thread, would count none.
    assert all(row["calls_per_thread"] > 100 for row in r.values())
    assert all(row["cpu_ms_per_thread"] > 0 for row in r.values())
