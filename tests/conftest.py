"""Shared fixtures."""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.config
import pytest

from objstore_saver.storage import S3Store


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the fault, race and stateful suites at their full counts",
    )


@pytest.fixture(scope="session")
def long_run(request: pytest.FixtureRequest) -> bool:
    """True under ``--long``: suites use their full counts instead of CI's."""
    return bool(request.config.getoption("--long"))


# --- S3 endpoint fixtures ---
#
# Tests run against a real HTTP S3 endpoint: the one named by
# OBJSTORE_TEST_ENDPOINT (credentials OBJSTORE_TEST_ACCESS_KEY /
# OBJSTORE_TEST_SECRET_KEY, else boto3's usual chain; region
# OBJSTORE_TEST_REGION), or an in-process moto server on loopback.


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
        from objstore_saver.storage.s3_lean import LeanS3Store

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
            transport: ``"boto3"`` (:class:`S3Store` on :meth:`client`) or
                ``"lean"`` (:meth:`lean_store`).
            bucket: Bucket name.
            prefix: Key prefix.
            **options: Other options of that store.
        """
        if transport == "boto3":
            return S3Store(bucket, prefix, client=self.client(), **options)
        if transport == "lean":
            return self.lean_store(bucket, prefix, **options)
        raise ValueError(f"unknown S3 transport {transport!r} in a test: {S3_TRANSPORTS}")


#: The S3 transports the suites that take a store run on (``S3Endpoint.store``).
S3_TRANSPORTS = ("boto3", "lean")


def _serialize_moto_puts(mp: pytest.MonkeyPatch) -> None:
    """Make moto's ``If-None-Match: *`` check atomic, as it is on S3.

    moto checks for an existing object and then stores the new one without a
    lock, so two racing create-only puts could both succeed. Serializing its
    PutObject handler keeps the race tests about this package, not moto.
    """
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    lock = threading.Lock()

    @functools.wraps(original)
    def put_object(self: Any) -> Any:
        with lock:
            return original(self)

    mp.setattr(S3Response, "put_object", put_object)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """The S3 endpoint of the test session."""
    url = os.environ.get("OBJSTORE_TEST_ENDPOINT")
    if url:
        yield S3Endpoint(
            url=url,
            access_key=os.environ.get("OBJSTORE_TEST_ACCESS_KEY"),
            secret_key=os.environ.get("OBJSTORE_TEST_SECRET_KEY"),
            region=os.environ.get("OBJSTORE_TEST_REGION", "us-east-1"),
        )
        return
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    mp = pytest.MonkeyPatch()
    _serialize_moto_puts(mp)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Endpoint(
            url=f"http://{host}:{port}",
            access_key="testing-access-key",
            secret_key="testing-secret-key",
            region="us-east-1",
        )
    finally:
        server.stop()
        mp.undo()


def _empty_and_remove_bucket(client: Any, bucket: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint) -> Iterator[str]:
    """A new, uniquely named bucket; emptied and removed afterwards."""
    client = s3_endpoint.client()
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    if s3_endpoint.region == "us-east-1":
        client.create_bucket(Bucket=bucket)
    else:
        client.create_bucket(
            Bucket=bucket,
            CreateBucketConfiguration={"LocationConstraint": s3_endpoint.region},
        )
    try:
        yield bucket
    finally:
        _empty_and_remove_bucket(client, bucket)


@pytest.fixture
def creds_env(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint's credentials in boto3's default chain (environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key or "testing-access-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_key or "testing-secret-key")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def s3_store(s3_endpoint: S3Endpoint, s3_bucket: str) -> S3Store:
    """An :class:`S3Store` under the prefix ``pfx/`` of a new bucket."""
    return S3Store(s3_bucket, "pfx/", client=s3_endpoint.client())


# --- PostgreSQL (migration tests) ---
from pg_server import postgres_server, postgres_url  # noqa: E402, F401
