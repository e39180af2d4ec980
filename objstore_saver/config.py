"""Configuring the saver in an application ("engine") with one setting: the public entry points.

* :func:`create_checkpointer` / :func:`create_store`: the checkpointer and the
  long-term store an application should use, by one precedence
  (:func:`choose_backend`: explicit, ``OBJSTORE_SAVER_URL``, ``POSTGRES_URL``,
  memory), each step logged at INFO with its reason and never a password.
* :func:`langgraph_checkpointer` / :func:`langgraph_store`: what a LangGraph
  server's ``langgraph.json`` names, in the dotted form the server loads:
  ``objstore_saver.config.langgraph_checkpointer`` (``docs/langgraph-server.md``;
  the server's blocks are read by :mod:`objstore_saver.server_settings`).
* :func:`store_from_url` / :func:`parse_url` (from :mod:`objstore_saver.storage.urls`):
  ``s3://bucket/prefix?endpoint_url=...&region=...`` or ``file:///path`` to a
  checked :class:`~objstore_saver.storage.ObjectStore`; every S3 setting is
  resolved in :mod:`objstore_saver.storage.s3.settings`.

The jobs and the command line read the same variables (:func:`environment_url`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import BaseStore

from objstore_saver.errors import ConfigurationError
from objstore_saver.fallback import FallbackSaver
from objstore_saver.longterm.store import ObjectStoreStore
from objstore_saver.saver import AsyncObjectStoreSaver, ObjectStoreSaver
from objstore_saver.server_settings import (
    checkpointer_options,
    describe_ttl,
    store_options,
    thread_ttl,
)
from objstore_saver.storage.urls import StoreURL, parse_url, redact_url, store_from_url

__all__ = [
    "OBJSTORE_SAVER_URL",
    "POSTGRES_URL",
    "ConfigurationError",
    "StoreURL",
    "create_checkpointer",
    "create_store",
    "langgraph_checkpointer",
    "langgraph_store",
    "parse_url",
    "redact_url",
    "store_from_url",
]

logger = logging.getLogger("objstore_saver.config")

#: Environment variable naming the object store of the application.
OBJSTORE_SAVER_URL = "OBJSTORE_SAVER_URL"
#: Environment variable naming a PostgreSQL database (LangGraph's ``PostgresSaver``).
POSTGRES_URL = "POSTGRES_URL"

T = TypeVar("T")


def environment_url(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The URL the variable ``name`` holds, stripped; ``""`` when it is not set."""
    return (os.environ if environ is None else environ).get(name, "").strip()


def _server_url(role: str) -> str:
    """``OBJSTORE_SAVER_URL`` for a LangGraph server's custom ``role``; it must be set."""
    url = environment_url(OBJSTORE_SAVER_URL)
    if not url:
        raise ConfigurationError(
            f"{OBJSTORE_SAVER_URL} is not set: the LangGraph server's custom {role} "
            "needs it (e.g. s3://bucket/prefix?region=eu-west-1)"
        )
    return url


@dataclass(frozen=True)
class Backends(Generic[T]):
    """The candidates of one role (checkpointer or store), in order of precedence.

    Attributes:
        role: ``"checkpointer"`` or ``"store"`` (the start of each log line).
        noun: What an explicit one is called (``"saver"``, ``"store"``).
        objstore: Builds ours from ``OBJSTORE_SAVER_URL`` (checks it at once).
        postgres: Builds LangGraph's PostgreSQL one, or None when its package
            is not installed.
        postgres_name: Its class name, for the log.
        in_memory: Builds the in-process fallback.
        lost: What the fallback loses on restart (``"conversations"``...).
    """

    role: str
    noun: str
    objstore: Callable[[str], T]
    postgres: Callable[[str], T | None]
    postgres_name: str
    in_memory: Callable[[], T]
    lost: str


def choose_backend(backends: Backends[T], explicit: T | None, env: Mapping[str, str]) -> T:
    """The precedence shared by :func:`create_checkpointer` and ``create_store``.

    An explicit one, else ``OBJSTORE_SAVER_URL``, else ``POSTGRES_URL`` when
    the PostgreSQL package is installed, else in memory with a WARNING; each
    step logged at INFO with its reason (never a password).
    """
    role = backends.role
    if explicit is not None:
        logger.info("%s: using the %s passed in (%s)", role, backends.noun, type(explicit).__name__)
        return explicit
    logger.info("%s: no %s passed in; looking at %s", role, backends.noun, OBJSTORE_SAVER_URL)
    url = environment_url(OBJSTORE_SAVER_URL, env)
    if url:
        found = backends.objstore(url)
        location = found.store.location  # type: ignore[attr-defined]
        logger.info("%s: using the object store %s (from %s)", role, location, OBJSTORE_SAVER_URL)
        return found
    logger.info("%s: %s is not set; looking at %s", role, OBJSTORE_SAVER_URL, POSTGRES_URL)
    pg_url = environment_url(POSTGRES_URL, env)
    if pg_url:
        pg = backends.postgres(pg_url)
        if pg is not None:
            logger.info(
                "%s: using %s at %s (from %s)",
                role,
                backends.postgres_name,
                redact_url(pg_url),
                POSTGRES_URL,
            )
            return pg
        logger.info(
            "%s: %s is set but langgraph-checkpoint-postgres is not installed "
            "(pip install 'objstore-saver[postgres]'); not using it",
            role,
            POSTGRES_URL,
        )
    else:
        logger.info("%s: %s is not set", role, POSTGRES_URL)
    fallback = backends.in_memory()
    logger.warning(
        "%s: using %s: %s are lost when the process restarts; set %s "
        "(e.g. s3://bucket/prefix) to keep them",
        role,
        type(fallback).__name__,
        backends.lost,
        OBJSTORE_SAVER_URL,
    )
    return fallback


def postgres_saver(url: str) -> BaseCheckpointSaver[Any]:
    """LangGraph's ``PostgresSaver`` on ``url``, its tables created if missing."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)  # type: ignore[arg-type]
    saver.setup()
    return saver


def postgres_installed() -> bool:
    """Whether ``langgraph-checkpoint-postgres`` can be imported."""
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        return False
    return True


def _postgres_store(url: str) -> BaseStore | None:
    try:
        from langgraph.store.postgres import PostgresStore
        from psycopg import Connection
        from psycopg.rows import dict_row
    except ImportError:
        return None
    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    store = PostgresStore(conn)  # type: ignore[arg-type]
    store.setup()
    return store


def create_checkpointer(
    memory: BaseCheckpointSaver[Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    fallback: BaseCheckpointSaver[Any] | None = None,
) -> BaseCheckpointSaver[Any]:
    """Return the checkpointer an application should use.

    Precedence, each step logged once at INFO with its reason:

    1. ``memory``, an explicit saver, when given;
    2. the object store named by ``OBJSTORE_SAVER_URL`` (checked at once);
    3. LangGraph's ``PostgresSaver`` when ``POSTGRES_URL`` is set and
       ``langgraph-checkpoint-postgres`` is installed (``pip install
       'objstore-saver[postgres]'``); its tables are created if missing;
    4. else ``InMemorySaver``, with a WARNING: memory is lost on restart.

    Args:
        memory: A saver to use as is.
        environ: Environment to read (default ``os.environ``).
        fallback: The saver the application used before the bucket: with
            ``OBJSTORE_SAVER_URL`` set, the result is a
            :class:`~objstore_saver.fallback.FallbackSaver` that reads a thread
            from it until the bucket holds the thread, and writes to the
            bucket only (spec §6.14: migrate with no window).

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is set but invalid.
        StoreUnavailableError: the bucket it names cannot be used.
    """

    def objstore(url: str) -> BaseCheckpointSaver[Any]:
        saver = ObjectStoreSaver.from_url(url)
        if fallback is None:
            return saver
        logger.info(
            "checkpointer: threads not yet in the bucket are read from %s (FallbackSaver)",
            type(fallback).__name__,
        )
        return FallbackSaver(saver, fallback)

    def postgres(url: str) -> BaseCheckpointSaver[Any] | None:
        return postgres_saver(url) if postgres_installed() else None

    return choose_backend(
        Backends(
            "checkpointer",
            "saver",
            objstore,
            postgres,
            "PostgresSaver",
            InMemorySaver,
            lost="conversations",
        ),
        memory,
        os.environ if environ is None else environ,
    )


@contextlib.asynccontextmanager
async def langgraph_checkpointer(
    settings: Mapping[str, Any] | None = None,
) -> AsyncIterator[ObjectStoreSaver]:
    """The custom checkpointer of a LangGraph server (``langgraph.json``).

    Reads ``OBJSTORE_SAVER_URL``, checks the store at startup, yields an
    :class:`~objstore_saver.saver.AsyncObjectStoreSaver` and closes it when the
    server stops. The server loads a module path only in dotted form, so in
    ``langgraph.json``::

        "checkpointer": {"path": "objstore_saver.config.langgraph_checkpointer"}

    The server applies ``checkpointer.ttl`` itself; this factory checks it and
    logs what the server will do with it (``docs/langgraph-server.md``).

    Args:
        settings: The ``checkpointer`` block of ``langgraph.json``. The server
            (langgraph-api 0.16) passes nothing; the block is then read from
            ``LANGGRAPH_CHECKPOINTER``, which the server sets. Its
            ``replica_lag`` (seconds) marks the bucket a replica
            (``docs/replication.md``).

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is not set or invalid, or a
            TTL setting is invalid (the message names it).
        StoreUnavailableError: the bucket cannot be used.
    """
    url = _server_url("checkpointer")
    ttl = thread_ttl(settings)
    options = checkpointer_options(settings)
    # The server enters this on its event loop: the bucket check and the
    # shutdown of the saver's pool block, so they run in a worker thread.
    saver = await asyncio.to_thread(AsyncObjectStoreSaver.from_url, url, **options)
    logger.info("checkpointer: LangGraph server uses the object store %s", saver.store.location)
    if ttl is not None:
        level, message = describe_ttl(ttl)
        logger.log(level, "checkpointer: thread TTL %s", message)
    try:
        yield saver
    finally:
        await asyncio.to_thread(saver.close)


def create_store(
    store: BaseStore | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> BaseStore:
    """Return the long-term store an application should use.

    Precedence, each step logged once at INFO with its reason:

    1. ``store``, an explicit store, when given;
    2. :class:`ObjectStoreStore` on ``OBJSTORE_SAVER_URL`` (checked at once; the
       same bucket and prefix as the checkpointer, keys under ``store/``);
    3. LangGraph's ``PostgresStore`` when ``POSTGRES_URL`` is set and
       ``langgraph-checkpoint-postgres`` is installed (tables created if missing);
    4. else ``InMemoryStore``, with a WARNING: memories are lost on restart.

    Args:
        store: A store to use as is.
        environ: Environment to read (default ``os.environ``).
        **options: Options of :class:`ObjectStoreStore` (``index``, ``ttl``...).

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is set but invalid.
        StoreUnavailableError: the bucket it names cannot be used.
    """
    from langgraph.store.memory import InMemoryStore

    def objstore(url: str) -> BaseStore:
        return ObjectStoreStore.from_url(url, **options)

    return choose_backend(
        Backends(
            "store",
            "store",
            objstore,
            _postgres_store,
            "PostgresStore",
            InMemoryStore,
            lost="memories",
        ),
        store,
        os.environ if environ is None else environ,
    )


@contextlib.asynccontextmanager
async def langgraph_store(settings: Mapping[str, Any] | None = None) -> AsyncIterator[BaseStore]:
    """The custom store of a LangGraph server (``langgraph.json``).

    ``"store": {"path": "objstore_saver.config.langgraph_store", "ttl": {...}}``: reads
    ``OBJSTORE_SAVER_URL`` (the checkpointer's bucket), applies the block's ``ttl``
    (``default_ttl``, ``refresh_on_read``) and ``index``, checks the store at startup
    and closes it when the server stops.

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is not set or invalid.
        StoreUnavailableError: the bucket cannot be used.
    """
    url = _server_url("store")
    options = store_options(settings)
    store = await asyncio.to_thread(ObjectStoreStore.from_url, url, **options)
    logger.info("store: LangGraph server uses the object store %s", store.store.location)
    try:
        yield store
    finally:
        await asyncio.to_thread(store.close)
