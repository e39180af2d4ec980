"""The savers a migration reads: threads in a fixed order from a position (where a rerun
resumes), a thread's checkpoints through LangGraph's async saver API:

* ``postgres``: LangGraph's ``AsyncPostgresSaver`` on a connection pool; thread
  ids by keyset pages of ``SELECT DISTINCT thread_id`` in the database's order.
* ``sqlite``: ``AsyncSqliteSaver`` (aiosqlite keeps the database off the event
  loop); thread ids as for PostgreSQL.
* ``saver``: any LangGraph saver a ``module:callable`` factory returns; its
  ``alist`` when it has one, else ``list`` in a worker thread.
* ``objstore``: another bucket or directory, read by this package's saver.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from objstore_saver.config import POSTGRES_URL
from objstore_saver.driver import Driver
from objstore_saver.format import keys
from objstore_saver.ops._common import JobError, OpsConfig
from objstore_saver.plans.scan import scan_threads
from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage.urls import redact_url

__all__ = ["SOURCES", "Source", "open_source"]

#: Kinds of source ``migrate`` reads.
SOURCES = ("postgres", "sqlite", "saver", "objstore")
#: Thread ids read from a database per query.
THREAD_PAGE = 1000


@dataclass(frozen=True)
class Source:
    """An opened source: its ``description`` (no password); ``threads(after)``: (opaque
    position, thread id) of every thread after ``after`` (None: all), in a fixed order;
    ``checkpoints(thread_id)``: the thread's tuples, with their pending writes."""

    description: str
    threads: Callable[[str | None], AsyncGenerator[tuple[str, str], None]]
    checkpoints: Callable[[str], Awaitable[list[CheckpointTuple]]]


def _saver_class(kind: str, module: str, name: str) -> Any:
    """LangGraph's saver class for ``--from kind``, or a JobError naming the extra."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        raise JobError(
            f"--from {kind} needs langgraph-checkpoint-{kind}: pip install 'objstore-saver[{kind}]'"
        ) from None
    return getattr(found, name)


def _alist_of(saver: BaseCheckpointSaver[Any]) -> Callable[[str], Awaitable[list[CheckpointTuple]]]:
    """A thread's tuples by ``alist``, or by ``list`` in a worker thread where that is all."""

    async def checkpoints(thread_id: str) -> list[CheckpointTuple]:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        try:
            return [t async for t in saver.alist(config)]
        except NotImplementedError:
            return await asyncio.to_thread(lambda: list(saver.list(config)))

    return checkpoints


def _sql_threads(
    fetch: Callable[[str | None], Awaitable[list[str]]],
) -> Callable[[str | None], AsyncGenerator[tuple[str, str], None]]:
    """Thread ids by keyset pages: ``fetch(after)`` returns the next page."""

    async def threads(after: str | None) -> AsyncGenerator[tuple[str, str], None]:
        while True:
            page = await fetch(after)
            for thread_id in page:
                yield thread_id, thread_id
            if len(page) < THREAD_PAGE:
                return
            after = page[-1]

    return threads


@contextlib.asynccontextmanager
async def _postgres(config: OpsConfig, concurrency: int) -> AsyncIterator[Source]:
    url = config.postgres_url
    if not url:
        raise JobError(f"--from postgres needs {POSTGRES_URL} (or --source-url) to be set")
    saver_class = _saver_class(
        "postgres", "langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver"
    )
    from psycopg import AsyncConnection, Error as DatabaseError
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    # One connection first: a wrong database or password fails at once, where
    # a pool would retry until its timeout.
    try:
        probe = await AsyncConnection.connect(url, connect_timeout=10)
    except DatabaseError as exc:
        raise JobError(f"cannot connect to the source postgres {redact_url(url)}: {exc}") from None
    await probe.close()
    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max(2, min(concurrency, 32)),
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    try:
        await pool.open(wait=True, timeout=30)
    except Exception as exc:  # noqa: BLE001  # the job redacts and names the source
        await pool.close()
        raise JobError(f"cannot connect to the source postgres {redact_url(url)}: {exc}") from None

    async def fetch(after: str | None) -> list[str]:
        async with pool.connection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT DISTINCT thread_id FROM checkpoints WHERE %s::text IS NULL "
                    "OR thread_id > %s ORDER BY thread_id LIMIT %s",
                    (after, after, THREAD_PAGE),
                )
            ).fetchall()
        return [str(row["thread_id"]) for row in rows]

    try:
        yield Source(
            f"postgres {redact_url(url)}", _sql_threads(fetch), _alist_of(saver_class(pool))
        )
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def _sqlite(path: str | None) -> AsyncIterator[Source]:
    if not path:
        raise JobError("--from sqlite needs the path of the SQLite file")
    if not os.path.isfile(path):
        raise JobError(f"SQLite file {path!r} does not exist")
    saver_class = _saver_class("sqlite", "langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver")
    async with saver_class.from_conn_string(path) as saver:

        async def fetch(after: str | None) -> list[str]:
            async with saver.conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE ? IS NULL OR thread_id > ? "
                "ORDER BY thread_id LIMIT ?",
                (after, after, THREAD_PAGE),
            ) as cursor:
                return [str(row[0]) for row in await cursor.fetchall()]

        yield Source(f"sqlite {path}", _sql_threads(fetch), _alist_of(saver))


def _listed_threads(
    saver: BaseCheckpointSaver[Any],
) -> Callable[[str | None], AsyncGenerator[tuple[str, str], None]]:
    """Thread ids of a saver that can only list everything: read once, sorted."""

    async def threads(after: str | None) -> AsyncGenerator[tuple[str, str], None]:
        def every() -> list[str]:
            return sorted({str(t.config["configurable"]["thread_id"]) for t in saver.list(None)})

        for thread_id in await asyncio.to_thread(every):
            if after is None or thread_id > after:
                yield thread_id, thread_id

    return threads


@contextlib.asynccontextmanager
async def _factory(source: str | None) -> AsyncIterator[Source]:
    if not source or ":" not in source:
        raise JobError("--from saver needs a factory as module:callable")
    module_name, _, attr = source.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise JobError(f"cannot load the source saver factory {source!r}: {exc}") from None
    made = factory()
    with contextlib.ExitStack() as stack:
        if not isinstance(made, BaseCheckpointSaver) and hasattr(made, "__enter__"):
            made = stack.enter_context(made)
        if not isinstance(made, BaseCheckpointSaver):
            raise JobError(
                f"source factory {source!r} returned {type(made).__name__}, "
                "not a LangGraph BaseCheckpointSaver"
            )
        yield Source(f"saver {source}", _listed_threads(made), _alist_of(made))


@contextlib.asynccontextmanager
async def _objstore(source: str | None) -> AsyncIterator[Source]:
    if not source:
        raise JobError("--from objstore needs the source URL (s3://... or file:///...)")
    saver = await asyncio.to_thread(ObjectStoreSaver.from_url, source)
    driver = Driver(saver.store, max_workers=4)

    async def threads(after: str | None) -> AsyncGenerator[tuple[str, str], None]:
        # Positions are thread prefixes; "0" follows "/": resume past every key of one.
        start = None if after is None else after[:-1] + "0"
        async for listing in driver.aiterate(scan_threads(start)):
            thread_id = keys.untoken(listing.token)
            if thread_id is None:
                raise JobError(
                    f"source {saver.store.location} holds a thread with a hashed key "
                    f"token ({listing.pfx}); copy it with copy_thread by thread id"
                )
            yield listing.pfx, thread_id

    try:
        yield Source(f"objstore {saver.store.location}", threads, _alist_of(saver))
    finally:
        driver.close()
        await asyncio.to_thread(saver.close)


def open_source(
    kind: str, source: str | None, config: OpsConfig, concurrency: int
) -> contextlib.AbstractAsyncContextManager[Source]:
    """Open the source of a migration of ``kind`` (:data:`SOURCES`): the SQLite file, the
    ``module:callable`` factory or the store URL; None for PostgreSQL, whose URL is in
    ``config``. ``concurrency`` sizes the pool. ``JobError`` names a source that fails."""
    if kind == "postgres":
        if source is not None:
            raise JobError(
                "a PostgreSQL source is taken from configuration (POSTGRES_URL, or the CLI's "
                "--source-url), not from the job's arguments"
            )
        return _postgres(config, concurrency)
    opener = {"sqlite": _sqlite, "saver": _factory, "objstore": _objstore}.get(kind)
    if opener is not None:
        return opener(source)
    raise JobError(f"unknown migration source {kind!r}: use one of {', '.join(SOURCES)}")
