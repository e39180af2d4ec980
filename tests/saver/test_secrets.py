"""Secrets never appear in what this package logs, raises or shows.

Distinctive secrets (access key, secret key, session token, SSE-C key, a
password in an endpoint URL) are set, failures are provoked with every logger
at DEBUG, and the captured output of this package's loggers, the messages and
reprs of the exceptions (with their whole chain) and the reprs of the store and
saver are searched for them.

botocore itself logs request headers at DEBUG (the access key id in
``Authorization``, the session token, the SSE-C key): that is botocore's, and
``docs/s3-compatibility.md`` warns against DEBUG logging of botocore in
production. The test checks that the capture does see botocore's records, so
a leak of ours would be seen too. LeanS3Store does not log requests; its
failures are provoked over its blocking calls and its coroutines, and the
recorded requests show that the distinctive credentials did sign them.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from lean_helpers import AsyncDriven, Recorder
from s3_helpers import error_reply

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import Boto3S3Store, PutMode, S3Encryption, StorageError
from objstore_saver.storage.http.messages import HttpResponse
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.settings import TRANSPORTS

_TAG = uuid.uuid4().hex[:10].upper()


@dataclass(frozen=True)
class Secrets:
    access_key: str = f"AKIASECRET{_TAG}"
    secret_key: str = f"secret-key-{_TAG}-do-not-log"
    session_token: str = f"session-token-{_TAG}-do-not-log"
    sse_c_key: bytes = f"sse-c-key-{_TAG}-32-bytes!!!".encode()[:32].ljust(32, b"!")
    url_password: str = f"url-password-{_TAG}"

    def forms(self) -> list[str]:
        """Every string form in which a secret could leak."""
        return [
            self.access_key,
            self.secret_key,
            self.session_token,
            self.sse_c_key.decode(),
            base64.b64encode(self.sse_c_key).decode(),
            self.url_password,
        ]


SECRETS = Secrets()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's default chain finds the distinctive credentials."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SECRETS.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRETS.secret_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SECRETS.session_token)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every logger at DEBUG, captured."""
    with caplog.at_level(logging.DEBUG):
        yield caplog


def _exception_text(exc: BaseException) -> str:
    """Message, repr and formatted traceback of ``exc`` and its whole chain."""
    parts = ["".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts += [str(current), repr(current), repr(getattr(current, "response", ""))]
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _ours(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''}"
        for r in caplog.records
        if r.name.startswith("objstore_saver")
    )


def _assert_clean(text: str, what: str) -> None:
    for secret in SECRETS.forms():
        assert secret not in text, f"a secret leaked into {what}"


def _failures(endpoint: Any, bucket: str) -> list[tuple[str, Callable[[], Any]]]:
    """Calls that fail, each on a store built from the distinctive credentials."""
    sse_c = S3Encryption.sse_c(SECRETS.sse_c_key)
    down = f"http://127.0.0.1:{_closed_port()}"
    on_server = {"endpoint_url": endpoint.url, "region_name": endpoint.region}
    missing = Boto3S3Store(f"missing-{uuid.uuid4().hex[:10]}", "p/", encryption=sse_c, **on_server)
    unreachable = Boto3S3Store("bucket", encryption=sse_c, endpoint_url=down, max_attempts=1)
    denied = Boto3S3Store(bucket, encryption=sse_c, **on_server)
    if not os.environ.get("OBJSTORE_TEST_ENDPOINT"):
        # moto accepts any credentials: play the server's refusal.
        denied.client.meta.events.register(
            "before-send.s3", error_reply(403, "InvalidAccessKeyId", "no such key id")
        )
    failing_put = Boto3S3Store(bucket, encryption=sse_c, max_attempts=2, **on_server)
    failing_put.client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: _fail_put(request),
    )
    return [
        ("missing bucket put", lambda: missing.put("k", b"v", PutMode.CREATE)),
        ("missing bucket get", lambda: missing.get("k")),
        ("endpoint down check", unreachable.check),
        ("endpoint down put", lambda: unreachable.put("k", b"v")),
        ("wrong credentials check", denied.check),
        ("wrong credentials put", lambda: denied.put("k", b"v")),
        ("wrong credentials get", lambda: denied.get("k", (0, 4))),
        ("failing put", lambda: failing_put.put("k", b"v")),
        ("bad SSE-C get", lambda: _bad_sse_c_get(failing_put)),
    ]


def _fail_put(request: Any) -> Any:
    return error_reply(500, "InternalError", "We encountered an internal error.")(request)


def _bad_sse_c_get(store: Boto3S3Store) -> None:
    # With an MD5 given, botocore does not encode the key and refuses the raw
    # bytes with a ParamValidationError that quotes them.
    store._extra_get_args["SSECustomerKeyMD5"] = "not-the-md5"
    try:
        store.get("k")
    finally:
        del store._extra_get_args["SSECustomerKeyMD5"]


@pytest.mark.usefixtures("credentials")
def test_failures_carry_no_secret(
    s3_endpoint: Any, s3_bucket: str, captured: pytest.LogCaptureFixture
) -> None:
    for what, call in _failures(s3_endpoint, s3_bucket):
        with pytest.raises(StorageError) as info:
            call()
        _assert_clean(_exception_text(info.value), f"the exception of: {what}")
    _assert_clean(_ours(captured), "this package's log records")
    botocore_text = "\n".join(
        r.getMessage() for r in captured.records if r.name.startswith("botocore")
    )
    assert SECRETS.access_key in botocore_text  # the capture sees botocore's DEBUG records


def _lean_failures(
    endpoint: Any, bucket: str, recorders: list[Recorder]
) -> list[tuple[str, LeanS3Store]]:
    """The same failures on LeanS3Store: (what, store) pairs; the call is chosen by ``what``.

    Every store is recorded, so the test can check that the distinctive
    credentials did sign what was sent.
    """
    sse_c = S3Encryption.sse_c(SECRETS.sse_c_key)
    down = f"http://127.0.0.1:{_closed_port()}"
    on_server = {"endpoint_url": endpoint.url, "region_name": endpoint.region}
    missing = LeanS3Store(f"missing-{uuid.uuid4().hex[:10]}", "p/", encryption=sse_c, **on_server)
    unreachable = LeanS3Store("bucket", encryption=sse_c, endpoint_url=down, max_attempts=1)
    denied = LeanS3Store(bucket, encryption=sse_c, **on_server)
    failing_put = LeanS3Store(bucket, encryption=sse_c, max_attempts=2, backoff_base=0, **on_server)
    ssec_reader = LeanS3Store(bucket, encryption=sse_c, **on_server)
    recorders += [Recorder(missing), Recorder(unreachable), Recorder(ssec_reader)]
    if os.environ.get("OBJSTORE_TEST_ENDPOINT"):
        recorders.append(Recorder(denied))
    else:
        # moto accepts any credentials: play the server's refusal.
        recorders.append(Recorder(denied, intercept=_lean_error(403, "InvalidAccessKeyId")))
    recorders.append(Recorder(failing_put, intercept=_lean_error(500, "InternalError", "PUT")))
    return [
        ("missing bucket put", missing),
        ("missing bucket get", missing),
        ("endpoint down check", unreachable),
        ("endpoint down put", unreachable),
        ("wrong credentials check", denied),
        ("wrong credentials put", denied),
        ("wrong credentials get", denied),
        ("failing put", failing_put),
        ("SSE-C get of a missing key", ssec_reader),
    ]


def _lean_error(status: int, code: str, method: str | None = None) -> Any:
    body = f"<Error><Code>{code}</Code><Message>refused</Message></Error>".encode()
    return lambda req: HttpResponse(status, {}, body) if method in (None, req.method) else None


def _lean_call(what: str, store: Any) -> Any:
    if what.endswith("check"):
        return store.check() if hasattr(store, "check") else store.store_check()
    if what.endswith("put"):
        return store.put("k", b"v", PutMode.CREATE)
    return store.get("k", (0, 4))


class _Driven(AsyncDriven):
    def store_check(self) -> None:
        self._wait(self.store.acheck())


# LeanS3Store has its own error paths for its blocking calls and its coroutines.
@pytest.mark.usefixtures("credentials")
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_lean_failures_carry_no_secret(
    s3_endpoint: Any, s3_bucket: str, captured: pytest.LogCaptureFixture, use_async: bool
) -> None:
    recorders: list[Recorder] = []
    for what, store in _lean_failures(s3_endpoint, s3_bucket, recorders):
        driven = _Driven(store) if use_async else store
        try:
            with pytest.raises(StorageError) as info:
                _lean_call(what, driven)
        finally:
            if use_async:
                driven.close()
        _assert_clean(_exception_text(info.value), f"the exception of: {what}")
    _assert_clean(_ours(captured), "this package's log records")
    # The distinctive credentials signed what was sent (the SSE-C key went too),
    # so a leak of them would have been seen above.
    sent = [r for rec in recorders for r in rec.requests]
    assert sent
    assert all(SECRETS.access_key in r.headers["authorization"] for r in sent)
    assert all(r.headers["x-amz-security-token"] == SECRETS.session_token for r in sent)
    key64 = base64.b64encode(SECRETS.sse_c_key).decode()
    assert any(r.headers.get("x-amz-server-side-encryption-customer-key") == key64 for r in sent)


@pytest.mark.usefixtures("credentials")
def test_reprs_carry_no_secret(s3_endpoint: Any) -> None:
    sse_c = S3Encryption.sse_c(SECRETS.sse_c_key)
    store = Boto3S3Store(
        "bucket", "p/", endpoint_url=s3_endpoint.url, region_name="us-east-1", encryption=sse_c
    )
    lean_store = LeanS3Store(
        "bucket", "p/", endpoint_url=s3_endpoint.url, region_name="us-east-1", encryption=sse_c
    )
    for transport in TRANSPORTS:
        saver = ObjectStoreSaver.from_bucket(
            "bucket",
            "p/",
            endpoint_url=s3_endpoint.url,
            region_name="us-east-1",
            encryption=sse_c,
            transport=transport,
            check=False,
        )
        with saver:
            for what, text in [
                ("repr(store)", repr(store)),
                ("str(store)", str(store)),
                ("store.location", store.location),
                ("repr(lean_store)", repr(lean_store)),
                ("str(lean_store)", str(lean_store)),
                ("vars(lean_store)", repr(vars(lean_store))),
                ("repr(encryption)", repr(sse_c)),
                ("repr(saver)", repr(saver)),
                ("repr(saver.store)", repr(saver.store)),
                ("vars(saver)", repr(vars(saver))),
            ]:
                _assert_clean(text, f"{what} ({transport})")


def test_endpoint_url_password_is_refused_without_echo() -> None:
    url = f"http://objstore:{SECRETS.url_password}@127.0.0.1:{_closed_port()}"
    for build in (
        lambda: Boto3S3Store("bucket", endpoint_url=url),
        lambda: LeanS3Store("bucket", endpoint_url=url),
        lambda: ObjectStoreSaver.from_bucket("bucket", endpoint_url=url),
        lambda: ObjectStoreSaver.from_bucket("bucket", endpoint_url=url, transport="boto3"),
    ):
        with pytest.raises(ValueError, match="user info") as info:
            build()
        _assert_clean(_exception_text(info.value), "the refusal of a URL with a password")


@pytest.mark.usefixtures("credentials")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_saver_failures_carry_no_secret(
    s3_endpoint: Any, captured: pytest.LogCaptureFixture, transport: str
) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    saver = ObjectStoreSaver.from_bucket(
        f"missing-{uuid.uuid4().hex[:10]}",
        "p/",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        encryption=S3Encryption.sse_c(SECRETS.sse_c_key),
        transport=transport,
        check=False,
    )
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with saver:
        with pytest.raises(StorageError) as info:
            saver.put(config, empty_checkpoint(), {}, {})
        _assert_clean(_exception_text(info.value), "saver.put's exception")
        with pytest.raises(StorageError) as ainfo:
            await saver.aget_tuple(config)
        _assert_clean(_exception_text(ainfo.value), "saver.aget_tuple's exception")
    _assert_clean(_ours(captured), "this package's log records")
