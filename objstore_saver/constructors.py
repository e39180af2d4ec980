"""How the saver and the long-term store are built on an object store, once.

:class:`OnObjectStore` gives :class:`~objstore_saver.ObjectStoreSaver` and
:class:`~objstore_saver.ObjectStoreStore` the same constructors (``from_url``,
``from_bucket``, ``from_client``, ``from_directory``, ``from_store``) and the
same lifetime (``close`` and the sync/async context managers). Each class's
``__init__`` takes the :class:`~objstore_saver.storage.ObjectStore` first and
its own options as keywords, which the constructors pass through.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Self

from objstore_saver.driver import Driver
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.s3 import S3Encryption, S3Store
from objstore_saver.storage.s3.choice import open_s3_store
from objstore_saver.storage.urls import store_from_url


class OnObjectStore:
    """Constructors and lifetime of a class whose ``__init__(store, **options)`` runs a Driver."""

    _driver: Driver

    @classmethod
    def from_store(cls, store: ObjectStore, **kwargs: Any) -> Self:
        """An instance on any :class:`~objstore_saver.storage.ObjectStore`."""
        return cls(store, **kwargs)

    @classmethod
    def from_bucket(
        cls,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        max_attempts: int | None = None,
        retry_mode: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        encryption: S3Encryption | None = None,
        transport: str = "lean",
        **kwargs: Any,
    ) -> Self:
        """An instance on an S3 bucket; credentials come from boto3's usual chain.

        Args:
            bucket: Bucket name.
            prefix: Key prefix of every object written.
            endpoint_url: S3-compatible endpoint (MinIO, Ceph RGW...).
            region_name: Region of the bucket.
            max_attempts: Attempts per request, the first included.
            retry_mode: botocore's ``standard`` or ``adaptive`` (``boto3``
                transport only; the lean transport retries like ``standard``).
            connect_timeout: Seconds to wait for a connection.
            read_timeout: Seconds to wait for data on a connection.
            encryption: SSE-S3, SSE-KMS or SSE-C for every object.
            transport: ``"lean"`` (:class:`~objstore_saver.storage.LeanS3Store`,
                native async, the default) or ``"boto3"``
                (:class:`~objstore_saver.storage.S3Store`).
            **kwargs: Options of the class (the saver's ``serde``, the store's
                ``index``, ``max_workers``...).

        Raises:
            ValueError: an unknown transport, or ``retry_mode`` with the lean one.
        """
        store = open_s3_store(
            bucket,
            prefix,
            transport=transport,
            endpoint_url=endpoint_url,
            region_name=region_name,
            max_attempts=max_attempts,
            retry_mode=retry_mode,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            encryption=encryption,
        )
        return cls(store, **kwargs)

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
        """An instance on an S3 bucket through an existing boto3 S3 client."""
        return cls(S3Store.from_client(client, bucket, prefix, encryption=encryption), **kwargs)

    @classmethod
    def from_url(cls, url: str, *, check: bool = True, **kwargs: Any) -> Self:
        """An instance on the store a URL names, checked at construction.

        Args:
            url: ``s3://bucket/prefix?endpoint_url=...&region=...`` or
                ``file:///path``. URLs hold no secrets: S3 credentials come
                from boto3's chain (``AWS_PROFILE``, ``AWS_ACCESS_KEY_ID``...).
            check: Send one ``HeadBucket`` now, so a missing bucket, denied
                access, wrong region or unreachable endpoint fails here.
            **kwargs: Options of the class.

        Raises:
            ConfigurationError: the URL is invalid or carries credentials.
            StoreUnavailableError: the check failed; the message names the
                bucket and the endpoint.
        """
        return cls(store_from_url(url, check=check), **kwargs)

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str], **kwargs: Any) -> Self:
        """An instance on a local directory (created if missing); needs no server."""
        return cls(LocalStore(path), **kwargs)

    def close(self) -> None:
        """Stop the worker threads."""
        self._driver.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
