"""LeanS3Store against a real HTTP S3 endpoint (moto on loopback unless configured).

The contract suite runs with and without a prefix, each over the blocking
calls and over the coroutines. The guarantees Boto3S3Store has are then checked one
by one; signing, timeouts, connection reuse and HTTP framing are in
``test_lean_wire.py``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from lean_helpers import AsyncDriven, Recorder, Reply, lean
from s3_helpers import CUSTOMER_KEY, KMS_KEY_ID, SUPPORTED, encryption_of, server_kind

from objstore_saver.storage import (
    EncryptionNotConfirmedError,
    InvalidKeyError,
    ObjectExistsError,
    ObjectNotFoundError,
    PutMode,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.testing.store_contract import StoreContract

# --- the contract suite -------------------------------------------------------------


class TestLeanS3StoreContract(StoreContract):
    max_key_bytes = 1024 - len("pfx/")

    @pytest.fixture
    def empty_store(self, s3_endpoint: Any, s3_bucket: str, creds_env: None) -> LeanS3Store:
        return lean(s3_endpoint, s3_bucket, "pfx/")


class TestLeanS3StoreWithoutPrefixContract(StoreContract):
    @pytest.fixture
    def empty_store(self, s3_endpoint: Any, s3_bucket: str, creds_env: None) -> LeanS3Store:
        return lean(s3_endpoint, s3_bucket)


async def test_coroutines_never_leave_the_loop(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No thread hop: the blocking transport and every executor are out of reach."""
    store = lean(s3_endpoint, s3_bucket, "t/")

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a coroutine used a blocking path")

    monkeypatch.setattr(store, "_send", refuse)
    monkeypatch.setattr(asyncio.get_running_loop(), "run_in_executor", refuse)
    loop_thread = threading.get_ident()
    seen: list[int] = []
    asend = store._asend

    async def on_loop(request: HttpRequest) -> Reply:
        seen.append(threading.get_ident())
        return await asend(request)

    monkeypatch.setattr(store, "_asend", on_loop)
    try:
        await store.aput("k", b"v", PutMode.CREATE)
        assert await store.aget("k", (0, 1)) == b"v"
        assert [o.key for o in (await store.alist("")).objects] == ["k"]
        await store.adelete(["k"])
        await store.acheck()
    finally:
        await store.aclose()
    assert len(seen) == 5
    assert set(seen) == {loop_thread}


# --- construction --------------------------------------------------------------------------


def test_location_prefix_and_repr(s3_endpoint: Any, creds_env: None) -> None:
    store = lean(s3_endpoint, "bucket", "/p/q/")
    assert store.prefix == "p/q/"
    assert store.location == f"s3://bucket/p/q/ at {s3_endpoint.url}"
    sse_c = LeanS3Store("bkt", region_name="eu-west-1", encryption=encryption_of("SSE-C"))
    assert CUSTOMER_KEY.decode() not in repr(sse_c)
    assert "hidden" in repr(sse_c)
    assert sse_c.endpoint == "https://bkt.s3.eu-west-1.amazonaws.com"
    assert LeanS3Store("a.b", region_name="eu-west-1").endpoint == (
        "https://s3.eu-west-1.amazonaws.com"
    )


def test_defaults(s3_endpoint: Any) -> None:
    store = lean(s3_endpoint, "bucket")
    assert store.retry.max_attempts == 5
    assert store.timeouts == (5.0, 30.0)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", 1.5),
        ("connect_timeout", 0),
        ("connect_timeout", float("inf")),
        ("read_timeout", -1),
        ("read_timeout", "30"),
        ("max_pool_connections", 0),
        ("backoff_base", -1),
    ],
)
def test_invalid_options_are_refused(s3_endpoint: Any, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        lean(s3_endpoint, "bucket", **{option: value})


@pytest.mark.parametrize("prefix", ["a//b", "a/../b", "a b/", "caf\u00e9/"])
def test_invalid_prefix(s3_endpoint: Any, prefix: str) -> None:
    with pytest.raises(InvalidKeyError):
        lean(s3_endpoint, "bucket", prefix)


def test_endpoint_with_user_info_is_refused_without_echoing_it() -> None:
    secret = "pw-" + uuid.uuid4().hex
    with pytest.raises(ValueError, match="user info") as info:
        LeanS3Store("b", endpoint_url=f"http://user:{secret}@127.0.0.1:9/")
    assert secret not in str(info.value)


def test_extra_headers_may_not_set_what_the_store_sets() -> None:
    with pytest.raises(ValueError, match="x-amz-server-side-encryption"):
        LeanS3Store("b", extra_put_headers={"X-Amz-Server-Side-Encryption": "AES256"})
    with pytest.raises(ValueError, match="if-none-match"):
        LeanS3Store("b", extra_put_headers={"If-None-Match": "*"})


# --- create-only puts, lost responses, conflicts ----------------------------------------------


def test_create_sends_if_none_match_and_maps_412(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, "p/")
    rec = Recorder(store)
    store.put("k", b"first", PutMode.CREATE)
    with pytest.raises(ObjectExistsError) as info:
        store.put("k", b"second", PutMode.CREATE)
    assert "'k'" in str(info.value) and s3_bucket in str(info.value)
    store.put("k", b"third")
    assert [r.headers.get("if-none-match") for r in rec.of("PUT")] == ["*", "*", None]
    assert store.get("k") == b"third"


def _lose_first_put_answer() -> Callable[[HttpRequest, Reply], Reply]:
    """A reply editor: the first PUT reaches the server, its answer is dropped."""
    lost: list[int] = []

    def edit(request: HttpRequest, reply: Reply) -> Reply:
        if request.method == "PUT" and not lost:
            lost.append(1)
            return TransportFailure("ReadTimeoutError: answer lost (test)")
        return reply

    return edit


@pytest.mark.parametrize("use_async", [False, True])
def test_retried_create_that_finds_its_own_bytes_succeeds(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, use_async: bool
) -> None:
    store = lean(s3_endpoint, s3_bucket, backoff_base=0)
    rec = Recorder(store, _lose_first_put_answer())
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        driven.put("k", b"mine", PutMode.CREATE)  # 2nd attempt gets 412 from the 1st
        assert [r.method for r in rec.requests] == ["PUT", "PUT", "GET"]
        assert driven.get("k") == b"mine"
        rec.requests.clear()
        with pytest.raises(ObjectExistsError):  # not retried: a plain 412
            driven.put("k", b"other", PutMode.CREATE)
        assert [r.method for r in rec.requests] == ["PUT"]
    finally:
        if use_async:
            driven.close()


def test_retried_create_that_finds_other_bytes_raises(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, backoff_base=0)
    store.put("k", b"theirs")
    Recorder(store, _lose_first_put_answer())
    with pytest.raises(ObjectExistsError):
        store.put("k", b"mine", PutMode.CREATE)
    assert store.get("k") == b"theirs"


def _error_reply(status: int, code: str, times: int | None = None, method: str | None = None):
    body = f"<Error><Code>{code}</Code><Message>m</Message></Error>".encode()
    seen: list[int] = []

    def edit(request: HttpRequest) -> Reply | None:
        if (method is None or request.method == method) and (times is None or len(seen) < times):
            seen.append(1)
            return HttpResponse(status, {}, body)
        return None

    edit.seen = seen  # type: ignore[attr-defined]
    return edit


def test_create_retries_a_conditional_request_conflict(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket)
    edit = _error_reply(409, "ConditionalRequestConflict", 2, "PUT")
    Recorder(store, intercept=edit)
    store.put("k", b"mine", PutMode.CREATE)
    assert len(edit.seen) == 2
    assert store.get("k") == b"mine"


def test_create_conflict_retries_are_bounded(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket)
    edit = _error_reply(409, "ConditionalRequestConflict", None, "PUT")
    Recorder(store, intercept=edit)
    with pytest.raises(StorageError, match="ConditionalRequestConflict"):
        store.put("k", b"mine", PutMode.CREATE)
    assert len(edit.seen) == 6


@pytest.mark.parametrize("use_async", [False, True])
def test_max_attempts_bounds_retries_of_throttled_requests(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, use_async: bool
) -> None:
    store = lean(s3_endpoint, s3_bucket, max_attempts=3, backoff_base=0)
    edit = _error_reply(503, "SlowDown")
    Recorder(store, intercept=edit)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        with pytest.raises(StorageError, match="SlowDown") as info:
            driven.get("k")
        assert "'k'" in str(info.value)
        assert len(edit.seen) == 3
    finally:
        if use_async:
            driven.close()


def test_backoff_grows_and_is_capped(s3_endpoint: Any) -> None:
    policy = lean(s3_endpoint, "bucket", backoff_base=1.0).retry
    waits = [max(policy.delay(n) for _ in range(200)) for n in (1, 2, 3, 8)]
    assert waits[0] <= 1.0 < waits[1] <= 2.0 < waits[2] <= 4.0
    assert 4.0 < waits[3] <= 20.0


# --- reads, listings, deletes ---------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_range_requests_ask_only_for_the_range(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, use_async: bool
) -> None:
    store = lean(s3_endpoint, s3_bucket)
    store.put("r", b"0123456789")
    rec = Recorder(store)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        assert driven.get("r", (2, 5)) == b"234"
        assert driven.get("r", (4, 4)) == b""
        assert driven.get("r") == b"0123456789"
    finally:
        if use_async:
            driven.close()
    assert [r.headers.get("range") for r in rec.requests] == ["bytes=2-4", "bytes=4-4", None]


def test_list_sends_max_keys_and_start_after(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, "p/")
    for i in range(5):
        store.put(f"t/{i}", b"x")
    rec = Recorder(store)
    page = store.list("t/", start_after="t/1", limit=2)
    assert [o.key for o in page.objects] == ["t/2", "t/3"]
    assert page.truncated
    page = store.list("t/", start_after="t/3", limit=2)
    assert [o.key for o in page.objects] == ["t/4"]
    assert not page.truncated
    [first, _] = rec.requests
    assert "max-keys=2" in first.target
    assert "start-after=p%2Ft%2F1" in first.target
    assert "prefix=p%2Ft%2F" in first.target


@pytest.mark.parametrize("use_async", [False, True])
def test_delete_of_2500_keys_sends_three_batches(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, use_async: bool
) -> None:
    store = lean(s3_endpoint, s3_bucket, "p/")
    keys = [f"k/{i:05d}" for i in range(2500)]
    for key in keys[::250]:
        store.put(key, b"x")
    store.put("kept", b"x")
    rec = Recorder(store)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        driven.delete(keys)
        driven.delete([])
    finally:
        if use_async:
            driven.close()
    posts = rec.of("POST")
    assert [r.body.count(b"<Object>") for r in posts] == [1000, 1000, 500]
    assert all(r.target.endswith("?delete=") for r in posts)
    assert all(b"<Quiet>true</Quiet>" in r.body for r in posts)
    assert [o.key for o in store.list("").objects] == ["kept"]


def test_delete_errors_name_key_and_code(s3_endpoint: Any, s3_bucket: str, creds_env: None) -> None:
    store = lean(s3_endpoint, s3_bucket, "p/")
    body = (
        b"<DeleteResult><Error><Key>p/k1</Key><Code>AccessDenied</Code><Message>Access Denied"
        b"</Message></Error><Error><Key>p/k2</Key><Code>InternalError</Code><Message>again"
        b"</Message></Error></DeleteResult>"
    )
    Recorder(store, lambda req, rep: HttpResponse(200, {}, body) if req.method == "POST" else rep)
    with pytest.raises(StorageError) as info:
        store.delete(["k1", "k2"])
    message = str(info.value)
    assert "'k1'" in message and "AccessDenied" in message and "1 more" in message


# --- errors ----------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("use_async", [False, True])
def test_missing_bucket_is_unavailable(s3_endpoint: Any, creds_env: None, use_async: bool) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:12]}"
    store = lean(s3_endpoint, bucket, "p/")
    driven: Any = AsyncDriven(store) if use_async else store
    calls = [
        lambda: driven.put("k", b"v"),
        lambda: driven.put("k", b"v", PutMode.CREATE),
        lambda: driven.get("k"),
        lambda: driven.get("k", (0, 1)),
        lambda: driven.list(""),
        lambda: driven.delete(["k"]),
    ]
    if not use_async:
        calls.append(store.check)
    try:
        for call in calls:
            with pytest.raises(StoreUnavailableError) as info:
                call()
            assert bucket in str(info.value)
            assert s3_endpoint.url in str(info.value)
    finally:
        if use_async:
            driven.close()


@pytest.mark.parametrize("use_async", [False, True])
def test_down_endpoint_is_unavailable(creds_env: None, use_async: bool) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    store = LeanS3Store("some-bucket", endpoint_url=url, max_attempts=2, backoff_base=0)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        for call in (lambda: driven.get("k"), lambda: driven.put("k", b"v", PutMode.CREATE)):
            with pytest.raises(StoreUnavailableError) as info:
                call()
            assert url in str(info.value)
            assert "some-bucket" in str(info.value)
            assert "testing-secret-key" not in str(info.value)
    finally:
        if use_async:
            driven.close()


@pytest.mark.parametrize(
    ("status", "code"),
    [(403, "SignatureDoesNotMatch"), (403, "AccessDenied"), (403, "RequestTimeTooSkewed")],
)
def test_denied_is_unavailable_without_leaking_credentials(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, status: int, code: str
) -> None:
    secret = "wrong-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    store = lean(s3_endpoint, s3_bucket)
    Recorder(store, intercept=_error_reply(status, code))
    for call in (store.check, lambda: store.get("k"), lambda: store.put("k", b"v")):
        with pytest.raises(StoreUnavailableError) as info:
            call()
        assert s3_bucket in str(info.value)
        assert secret not in str(info.value)
        assert info.value.__cause__ is None


def test_no_credentials_is_unavailable(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session

    class NoChain(botocore.session.Session):
        def get_credentials(self) -> None:
            return None

    store = lean(s3_endpoint, "bucket", session=NoChain())
    with pytest.raises(StoreUnavailableError, match="no credentials"):
        store.get("k")


def test_session_credentials_sign_the_requests(s3_endpoint: Any, s3_bucket: str) -> None:
    import boto3

    session = boto3.session.Session(
        aws_access_key_id=s3_endpoint.access_key or "a",
        aws_secret_access_key=s3_endpoint.secret_key or "b",
        region_name=s3_endpoint.region,
    )
    store = LeanS3Store(s3_bucket, endpoint_url=s3_endpoint.url, session=session)
    assert store.region == s3_endpoint.region
    store.put("k", b"v")
    assert store.get("k") == b"v"


def test_other_errors_name_operation_key_and_code(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, extra_put_headers={"x-amz-storage-class": "NO_SUCH"})
    with pytest.raises(StorageError) as info:
        store.put("some/key", b"v")
    assert not isinstance(info.value, StoreUnavailableError)
    message = str(info.value)
    assert "put" in message and "'some/key'" in message
    assert "InvalidStorageClass" in message or "InvalidArgument" in message


def test_key_too_long_with_prefix(s3_endpoint: Any, s3_bucket: str, creds_env: None) -> None:
    store = lean(s3_endpoint, s3_bucket, "p" * 10)
    key = "k" * 1020
    for call in (lambda: store.put(key, b""), lambda: store.get(key), lambda: store.delete([key])):
        with pytest.raises(InvalidKeyError, match="1031 bytes"):
            call()


# --- server-side encryption ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["SSE-S3", "SSE-KMS", "SSE-C"])
def test_encryption_goes_with_every_put_and_get(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, kind: str
) -> None:
    encryption = encryption_of(kind)
    store = lean(s3_endpoint, s3_bucket, "enc/", encryption=encryption)
    confirm = {
        "x-amz-server-side-encryption": {"SSE-S3": "AES256", "SSE-KMS": "aws:kms"}.get(kind, ""),
        "x-amz-server-side-encryption-customer-algorithm": "AES256",
        "x-amz-server-side-encryption-customer-key-md5": str(encryption.customer_key_md5),
    }

    def confirmed(request: HttpRequest, reply: Reply) -> Reply:
        # The server's answer is not the point here: confirm every stored put.
        if request.method == "PUT" and isinstance(reply, HttpResponse) and reply.status == 200:
            return HttpResponse(200, {**reply.headers, **confirm}, reply.body)
        return reply

    rec = Recorder(store, confirmed)
    store.put("a", b"1")
    store.put("b", b"22", PutMode.CREATE)
    with pytest.raises(ObjectExistsError):
        store.put("b", b"other", PutMode.CREATE)
    if kind != "SSE-C":  # moto stores SSE-C objects in the clear and answers GETs without key
        store.get("a")
        store.get("b", (0, 1))
    puts, gets = rec.of("PUT"), rec.of("GET")
    assert len(puts) == 3
    for request in puts:
        if kind == "SSE-C":
            assert request.headers["x-amz-server-side-encryption-customer-algorithm"] == "AES256"
            assert (
                request.headers["x-amz-server-side-encryption-customer-key-md5"]
                == encryption.customer_key_md5
            )
        else:
            assert (
                request.headers["x-amz-server-side-encryption"]
                == confirm["x-amz-server-side-encryption"]
            )
        if kind == "SSE-KMS":
            assert request.headers["x-amz-server-side-encryption-aws-kms-key-id"] == KMS_KEY_ID
    for request in gets:
        assert not any(name.startswith("x-amz-server-side") for name in request.headers)


def test_sse_c_key_goes_with_gets(s3_endpoint: Any, s3_bucket: str, creds_env: None) -> None:
    encryption = encryption_of("SSE-C")
    store = lean(s3_endpoint, s3_bucket, encryption=encryption)
    rec = Recorder(store)
    with pytest.raises(ObjectNotFoundError):
        store.get("absent", (0, 4))
    [request] = rec.requests
    assert request.headers["x-amz-server-side-encryption-customer-key-md5"] == (
        encryption.customer_key_md5
    )
    assert "x-amz-server-side-encryption-customer-key" in request.headers


@pytest.mark.parametrize("kind", ["SSE-S3", "SSE-KMS", "SSE-C"])
def test_encryption_on_the_server(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, kind: str
) -> None:
    """Stored encrypted where the server confirms the mode; otherwise a clear error."""
    supported = SUPPORTED.get(server_kind())
    if supported is None:
        pytest.skip("unknown server: test_s3_options probes it with Boto3S3Store")
    encryption = encryption_of(kind)
    store = lean(s3_endpoint, s3_bucket, "enc/", encryption=encryption)
    if kind not in supported:
        with pytest.raises(EncryptionNotConfirmedError) as info:
            store.put("thread/obj", b"secret value")
        message = str(info.value)
        assert "'thread/obj'" in message and kind in message and s3_bucket in message
        assert CUSTOMER_KEY.decode() not in message
        return
    value = b"a checkpoint value " * 100
    store.put("thread/obj", value, PutMode.CREATE)
    assert store.get("thread/obj") == value
    assert store.get("thread/obj", (2, 11)) == value[2:11]
    head = s3_endpoint.client().head_object(
        Bucket=s3_bucket, Key="enc/thread/obj", **encryption.get_args()
    )
    if kind == "SSE-C":
        assert head["SSECustomerKeyMD5"] == encryption.customer_key_md5
    else:
        assert head["ServerSideEncryption"] == encryption.put_args()["ServerSideEncryption"]


# --- one loop, many tasks ------------------------------------------------------------------------


async def test_64_concurrent_tasks_on_one_loop(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, "c/")
    try:
        await asyncio.gather(
            *(store.aput(f"k{i}", bytes([i]) * 100, PutMode.CREATE) for i in range(64))
        )
        bodies = await asyncio.gather(*(store.aget(f"k{i}") for i in range(64)))
        assert bodies == [bytes([i]) * 100 for i in range(64)]
        page = await store.alist("", limit=1000)
        assert len(page.objects) == 64
        await store.adelete([f"k{i}" for i in range(64)])
        assert (await store.alist("")).objects == []
    finally:
        await store.aclose()
