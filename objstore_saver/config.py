"""Configuring the saver in an application with one setting (``docs/configuration.md``).

:func:`create_checkpointer` / :func:`create_store` pick what an application
should use; :func:`langgraph_checkpointer` / :func:`langgraph_store` are what a
LangGraph server's ``langgraph.json`` names (``docs/langgraph-server.md``).
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

    ``postgres`` returns None when its package is not installed; ``lost`` is
    what the in-memory fallback loses on restart.
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


def _on_postgres(kind: Any, url: str) -> Any:
    """A ``kind`` (LangGraph's PostgreSQL saver or store) on ``url``, tables created if missing."""
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    backend = kind(conn)
    backend.setup()
    return backend


def postgres_saver(url: str) -> BaseCheckpointSaver[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    return _on_postgres(PostgresSaver, url)


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
    except ImportError:
        return None
    return _on_postgres(PostgresStore, url)


def create_checkpointer(
    memory: BaseCheckpointSaver[Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    fallback: BaseCheckpointSaver[Any] | None = None,
) -> BaseCheckpointSaver[Any]:
    """Return the checkpointer an application should use.

    Precedence, each step logged at INFO with its reason: ``memory`` (a saver
    to use as is); the object store ``OBJSTORE_SAVER_URL`` names (checked at
    once); ``PostgresSaver`` when ``POSTGRES_URL`` is set and
    ``objstore-saver[postgres]`` installed (tables created if missing); else
    ``InMemorySaver``, with a WARNING.

    Args:
        environ: Environment to read (default ``os.environ``).
        fallback: The saver used before the bucket: with ``OBJSTORE_SAVER_URL``
            set, a :class:`~objstore_saver.fallback.FallbackSaver` reads a thread
            from it until the bucket holds it (spec §6.14).

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
    """The custom checkpointer of a LangGraph server (``docs/langgraph-server.md``).

    ``"checkpointer": {"path": "objstore_saver.config.langgraph_checkpointer"}``:
    an :class:`~objstore_saver.saver.AsyncObjectStoreSaver` on
    ``OBJSTORE_SAVER_URL``, checked at startup and closed when the server
    stops. The server applies ``checkpointer.ttl``; this checks and logs it.

    Args:
        settings: The ``checkpointer`` block; default ``LANGGRAPH_CHECKPOINTER``,
            which the server sets.

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

    The precedence of :func:`create_checkpointer`: ``store``;
    :class:`ObjectStoreStore` on ``OBJSTORE_SAVER_URL`` (keys under ``store/``,
    given ``**options``); ``PostgresStore``; else ``InMemoryStore``, with a WARNING.

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
    """The custom store of a LangGraph server (``docs/langgraph-server.md``).

    ``"store": {"path": "objstore_saver.config.langgraph_store", "ttl": {...}}``: on
    ``OBJSTORE_SAVER_URL``, with the block's ``ttl`` and ``index``, checked at
    startup and closed when the server stops.

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
