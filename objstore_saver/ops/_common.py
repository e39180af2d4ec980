"""What every operator job shares: configuration, progress, cancellation, redaction, tallies."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from objstore_saver.config import OBJSTORE_SAVER_URL, POSTGRES_URL, environment_url
from objstore_saver.constructors import replica_lag_seconds
from objstore_saver.crypto.layer import sealed
from objstore_saver.driver import Driver
from objstore_saver.errors import ConfigurationError, ObjstoreSaverError
from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.urls import store_from_url

#: A plan of an operator job (request batches in, results out; run by a Driver).
SubPlan = Generator[Any, list[Any] | None, Any]
#: ``progress(done, total, item)``: called after each unit of work (usually a thread).
ProgressCallback = Callable[[int, int | None, str], None]
#: ``should_cancel()``: polled between threads; True stops the job cleanly.
CancelCheck = Callable[[], bool]


class JobError(ObjstoreSaverError):
    """An operator job could not run; the message names what is at fault, with no secret."""


@dataclass(frozen=True)
class OpsConfig:
    """Where the jobs read and write: from the environment or the CLI, never from a payload.

    ``postgres_url`` (what a migration reads) is never shown: ``repr`` and reports redact
    it. ``replica_lag``: seconds a replica's objects may arrive after what references them
    (docs/replication.md); the jobs leave alone what is still arriving.
    """

    url: str | None = None
    postgres_url: str | None = field(default=None, repr=False)
    replica_lag: float | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> OpsConfig:
        """Read ``OBJSTORE_SAVER_URL``, ``POSTGRES_URL`` and ``OBJSTORE_SAVER_REPLICA_LAG`` (a
        ``ConfigurationError`` unless positive seconds); non-None overrides win."""
        lag = environment_url(REPLICA_LAG, environ)
        values: dict[str, Any] = {
            "url": environment_url(OBJSTORE_SAVER_URL, environ) or None,
            "postgres_url": environment_url(POSTGRES_URL, environ) or None,
            "replica_lag": replica_lag_seconds(lag or None, REPLICA_LAG),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def secrets(self) -> list[str]:
        """Strings that must never appear in output (passwords of the URLs)."""
        return [found for url in (self.url, self.postgres_url) if url for found in _passwords(url)]

    def require_url(self) -> str:
        """The object store URL, or a clear error naming the setting."""
        if not self.url:
            raise ConfigurationError(
                f"no object store given: pass --url or set {OBJSTORE_SAVER_URL} "
                "(s3://bucket/prefix?endpoint_url=...&region=... or file:///dir)"
            )
        return self.url


#: The environment variable of :attr:`OpsConfig.replica_lag`.
REPLICA_LAG = "OBJSTORE_SAVER_REPLICA_LAG"


_CONNINFO_PASSWORD = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _passwords(url: str) -> list[str]:
    out = [match.group(1).strip("'") for match in _CONNINFO_PASSWORD.finditer(url)]
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.password:
            out[:0] = [parts.password, unquote(parts.password)]
    return [s for s in out if s]


def redact(text: str, secrets: list[str]) -> str:
    """Replace every secret in ``text`` (and passwords of URLs in it) by ``***``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = re.sub(r"([a-z][a-z0-9+.-]*://[^\s:/@]*):[^\s@/]*@", r"\1:***@", text)
    return _CONNINFO_PASSWORD.sub("password=***", text)


def redact_error(exc: BaseException, secrets: list[str]) -> str:
    """``Type: message`` of an error with every secret removed."""
    return redact(f"{type(exc).__name__}: {exc}", secrets)


@contextlib.contextmanager
def secrets_kept_out(
    job: str,
    secrets: list[str],
    kept: tuple[type[ObjstoreSaverError], ...] = (ConfigurationError, JobError),
) -> Iterator[None]:
    """Re-raise a job's errors with every secret removed: a ``kept`` type as itself, any
    other as a ``JobError`` saying ``<job> failed``."""
    try:
        yield
    except kept as exc:
        kind = next(k for k in kept if isinstance(exc, k))
        raise kind(redact(str(exc), secrets)) from None
    except Exception as exc:  # noqa: BLE001 - re-raised, with the secrets removed
        raise JobError(f"{job} failed: {redact_error(exc, secrets)}") from None


def tally(counts: dict[str, Any], name: str, size: int, **first: Any) -> dict[str, Any]:
    """Count one object of ``size`` bytes in ``counts[name]`` (made from ``first``); return it."""
    slot = counts.setdefault(name, {**first, "objects": 0, "bytes": 0})
    slot["objects"] += 1
    slot["bytes"] += size
    return slot


def no_progress(done: int, total: int | None, item: str) -> None:
    """The default progress callback: report nothing."""


def never_cancel() -> bool:
    """The default cancellation check: never cancel."""
    return False


@contextlib.contextmanager
def open_store(config: OpsConfig | None) -> Iterator[tuple[ObjectStore, Driver]]:
    """The configured store (None: from the environment), checked, and a driver on it.

    Encrypted objects open with a master key in the environment, else are errors naming them.
    """
    store, _ = sealed(store_from_url((config or OpsConfig.from_env()).require_url()))
    with contextlib.closing(Driver(store, max_workers=16)) as driver:
        yield store, driver


@contextlib.asynccontextmanager
async def aopen_store(config: OpsConfig | None) -> AsyncIterator[tuple[ObjectStore, Driver]]:
    """Async :func:`open_store`: the check runs in a worker thread, off the loop."""
    url = (config or OpsConfig.from_env()).require_url()
    store, _ = sealed(await asyncio.to_thread(store_from_url, url))
    with contextlib.closing(Driver(store, max_workers=16)) as driver:
        yield store, driver


@contextlib.asynccontextmanager
async def aopen_saver(config: OpsConfig | None) -> AsyncIterator[ObjectStoreSaver]:
    """A saver on the configured store; its check and close run in a worker thread."""
    config = config or OpsConfig.from_env()
    url = config.require_url()
    saver = await asyncio.to_thread(ObjectStoreSaver.from_url, url, replica_lag=config.replica_lag)
    try:
        yield saver
    finally:
        await asyncio.to_thread(saver.close)
