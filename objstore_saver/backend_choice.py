"""Which backend an application gets: explicit, ``OBJSTORE_SAVER_URL``, ``POSTGRES_URL``, memory.

One precedence for both roles, the checkpointer (:func:`objstore_saver.config.create_checkpointer`)
and the long-term store (:func:`objstore_saver.config.create_store`), each step
logged at INFO with its reason and never a password.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from objstore_saver.storage.urls import redact_url

__all__ = [
    "OBJSTORE_SAVER_URL",
    "POSTGRES_URL",
    "Backends",
    "choose_backend",
    "postgres_installed",
    "postgres_saver",
]

logger = logging.getLogger("objstore_saver.config")

#: Environment variable naming the object store of the application.
OBJSTORE_SAVER_URL = "OBJSTORE_SAVER_URL"
#: Environment variable naming a PostgreSQL database (LangGraph's ``PostgresSaver``).
POSTGRES_URL = "POSTGRES_URL"

T = TypeVar("T")


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
    url = env.get(OBJSTORE_SAVER_URL, "").strip()
    if url:
        found = backends.objstore(url)
        location = found.store.location  # type: ignore[attr-defined]
        logger.info("%s: using the object store %s (from %s)", role, location, OBJSTORE_SAVER_URL)
        return found
    logger.info("%s: %s is not set; looking at %s", role, OBJSTORE_SAVER_URL, POSTGRES_URL)
    pg_url = env.get(POSTGRES_URL, "").strip()
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
