"""LeanS3Store against a real HTTP S3 endpoint (moto on loopback unless configured).

The contract suite runs twice over the blocking path (with and without a
prefix) and once over the coroutines, through an adapter that drives them on
an event loop of its own. The guarantees S3Store has are then checked one by
one, on the wire where the wire is what matters.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import botocore.auth
import botocore.awsrequest
import botocore.credentials
import pytest
from store_contract import StoreContract
from test_s3_options import CUSTOMER_KEY, KMS_KEY_ID, SUPPORTED, _encryption, _server

from objstore_saver.storage import (
    EncryptionNotConfirmedError,
    InvalidKeyError,
    ListPage,
    ObjectExistsError,
    ObjectNotFoundError,
    PutMode,
    StorageError,
    StoreUnavailableError,
)
from objstore_saver.storage.s3_lean import LeanS3Store
from objstore_saver.storage.s3_protocol import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.sigv4 import Credentials, Signer, canonical_query


@pytest.fixture
def creds_env(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint's credentials in boto3's default chain (environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key or "testing-access-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_key or "testing-secret-key")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def lean(s3_endpoint: Any, bucket: str, prefix: str = "", **options: Any) -> LeanS3Store:
    """A store on the test endpoint (credentials from the environment)."""
    return LeanS3Store(
        bucket, prefix, endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region, **options
    )


class Recorder:
    """Wraps a store's two send paths, recording requests and optionally replacing replies."""

    def __init__(
        self,
        store: LeanS3Store,
        reply: Callable[[HttpRequest, Reply], Reply] | None = None,
        *,
        intercept: Callable[[HttpRequest], Reply | None] | None = None,
    ) -> None:
        """``intercept`` may answer a request instead of the server (it is then not sent);
        ``reply`` may replace the server's answer after the request was sent."""
        self.requests: list[HttpRequest] = []
        send, asend = store._send, store._asend
        edit = reply or (lambda _req, rep: rep)
        early = intercept or (lambda _req: None)

        def sync(request: HttpRequest) -> Reply:
            self.requests.append(request)
            answer = early(request)
            return answer if answer is not None else edit(request, send(request))

        async def asyn(request: HttpRequest) -> Reply:
            self.requests.append(request)
            answer = early(request)
            return answer if answer is not None else edit(request, await asend(request))

        store._send = sync  # type: ignore[method-assign]
        store._asend = asyn  # type: ignore[method-assign]

    def of(self, method: str) -> list[HttpRequest]:
        return [r for r in self.requests if r.method == method]


Reply = HttpResponse | TransportFailure


class AsyncDriven:
    """The blocking protocol carried out by a LeanS3Store's coroutines on a private loop.

    Like the contract suite's ``ThroughCoroutines``, plus closing the store's
    connections on that loop.
    """

    def __init__(self, store: LeanS3Store) -> None:
        self.store = store
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    @property
    def location(self) -> str:
        return self.store.location

    def _wait(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)  # type: ignore[arg-type]

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self._wait(self.store.aput(key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._wait(self.store.aget(key, byte_range))

    def list(self, prefix: str, *, start_after: str | None = None, limit: int = 1000) -> ListPage:
        return self._wait(self.store.alist(prefix, start_after=start_after, limit=limit))

    def delete(self, keys: Sequence[str]) -> None:
        self._wait(self.store.adelete(keys))

    def close(self) -> None:
        self._wait(self.store.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


# --- the contract suite -------------------------------------------------------------


class TestLeanS3StoreContract(StoreContract):
    max_key_bytes = 1024 - len("pfx/")

    @pytest.fixture
    def backend(self, s3_endpoint: Any, s3_bucket: str, creds_env: None) -> LeanS3Store:
        return lean(s3_endpoint, s3_bucket, "pfx/")


class TestLeanS3StoreWithoutPrefixContract(StoreContract):
    @pytest.fixture
    def backend(self, s3_endpoint: Any, s3_bucket: str, creds_env: None) -> LeanS3Store:
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


# --- signing ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "session-token/with+chars="])
def test_signature_matches_botocore(token: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same canonical request, same signature as botocore's S3 SigV4 signer."""
    now = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
    body = b"<Delete><Quiet>true</Quiet></Delete>"
    digest = hashlib.sha256(body).hexdigest()
    query = canonical_query(
        {"list-type": "2", "prefix": "a b/%~", "start-after": "x/y", "delete": ""}
    )
    path = "/bucket/dir/%2541~k"
    headers = {"host": "127.0.0.1:9000", "content-md5": "abc==", "x-amz-meta-x": " a  b "}
    Signer("eu-west-3").sign(
        "POST",
        "127.0.0.1:9000",
        path,
        query,
        headers,
        digest,
        Credentials("AKIDEXAMPLE", "secret/key+x", token),
        now,
    )
    request = botocore.awsrequest.AWSRequest(
        "POST",
        f"http://127.0.0.1:9000{path}?{query}",
        data=body,
        headers={"content-md5": "abc==", "x-amz-meta-x": " a  b ", "x-amz-content-sha256": digest},
    )
    auth = botocore.auth.S3SigV4Auth(
        botocore.credentials.Credentials("AKIDEXAMPLE", "secret/key+x", token), "s3", "eu-west-3"
    )
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    auth.add_auth(request)
    assert headers["authorization"] == request.headers["Authorization"]
    assert headers["x-amz-date"] == request.headers["X-Amz-Date"]
    if token:
        assert headers["x-amz-security-token"] == token


def test_credentials_never_show() -> None:
    creds = Credentials("AKIDSHOWN", "very-secret", "tok")
    assert "very-secret" not in repr(creds) and "AKIDSHOWN" not in repr(creds)


# --- construction --------------------------------------------------------------------------


def test_location_prefix_and_repr(s3_endpoint: Any, creds_env: None) -> None:
    store = lean(s3_endpoint, "bucket", "/p/q/")
    assert store.prefix == "p/q/"
    assert store.location == f"s3://bucket/p/q/ at {s3_endpoint.url}"
    sse_c = LeanS3Store("b", encryption=_encryption("SSE-C"))
    assert CUSTOMER_KEY.decode() not in repr(sse_c)
    assert "hidden" in repr(sse_c)
    assert sse_c.endpoint == "https://b.s3.us-east-1.amazonaws.com"
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


# --- timeouts and the wire ---------------------------------------------------------------------


@pytest.fixture
def raw_server() -> Iterator[tuple[str, list[bytes], threading.Event]]:
    """A loopback server recording request heads; answers 200 unless ``silent`` is set.

    ``silent.closing`` (an event too) makes it close each connection after its
    answer, without saying so, as servers do with idle keep-alive connections.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []
    silent = threading.Event()
    closing = threading.Event()
    silent.closing = closing  # type: ignore[attr-defined]
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve_one(conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        try:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                heads.append(head)
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                if silent.is_set():
                    held.append(conn)
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                if closing.is_set():
                    conn.close()
                    return
        except OSError:
            return

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads, silent
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def test_puts_do_not_wait_for_100_continue(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None
) -> None:
    url, heads, _ = raw_server
    store = LeanS3Store("bucket", endpoint_url=url)
    store.put("k", b"v" * 100_000)
    driven = AsyncDriven(store)
    try:
        driven.put("k2", b"v" * 100_000, PutMode.CREATE)
    finally:
        driven.close()
    assert len(heads) == 2
    for head in heads:
        assert head.startswith(b"PUT /bucket/")
        assert b"expect:" not in head.lower()
    assert b"if-none-match: *" in heads[1].lower()


@pytest.mark.parametrize("use_async", [False, True])
def test_read_timeout_ends_each_attempt(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None, use_async: bool
) -> None:
    url, heads, silent = raw_server
    silent.set()
    store = LeanS3Store(
        "bucket", endpoint_url=url, max_attempts=2, read_timeout=0.3, backoff_base=0
    )
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        with pytest.raises(StoreUnavailableError) as info:
            driven.get("k")
    finally:
        if use_async:
            driven.close()
    assert url in str(info.value)
    assert "Timeout" in str(info.value)
    assert len(heads) == 2  # one request per attempt, each ended by the timeout


def test_a_put_refused_early_does_not_stall_the_next_put(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    missing = lean(s3_endpoint, f"missing-{uuid.uuid4().hex[:12]}", read_timeout=5, max_attempts=1)
    good = lean(s3_endpoint, s3_bucket, read_timeout=5, max_attempts=1)
    for _ in range(3):
        with pytest.raises(StoreUnavailableError):
            missing.put("k", b"v")
        good.put("k", b"v")
    assert good.get("k") == b"v"


# --- server-side encryption ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["SSE-S3", "SSE-KMS", "SSE-C"])
def test_encryption_goes_with_every_put_and_get(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, kind: str
) -> None:
    encryption = _encryption(kind)
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
    encryption = _encryption("SSE-C")
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
    supported = SUPPORTED.get(_server())
    if supported is None:
        pytest.skip("unknown server: test_s3_options probes it with S3Store")
    encryption = _encryption(kind)
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


@pytest.mark.parametrize("use_async", [False, True])
def test_a_connection_the_server_closed_is_not_reused(
    raw_server: tuple[str, list[bytes], threading.Event], creds_env: None, use_async: bool
) -> None:
    url, heads, control = raw_server
    control.closing.set()  # type: ignore[attr-defined]
    # One attempt only: a stale pooled connection must not cost a failed attempt.
    store = LeanS3Store("bucket", endpoint_url=url, max_attempts=1)
    driven: Any = AsyncDriven(store) if use_async else store
    try:
        for i in range(5):
            driven.put(f"k{i}", b"v")
            time.sleep(0.05)  # the server's close reaches the client first
    finally:
        if use_async:
            driven.close()
    assert len(heads) == 5


# --- HTTP/1.1 framing of both pools ------------------------------------------------------


def _canned_server(answer: bytes) -> tuple[str, threading.Thread, socket.socket]:
    """A loopback server answering one request with ``answer`` bytes, then closing."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{listener.getsockname()[1]}", thread, listener


FRAMINGS = {
    "content-length": (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, b"hello"),
    "chunked": (
        b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\nX-Amz-Id: 1\r\n\r\n"
        b"3;ext=1\r\nhel\r\n2\r\nlo\r\n0\r\nTrailer: x\r\n\r\n",
        206,
        b"hello",
    ),
    "until-close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", 200, b"hello"),
    "interim-100": (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 412 Precondition Failed\r\n"
        b"Content-Length: 2\r\n\r\nno",
        412,
        b"no",
    ),
}


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_pools_read_every_framing(framing: str, use_async: bool) -> None:
    from objstore_saver.storage.aio_pool import AsyncConnectionPool
    from objstore_saver.storage.http_pool import ConnectionPool

    answer, status, body = FRAMINGS[framing]
    host, thread, listener = _canned_server(answer)
    options = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}
    request = HttpRequest("GET", "/b/k", {"host": host})
    try:
        if use_async:
            reply = asyncio.run(AsyncConnectionPool("http", host, **options).send(request))
        else:
            reply = ConnectionPool("http", host, **options).send(request)
    finally:
        thread.join(10)
        listener.close()
    assert isinstance(reply, HttpResponse), reply
    assert (reply.status, reply.body) == (status, body)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    "answer",
    [b"garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b""],
    ids=["bad-status-line", "cut-body", "no-answer"],
)
def test_pools_report_broken_answers_as_transport_failures(answer: bytes, use_async: bool) -> None:
    from objstore_saver.storage.aio_pool import AsyncConnectionPool
    from objstore_saver.storage.http_pool import ConnectionPool

    host, thread, listener = _canned_server(answer)
    options = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}
    request = HttpRequest("PUT", "/b/k", {"host": host}, b"body")
    try:
        if use_async:
            reply = asyncio.run(AsyncConnectionPool("http", host, **options).send(request))
        else:
            reply = ConnectionPool("http", host, **options).send(request)
    finally:
        thread.join(10)
        listener.close()
    assert isinstance(reply, TransportFailure), reply
    assert reply.sent


def test_each_event_loop_has_its_own_connections(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = lean(s3_endpoint, s3_bucket, "loops/")
    first, second = AsyncDriven(store), AsyncDriven(store)
    try:
        for i in range(3):  # interleaved: neither loop may use the other's connections
            first.put(f"a{i}", b"1")
            second.put(f"b{i}", b"2")
            assert first.get(f"b{i}") == b"2"
            assert second.get(f"a{i}") == b"1"
        assert len(store._aio) == 2
    finally:
        first.close()
        second.close()
    assert len(store._aio) == 0
