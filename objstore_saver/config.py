"""Configuring the saver in an application ("engine") with one setting: the public entry points.

* :func:`create_checkpointer` / :func:`create_store`: the checkpointer and the
  long-term store an application should use, by a fixed precedence (explicit,
  ``OBJSTORE_SAVER_URL``, ``POSTGRES_URL``, memory; :mod:`objstore_saver.backend_choice`).
* :func:`langgraph_checkpointer` / :func:`langgraph_store`: what a LangGraph
  server's ``langgraph.json`` names, in the dotted form the server loads:
  ``objstore_saver.config.langgraph_checkpointer`` (``docs/langgraph-server.md``).
* :func:`store_from_url` / :func:`parse_url` (from :mod:`objstore_saver.storage.urls`):
  ``s3://bucket/prefix?endpoint_url=...&region=...`` or ``file:///path`` to a
  checked :class:`~objstore_saver.storage.ObjectStore`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from objstore_saver.backend_choice import (
    OBJSTORE_SAVER_URL,
    POSTGRES_URL,
    Backends,
    choose_backend,
    postgres_installed,
    postgres_saver,
)
from objstore_saver.errors import ConfigurationError
from objstore_saver.fallback import FallbackSaver
from objstore_saver.longterm import factory as longterm_factory
from objstore_saver.saver import AsyncObjectStoreSaver, ObjectStoreSaver
from objstore_saver.server_settings import describe_ttl, thread_ttl
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
            ``LANGGRAPH_CHECKPOINTER``, which the server sets.

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is not set or invalid, or a
            TTL setting is invalid (the message names it).
        StoreUnavailableError: the bucket cannot be used.
    """
    url = os.environ.get(OBJSTORE_SAVER_URL, "").strip()
    if not url:
        raise ConfigurationError(
            f"{OBJSTORE_SAVER_URL} is not set: the LangGraph server's custom checkpointer "
            "needs it (e.g. s3://bucket/prefix?region=eu-west-1)"
        )
    ttl = thread_ttl(settings)
    # The server enters this on its event loop: the bucket check and the
    # shutdown of the saver's pool block, so they run in a worker thread.
    saver = await asyncio.to_thread(AsyncObjectStoreSaver.from_url, url)
    logger.info("checkpointer: LangGraph server uses the object store %s", saver.store.location)
    if ttl is not None:
        level, message = describe_ttl(ttl)
        logger.log(level, "checkpointer: thread TTL %s", message)
    try:
        yield saver
    finally:
        await asyncio.to_thread(saver.close)


def create_store(
    store: Any = None, *, environ: Mapping[str, str] | None = None, **options: Any
) -> Any:
    """The long-term store (``BaseStore``) an application should use; same precedence as
    :func:`create_checkpointer`. See :func:`objstore_saver.longterm.factory.create_store`."""
    return longterm_factory.create_store(store, environ=environ, **options)


def langgraph_store(settings: Mapping[str, Any] | None = None) -> Any:
    """The custom store of a LangGraph server, in the dotted form ``langgraph.json`` loads:
    ``"store": {"path": "objstore_saver.config.langgraph_store"}``. See
    :func:`objstore_saver.longterm.factory.langgraph_store`."""
    return longterm_factory.langgraph_store(settings)
