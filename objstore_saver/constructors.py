"""The constructors (``from_url``, ``from_bucket``...) and lifetime shared by the saver and
the long-term store: :class:`OnObjectStore`.

Each class's ``__init__`` takes the store first and its own options as keywords;
``from_url`` and ``from_bucket`` hand the S3 store's options to the store. An
option neither takes is a ``TypeError`` naming the constructor, the option and
what it accepts.
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Collection
from datetime import timedelta
from typing import Any, Self

from objstore_saver.driver import Driver
from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.s3 import Boto3S3Store, S3Encryption
from objstore_saver.storage.s3.settings import S3_OPTIONS
from objstore_saver.storage.urls import open_s3_store, store_from_url


def _own_options(cls: type) -> frozenset[str] | None:
    """The keyword options of ``cls.__init__`` after the store; ``None`` when it takes any."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[2:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL)


def _split_options(
    cls: type,
    constructor: str,
    options: dict[str, Any],
    *,
    takes: Collection[str] = (),
    store_options: Collection[str] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` as ``(the store's, the class's)``; ``takes``: the constructor's own."""
    own = _own_options(cls)
    store: dict[str, Any] = {}
    mine: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in options.items():
        if name in store_options:
            store[name] = value
        elif own is None or name in own:
            mine[name] = value
        else:
            unknown.append(name)
    if unknown:
        groups = [f"{cls.__name__} options: {', '.join(sorted(own or ()))}"]
        if store_options:
            groups.insert(0, f"S3 store options: {', '.join(sorted(store_options))}")
        if takes:
            groups.insert(0, ", ".join(takes))
        known = [*takes, *store_options, *(own or ())]
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=1)
            if name in S3_OPTIONS:
                hints.append(f"{name!r} is an S3 store option, which from_url and from_bucket take")
            elif close:
                hints.append(f"did you mean {close[0]!r}?")
        raise TypeError(
            f"{cls.__name__}.{constructor}() got an unexpected option "
            f"{', '.join(map(repr, unknown))}{''.join(f' ({hint})' for hint in hints)}; "
            f"it accepts {'; '.join(groups)}"
        )
    return store, mine


class OnObjectStore:
    """Constructors and lifetime of a class whose ``__init__(store, **options)`` runs a Driver."""

    _driver: Driver

    @classmethod
    def from_store(cls, store: ObjectStore, **kwargs: Any) -> Self:
        """An instance on any :class:`~objstore_saver.storage.ObjectStore`."""
        _, options = _split_options(cls, "from_store", kwargs)
        return cls(store, **options)

    @classmethod
    def from_bucket(
        cls,
        bucket: str,
        prefix: str = "",
        *,
        transport: str = "lean",
        check: bool = True,
        **kwargs: Any,
    ) -> Self:
        """An instance on an S3 bucket, checked at construction; credentials from boto3's chain.

        Args:
            transport: ``"lean"`` (:class:`~objstore_saver.storage.LeanS3Store`,
                the default) or ``"boto3"`` (:class:`~objstore_saver.storage.Boto3S3Store`).
            check: Send one ``HeadBucket`` now, so a bad bucket, access, region
                or endpoint fails here.
            **kwargs: Options of the transport's store (``endpoint_url``,
                ``region_name``, ``encryption``...; ``retry_mode`` is boto3's)
                and of the class (``serde``, ``index``, ``max_workers``...).

        Raises:
            TypeError: an option neither the store nor the class takes.
            ValueError: an unknown transport, ``retry_mode`` with the lean
                one, or an option of one transport with the other.
            StoreUnavailableError: the check failed; the message names the
                bucket and the endpoint.
        """
        store_options, options = _split_options(
            cls,
            "from_bucket",
            kwargs,
            takes=("bucket", "prefix", "transport", "check"),
            store_options=S3_OPTIONS,
        )
        store = open_s3_store(bucket, prefix, transport=transport, **store_options)
        if check:
            store.check()
        return cls(store, **options)

    @classmethod
    def from_client(
        cls,
        client: Any,
        bucket: str,
        prefix: str = "",
        *,
        encryption: S3Encryption | None = None,
        **kwargs: Any,
    ) -> Self:
        """An instance on an S3 bucket through an existing boto3 S3 client (configure it)."""
        _, options = _split_options(
            cls, "from_client", kwargs, takes=("client", "bucket", "prefix", "encryption")
        )
        return cls(
            Boto3S3Store.from_client(client, bucket, prefix, encryption=encryption), **options
        )

    @classmethod
    def from_url(cls, url: str, *, check: bool = True, **kwargs: Any) -> Self:
        """An instance on the store a URL names, checked at construction.

        Args:
            url: ``s3://bucket/prefix?endpoint_url=...&region=...`` or
                ``file:///path``; no secrets (S3 credentials: boto3's chain).
            check: As :meth:`from_bucket`'s.
            **kwargs: Options of the S3 store (not set by the URL too) and of the class.

        Raises:
            TypeError: an option neither the store nor the class takes.
            ConfigurationError: the URL is invalid or carries credentials, sets
                an option given here too, or is a ``file://`` URL given S3 options.
            StoreUnavailableError: the check failed; the message names the
                bucket and the endpoint.
        """
        store_options, options = _split_options(
            cls, "from_url", kwargs, takes=("url", "check"), store_options=S3_OPTIONS
        )
        return cls(store_from_url(url, check=check, **store_options), **options)

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str], **kwargs: Any) -> Self:
        """An instance on a local directory (created if missing); needs no server."""
        _, options = _split_options(cls, "from_directory", kwargs, takes=("path",))
        return cls(LocalStore(path), **options)

    def close(self) -> None:
        """Stop the worker threads."""
        self._driver.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


def replica_lag_seconds(
    value: timedelta | float | str | None, setting: str = "replica_lag"
) -> float | None:
    """A replica lag in seconds (None: not a replica); ``setting`` names it in errors.

    Raises:
        ConfigurationError: not a positive duration.
    """
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise TypeError("a boolean is no duration")
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"{setting} must be a duration (seconds or a timedelta), not {value!r}"
        ) from exc
    if not seconds > 0:
        raise ConfigurationError(
            f"{setting} must be a positive duration, not {value!r}: it is how long an "
            "object may arrive after what references it on a replica (docs/replication.md)"
        )
    return seconds
