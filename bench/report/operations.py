"""Workload 7's figures and targets: the operator jobs at production scale.

:func:`section` gives the section's placeholders and tables, :func:`headline`
its headline, :func:`add_targets` its targets (met or not, each with the
figures of its reason paragraph, ``reason.w7_*`` in ``template.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.report.results import OURS, Results

#: The jobs of the first table, in its order, with their names on the page.
JOBS = {
    "threads": "`threads`",
    "verify": "`verify`",
    "verify_no_delay": "`verify`, no injected round trip",
    "du": "`du`",
    "prune_dry_run": "`prune --keep-last 1` (dry run)",
    "prune_apply": "`prune --keep-last 1 --apply`",
    "delete_threads": "`delete_threads --apply` (the pruned threads)",
    "store_sweep": "`store-sweep --apply` (a row a long-term store item, not a thread)",
}
#: S3 operations by their short names on the page (``HeadBucket``: once per job, left out).
OPS = {"LIST": "ListObjectsV2", "GET": "GetObject", "PUT": "PutObject", "DELETE": "DeleteObjects"}
#: The memory table's rows that are not a job, by their name on the page.
MEMORY_ROWS = {"list": "the store's listing alone, no job"}
#: The targets' thresholds: requests and client CPU a thread (``verify`` at its default depth).
VERIFY_REQUESTS = 3.1
CPU_LIMITS = (
    ("threads", "threads", 0.2),
    ("verify", "verify", 0.5),
    ("prune_apply", "prune --keep-last 1 --apply", 0.8),
    ("delete_threads", "delete_threads --apply", 0.8),
)
MIGRATE_CPU_MS = 0.7
SHARD_CPU = 1.1
DU_BEFORE = 131.0
#: The line a rate is rounded around on the page.
RATE = 1000.0


def rate(x: float, line: float = RATE) -> str:
    """A rate with thousands separated; one decimal when rounding would cross ``line``."""
    return f"{x:,.1f}" if (x < line) != (round(x) < line) else f"{x:,.0f}"


def duration(seconds: float) -> str:
    """``"2.5 h"``, ``"17 min"`` or ``"45 s"``."""
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _per(requests: dict[str, float], short: str) -> float:
    return requests.get(OPS[short], 0.0)


def _verify_reads(verify: dict[str, Any], add: Add, reason: Callable[[], Any]) -> None:
    """``verify``'s reads at its default depth: no content object, and its requests a thread.

    The default depth reads every manifest and every pending write, and the
    long-term store's records (spec §6.11); the request target is the
    thread's own listing and manifests, with the writes and the store's
    records counted beside it from the same run.
    """
    read, n = verify["read"], verify["threads"]
    per = verify["requests_per_thread"]
    add(
        "W7 `verify` reads no content object",
        read["objects"] == 0,
        f"{read['objects']:,} read",
        f"depth {verify['depth']}",
    )
    own = per.get(OPS["LIST"], 0.0) + (read["manifests"] + read["objects"]) / n
    writes = read["writes"] / n
    store = per.get(OPS["GET"], 0.0) - (read["manifests"] + read["objects"] + read["writes"]) / n
    add(
        f"W7 `verify` ≤ {VERIFY_REQUESTS} requests a thread for its checkpoints",
        own <= VERIFY_REQUESTS,
        f"{own:.2f} (LIST {per.get(OPS['LIST'], 0.0):.3f}, GET of manifests "
        f"{read['manifests'] / n:.1f})",
        f"besides, a thread's pending writes: GET {writes:.1f}, and the long-term store's "
        f"records: GET {store:.1f} a thread (every write and record is read at this depth)",
        reason=reason,
    )


def _by_op(per: dict[str, float], digits: int = 1) -> str:
    """``"GET 8.0, LIST 0.01"``: requests per unit by short name, HeadBucket left out."""
    named = {short: per[full] for short, full in OPS.items() if per.get(full)}
    return ", ".join(f"{k} {v:.{digits if v >= 0.1 else 3}f}" for k, v in named.items())


def _weed_cores(job: dict[str, Any]) -> float:
    return job["server_cpu_s"].get("weed", 0.0) / job["seconds"]


def _rps(job: dict[str, Any]) -> float:
    """Requests a second the job sent (and the server answered)."""
    return sum(job["requests"].values()) / job["seconds"]


def _job_row(name: str, job: dict[str, Any]) -> list[Any]:
    per = job["requests_per_thread"]
    return [
        name,
        job["threads"],
        f"{job['seconds']:.2f}",
        rate(job["threads_per_second"]),
        f"{_rps(job):,.0f}",
        *(f"{_per(per, op):.2f}" for op in OPS),
        f"{job['cpu_ms_per_thread']:.2f}",
        f"{job['server_ms_per_request']:.0f}",
        f"{job['in_flight']:.0f}",
        f"{_weed_cores(job):.2f}",
        duration(job["projected_s"]),
    ]


def section(d: Results) -> dict[str, Any] | None:
    """Workload 7's placeholders and tables; None when the run has no row for it."""
    r = d.ok("7", OURS)
    if r is None:
        return None
    jobs = r["jobs"]
    n = r["sizes"]["threads"]
    header = [
        "job",
        "threads",
        "s",
        "threads/s",
        "requests/s",
        *(f"{op} / thread" for op in OPS),
        "client CPU ms / thread",
        "S3 server ms / request",
        "requests in flight",
        "weed cores",
        f"{r['projected_threads']:,} threads in",
    ]
    rows = [_job_row(label, jobs[k]) for k, label in JOBS.items() if k in jobs]
    out: dict[str, Any] = {
        "threads": n,
        "checkpoints": r["sizes"]["checkpoints"],
        "keys": r["keys_per_thread"],
        "seed_s": r["seed_s"],
        "buckets": r["seed_buckets"],
        "delay_ms": r["delay_ms"],
        "concurrency": r["concurrency"],
        "load_before": r["load_average_before"],
        "load_after": r["load_average_after"],
        "workload_min": r["workload_s"] / 60,
        "jobs": (header, rows),
        "migrate": _migrate(r),
        "shards": _shards(r),
        "memory": _memory(r),
    }
    return out


def _migrate(r: dict[str, Any]) -> dict[str, Any] | None:
    m = r["migrate"]
    if "one" not in m:
        return None
    one = m["one"]
    header = [
        "job",
        "threads",
        "checkpoints",
        "s",
        "checkpoints/s",
        "requests/s",
        *(f"{op} / checkpoint" for op in OPS),
        "client CPU ms / checkpoint",
        "S3 server ms / request",
        "requests in flight",
        "weed cores",
        f"{r['projected_checkpoints']:,} checkpoints in",
    ]
    per = one["requests_per_checkpoint"]
    row = [
        "`migrate --from postgres --apply`",
        one["threads"],
        one["checkpoints"],
        f"{one['seconds']:.2f}",
        rate(one["checkpoints_per_second"]),
        f"{_rps(one):,.0f}",
        *(f"{_per(per, op):.2f}" for op in OPS),
        f"{one['cpu_s'] / one['checkpoints'] * 1000:.2f}",
        f"{one['server_ms_per_request']:.0f}",
        f"{one['in_flight']:.0f}",
        f"{_weed_cores(one):.2f}",
        duration(one["projected_s"]),
    ]
    return {
        "threads": one["threads"],
        "per_thread": r["sizes"]["migrate_checkpoints"],
        "checkpoints": one["checkpoints"],
        "writes": one["writes"],
        "seed_s": m["seed_s"],
        "table": (header, [row]),
    }


def _shards(r: dict[str, Any]) -> dict[str, Any]:
    rows = []
    pairs = [("`prune --keep-last 1 --apply`", r["jobs"]["prune_apply"], r["two_prune"], "")]
    if "one" in r["migrate"]:
        m = r["migrate"]
        pairs.append(("`migrate --apply`", m["one"], m["two"], "checkpoints_per_second"))
    for label, one, two, field in pairs:
        unit = "checkpoints/s" if field else "threads/s"
        field = field or "threads_per_second"
        rows.append(
            [
                label,
                f"{one['seconds']:.2f}",
                f"{rate(one[field])} {unit}",
                f"{two['seconds']:.2f}",
                f"{rate(two[field])} {unit}",
                f"{two[field] / one[field]:.2f}x",
                f"{two['start_skew_s'] * 1000:.0f}",
                f"{_rps(one):,.0f} → {_rps(two):,.0f}",
                f"{one['server_ms_per_request']:.0f} → {two['server_ms_per_request']:.0f}",
            ]
        )
    header = [
        "job",
        "one shard: s",
        "rate",
        "two shards: s",
        "rate",
        "speed-up",
        "shards started apart (ms)",
        "requests/s, one → two",
        "S3 server ms / request, one → two",
    ]
    return {"table": (header, rows)}


def _memory(r: dict[str, Any]) -> dict[str, Any]:
    mem = r["memory"]
    sizes = sorted({int(k) for by in mem["jobs"].values() for k in by})
    small, big = str(sizes[0]), str(sizes[-1])
    rows = []
    for job, by in mem["jobs"].items():
        grew = {k: (v["peak_kib"] - v["rss_before_kib"]) / 1024 for k, v in by.items()}
        rows.append(
            [
                MEMORY_ROWS.get(job, f"`{job}`"),
                f"{by[small]['rss_before_kib'] / 1024:.0f}",
                f"{grew[small]:.1f}",
                f"{grew[big]:.1f}",
                f"{grew[big] / grew[small]:.1f}x" if grew[small] > 0 else "-",
            ]
        )
    header = [
        "job",
        "resident before the job (MiB)",
        f"peak above it, {int(small):,} threads (MiB)",
        f"peak above it, {int(big):,} threads (MiB)",
        "ratio",
    ]
    return {
        "store": mem["store"],
        "small": int(small),
        "big": int(big),
        "table": (header, rows),
    }


def headline(d: Results) -> dict[str, Any] | None:
    """The section's headline figures, or None."""
    r = d.ok("7", OURS)
    if r is None:
        return None
    jobs = r["jobs"]
    m = r["migrate"].get("one")
    return {
        "threads": r["sizes"]["threads"],
        "delay_ms": r["delay_ms"],
        "verify": rate(jobs["verify"]["threads_per_second"]),
        "prune": rate(jobs["prune_apply"]["threads_per_second"]),
        "listing": rate(jobs["threads"]["threads_per_second"]),
        "verify_1m": duration(jobs["verify"]["projected_s"]),
        "migrate": "-" if m is None else rate(m["checkpoints_per_second"]),
    }


Add = Callable[..., None]


def add_targets(d: Results, add: Add) -> None:
    """Workload 7's targets, through ``add`` (see :func:`bench.report.targets.targets`).

    Each job's client CPU (and ``verify``'s requests) per thread or checkpoint,
    and the shards' work and CPU: figures a job's own process measures, which
    transfer to another machine. The rates stay in the notes and tables.
    """
    r = d.ok("7", OURS)
    if r is None:
        return
    jobs = r["jobs"]
    cpus = d.doc["machine"]["cpus"]
    verify = jobs["verify"]
    if "read" in verify:
        _verify_reads(verify, add, lambda: _requests(r, verify, "verify", cpus))
    else:
        add(
            f"W7 `verify` ≤ {VERIFY_REQUESTS} requests a thread",
            verify["total_requests_per_thread"] <= VERIFY_REQUESTS,
            f"{verify['total_requests_per_thread']:.2f} ({_by_op(verify['requests_per_thread'])})",
            verify.get("depth", "") and f"depth {verify['depth']}",
            reason=lambda: _requests(r, verify, "verify", cpus),
        )
    for key, name, limit in CPU_LIMITS:
        job = jobs.get(key)
        if job is None:
            add(f"W7 `{name}` ≤ {limit} ms client CPU a thread", None, "not measured")
            continue
        reason = _listing if key == "threads" else _requests
        add(
            f"W7 `{name}` ≤ {limit} ms client CPU a thread",
            job["cpu_ms_per_thread"] <= limit,
            f"{job['cpu_ms_per_thread']:.2f} ms",
            f"{rate(job['threads_per_second'])} threads/s, {job['threads']:,} threads",
            reason=lambda job=job, name=name, reason=reason: reason(r, job, name, cpus),
        )
    du = jobs["du"]
    add(
        f"W7 `du` ≥ {DU_BEFORE:.0f} threads/s (its rate before the jobs' fan-out)",
        du["threads_per_second"] >= DU_BEFORE,
        f"{rate(du['threads_per_second'], DU_BEFORE)} threads/s",
        reason=lambda: _listing(r, du, "du", cpus),
    )
    m = r["migrate"]
    if "one" in m:
        one = m["one"]
        cpu_ms = one["cpu_s"] / one["checkpoints"] * 1000
        add(
            f"W7 `migrate --apply` ≤ {MIGRATE_CPU_MS} ms client CPU a checkpoint",
            cpu_ms <= MIGRATE_CPU_MS,
            f"{cpu_ms:.2f} ms",
            f"{rate(one['checkpoints_per_second'])} checkpoints/s, "
            f"{one['checkpoints']:,} checkpoints from PostgreSQL",
            reason=lambda: _migrate_reason(r, one),
        )
    pairs = [("prune --keep-last 1 --apply", "thread", jobs["prune_apply"], r["two_prune"])]
    if "one" in m:
        pairs.append(("migrate --apply", "checkpoint", m["one"], m["two"]))
    for name, unit, one, two in pairs:
        once = two.get("exactly_once")
        add(
            f"W7 two shards handle every thread exactly once (`{name}`)",
            None if once is None else once["ok"],
            "not measured" if once is None else once["figure"],
            "" if once is None else "two processes started together",
        )
        ratio = _per_unit_cpu(two, unit) / _per_unit_cpu(one, unit)
        add(
            f"W7 two shards' client CPU a {unit} ≤ {SHARD_CPU}x one shard's (`{name}`)",
            ratio <= SHARD_CPU,
            f"{ratio:.2f}x",
            f"speed-up {_speed_up(one, two, unit):.2f}x in wall time",
            reason=lambda one=one, two=two, name=name: _shards_reason(r, one, two, name, cpus),
        )


def _per_unit_cpu(row: dict[str, Any], unit: str) -> float:
    """Client CPU seconds a thread (or a checkpoint, for ``unit`` checkpoint) of a job's row."""
    return row["cpu_s"] / (row["checkpoints"] if unit == "checkpoint" else row["threads"])


def _speed_up(one: dict[str, Any], two: dict[str, Any], unit: str) -> float:
    field = "checkpoints_per_second" if unit == "checkpoint" else "threads_per_second"
    return float(two[field] / one[field])


def _listing(r: dict[str, Any], job: dict[str, Any], name: str, cpus: int) -> Any:
    lists = job["requests"].get(OPS["LIST"], 0)
    return (
        "w7_listing",
        {
            "job": name,
            "lists": lists,
            "threads": job["threads"],
            "per_page": job["threads"] / max(1, lists),
            "keys": r["keys_per_thread"],
            "list_ms": job["seconds"] / max(1, lists) * 1000,
            "server_ms": job["server_ms_per_request"],
            "delay_ms": r["delay_ms"],
            "cpu_ms": job["cpu_ms_per_thread"],
        },
    )


def _requests(r: dict[str, Any], job: dict[str, Any], name: str, cpus: int) -> Any:
    per = job["total_requests_per_thread"]
    server = job["server_cpu_s"]
    control = r["jobs"].get("verify_no_delay") if name == "verify" else None
    return (
        "w7_requests",
        {
            "job": name,
            "requests": per,
            "by_op": _by_op(job["requests_per_thread"]),
            "delay_ms": r["delay_ms"],
            "server_ms": job["server_ms_per_request"],
            "in_flight": job["in_flight"],
            "rate": job["threads_per_second"],
            "weed_cores": server.get("weed", 0.0) / job["seconds"],
            "proxy_cores": server.get("python", 0.0) / job["seconds"],
            "cores": job["cpu_s"] / job["seconds"],
            "cpus": cpus,
            "load": r["load_average_before"],
            "cpu_ms": job["cpu_ms_per_thread"],
            "cpu_cap": 1000 / job["cpu_ms_per_thread"],
            "control": None
            if control is None
            else {"rate": control["threads_per_second"], "served": _rps(control)},
        },
    )


def _migrate_reason(r: dict[str, Any], one: dict[str, Any]) -> Any:
    cpu_ms = one["cpu_s"] / one["checkpoints"] * 1000
    thread_s = r["concurrency"] / one["threads_per_second"]
    return (
        "w7_migrate",
        {
            "requests": sum(one["requests_per_checkpoint"].values()),
            "by_op": _by_op(one["requests_per_checkpoint"], 2),
            "cpu_ms": cpu_ms,
            "cores": one["cpu_s"] / one["seconds"],
            "cpu_cap": 1000 / cpu_ms,
            "concurrency": r["concurrency"],
            "thread_s": thread_s,
            "checkpoint_ms": thread_s / r["sizes"]["migrate_checkpoints"] * 1000,
            "server_ms": one["server_ms_per_request"],
            "pg_cores": one["server_cpu_s"].get("postgres", 0.0) / one["seconds"],
        },
    )


def _shards_reason(
    r: dict[str, Any], one: dict[str, Any], two: dict[str, Any], name: str, cpus: int
) -> Any:
    unit = "checkpoint" if "checkpoints" in two else "thread"
    return (
        "w7_shards",
        {
            "job": name,
            "unit": unit,
            "cpu_one": _per_unit_cpu(one, unit) * 1000,
            "cpu_two": _per_unit_cpu(two, unit) * 1000,
            "seconds": two["seconds"],
            "skew_ms": two["start_skew_s"] * 1000,
            "shard_cores": two["cpu_s"] / two["seconds"],
            "one_cores": one["cpu_s"] / one["seconds"],
            "rps_one": _rps(one),
            "rps_two": _rps(two),
            "rps_ratio": _rps(two) / _rps(one),
            "in_flight_one": one["in_flight"],
            "in_flight_two": two["in_flight"],
            "server_ms_one": one["server_ms_per_request"],
            "server_ms_two": two["server_ms_per_request"],
            "weed_one": _weed_cores(one),
            "weed_two": _weed_cores(two),
            "cpus": cpus,
            "load": r["load_average_before"],
        },
    )
