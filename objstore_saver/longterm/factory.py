"""Choosing the long-term store of an application (``create_store``, ``langgraph.json``).

The precedence is the checkpointer's (:func:`objstore_saver.config.create_checkpointer`):
an explicit store, then ``OBJSTORE_SAVER_URL``, then LangGraph's ``PostgresStore``
when ``POSTGRES_URL`` is set and installed, else ``InMemoryStore`` with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

from langgraph.store.base import BaseStore

from objstore_saver.backend_choice import OBJSTORE_SAVER_URL, Backends, choose_backend
from objstore_saver.errors import ConfigurationError
from objstore_saver.longterm.store import ObjectStoreStore

logger = logging.getLogger("objstore_saver.config")

#: The ``store`` block of ``langgraph.json``, as a LangGraph server passes it on.
LANGGRAPH_STORE = "LANGGRAPH_STORE"


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


def _server_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """Options of the store from the ``store`` block of ``langgraph.json``."""
    if settings is None:
        raw = os.environ.get(LANGGRAPH_STORE, "").strip()
        try:
            settings = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise ConfigurationError(f"{LANGGRAPH_STORE} is not JSON: {exc}") from exc
    if not isinstance(settings, Mapping):
        raise ConfigurationError(
            f"the store block of langgraph.json must be an object: {settings!r}"
        )
    options: dict[str, Any] = {}
    if settings.get("ttl"):
        options["ttl"] = dict(settings["ttl"])
    if settings.get("index"):
        options["index"] = dict(settings["index"])
    return options


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
    url = os.environ.get(OBJSTORE_SAVER_URL, "").strip()
    if not url:
        raise ConfigurationError(
            f"{OBJSTORE_SAVER_URL} is not set: the LangGraph server's custom store needs it "
            "(e.g. s3://bucket/prefix?region=eu-west-1)"
        )
    options = _server_settings(settings)
    store = await asyncio.to_thread(ObjectStoreStore.from_url, url, **options)
    logger.info("store: LangGraph server uses the object store %s", store.store.location)
    try:
        yield store
    finally:
        await asyncio.to_thread(store.close)
