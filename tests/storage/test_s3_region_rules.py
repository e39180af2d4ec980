"""Wrong-region answers followed once and re-signed, and directory buckets refused
(both transports), against a scripted loopback server or plans driven by hand."""

from __future__ import annotations

from typing import Any

import pytest
from lean_helpers import AsyncDriven
from scripted_s3 import error_xml, scripted_server

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage import StoreUnavailableError
from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpResponse
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.s3 import lean
from objstore_saver.storage.s3.boto3_store import Boto3S3Store
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.protocol import BucketRegionError
from objstore_saver.storage.urls import store_from_url

HOME = "eu-west-1"


def _wrong_region(kind: str, region: str) -> tuple[int, dict[str, str], bytes]:
    if kind == "301 header":
        return 301, {"x-amz-bucket-region": region}, error_xml("PermanentRedirect")
    if kind == "400 xml":
        return 400, {}, error_xml("AuthorizationHeaderMalformed", Region=region)
    assert kind == "307 header"
    return 307, {"x-amz-bucket-region": region}, error_xml("TemporaryRedirect")


def _bucket_in(region: str, kind: str) -> Any:
    """A script: a wrong-region answer unless the request is signed for ``region``."""

    def script(method: str, path: str, headers: dict[str, str]) -> Any:
        credential = headers["authorization"].partition("Credential=")[2]
        if credential.split("/")[2] != region:
            return _wrong_region(kind, region)
        return 200, {}, b"" if method == "HEAD" else b"data"

    return script


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("kind", ["301 header", "400 xml", "307 header"])
def test_a_wrong_region_answer_is_followed_and_remembered(
    creds: None, kind: str, use_async: bool
) -> None:
    with scripted_server(_bucket_in(HOME, kind)) as server:
        store = LeanS3Store("bucket", endpoint_url=server.url, region_name="us-east-1")
        driven: Any = AsyncDriven(store) if use_async else store
        try:
            assert driven.get("k") == b"data"
            assert [s.scope_region for s in server.seen] == ["us-east-1", HOME]
            assert server.seen[0].path == server.seen[1].path == "/bucket/k"
            # Later requests go signed for the bucket's region at once.
            driven.put("k2", b"v")
            assert store.check() is None
        finally:
            if use_async:
                driven.close()
    assert [s.scope_region for s in server.seen[2:]] == [HOME, HOME]
    assert store._protocol.region == HOME


def test_a_second_wrong_region_answer_is_an_error_naming_both_regions(creds: None) -> None:
    def script(method: str, path: str, headers: dict[str, str]) -> Any:
        return _wrong_region("301 header", "ap-south-1" if len(server.seen) > 1 else HOME)

    with scripted_server(script) as server:
        store = LeanS3Store("bucket", endpoint_url=server.url, region_name="us-east-1")
        with pytest.raises(StoreUnavailableError) as info:
            store.get("k")
    assert len(server.seen) == 2
    message = str(info.value)
    for part in ("'bucket'", "'us-east-1'", f"'{HOME}'", "'ap-south-1'", server.url):
        assert part in message


def test_a_redirect_without_a_region_is_not_followed(creds: None) -> None:
    with scripted_server(lambda *_: (301, {}, error_xml("PermanentRedirect"))) as server:
        store = LeanS3Store("bucket", endpoint_url=server.url, region_name="us-east-1")
        with pytest.raises(StoreUnavailableError, match="PermanentRedirect"):
            store.get("k")
    assert len(server.seen) == 1


def test_an_aws_host_of_another_region_is_reported_with_the_new_addressing(creds: None) -> None:
    """The plans cannot move the connection pools: they say where the bucket is instead."""
    store = LeanS3Store("bucket", region_name="us-east-1")
    plan = store._protocol.get("k", None)
    request = plan.send(None)
    assert request.headers["host"] == "bucket.s3.amazonaws.com"  # botocore's us-east-1 host
    with pytest.raises(BucketRegionError) as info:
        plan.send(HttpResponse(301, {"x-amz-bucket-region": HOME}, error_xml("PermanentRedirect")))
    error = info.value
    assert (error.region, error.bucket_region) == ("us-east-1", HOME)
    assert error.addressing.host == f"bucket.s3.{HOME}.amazonaws.com"
    assert error.addressing.public_url == f"https://bucket.s3.{HOME}.amazonaws.com"
    assert "region_name='eu-west-1'" in str(error) and "'bucket'" in str(error)
    assert store._protocol.region == "us-east-1"  # nothing switched behind the pools' back


def test_another_region_of_aws_is_where_botocore_puts_it() -> None:
    store = LeanS3Store("dotted.bucket", region_name="us-east-1")
    moved = store._protocol._relocate(HOME)
    assert (moved.host, moved.base_path) == (f"s3.{HOME}.amazonaws.com", "/dotted.bucket")
    custom = LeanS3Store("b", endpoint_url="http://127.0.0.1:9000", region_name="us-east-1")
    assert custom._protocol._relocate is None  # a custom endpoint: only the signature changes


@pytest.mark.parametrize("use_async", [False, True])
def test_the_store_follows_its_bucket_to_another_regions_host(
    creds: None, use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS hosts are reached on loopback (no DNS, no TLS here); all else is the store's own."""
    home_host = f"bucket.s3.{HOME}.amazonaws.com"

    def script(method: str, path: str, headers: dict[str, str]) -> Any:
        if headers["host"] != home_host:
            return 301, {"x-amz-bucket-region": HOME}, error_xml("PermanentRedirect")
        return 200, {}, b"" if method == "HEAD" else b"data"

    with scripted_server(script) as server:
        loopback = server.url.removeprefix("http://")
        made: list[str] = []

        def on_loopback(cls: type) -> type:
            class Pool(cls):  # type: ignore[misc, valid-type]
                def __init__(self, scheme: str, host: str, **options: Any) -> None:
                    made.append(host)
                    super().__init__("http", loopback, **{**options, "tls": None})

            return Pool

        monkeypatch.setattr(lean, "ConnectionPool", on_loopback(ConnectionPool))
        monkeypatch.setattr(lean, "AsyncConnectionPool", on_loopback(AsyncConnectionPool))
        store = LeanS3Store("bucket", region_name="us-east-1")
        driven: Any = AsyncDriven(store) if use_async else store
        try:
            assert driven.get("k") == b"data"
            driven.put("k2", b"v")
        finally:
            if use_async:
                driven.close()
    hosts = [(s.headers["host"], s.scope_region) for s in server.seen]
    assert hosts == [
        ("bucket.s3.amazonaws.com", "us-east-1"),
        (home_host, HOME),
        (home_host, HOME),  # later requests go to the bucket's region at once
    ]
    assert home_host in made and made[-1] == home_host
    assert (store.region, store.endpoint) == (HOME, f"https://{home_host}")


# --- S3 Express One Zone directory buckets ---------------------------------------------------

EXPRESS = "mybucket--usw2-az1--x-s3"


@pytest.mark.parametrize(
    "build",
    [
        lambda: LeanS3Store(EXPRESS, region_name="us-west-2"),
        lambda: Boto3S3Store(EXPRESS, region_name="us-west-2"),
        lambda: store_from_url(f"s3://{EXPRESS}/", check=False),
        lambda: store_from_url(f"s3://{EXPRESS}/?transport=boto3", check=False),
        lambda: store_from_url("s3://x--usw2-az1--x-s3/", check=False),
    ],
    ids=["lean", "boto3", "url", "url-boto3", "url-short"],
)
def test_a_directory_bucket_is_refused(creds: None, build: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        build()
    message = str(info.value)
    assert "--x-s3" in message and "directory bucket" in message
    assert "order" in message and "latest-checkpoint" in message
    assert isinstance(info.value, ValueError)


def test_a_general_purpose_bucket_with_a_similar_name_is_accepted(creds: None) -> None:
    LeanS3Store("my--x-s3-bucket", region_name="us-west-2")
    Boto3S3Store("my--x-s3-bucket", region_name="us-west-2")
