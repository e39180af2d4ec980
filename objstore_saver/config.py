"""Configuring the saver in an application ("engine") with one setting.

* :func:`store_from_url` / :func:`parse_url`: ``s3://bucket/prefix?endpoint_url=...&region=...``
  or ``file:///path`` to a checked :class:`~objstore_saver.storage.ObjectStore`.
  URLs never carry secrets: credentials come from boto3's chain
  (``AWS_PROFILE``, ``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, instance roles...).
* :func:`create_checkpointer`: the saver an application should use, by a fixed
  precedence (explicit saver, ``OBJSTORE_SAVER_URL``, ``POSTGRES_URL``, memory).
* :func:`langgraph_checkpointer`: the async context manager a LangGraph server's
  ``langgraph.json`` names as its custom checkpointer, in the dotted form the
  server loads: ``objstore_saver.config.langgraph_checkpointer``
  (``docs/langgraph-server.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from objstore_saver.errors import ObjstoreSaverError
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.transports import TRANSPORTS, open_s3_store

if TYPE_CHECKING:
    from objstore_saver.saver import ObjectStoreSaver

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

#: Query parameters an ``s3://`` URL accepts, with the aliases people type.
_S3_PARAMS = {
    "endpoint_url": "endpoint_url",
    "endpoint": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "transport": "transport",
}

#: Query parameter names that would put a secret in the URL: refused.
_SECRET_PARAMS = frozenset(
    {
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "access_key",
        "secret_key",
        "secret",
        "password",
        "token",
        "session_token",
    }
)


class ConfigurationError(ObjstoreSaverError, ValueError):
    """A URL or environment setting that cannot configure a saver."""


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL: ``s3`` (bucket, prefix, endpoint, region) or ``file`` (path)."""

    scheme: str
    bucket: str = ""
    prefix: str = ""
    endpoint_url: str | None = None
    region_name: str | None = None
    path: str = ""
    transport: str = "lean"

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.path}"
        query = []
        if self.endpoint_url:
            query.append(f"endpoint_url={self.endpoint_url}")
        if self.region_name:
            query.append(f"region={self.region_name}")
        if self.transport != "lean":
            query.append(f"transport={self.transport}")
        tail = ("?" + "&".join(query)) if query else ""
        return f"s3://{self.bucket}/{self.prefix}{tail}"


def redact_url(url: str) -> str:
    """Return ``url`` with any password (or whole user info) replaced by ``***``.

    Works for ``postgresql://user:pw@host/db`` style URLs and leaves other
    text unchanged; used before a URL goes into a message or a report.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if not parts.netloc or "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    safe = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    return urlunsplit((parts.scheme, safe, parts.path, parts.query, parts.fragment))


def parse_url(url: str) -> StoreURL:
    """Parse an object store URL.

    Args:
        url: ``s3://bucket[/prefix][?endpoint_url=URL&region=NAME&transport=T]``
            or ``file:///absolute/path`` (``file://relative`` is refused).
            ``transport`` is ``lean`` (default: :class:`~objstore_saver.storage.LeanS3Store`,
            native async, about a quarter of boto3's client CPU per request) or
            ``boto3`` (:class:`~objstore_saver.storage.S3Store`).

    Raises:
        ConfigurationError: unknown scheme, missing bucket or path, credentials
            in the URL, or an unknown query parameter. The message names the
            URL (without credentials).
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("object store URL is empty: use s3://bucket/prefix or file:///dir")
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise ConfigurationError(
            f"object store URL {redact_url(url)!r} is invalid: {exc}"
        ) from None
    shown = redact_url(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"object store URL {shown!r} carries credentials: URLs must not hold secrets; "
            "use boto3's credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "an instance role) instead"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"object store URL {shown!r}: a file URL is file:///absolute/path "
                f"(found host {parts.netloc!r})"
            )
        if parts.query:
            raise ConfigurationError(f"object store URL {shown!r}: file URLs take no query")
        path = unquote(parts.path)
        if not path or path == "/":
            raise ConfigurationError(f"object store URL {shown!r} names no directory")
        return StoreURL("file", path=path)
    if parts.scheme != "s3":
        raise ConfigurationError(
            f"object store URL {shown!r}: unknown scheme {parts.scheme!r}; "
            "use s3://bucket/prefix or file:///dir"
        )
    bucket = parts.netloc
    if not bucket:
        raise ConfigurationError(f"object store URL {shown!r} names no bucket")
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        lowered = name.lower()
        if lowered in _SECRET_PARAMS:
            raise ConfigurationError(
                f"object store URL s3://{bucket}/... carries the secret parameter {name!r}: "
                "URLs must not hold secrets; use boto3's credential chain instead"
            )
        if lowered not in _S3_PARAMS:
            raise ConfigurationError(
                f"object store URL {shown!r}: unknown parameter {name!r} "
                f"(known: endpoint_url, region, transport)"
            )
        if not value:
            raise ConfigurationError(f"object store URL {shown!r}: parameter {name!r} is empty")
        options[_S3_PARAMS[lowered]] = value
    endpoint = options.get("endpoint_url")
    if endpoint is not None:
        ep = urlsplit(endpoint)
        if ep.username is not None or ep.password is not None:
            raise ConfigurationError(
                f"object store URL s3://{bucket}/...: endpoint_url carries credentials; "
                "use boto3's credential chain instead"
            )
        if ep.scheme not in ("http", "https") or not ep.netloc:
            raise ConfigurationError(
                f"object store URL {shown!r}: endpoint_url {endpoint!r} is not an http(s) URL"
            )
    transport = options.get("transport", "lean")
    if transport not in TRANSPORTS:
        raise ConfigurationError(
            f"object store URL {shown!r}: unknown transport {transport!r} "
            f"(known: {', '.join(TRANSPORTS)})"
        )
    return StoreURL(
        "s3",
        bucket=bucket,
        prefix=unquote(parts.path).lstrip("/"),
        endpoint_url=endpoint,
        region_name=options.get("region_name"),
        transport=transport,
    )


def store_from_url(url: str, *, check: bool = True, **s3_options: Any) -> ObjectStore:
    """Build the store a URL names and, by default, check it can be used.

    Args:
        url: See :func:`parse_url`.
        check: For S3, send one ``HeadBucket`` so a missing bucket, a denied
            access, a wrong region or an endpoint that is down fails here, with
            one message naming bucket and endpoint, not at the first turn.
        **s3_options: Extra options of the transport's store
            (:class:`~objstore_saver.storage.LeanS3Store` or
            :class:`~objstore_saver.storage.S3Store`).

    Raises:
        ConfigurationError: the URL is invalid.
        StoreUnavailableError: the check failed.
    """
    spec = parse_url(url)
    if spec.scheme == "file":
        return LocalStore(spec.path)
    # boto3 reads these too, but passing the endpoint on selects path-style
    # addressing, which MinIO and most S3-compatible servers need.
    endpoint = (
        spec.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or None
    )
    store = open_s3_store(
        spec.bucket,
        spec.prefix,
        transport=spec.transport,
        endpoint_url=endpoint,
        region_name=spec.region_name,
        **s3_options,
    )
    if check:
        store.check()
    return store


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


def _postgres_saver(url: str) -> BaseCheckpointSaver[Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)  # type: ignore[arg-type]
    saver.setup()
    return saver


def _postgres_installed() -> bool:
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        return False
    return True


def create_checkpointer(
    memory: BaseCheckpointSaver[Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
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

    Raises:
        ConfigurationError: ``OBJSTORE_SAVER_URL`` is set but invalid.
        StoreUnavailableError: the bucket it names cannot be used.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    def objstore(url: str) -> BaseCheckpointSaver[Any]:
        from objstore_saver.saver import ObjectStoreSaver

        return ObjectStoreSaver.from_url(url)

    def postgres(url: str) -> BaseCheckpointSaver[Any] | None:
        return _postgres_saver(url) if _postgres_installed() else None

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
    from objstore_saver.saver import AsyncObjectStoreSaver
    from objstore_saver.server_settings import describe_ttl, thread_ttl

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
    from objstore_saver.longterm.factory import create_store as create

    return create(store, environ=environ, **options)


def langgraph_store(settings: Mapping[str, Any] | None = None) -> Any:
    """The custom store of a LangGraph server, in the dotted form ``langgraph.json`` loads:
    ``"store": {"path": "objstore_saver.config.langgraph_store"}``. See
    :func:`objstore_saver.longterm.factory.langgraph_store`."""
    from objstore_saver.longterm.factory import langgraph_store as make

    return make(settings)
