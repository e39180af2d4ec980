"""Store workload: LangGraph ``BaseStore`` put/get/search latency and requests per operation.

``python -m bench.store_bench [--quick] [--s3-server moto|seaweedfs|ceph]`` puts
``items`` memories into one namespace, then gets random ones, searches with a
filter and (where the store has an ``index``) with a query embedded by a
deterministic fake embedding (words hashed into ``DIMS`` dimensions: no model,
the same vectors on every machine). One client, one operation at a time: the
latency an agent's node sees.

Stores: ``ObjectStoreStore`` on a local directory and on S3 (the bench's S3
server behind the metering proxy, 20 ms injected per request, as the saver
workloads); LangGraph's ``InMemoryStore``; ``PostgresStore`` on the PostgreSQL
server the bench starts (no semantic search: pgvector is not packaged for this
Debian); ``RedisStore`` is not run (see ``ABSENT``). Requests are counted by
``MeteredStore`` around the object store (exact, per operation); PostgreSQL's
statements are not counted. Writes ``bench/results/store.json`` and the
benchmark section of ``docs/store.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import math
import random
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "store.json"
DOC = ROOT / "docs" / "store.md"
BEGIN = "<!-- store-bench:begin -->"
END = "<!-- store-bench:end -->"
DIMS = 64
NAMESPACE = ("bench", "memories")
KINDS = ("fact", "preference", "episode", "plan", "note")
WORDS = [
    "tea",
    "coffee",
    "turin",
    "paris",
    "cats",
    "dogs",
    "chess",
    "piano",
    "rust",
    "python",
    "hiking",
    "sailing",
]

#: Stores that cannot run here, and why.
ABSENT = {
    "redis": "langgraph-checkpoint-redis's RedisStore needs Redis with the RediSearch 2 "
    "(vector) and RedisJSON modules; Debian 12 ships redis-server 7.0 with neither "
    "(its redis-redisearch is 1.2.2, without vector fields, and RedisJSON is not packaged)",
}


@dataclass(frozen=True)
class Sizes:
    """Operation counts of one run."""

    items: int
    gets: int
    searches: int


QUICK = Sizes(items=60, gets=30, searches=10)
FULL = Sizes(items=500, gets=200, searches=50)


class HashEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors: each word adds weight to a hashed dimension."""

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * DIMS
        for word in text.lower().split():
            h = hashlib.sha256(word.encode()).digest()
            vec[h[0] % DIMS] += 1.0 + h[1] / 255.0
        return vec

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def index_config() -> dict[str, Any]:
    """The ``index`` every store that supports semantic search is built with."""
    return {"dims": DIMS, "embed": HashEmbeddings(), "fields": ["text"]}


def memory(i: int) -> dict[str, Any]:
    """The i-th memory: a short text, a kind to filter on, a number."""
    rnd = random.Random(i)
    return {
        "text": " ".join(rnd.choice(WORDS) for _ in range(8)),
        "kind": KINDS[i % len(KINDS)],
        "n": i,
    }


# --- the stores -------------------------------------------------------------------------


@dataclass
class Opened:
    """An open store, the meter of its requests (None: not counted) and a note."""

    store: Any
    meter: Any = None
    semantic: bool = True
    note: str = ""


@contextlib.contextmanager
def _objstore(inner: Any) -> Iterator[Opened]:
    from objstore_saver import MeteredStore, ObjectStoreStore

    meter = MeteredStore(inner)
    with ObjectStoreStore(meter, index=index_config()) as store:  # type: ignore[arg-type]
        yield Opened(store, meter)


@contextlib.contextmanager
def open_local(ctx: dict[str, Any]) -> Iterator[Opened]:
    """ObjectStoreStore on a local directory (no injected latency)."""
    from objstore_saver import LocalStore

    with (
        tempfile.TemporaryDirectory(prefix="store-bench-") as root,
        _objstore(LocalStore(root)) as opened,
    ):
        yield opened


@contextlib.contextmanager
def open_s3(ctx: dict[str, Any]) -> Iterator[Opened]:
    """ObjectStoreStore on the bench's S3 server through the metering proxy (20 ms)."""
    from objstore_saver.storage import LeanS3Store

    bucket = f"store-bench-{int(time.time() * 1000) % 10**9}"
    ctx["direct"].create_bucket(Bucket=bucket)
    with _objstore(
        LeanS3Store(bucket, endpoint_url=ctx["proxy_url"], region_name=ctx["region"])
    ) as o:
        yield o


@contextlib.contextmanager
def open_memory(ctx: dict[str, Any]) -> Iterator[Opened]:
    """LangGraph's InMemoryStore (no storage: zero requests)."""
    from langgraph.store.memory import InMemoryStore

    yield Opened(InMemoryStore(index=index_config()))  # type: ignore[arg-type]


@contextlib.contextmanager
def open_postgres(ctx: dict[str, Any]) -> Iterator[Opened]:
    """PostgresStore on the bench's PostgreSQL (loopback, no injected latency)."""
    from langgraph.store.postgres import PostgresStore

    server = ctx.get("postgres")
    if server is None:
        raise RuntimeError(f"PostgreSQL unavailable: {ctx.get('postgres_error')}")
    conninfo = server.create_database(f"store_bench_{int(time.time() * 1000) % 10**9}")
    with PostgresStore.from_conn_string(conninfo) as store:
        store.setup()
        yield Opened(store, semantic=False, note="no semantic search: pgvector is not installed")


STORES: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "objstore-local": ("ObjectStoreStore (directory)", open_local),
    "objstore-s3": ("ObjectStoreStore (S3, 20 ms)", open_s3),
    "inmemory": ("InMemoryStore", open_memory),
    "postgres": ("PostgresStore", open_postgres),
}


# --- measuring --------------------------------------------------------------------------


def _summary(times: list[float], meter: Any, before: Any, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ops": n,
        "mean_ms": round(1000 * statistics.fmean(times), 2),
        "p50_ms": round(1000 * statistics.median(times), 2),
        "p95_ms": round(1000 * sorted(times)[max(0, math.ceil(0.95 * n) - 1)], 2),
    }
    if meter is not None:
        after = meter.snapshot()
        for op in ("get", "put", "list", "delete"):
            out[f"{op}_per_op"] = round((after.requests[op] - before.requests[op]) / n, 2)
        out["requests_per_op"] = round((after.total_requests - before.total_requests) / n, 2)
        out["bytes_sent_per_op"] = round((after.bytes_sent - before.bytes_sent) / n)
        out["bytes_received_per_op"] = round((after.bytes_received - before.bytes_received) / n)
    return out


def _timed(opened: Opened, calls: list[Callable[[], Any]]) -> tuple[dict[str, Any], list[Any]]:
    meter = opened.meter
    before = meter.snapshot() if meter is not None else None
    times, results = [], []
    for call in calls:
        t0 = time.perf_counter()
        results.append(call())
        times.append(time.perf_counter() - t0)
    return _summary(times, meter, before, len(calls)), results


def run_store(opened: Opened, sizes: Sizes) -> dict[str, Any]:
    """Every operation on one open store; checks the answers, returns the figures."""
    st = opened.store
    rnd = random.Random(7)
    out: dict[str, Any] = {}
    out["put"], _ = _timed(
        opened,
        [lambda i=i: st.put(NAMESPACE, f"m{i:05d}", memory(i)) for i in range(sizes.items)],
    )
    keys = [rnd.randrange(sizes.items) for _ in range(sizes.gets)]
    out["get"], got = _timed(opened, [lambda i=i: st.get(NAMESPACE, f"m{i:05d}") for i in keys])
    if [g.value for g in got] != [memory(i) for i in keys]:
        raise AssertionError("get returned another value than was put")
    kinds = [KINDS[j % len(KINDS)] for j in range(sizes.searches)]
    out["search_filter"], found = _timed(
        opened,
        [lambda k=k: st.search(NAMESPACE, filter={"kind": k}, limit=10) for k in kinds],
    )
    if any(
        len(f) != 10 or any(r.value["kind"] != k for r in f)
        for f, k in zip(found, kinds, strict=True)
    ):
        raise AssertionError("filtered search returned the wrong items")
    if opened.semantic:
        queries = [" ".join(rnd.choice(WORDS) for _ in range(3)) for _ in range(sizes.searches)]
        out["search_query"], found = _timed(
            opened, [lambda q=q: st.search(NAMESPACE, query=q, limit=10) for q in queries]
        )
        if any(len(f) != 10 or f[0].score is None for f in found):
            raise AssertionError("semantic search returned no scored page")
    else:
        out["search_query"] = {"skipped": opened.note}
    return out


def _versions() -> dict[str, str]:
    out = {}
    for name in ("langgraph", "langgraph-checkpoint-postgres", "psycopg", "moto"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def run(
    sizes: Sizes,
    names: list[str],
    log: Callable[[str], None],
    s3_server: str = "moto",
    delay_ms: float = 20.0,
) -> dict[str, Any]:
    """Start the S3 server (and PostgreSQL when asked), run every store, return the doc."""
    from bench.savers import REGION, Env
    from bench.server import ServerProcess

    started = time.monotonic()
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        ctx: dict[str, Any] = {"region": REGION}
        if "objstore-s3" in names:
            server = stack.enter_context(ServerProcess(delay_ms, s3_server))
            env = Env(server.proxy_url, server.s3_url, "", keys=server.keys)
            ctx.update(proxy_url=server.proxy_url, direct=env.direct, s3=server.server_version)
        if "postgres" in names:
            try:
                from bench.postgres import PostgresServer

                ctx["postgres"] = PostgresServer()
                stack.callback(ctx["postgres"].stop)
            except Exception as exc:  # noqa: BLE001 -- the PostgreSQL row says why
                ctx["postgres_error"] = f"{type(exc).__name__}: {exc}"
        for name in names:
            t0 = time.monotonic()
            try:
                with STORES[name][1](ctx) as opened:
                    results[name] = run_store(opened, sizes)
            except Exception as exc:  # noqa: BLE001 -- a broken peer gets a row saying how
                results[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            log(f"store {name:<15} {time.monotonic() - t0:7.1f}s")
    return {
        "generated_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "sizes": sizes.__dict__,
        "s3_server": ctx.get("s3"),
        "delay_ms": delay_ms,
        "elapsed_s": round(time.monotonic() - started, 1),
        "versions": _versions(),
        "stores": {n: STORES[n][0] for n in names},
        "absent": ABSENT,
        "results": results,
    }


# --- report -----------------------------------------------------------------------------

OPS = (("put", "put"), ("get", "get"), ("search_filter", "search (filter)"),
       ("search_query", "search (query)"))  # fmt: skip


def _cell(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return "—"
    reqs = f" / {r['requests_per_op']:g} req" if "requests_per_op" in r else ""
    return f"{r['p50_ms']:g} ms{reqs}"


def markdown(doc: dict[str, Any]) -> str:
    """The benchmark section of docs/store.md, from a results document."""
    s = doc["sizes"]
    lines = [
        BEGIN,
        f"Generated {doc['generated_at']} by `python -m bench.store_bench` "
        f"({s['items']} puts into one namespace, {s['gets']} gets, {s['searches']} searches "
        f"of each kind, one at a time; S3 server: {doc['s3_server'] or 'not run'}, "
        f"{doc['delay_ms']:g} ms injected per S3 request). Cells: median latency / "
        "requests per operation (counted by `MeteredStore`; PostgreSQL's statements are "
        "not counted, InMemoryStore makes none). Only the S3 row has the injected round "
        "trip: the directory and PostgreSQL (a local server on loopback) have none, so "
        "compare their latencies with care; compare requests, which do not depend on it.",
        "",
        "| store | " + " | ".join(label for _, label in OPS) + " |",
        "|---" * (len(OPS) + 1) + "|",
    ]
    notes = []
    for name, label in doc["stores"].items():
        r = doc["results"].get(name, {})
        if "error" in r:
            lines.append(f"| {label} | " + " | ".join("error" for _ in OPS) + " |")
            notes.append(f"- {label}: {r['error']}")
            continue
        lines.append(f"| {label} | " + " | ".join(_cell(r[op]) for op, _ in OPS) + " |")
        if "skipped" in r.get("search_query", {}):
            notes.append(f"- {label}: {r['search_query']['skipped']}.")
    obj = doc["results"].get("objstore-s3", {})
    if "put" in obj:
        detail = ", ".join(
            f"{label} {obj[op]['get_per_op']:g} GET + {obj[op]['put_per_op']:g} PUT + "
            f"{obj[op]['list_per_op']:g} LIST"
            for op, label in OPS
            if "get_per_op" in obj[op]
        )
        notes.append(f"- ObjectStoreStore requests per operation on S3: {detail}.")
    notes += [f"- Not run: {name}: {why}." for name, why in doc["absent"].items()]
    lines += ["", *notes, "", "Reproduce:", "", "```sh",
              "PYTHONPATH=$PWD /work/venv-bench/bin/python -m bench.store_bench --s3-server "
              f"{doc['s3_server_name']}",
              "```", END]  # fmt: skip
    return "\n".join(lines)


def write_doc(doc: dict[str, Any], path: Path = DOC) -> None:
    """Replace the section between the markers of ``path`` (append it if absent)."""
    text = path.read_text() if path.exists() else "# Long-term memory: `ObjectStoreStore`\n"
    section = markdown(doc)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Benchmark\n\n" + section + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    from bench.server import BACKENDS

    parser = argparse.ArgumentParser(prog="python -m bench.store_bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated store names")
    parser.add_argument("--s3-server", choices=sorted(BACKENDS), default="moto")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="injected per S3 request")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results JSON path")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/store.md alone")
    args = parser.parse_args(argv)
    names = [n for n in args.stores.split(",") if n]
    unknown = set(names) - set(STORES)
    if unknown:
        parser.error(f"unknown store(s) {sorted(unknown)}; known: {list(STORES)}")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    doc = run(QUICK if args.quick else FULL, names, log, args.s3_server, args.delay_ms)
    doc["s3_server_name"] = args.s3_server
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    log(f"wrote {args.out}")
    if not args.no_docs:
        write_doc(doc)
        log(f"wrote {DOC}")


if __name__ == "__main__":
    main()
