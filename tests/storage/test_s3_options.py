"""Boto3S3Store's client options: retries, timeouts, server-side encryption, Expect.

Runs against the test session's S3 endpoint (moto on loopback, or the server
named by OBJSTORE_TEST_ENDPOINT, e.g. Ceph RGW from scripts/ceph-rgw.sh).
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from layout import is_write
from payloads import incompressible_text
from s3_helpers import (
    CUSTOMER_KEY,
    KMS_KEY_ID,
    SUPPORTED,
    encryption_of,
    error_reply,
    server_kind,
    use_endpoint_credentials,
)
from standalone_values import parts_value, write_value_alone

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.storage import (
    Boto3S3Store,
    EncryptionNotConfirmedError,
    LeanS3Store,
    ObjectExistsError,
    PutMode,
    S3Encryption,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.storage.s3.settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_READ_TIMEOUT,
)


def _record(client: Any, operation: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.s3.{operation}", lambda params, **_: seen.append(dict(params))
    )
    return seen


# --- retries and timeouts ------------------------------------------------------


def test_default_client_options(s3_endpoint: Any) -> None:
    store = Boto3S3Store("bucket", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region)
    config = store.client.meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": DEFAULT_MAX_ATTEMPTS}
    assert config.connect_timeout == DEFAULT_CONNECT_TIMEOUT == 5.0
    assert config.read_timeout == DEFAULT_READ_TIMEOUT == 30.0
    assert config.max_pool_connections == 64
    assert config.s3 == {"addressing_style": "path"}


def test_client_options_reach_the_client(s3_endpoint: Any) -> None:
    store = Boto3S3Store(
        "bucket",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        max_attempts=3,
        retry_mode="adaptive",
        connect_timeout=1.5,
        read_timeout=7,
        max_pool_connections=8,
    )
    config = store.client.meta.config
    assert config.retries == {"mode": "adaptive", "total_max_attempts": 3}
    assert (config.connect_timeout, config.read_timeout) == (1.5, 7)
    assert config.max_pool_connections == 8


def test_from_bucket_forwards_the_s3_options(s3_endpoint: Any) -> None:
    saver = ObjectStoreSaver.from_bucket(
        "bucket",
        "p/",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        max_attempts=2,
        retry_mode="adaptive",
        connect_timeout=2,
        read_timeout=3,
        encryption=S3Encryption.sse_kms("k1"),
        transport="boto3",
        check=False,
    )
    with saver:
        store = saver.store
        assert isinstance(store, Boto3S3Store)
        config = store.client.meta.config
        assert config.retries == {"mode": "adaptive", "total_max_attempts": 2}
        assert (config.connect_timeout, config.read_timeout) == (2, 3)
        assert repr(store.encryption) == "S3Encryption.sse_kms('k1')"


def test_from_bucket_forwards_the_options_to_the_lean_transport(s3_endpoint: Any) -> None:
    saver = ObjectStoreSaver.from_bucket(
        "bucket",
        "p/",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        max_attempts=2,
        connect_timeout=2,
        read_timeout=3,
        encryption=S3Encryption.sse_kms("k1"),
        check=False,
    )
    with saver:
        store = saver.store
        assert isinstance(store, LeanS3Store)
        assert store.retry.max_attempts == 2
        assert store.timeouts == (2, 3)
        assert store.region == s3_endpoint.region
        assert repr(store.encryption) == "S3Encryption.sse_kms('k1')"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", 1.5),
        ("retry_mode", "legacy"),
        ("retry_mode", "STANDARD"),
        ("connect_timeout", 0),
        ("connect_timeout", float("inf")),
        ("read_timeout", -1),
        ("read_timeout", "30"),
        ("max_pool_connections", 0),
    ],
)
def test_invalid_client_options_are_refused(s3_endpoint: Any, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        Boto3S3Store("bucket", endpoint_url=s3_endpoint.url, **{option: value})


def test_client_options_cannot_be_combined_with_a_client(s3_endpoint: Any) -> None:
    with pytest.raises(ValueError, match=r"max_attempts, read_timeout cannot be combined"):
        Boto3S3Store("b", client=s3_endpoint.client(), max_attempts=2, read_timeout=1)


def test_endpoint_with_user_info_is_refused_without_echoing_it() -> None:
    secret = "pw-" + uuid.uuid4().hex
    with pytest.raises(ValueError, match="user info") as info:
        Boto3S3Store("b", endpoint_url=f"http://user:{secret}@127.0.0.1:9/")
    assert secret not in str(info.value)
    assert "user" not in str(info.value).split("carries")[0]


def test_max_attempts_bounds_retries_of_throttled_requests(
    s3_endpoint: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_endpoint_credentials(s3_endpoint, monkeypatch)
    store = Boto3S3Store(
        s3_bucket, endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region, max_attempts=3
    )
    # No wait between attempts: the count is what matters here.
    monkeypatch.setattr("botocore.retries.standard.ExponentialBackoff.delay_amount", lambda *a: 0)
    hook = error_reply(503, "SlowDown", "Please reduce your request rate.")
    store.client.meta.events.register("before-send.s3.GetObject", hook)
    with pytest.raises(StorageError, match="SlowDown"):
        store.get("k")
    assert len(hook.calls) == 3


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[int]]]:
    """A loopback HTTP server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_read_timeout_ends_each_attempt(
    silent_server: tuple[str, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, accepted = silent_server
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.setattr("botocore.retries.standard.ExponentialBackoff.delay_amount", lambda *a: 0)
    store = Boto3S3Store(
        "bucket", endpoint_url=url, region_name="us-east-1", max_attempts=2, read_timeout=0.3
    )
    with pytest.raises(StoreUnavailableError, match="ReadTimeoutError") as info:
        store.get("k")
    assert url in str(info.value)
    assert len(accepted) == 2  # one connection per attempt, each ended by the timeout


# --- Expect: 100-continue ----------------------------------------------------------


def test_puts_do_not_wait_for_100_continue(s3_store: Boto3S3Store) -> None:
    expect: list[str | None] = []
    s3_store.client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: expect.append(request.headers.get("Expect")),
    )
    s3_store.put("k", b"v")
    s3_store.put("k2", b"", PutMode.CREATE)
    assert expect == [None, None]


def test_a_put_refused_early_does_not_stall_the_next_put(s3_endpoint: Any, s3_bucket: str) -> None:
    # Ceph RGW answers these PUTs before reading the body; with Expect:
    # 100-continue botocore then misreads the next PUT's answer on the same
    # pooled connection and waits for the read timeout.
    client = s3_endpoint.client(
        read_timeout=5, retries={"mode": "standard", "total_max_attempts": 1}
    )
    missing = Boto3S3Store(f"missing-{uuid.uuid4().hex[:12]}", client=client)
    good = Boto3S3Store(s3_bucket, client=client)
    for _ in range(3):
        with pytest.raises(StoreUnavailableError):
            missing.put("k", b"v")
        good.put("k", b"v")
    assert good.get("k") == b"v"


# --- conditional writes the store does not use -------------------------------------

#: How each server answers If-Match on PutObject (docs/s3-compatibility.md #3, #4):
#: with the quoted ETag, with the bare ETag, on a missing key. Boto3S3Store never
#: sends If-Match; this records the differences for code that would.
IF_MATCH = {
    "moto": (200, 200, 404),
    "ceph": (412, 200, 412),  # Ceph 16 compares the ETag without its quotes
}


def _status_of(call: Any) -> int:
    try:
        return call()["ResponseMetadata"]["HTTPStatusCode"]
    except ClientError as exc:
        return exc.response["ResponseMetadata"]["HTTPStatusCode"]


def test_if_match_answers_are_the_documented_ones(s3_endpoint: Any, s3_bucket: str) -> None:
    client = s3_endpoint.client()
    quoted = client.put_object(Bucket=s3_bucket, Key="k", Body=b"v")["ETag"]
    assert quoted.startswith('"') and quoted.endswith('"')
    answers = (
        _status_of(lambda: client.put_object(Bucket=s3_bucket, Key="k", Body=b"v", IfMatch=quoted)),
        _status_of(
            lambda: client.put_object(
                Bucket=s3_bucket, Key="k", Body=b"v", IfMatch=quoted.strip('"')
            )
        ),
        _status_of(
            lambda: client.put_object(Bucket=s3_bucket, Key="missing", Body=b"v", IfMatch=quoted)
        ),
    )
    # AWS S3 documents 200 with the quoted ETag and 404 on a missing key.
    expected = IF_MATCH.get(server_kind())
    if expected is None:
        assert answers[0] in (200, 412) and answers[2] in (404, 412), answers
    else:
        assert answers == expected


# --- server-side encryption --------------------------------------------------------


def test_encryption_arguments() -> None:
    assert S3Encryption.sse_s3().put_args() == {"ServerSideEncryption": "AES256"}
    assert S3Encryption.sse_s3().get_args() == {}
    assert S3Encryption.sse_kms().put_args() == {"ServerSideEncryption": "aws:kms"}
    assert S3Encryption.sse_kms("alias/k").put_args() == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/k",
    }
    sse_c = S3Encryption.sse_c(CUSTOMER_KEY)
    assert sse_c.put_args() == sse_c.get_args()
    assert sse_c.get_args()["SSECustomerAlgorithm"] == "AES256"
    assert sse_c.get_args()["SSECustomerKey"] == CUSTOMER_KEY


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: S3Encryption.sse_c(b"short"), "32 bytes .* got 5 bytes"),
        (lambda: S3Encryption.sse_c("x" * 32), "32 bytes"),  # type: ignore[arg-type]
        (lambda: S3Encryption.sse_kms(""), "kms_key_id"),
        (lambda: S3Encryption("SSE-S3", kms_key_id="k"), "kms_key_id"),
        (lambda: S3Encryption("SSE-KMS", customer_key=CUSTOMER_KEY), "SSE-C only"),
        (lambda: S3Encryption("AES", kms_key_id=None), "unknown encryption kind"),  # type: ignore[arg-type]
    ],
)
def test_invalid_encryption_is_refused(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        build()
    assert CUSTOMER_KEY.decode() not in str(info.value)


def test_encryption_repr_hides_the_customer_key(s3_endpoint: Any) -> None:
    sse_c = S3Encryption.sse_c(CUSTOMER_KEY)
    store = Boto3S3Store("b", "p/", client=s3_endpoint.client(), encryption=sse_c)
    for text in (repr(sse_c), repr(store), str(store)):
        assert CUSTOMER_KEY.decode() not in text
        assert "hidden" in text
    assert repr(S3Encryption.sse_s3()) == "S3Encryption.sse_s3()"


def test_encryption_clashing_with_extra_args_is_refused(s3_endpoint: Any) -> None:
    with pytest.raises(ValueError, match="ServerSideEncryption clash"):
        Boto3S3Store(
            "b",
            client=s3_endpoint.client(),
            encryption=S3Encryption.sse_s3(),
            extra_put_args={"ServerSideEncryption": "aws:kms"},
        )


@pytest.mark.parametrize("kind", ["SSE-S3", "SSE-KMS", "SSE-C"])
def test_encryption_goes_with_every_put_and_get(
    s3_endpoint: Any, s3_bucket: str, kind: str
) -> None:
    """Every PutObject and GetObject carries the settings, whatever the server does."""
    encryption = encryption_of(kind)
    client = s3_endpoint.client()
    # The server's answer is not the point here: confirm every put.
    client.meta.events.register(
        "after-call.s3.PutObject",
        lambda parsed, **_: parsed.update(
            ServerSideEncryption={"SSE-S3": "AES256", "SSE-KMS": "aws:kms"}.get(kind),
            SSECustomerAlgorithm="AES256",
            SSECustomerKeyMD5=encryption.customer_key_md5,
        ),
    )
    puts, gets = _record(client, "PutObject"), _record(client, "GetObject")
    store = Boto3S3Store(s3_bucket, "enc/", client=client, encryption=encryption)
    store.put("a", b"1")
    store.put("b", b"22", PutMode.CREATE)
    with pytest.raises(ObjectExistsError):
        store.put("b", b"other", PutMode.CREATE)
    store.get("a")
    store.get("b", (0, 1))
    assert len(puts) == 3
    assert len(gets) == 2
    for params in puts:
        assert encryption.put_args().items() <= params.items()
    for params in gets:
        assert encryption.get_args().items() <= params.items()
        if kind != "SSE-C":
            assert not any(name.startswith("SSE") for name in params)


@pytest.mark.parametrize("kind", ["SSE-S3", "SSE-KMS", "SSE-C"])
def test_encryption_on_the_server(s3_endpoint: Any, s3_bucket: str, kind: str) -> None:
    """Objects are stored encrypted where the server supports the mode; else a clear error."""
    server = server_kind()
    encryption = encryption_of(kind)
    raw = s3_endpoint.client()
    supported = SUPPORTED.get(server)
    if supported is None:  # an unknown server: ask it
        answer = raw.put_object(Bucket=s3_bucket, Key="probe", Body=b"p", **encryption.put_args())
        supported = {kind} if encryption.confirmed_by(answer) else set()
    store = Boto3S3Store(s3_bucket, "enc/", client=s3_endpoint.client(), encryption=encryption)
    if kind not in supported:
        with pytest.raises(EncryptionNotConfirmedError) as info:
            store.put("thread/obj", b"secret value")
        message = str(info.value)
        assert "'thread/obj'" in message
        assert kind in message
        assert s3_bucket in message
        assert CUSTOMER_KEY.decode() not in message
        return
    value = b"a checkpoint value " * 100
    store.put("thread/obj", value, PutMode.CREATE)
    store.put("thread/over", value)
    assert store.get("thread/obj") == value
    assert store.get("thread/obj", (2, 11)) == value[2:11]
    assert [o.key for o in store.list("thread/").objects] == ["thread/obj", "thread/over"]
    for key in ("enc/thread/obj", "enc/thread/over"):
        head = raw.head_object(Bucket=s3_bucket, Key=key, **encryption.get_args())
        if kind == "SSE-C":
            assert head["SSECustomerAlgorithm"] == "AES256"
            assert head["SSECustomerKeyMD5"] == encryption.customer_key_md5
            with pytest.raises(ClientError):  # unreadable without the key
                raw.get_object(Bucket=s3_bucket, Key=key)
        else:
            assert head["ServerSideEncryption"] == encryption.put_args()["ServerSideEncryption"]
        if kind == "SSE-KMS":
            assert head["SSEKMSKeyId"].endswith(KMS_KEY_ID)
    store.delete(["thread/obj", "thread/over"])
    assert store.list("thread/").objects == []


@pytest.mark.parametrize(
    "kind", sorted(SUPPORTED.get(server_kind(), {"SSE-S3", "SSE-KMS", "SSE-C"}))
)
async def test_every_object_of_a_saver_is_encrypted(
    s3_endpoint: Any, s3_bucket: str, kind: str
) -> None:
    """A saver's checkpoints, values and writes all carry the encryption, sync and async.

    Run for the modes the server supports (the others are refused with a clear
    error: ``test_encryption_on_the_server``). Every kind of object the saver
    stores is written: manifests (embedding values, spec §4.1), a value
    object alone, a ``parts`` object and its parts, and pending writes.
    """
    from langgraph.checkpoint.base import empty_checkpoint

    encryption = encryption_of(kind)
    if server_kind() not in SUPPORTED:
        answer = s3_endpoint.client().put_object(
            Bucket=s3_bucket, Key="probe", Body=b"p", **encryption.put_args()
        )
        if not encryption.confirmed_by(answer):
            pytest.skip(f"this server does not confirm {kind}")
        s3_endpoint.client().delete_object(Bucket=s3_bucket, Key="probe")
    store = Boto3S3Store(s3_bucket, "saver/", client=s3_endpoint.client(), encryption=encryption)
    with ObjectStoreSaver(store) as saver:
        config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        big = incompressible_text(30_000, 4)  # a value object, embedded in the manifest
        huge = parts_value(4)  # over 256 KiB: a parts object and its parts, alone
        checkpoint["channel_values"] = {"messages": ["hello", big], "n": 1, "huge": huge}
        checkpoint["channel_versions"] = {"messages": 1, "n": 1, "huge": 1}
        stored = saver.put(config, checkpoint, {"step": 0}, {"messages": 1, "n": 1, "huge": 1})
        # Over 1 KiB compressed: the write's value is a value object alone.
        written = write_value_alone(5)
        saver.put_writes(stored, [("n", 2), ("w", written)], "task-1")
        second = empty_checkpoint()
        await saver.aput(stored, second, {"step": 1}, {})
        await saver.aput_writes(stored, [("a", write_value_alone(6))], "task-2")
        got = saver.get_tuple(stored)
        assert got is not None
        assert got.checkpoint["channel_values"] == {
            "messages": ["hello", big],
            "n": 1,
            "huge": huge,
        }
        assert got.pending_writes == [
            ("task-1", "n", 2),
            ("task-1", "w", written),
            ("task-2", "a", write_value_alone(6)),
        ]
        latest = await saver.aget_tuple(config)
        assert latest is not None
        assert latest.checkpoint["id"] == second["id"]
    raw = s3_endpoint.client()
    keys = [o["Key"] for o in raw.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    kinds = {"write" if is_write(key.split("/", 1)[1]) else key.split("/")[3] for key in keys}
    assert kinds == {"checkpoints", "objects", "write"}, keys
    # What the objects are (read through the store, which has the key for SSE-C).
    objects = [key.split("/", 1)[1] for key in keys if key.split("/")[3] == "objects"]
    found = {type(codec.decode_object(store.get(key), key)).__name__ for key in objects}
    assert found == {"ValueObj", "PartsObj", "PartObj"}, objects
    manifest = k.manifest_key("t1", "", stored["configurable"]["checkpoint_id"])
    assert codec.decode_manifest(store.get(manifest), manifest).embedded
    for key in keys:
        head = raw.head_object(Bucket=s3_bucket, Key=key, **encryption.get_args())
        if kind == "SSE-C":
            assert head["SSECustomerKeyMD5"] == encryption.customer_key_md5, key
        else:
            assert head["ServerSideEncryption"] == encryption.put_args()["ServerSideEncryption"]
