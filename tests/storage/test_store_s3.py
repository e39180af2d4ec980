"""Boto3S3Store against a real HTTP S3 endpoint (moto on loopback unless configured)."""

from __future__ import annotations

import socket
import uuid
from datetime import UTC
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from s3_helpers import error_reply, use_endpoint_credentials

from objstore_saver.storage import (
    Boto3S3Store,
    InvalidKeyError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.testing.store_contract import StoreContract


class _BlockingManyKeys(StoreContract):
    def test_many_keys_paginate_and_delete(self, empty_store: ObjectStore) -> None:
        # Blocking only: Boto3S3Store's coroutines run these very calls in threads
        # (ThreadedAsync), and 1,100 keys on moto take seconds each way.
        StoreContract.test_many_keys_paginate_and_delete(self, empty_store)


class TestS3StoreContract(_BlockingManyKeys):
    max_key_bytes = 1024 - len("pfx/")

    @pytest.fixture
    def empty_store(self, s3_store: Boto3S3Store) -> Boto3S3Store:
        return s3_store


class TestS3StoreWithoutPrefixContract(_BlockingManyKeys):
    @pytest.fixture
    def empty_store(self, s3_endpoint: Any, s3_bucket: str) -> Boto3S3Store:
        return Boto3S3Store(s3_bucket, client=s3_endpoint.client())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_honours_if_none_match(s3_endpoint: Any, s3_bucket: str) -> None:
    client = s3_endpoint.client()
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=s3_bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"first"


def test_keys_are_stored_under_the_prefix(s3_store: Boto3S3Store) -> None:
    s3_store.put("a/b", b"v")
    raw = s3_store.client.list_objects_v2(Bucket=s3_store.bucket)
    assert [o["Key"] for o in raw["Contents"]] == ["pfx/a/b"]
    assert [o.key for o in s3_store.list("").objects] == ["a/b"]


def test_built_from_endpoint_url(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_endpoint_credentials(s3_endpoint, monkeypatch)
    store = Boto3S3Store(
        s3_bucket, "/built", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region
    )
    assert store.prefix == "built/"
    assert store.location == f"s3://{s3_bucket}/built/ at {s3_endpoint.url}"
    store.check()
    store.put("x", b"1", PutMode.CREATE)
    assert store.get("x") == b"1"
    assert store.client.meta.config.s3["addressing_style"] == "path"
    assert store.client.meta.config.retries == {"mode": "standard", "total_max_attempts": 5}


@pytest.mark.parametrize(
    ("prefix", "normalized"), [("", ""), ("/", ""), ("p", "p/"), ("/p/q/", "p/q/")]
)
def test_prefix_is_normalized(s3_endpoint: Any, prefix: str, normalized: str) -> None:
    store = Boto3S3Store("bucket", prefix, client=s3_endpoint.client())
    assert store.prefix == normalized
    assert store.location.startswith(f"s3://bucket/{normalized} at ")


@pytest.mark.parametrize("prefix", ["a//b", "a/../b", "a b/", "caf\u00e9/"])
def test_invalid_prefix(s3_endpoint: Any, prefix: str) -> None:
    with pytest.raises(InvalidKeyError):
        Boto3S3Store("bucket", prefix, client=s3_endpoint.client())


def test_key_too_long_with_prefix(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, "p" * 10, client=s3_endpoint.client())
    key = "k" * 1020  # valid on its own, 1,031 bytes under the prefix
    for call in (lambda: store.put(key, b""), lambda: store.get(key), lambda: store.delete([key])):
        with pytest.raises(InvalidKeyError, match="1031 bytes") as info:
            call()
        assert repr(key) in str(info.value)
    store.put("k" * 1013, b"fits")
    assert store.get("k" * 1013) == b"fits"


def test_prefix_isolation(s3_endpoint: Any, s3_bucket: str) -> None:
    a, ab, a_b = (
        Boto3S3Store(s3_bucket, p, client=s3_endpoint.client()) for p in ("a/", "ab/", "a/b/")
    )
    a.put("x", b"a")
    ab.put("x", b"ab")
    a_b.put("y", b"a/b")
    assert [o.key for o in a.list("").objects] == ["b/y", "x"]
    assert [o.key for o in ab.list("").objects] == ["x"]
    assert [o.key for o in a_b.list("").objects] == ["y"]
    assert a.get("x") == b"a"
    assert ab.get("x") == b"ab"
    with pytest.raises(ObjectNotFoundError):
        ab.get("b/y")
    ab.delete(["x", "b/y"])
    assert a.get("x") == b"a"
    assert a.get("b/y") == b"a/b"
    assert ab.list("").objects == []


def test_missing_bucket_is_unavailable(s3_endpoint: Any) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    store = Boto3S3Store(bucket, "p/", client=s3_endpoint.client())
    for call in (
        store.check,
        lambda: store.put("k", b"v"),
        lambda: store.put("k", b"v", PutMode.CREATE),
        lambda: store.get("k"),
        lambda: store.get("k", (0, 1)),
        lambda: store.list(""),
        lambda: store.delete(["k"]),
    ):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        assert bucket in str(info.value)
        assert s3_endpoint.url in str(info.value)


def test_down_endpoint_is_unavailable(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    use_endpoint_credentials(s3_endpoint, monkeypatch)
    url = f"http://127.0.0.1:{_closed_port()}"
    store = Boto3S3Store("some-bucket", endpoint_url=url, region_name="us-east-1", max_attempts=1)
    for call in (store.check, lambda: store.get("k"), lambda: store.put("k", b"v")):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        message = str(info.value)
        assert url in message
        assert "some-bucket" in message
        if s3_endpoint.secret_key:
            assert s3_endpoint.secret_key not in message


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (403, "SignatureDoesNotMatch"),
        (403, "InvalidAccessKeyId"),
        (403, "AccessDenied"),
        (403, "RequestTimeTooSkewed"),  # any 403, not only the listed codes
        (404, "NoSuchBucket"),
    ],
)
def test_denied_credentials_are_unavailable_without_leaking_them(
    s3_endpoint: Any, s3_bucket: str, status: int, code: str
) -> None:
    secret = "wrong-secret-" + uuid.uuid4().hex
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        aws_access_key_id="AKIAWRONGKEY",
        aws_secret_access_key=secret,
    )
    # moto accepts any credentials unless its IAM checks are on, so the
    # endpoint's denial is played by a hook answering every request.
    client.meta.events.register("before-send.s3.*", error_reply(status, code, "denied"))
    store = Boto3S3Store(s3_bucket, client=client)
    for call in (store.check, lambda: store.get("k"), lambda: store.put("k", b"v")):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        message = str(info.value)
        assert s3_bucket in message
        assert s3_endpoint.url in message
        assert secret not in message
        assert secret not in repr(info.value.__cause__)


def test_last_modified_is_normalized_to_utc(s3_store: Boto3S3Store) -> None:
    # botocore returns tzutc() or tzlocal() (when the local zone is UTC);
    # listings always carry datetime.UTC, as LocalStore's do.
    s3_store.put("k", b"v")
    [info] = s3_store.list("").objects
    assert info.last_modified.tzinfo is UTC


def test_other_client_errors_name_operation_key_and_code(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(
        s3_bucket, client=s3_endpoint.client(), extra_put_args={"StorageClass": "NO_SUCH_CLASS"}
    )
    with pytest.raises(StorageError) as info:
        store.put("some/key", b"v")
    assert not isinstance(info.value, StoreUnavailableError)
    message = str(info.value)
    assert "put" in message
    assert "'some/key'" in message
    # AWS and moto answer InvalidStorageClass, Ceph RGW InvalidArgument.
    cause = info.value.__cause__
    assert isinstance(cause, ClientError)
    assert cause.response["Error"]["Code"] in ("InvalidStorageClass", "InvalidArgument")
    assert cause.response["Error"]["Code"] in message


def test_extra_put_and_get_args_are_sent(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(
        s3_bucket,
        client=s3_endpoint.client(),
        extra_put_args={"Metadata": {"origin": "test"}},
        extra_get_args={"ChecksumMode": "ENABLED"},
    )
    sent: list[dict[str, Any]] = []
    store.client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: sent.append(dict(params))
    )
    store.put("k", b"v")
    head = store.client.head_object(Bucket=s3_bucket, Key="k")
    assert head["Metadata"] == {"origin": "test"}
    assert store.get("k", (0, 1)) == b"v"
    assert sent == [
        {"ChecksumMode": "ENABLED", "Bucket": s3_bucket, "Key": "k", "Range": "bytes=0-0"}
    ]


def test_create_retries_a_conditional_request_conflict(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, client=s3_endpoint.client())
    hook = error_reply(
        409, "ConditionalRequestConflict", "A conflicting operation is in progress", 2
    )
    store.client.meta.events.register("before-send.s3.PutObject", hook)
    store.put("k", b"mine", PutMode.CREATE)
    assert len(hook.calls) == 2
    assert store.get("k") == b"mine"


def test_create_conflict_then_existing_object_raises(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, client=s3_endpoint.client())
    store.put("k", b"theirs")
    hook = error_reply(
        409, "ConditionalRequestConflict", "A conflicting operation is in progress", 1
    )
    store.client.meta.events.register("before-send.s3.PutObject", hook)
    with pytest.raises(ObjectExistsError):
        store.put("k", b"mine", PutMode.CREATE)
    assert store.get("k") == b"theirs"


def test_create_conflict_retries_are_bounded(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, client=s3_endpoint.client())
    hook = error_reply(409, "ConditionalRequestConflict", "A conflicting operation is in progress")
    store.client.meta.events.register("before-send.s3.PutObject", hook)
    with pytest.raises(StorageError, match="ConditionalRequestConflict"):
        store.put("k", b"mine", PutMode.CREATE)
    assert 2 <= len(hook.calls) <= 10


def _retry_first_success(seen: list[int]) -> Any:
    """A ``needs-retry`` hook resending a request that succeeded, as after a lost reply."""

    def hook(response: Any, attempts: int, **_: Any) -> float | None:
        seen.append(attempts)
        if attempts == 1 and response is not None and response[0].status_code == 200:
            return 0.0
        return None

    return hook


def test_retried_create_that_finds_its_own_bytes_succeeds(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, client=s3_endpoint.client())
    attempts: list[int] = []
    store.client.meta.events.register("needs-retry.s3.PutObject", _retry_first_success(attempts))
    store.put("k", b"mine", PutMode.CREATE)  # second attempt gets 412 from the first
    assert attempts == [1, 2]
    assert store.get("k") == b"mine"
    attempts.clear()
    with pytest.raises(ObjectExistsError):
        store.put("k", b"other", PutMode.CREATE)
    assert attempts == [1]


def test_delete_sends_batches_of_at_most_1000(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, "p/", client=s3_endpoint.client())
    batches: list[int] = []
    store.client.meta.events.register(
        "provide-client-params.s3.DeleteObjects",
        lambda params, **_: batches.append(len(params["Delete"]["Objects"])),
    )
    store.delete([f"k{i}" for i in range(2345)])
    assert batches == [1000, 1000, 345]
    store.delete([])
    assert batches == [1000, 1000, 345]


def test_delete_errors_name_key_and_code(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, "p/", client=s3_endpoint.client())
    store.put("k1", b"")

    def fail(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Errors"] = [
            {"Key": "p/k1", "Code": "AccessDenied", "Message": "Access Denied"},
            {"Key": "p/k2", "Code": "InternalError", "Message": "try again"},
        ]

    store.client.meta.events.register("after-call.s3.DeleteObjects", fail)
    with pytest.raises(StorageError) as info:
        store.delete(["k1", "k2"])
    message = str(info.value)
    assert "'k1'" in message
    assert "AccessDenied" in message
    assert "1 more" in message


def test_range_requests_ask_only_for_the_range(s3_endpoint: Any, s3_bucket: str) -> None:
    store = Boto3S3Store(s3_bucket, client=s3_endpoint.client())
    store.put("r", b"0123456789")
    ranges: list[str | None] = []
    store.client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: ranges.append(params.get("Range"))
    )
    assert store.get("r", (2, 5)) == b"234"
    assert store.get("r", (4, 4)) == b""
    assert store.get("r") == b"0123456789"
    assert ranges == ["bytes=2-4", "bytes=4-4", None]
