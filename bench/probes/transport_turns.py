"""Client CPU per chat turn: PostgresSaver against the saver on each S3 transport.

``python -m bench.probes.transport_turns`` runs workload 1's chat graph (the seed
conversation) through PostgresSaver and through ObjectStoreSaver on
``Boto3S3Store`` (boto3) and on ``LeanS3Store``, first as 8 conversations on 8 OS
threads (``invoke``), then as 64 conversations on one event loop
(``ainvoke``). The servers (PostgreSQL, moto) run in other processes (moto behind the
metering proxy, no injected delay, keep-alive connections), so
``time.process_time()`` over the measured turns is the client's CPU alone: the
graph, the saver, serialization and the storage client. Run it with the
project's environment (langgraph, langgraph-checkpoint-postgres);
PostgreSQL's ``initdb``/``postgres`` must be installed (see bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import boto3

from bench.graphs import SEED, chat_graph
from bench.postgres import PostgresServer
from bench.server import ServerProcess
from objstore_saver import Boto3S3Store, ObjectStoreSaver
from objstore_saver.storage import (
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    PutMode,
)
from objstore_saver.storage.s3.lean import LeanS3Store

REGION = "us-east-1"


def _requests(proxy_url: str) -> int:
    """Requests the metering proxy has forwarded so far."""
    with urllib.request.urlopen(f"{proxy_url}/__bench__/counters") as r:
        return sum(json.loads(r.read())["requests"].values())


def _bucket(url: str) -> str:
    name = f"turns-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=url, region_name=REGION).create_bucket(Bucket=name)
    return name


class DictStore:
    """Objects in a dict, no I/O: the saver's and LangGraph's CPU without any transport.

    Not a backend (no key checks, no byte order beyond ``sorted``): a floor
    for the table only.
    """

    location = "memory://floor"

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._times: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        with self._lock:
            if mode is PutMode.CREATE and key in self._objects:
                raise ObjectExistsError(self.location, key)
            self._objects[key] = bytes(data)
            self._times[key] = datetime.now(UTC)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        try:
            data = self._objects[key]
        except KeyError:
            raise ObjectNotFoundError(self.location, key) from None
        return data if byte_range is None else data[byte_range[0] : byte_range[1]]

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> ListPage:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
        if start_after:
            keys = [k for k in keys if k > start_after]
        objects = [ObjectInfo(k, len(self._objects[k]), self._times[k]) for k in keys[:limit]]
        return ListPage(objects=objects, truncated=len(keys) > limit)

    def delete(self, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self._objects.pop(key, None)

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self.put(key, data, mode)

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self.get(key, byte_range)

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = 1000
    ) -> ListPage:
        return self.list(prefix, start_after=start_after, limit=limit)

    async def adelete(self, keys: Sequence[str]) -> None:
        self.delete(keys)


def _store(kind: str, url: str) -> Any:
    if kind == "dict":
        return DictStore()
    bucket = _bucket(url)
    if kind == "boto3":
        return Boto3S3Store(bucket, endpoint_url=url, region_name=REGION)
    return LeanS3Store(bucket, endpoint_url=url, region_name=REGION)


@contextlib.contextmanager
def _sync_savers(kind: str, n: int, url: str, pg: PostgresServer) -> Iterator[list[Any]]:
    """``n`` savers for ``n`` threads: one connection each for Postgres, one shared store."""
    if kind == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conninfo = pg.create_database(f"turns_{uuid.uuid4().hex[:8]}")
        with contextlib.ExitStack() as stack:
            savers = []
            for _ in range(n):
                conn = stack.enter_context(
                    psycopg.connect(
                        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
                    )
                )
                savers.append(PostgresSaver(conn))
            savers[0].setup()
            yield savers
        return
    with ObjectStoreSaver(_store(kind, url)) as saver:
        yield [saver] * n


@contextlib.asynccontextmanager
async def _async_savers(kind: str, n: int, url: str, pg: PostgresServer) -> AsyncIterator[list]:
    if kind == "postgres":
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row

        conninfo = pg.create_database(f"turns_{uuid.uuid4().hex[:8]}")
        async with contextlib.AsyncExitStack() as stack:
            savers = []
            for _ in range(n):
                conn = await stack.enter_async_context(
                    await psycopg.AsyncConnection.connect(
                        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
                    )
                )
                savers.append(AsyncPostgresSaver(conn))
            await savers[0].setup()
            yield savers
        return
    store = _store(kind, url)
    with ObjectStoreSaver(store) as saver:
        yield [saver] * n
    if isinstance(store, LeanS3Store):
        await store.aclose()


def _threads(kind: str, n: int, warmup: int, turns: int, url: str, pg: Any) -> float:
    """CPU ms per turn of ``n`` conversations on ``n`` threads."""
    with _sync_savers(kind, n, url, pg) as savers:
        graphs = [chat_graph(s, SEED) for s in savers]
        start = threading.Barrier(n + 1)
        done = threading.Barrier(n + 1)

        def conversation(i: int) -> None:
            config = {"configurable": {"thread_id": f"c{i}"}}
            for t in range(warmup):
                graphs[i].invoke({"messages": SEED.inputs(t)}, config)
            start.wait()
            for t in range(warmup, warmup + turns):
                graphs[i].invoke({"messages": SEED.inputs(t)}, config)
            done.wait()

        workers = [threading.Thread(target=conversation, args=(i,)) for i in range(n)]
        for w in workers:
            w.start()
        start.wait()
        cpu = time.process_time()
        done.wait()
        cpu = time.process_time() - cpu
        for w in workers:
            w.join()
    return 1000 * cpu / (n * turns)


def _tasks(kind: str, n: int, warmup: int, turns: int, url: str, pg: Any) -> float:
    """CPU ms per turn of ``n`` conversations as tasks on one event loop."""

    async def run() -> float:
        async with _async_savers(kind, n, url, pg) as savers:
            graphs = [chat_graph(s, SEED) for s in savers]

            async def conversation(i: int, turn_range: range) -> None:
                config = {"configurable": {"thread_id": f"c{i}"}}
                for t in turn_range:
                    await graphs[i].ainvoke({"messages": SEED.inputs(t)}, config)

            await asyncio.gather(*(conversation(i, range(warmup)) for i in range(n)))
            cpu = time.process_time()
            await asyncio.gather(
                *(conversation(i, range(warmup, warmup + turns)) for i in range(n))
            )
            return 1000 * (time.process_time() - cpu) / (n * turns)

    return asyncio.run(run())


MODES: dict[str, Callable[..., float]] = {"8 OS threads": _threads, "64 async tasks": _tasks}
WIDTH = {"8 OS threads": 8, "64 async tasks": 64}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10, help="measured turns per conversation")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--savers",
        default="postgres,boto3,lean,dict",
        help="dict: ObjectStoreSaver on an in-process dict, the floor without any transport",
    )
    parser.add_argument("--s3-server", default="moto", help="S3 server of bench.server")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    pg = PostgresServer()
    try:
        with ServerProcess(delay_ms=0, s3_server=args.s3_server) as server:
            access, secret = server.keys
            os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
            for mode, fn in MODES.items():
                for kind in args.savers.split(","):
                    before = _requests(server.proxy_url)
                    ms = fn(kind, WIDTH[mode], args.warmup, args.turns, server.proxy_url, pg)
                    sent = (_requests(server.proxy_url) - before) / (
                        WIDTH[mode] * (args.warmup + args.turns)
                    )
                    results.setdefault(kind, {})[mode] = ms
                    print(
                        f"{mode:16} {kind:9} {ms:7.2f} ms CPU per turn, "
                        f"{sent:.1f} S3 requests per turn",
                        flush=True,
                    )
    finally:
        pg.stop()
    base = results.get("postgres")
    print("\n| saver | " + " | ".join(MODES) + " |")
    print("| --- |" + " --- |" * len(MODES))
    for kind, row in results.items():
        cells = []
        for mode in MODES:
            ratio = f" ({row[mode] / base[mode]:.2f}x)" if base else ""
            cells.append(f"{row[mode]:.2f} ms{ratio}")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
