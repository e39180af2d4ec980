"""Both S3 transports read an answer the same way: one set of rules, one error text."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_s3 import error_xml, scripted_server

from objstore_saver.errors import StorageError, StoreUnavailableError
from objstore_saver.storage import ObjectExistsError, ObjectNotFoundError, PutMode
from objstore_saver.storage.s3 import Boto3S3Store, LeanS3Store, rules


def _stores(url: str) -> list[Any]:
    options = {"endpoint_url": url, "region_name": "us-east-1", "max_attempts": 1}
    return [LeanS3Store("bkt", **options), Boto3S3Store("bkt", **options)]


@pytest.mark.parametrize(
    ("status", "code", "call", "expected"),
    [
        (404, "NoSuchKey", "get", ObjectNotFoundError),
        (404, "NoSuchBucket", "get", StoreUnavailableError),
        (403, "AccessDenied", "get", StoreUnavailableError),
        (412, "PreconditionFailed", "create", ObjectExistsError),
        (400, "InvalidArgument", "get", StorageError),
        (400, "InvalidArgument", "create", StorageError),
    ],
)
def test_both_transports_map_an_answer_alike(
    creds: None, status: int, code: str, call: str, expected: type[Exception]
) -> None:
    answer = (status, {"content-type": "application/xml"}, error_xml(code))
    with scripted_server(lambda *_: answer) as server:
        messages = []
        for store in _stores(server.url):
            with pytest.raises(expected) as info:
                if call == "get":
                    store.get("some/key")
                else:
                    store.put("some/key", b"v", PutMode.CREATE)
            assert type(info.value) is expected, type(store).__name__
            messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "some/key" in messages[0]
    if expected is not ObjectNotFoundError and expected is not ObjectExistsError:
        assert (code in messages[0] and "'bkt'" in messages[0]) or "s3://bkt/" in messages[0]


def test_a_range_past_the_end_reads_empty_on_both(creds: None) -> None:
    answer = (416, {"content-type": "application/xml"}, error_xml("InvalidRange"))
    with scripted_server(lambda *_: answer) as server:
        assert [store.get("k", (10, 20)) for store in _stores(server.url)] == [b"", b""]


def test_the_rules() -> None:
    assert rules.key_missing(404, "404") and rules.key_missing(404, "NoSuchKey")
    assert not rules.key_missing(404, "NoSuchBucket")
    assert rules.create_refused(412, "") and not rules.create_refused(409, "x")
    assert rules.create_raced(409, "ConditionalRequestConflict")
    assert rules.range_past_end(416, "") and not rules.range_past_end(404, "NoSuchKey")
    unavailable = rules.answer_error(
        bucket="b",
        endpoint="http://e",
        location="s3://b/",
        operation="get",
        key="k",
        status=403,
        code="AccessDenied",
    )
    assert isinstance(unavailable, StoreUnavailableError)
    assert (
        str(unavailable)
        == "S3 bucket 'b' at http://e is unavailable (get of key 'k'): AccessDenied (HTTP 403)"
    )
    other = rules.answer_error(
        bucket="b",
        endpoint="http://e",
        location="s3://b/",
        operation="put",
        key="k",
        status=400,
        code="InvalidArgument",
        message="m",
        note="n",
    )
    assert type(other) is StorageError
    assert str(other) == "S3 put of key 'k' in s3://b/ failed: InvalidArgument (HTTP 400): m; n"
    assert 0 <= rules.conflict_wait(3) <= 0.4


@pytest.mark.parametrize("store", [LeanS3Store, Boto3S3Store])
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://user:topsecret@127.0.0.1:9", "carries user info"),
        ("ftp://127.0.0.1:9", "is not an"),
    ],
)
def test_both_transports_refuse_an_endpoint_alike(
    creds: None, monkeypatch: pytest.MonkeyPatch, store: Any, url: str, says: str
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    with pytest.raises(ValueError, match=f"AWS_ENDPOINT_URL_S3 .*{says}") as info:
        store("bkt", region_name="us-east-1")
    assert "topsecret" not in str(info.value)
