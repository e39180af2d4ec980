"""Where the tests store objects: an S3 endpoint, and the backends the suites run on.

The fixtures of conftest.py build these: ``s3_endpoint`` (session), ``s3_bucket``
and ``backend``, which runs a test once per :data:`BACKENDS` id (``local``, a
directory; ``s3-lean``, a bucket over :class:`LeanS3Store`; ``s3-boto3``, a
bucket over boto3's :class:`Boto3S3Store`), or on fewer with
``@pytest.mark.backends("local", "s3-boto3")`` on the test or the module.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest

from objstore_saver.storage import Boto3S3Store, LocalStore, ObjectStore

#: The backend ids, in the order tests run on them.
BACKENDS = ("local", "s3-lean", "s3-boto3")
#: The S3 backend ids: one per transport.
S3_BACKENDS = ("s3-lean", "s3-boto3")
#: The S3 transports the suites that take a store run on (``S3Endpoint.store``).
S3_TRANSPORTS = ("boto3", "lean")


@dataclass(frozen=True)
class S3Endpoint:
    """An S3 endpoint the tests may create buckets on."""

    url: str
    access_key: str | None
    secret_key: str | None
    region: str
    # One boto3 session for every client: each new session reloads the S3
    # service model, which costs about 0.1 s per client.
    _session: Any = field(default_factory=boto3.session.Session, repr=False, compare=False)

    def client(self, **config: Any) -> Any:
        """Return a new boto3 S3 client (path addressing, standard retries).

        Clients are independent: event hooks registered on one do not reach
        the others.

        Args:
            **config: Overrides of the ``botocore.config.Config`` options.
        """
        options: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"mode": "standard", "total_max_attempts": 5},
            "max_pool_connections": 64,
        }
        options.update(config)
        return self._session.client(
            "s3",
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=botocore.config.Config(**options),
        )

    def lean_store(self, bucket: str, prefix: str = "", **options: Any) -> Any:
        """A :class:`LeanS3Store` on this endpoint, signed with its credentials.

        Args:
            bucket: Bucket name.
            prefix: Key prefix.
            **options: Other ``LeanS3Store`` options.
        """
        from objstore_saver.storage.s3.lean import LeanS3Store

        session = None
        if self.access_key:
            session = boto3.session.Session(
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
                region_name=self.region,
            )
        return LeanS3Store(
            bucket,
            prefix,
            endpoint_url=self.url,
            region_name=self.region,
            session=session,
            **options,
        )

    def store(self, transport: str, bucket: str, prefix: str = "", **options: Any) -> Any:
        """A store on this endpoint over ``transport`` (one of :data:`S3_TRANSPORTS`).

        Args:
            transport: ``"boto3"`` (:class:`Boto3S3Store` on a new :meth:`client`, unless
                ``client=`` is given) or ``"lean"`` (:meth:`lean_store`).
            bucket: Bucket name.
            prefix: Key prefix.
            **options: Other options of that store.
        """
        if transport == "boto3":
            options.setdefault("client", self.client())
            return Boto3S3Store(bucket, prefix, **options)
        if transport == "lean":
            return self.lean_store(bucket, prefix, **options)
        raise ValueError(f"unknown S3 transport {transport!r} in a test: {S3_TRANSPORTS}")

    @contextlib.contextmanager
    def new_bucket(
        self, name: str = "test", *, versioned: bool = False, object_lock: bool = False
    ) -> Iterator[str]:
        """A new bucket ``<name>-<random>``; emptied and removed afterwards.

        ``versioned`` turns versioning on; ``object_lock`` creates the bucket
        with Object Lock (which turns versioning on). Every version goes at
        the end, locked ones too (governance mode, bypassed).
        """
        client = self.client()
        bucket = f"{name}-{uuid.uuid4().hex[:12]}"
        args: dict[str, Any] = {"Bucket": bucket}
        if self.region != "us-east-1":
            args["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        if object_lock:
            args["ObjectLockEnabledForBucket"] = True
        client.create_bucket(**args)
        if versioned and not object_lock:
            client.put_bucket_versioning(
                Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
            )
        try:
            yield bucket
        finally:
            if versioned or object_lock:
                pages = client.get_paginator("list_object_versions").paginate(Bucket=bucket)
                for page in pages:
                    doomed = [
                        {"Key": v["Key"], "VersionId": v["VersionId"]}
                        for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
                    ]
                    if doomed:
                        client.delete_objects(
                            Bucket=bucket,
                            Delete={"Objects": doomed, "Quiet": True},
                            BypassGovernanceRetention=True,
                        )
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if keys:
                    client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            client.delete_bucket(Bucket=bucket)


@dataclass
class Backend:
    """One place a test stores objects: a directory, or a bucket over one S3 transport.

    Every :meth:`store` call opens a new store (no state shared with the
    others) on the same data; the same prefix gives the same objects. Lean
    stores' idle connections are closed when the test ends.
    """

    kind: str
    """One of :data:`BACKENDS`, the test id."""
    root: Path
    """The directory of the ``local`` backend (each prefix is a folder in it)."""
    endpoint: S3Endpoint | None = None
    """The S3 endpoint of the ``s3-*`` backends."""
    bucket: str | None = None
    """The bucket of the ``s3-*`` backends, new for the test."""
    request: pytest.FixtureRequest | None = field(default=None, repr=False)
    _opened: list[Any] = field(default_factory=list, repr=False)

    @property
    def is_s3(self) -> bool:
        return self.kind != "local"

    @property
    def transport(self) -> str | None:
        """``"lean"`` or ``"boto3"`` on S3, else None."""
        return self.kind.removeprefix("s3-") if self.is_s3 else None

    def store(self, prefix: str = "pfx/", *, fsync: bool = True, **options: Any) -> ObjectStore:
        """A new store on the objects under ``prefix``.

        Args:
            prefix: Key prefix on S3; a folder of :attr:`root` for ``local``.
            fsync: The :class:`LocalStore` option (S3 has no such switch).
            **options: Other options of the store's constructor (``client`` and
                others of :class:`Boto3S3Store`, those of :class:`LeanS3Store`).
        """
        if not self.is_s3:
            return LocalStore(self.root / prefix if prefix else self.root, fsync=fsync, **options)
        assert self.endpoint is not None and self.bucket is not None and self.transport
        store = self.endpoint.store(self.transport, self.bucket, prefix, **options)
        self._opened.append(store)
        return store

    def url(self, prefix: str = "pfx/", *, name_transport: bool = False) -> str:
        """The URL of :meth:`store`'s objects (``from_url``, the CLI, the server).

        On S3 it opens the same transport (``transport=`` is in the URL unless
        it is the default, lean, and ``name_transport`` is false), and the
        endpoint's credentials are put in the environment for the test
        (``creds_env``), where URLs find them.
        """
        if not self.is_s3:
            return (self.root / prefix if prefix else self.root).as_uri()
        assert self.endpoint is not None and self.request is not None
        self.request.getfixturevalue("creds_env")
        url = f"s3://{self.bucket}/{prefix}?endpoint_url={self.endpoint.url}"
        url += f"&region={self.endpoint.region}"
        if name_transport or self.transport != "lean":
            url += f"&transport={self.transport}"
        return url

    def close(self) -> None:
        """Close the idle connections of the lean stores opened."""
        for store in self._opened:
            close = getattr(store, "close", None)
            if close is not None:
                close()
        self._opened.clear()


@contextlib.contextmanager
def open_backend(kind: str, root: Path, request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A :class:`Backend` of ``kind``: the directory ``root``, or a new bucket on the
    session's S3 endpoint (emptied and removed afterwards)."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend {kind!r} in a test: {BACKENDS}")
    if kind == "local":
        backend = Backend(kind, root, request=request)
        yield backend
        return
    endpoint: S3Endpoint = request.getfixturevalue("s3_endpoint")
    with endpoint.new_bucket() as bucket:
        backend = Backend(kind, root, endpoint, bucket, request)
        try:
            yield backend
        finally:
            backend.close()
