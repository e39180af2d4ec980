"""The lean transport's retries: botocore's standard mode with its retry quota, against
a scripted loopback server, and plans driven by hand for what a server cannot show."""

from __future__ import annotations

from typing import Any

import botocore.retries.standard
import pytest
from lean_helpers import AsyncDriven
from scripted_s3 import error_xml, scripted_server

from objstore_saver.storage import StorageError, StoreUnavailableError
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, TransportFailure
from objstore_saver.storage.s3.boto3_store import Boto3S3Store
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.protocol import Sleep
from objstore_saver.storage.s3.retry import (
    QUOTA_CAPACITY,
    RETRY_COST,
    TIMEOUT_RETRY_COST,
    RetryPolicy,
    is_retryable,
)

CALLS = 200
SLOW_DOWN = (503, {"content-type": "application/xml"}, error_xml("SlowDown"))
OK = (200, {}, b"data")


def _lean(url: str, **options: Any) -> LeanS3Store:
    return LeanS3Store("bucket", endpoint_url=url, region_name="us-east-1", **options)


def _failed_gets(store: Any, calls: int) -> None:
    for i in range(calls):
        with pytest.raises(StorageError, match="SlowDown"):
            store.get(f"k{i}")


def test_an_outage_costs_what_botocore_standard_mode_sends(
    creds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 GETs to a server answering 503 SlowDown: ~300 requests, as boto3 sends, not 1,000."""
    with scripted_server(lambda *_: SLOW_DOWN) as server:
        store = _lean(server.url, backoff_base=0)
        _failed_gets(store, CALLS)
        lean_requests = len(server.seen)
        assert store.retry.quota.available < RETRY_COST  # the quota ran dry
        # boto3 on the same server, its backoff waits skipped (its quota is untouched).
        monkeypatch.setattr(
            botocore.retries.standard.ExponentialBackoff, "delay_amount", lambda self, ctx: 0
        )
        server.seen.clear()
        _failed_gets(
            Boto3S3Store("bucket", endpoint_url=server.url, region_name="us-east-1"), CALLS
        )
        boto3_requests = len(server.seen)
    assert lean_requests <= 1.6 * CALLS, lean_requests
    assert abs(lean_requests - boto3_requests) <= 0.1 * boto3_requests, (
        lean_requests,
        boto3_requests,
    )


def test_the_exhausted_budget_is_named_and_successes_refill_it(creds: None) -> None:
    failing = [True]
    with scripted_server(lambda *_: SLOW_DOWN if failing[0] else OK) as server:
        store = _lean(server.url, backoff_base=0)
        _failed_gets(store, QUOTA_CAPACITY // (RETRY_COST * 4))  # 4 retries per call
        assert store.retry.quota.available == 0
        server.seen.clear()
        with pytest.raises(StorageError) as info:
            store.get("one/key")
        assert len(server.seen) == 1  # not retried
        message = str(info.value)
        for part in ("retry budget", "exhausted", "'bucket'", "'one/key'", server.url):
            assert part in message
        # The server recovers: each success without retries gives back one unit.
        failing[0] = False
        for _ in range(RETRY_COST):
            assert store.get("k") == b"data"
        assert store.retry.quota.available == RETRY_COST
        # ... enough for one retry again.
        answers = iter([SLOW_DOWN, OK])
        failing[0] = True
        server.seen.clear()
        with scripted_server(lambda *_: next(answers)) as second:
            store = _lean(second.url, backoff_base=0)
            store.retry.quota.acquire(QUOTA_CAPACITY - RETRY_COST)
            assert store.get("k") == b"data"
            assert len(second.seen) == 2
            # A success after a retry gives back what the retry took.
            assert store.retry.quota.available == RETRY_COST


def test_a_fresh_store_has_a_full_budget_and_a_retried_success_refunds_it(creds: None) -> None:
    answers = iter([SLOW_DOWN, SLOW_DOWN, SLOW_DOWN, OK, OK])
    with scripted_server(lambda *_: next(answers)) as server:
        store = _lean(server.url, backoff_base=0)
        assert store.retry.quota.available == QUOTA_CAPACITY
        assert store.get("k") == b"data"
        assert len(server.seen) == 4
        assert store.retry.quota.available == QUOTA_CAPACITY - 2 * RETRY_COST
        assert store.get("k") == b"data"
        assert store.retry.quota.available == QUOTA_CAPACITY - 2 * RETRY_COST + 1


def test_the_async_path_shares_the_store_budget(creds: None) -> None:
    with scripted_server(lambda *_: SLOW_DOWN) as server:
        store = _lean(server.url, backoff_base=0, max_attempts=3)
        driven = AsyncDriven(store)
        try:
            with pytest.raises(StorageError, match="SlowDown"):
                driven.get("k")
        finally:
            driven.close()
        with pytest.raises(StorageError, match="SlowDown"):
            store.get("k")
    assert len(server.seen) == 6
    assert store.retry.quota.available == QUOTA_CAPACITY - 4 * RETRY_COST


# --- plans driven by hand ---------------------------------------------------------------------


def _drive(store: LeanS3Store, replies: list[Any]) -> tuple[list[HttpRequest | Sleep], Any]:
    """Run a GET plan of ``store`` on scripted replies; the steps and the outcome."""
    plan = store._protocol.get("k", None)
    steps: list[HttpRequest | Sleep] = []
    answers = iter(replies)
    reply: Any = None
    try:
        while True:
            step = plan.send(reply)
            steps.append(step)
            reply = None if isinstance(step, Sleep) else next(answers)
    except StopIteration as stop:
        return steps, stop.value
    except StorageError as exc:
        return steps, exc


@pytest.mark.parametrize(
    "error",
    [
        "CertificateError: hostname 'x' doesn't match 'y'",
        "SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
        "self-signed certificate (_ssl.c:1006)",
        "ConnectionError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed",
    ],
)
def test_a_certificate_failure_is_not_retried(creds: None, error: str) -> None:
    store = _lean("https://127.0.0.1:1")
    steps, outcome = _drive(store, [TransportFailure(error, sent=False)] * 5)
    assert len(steps) == 1
    assert isinstance(outcome, StoreUnavailableError)
    assert "CERTIFICATE" in str(outcome).upper()
    assert store.retry.quota.available == QUOTA_CAPACITY


def test_a_timeout_costs_twice_a_retry(creds: None) -> None:
    store = _lean("http://127.0.0.1:1", backoff_base=0)
    replies = [
        TransportFailure("ReadTimeoutError: no answer within 30 s"),
        TransportFailure("ConnectionResetError: [Errno 104] reset"),
    ]
    steps, outcome = _drive(store, [*replies, HttpResponse(404, {}, b"")])
    assert [type(s).__name__ for s in steps] == ["HttpRequest", "Sleep"] * 2 + ["HttpRequest"]
    assert isinstance(outcome, StorageError)
    # A 404 gives nothing back: what the two retries took stays taken.
    assert store.retry.quota.available == QUOTA_CAPACITY - TIMEOUT_RETRY_COST - RETRY_COST


def test_backoff_is_botocore_standard() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.backoff_base, policy.backoff_cap) == (5, 1.0, 20.0)
    waits = [max(policy.delay(n) for _ in range(300)) for n in (1, 2, 3, 6)]
    assert 0.8 < waits[0] <= 1.0 < waits[1] <= 2.0 < waits[2] <= 4.0
    assert 16.0 < waits[3] <= 20.0


@pytest.mark.parametrize(
    ("reply", "retryable"),
    [
        (HttpResponse(503, {}, error_xml("SlowDown")), True),
        (HttpResponse(500, {}, b""), True),
        (HttpResponse(429, {}, b""), True),
        (HttpResponse(400, {}, error_xml("RequestTimeout")), True),
        (HttpResponse(400, {}, error_xml("ThrottlingException")), True),
        (HttpResponse(400, {}, error_xml("InvalidArgument")), False),
        (HttpResponse(403, {}, error_xml("AccessDenied")), False),
        (HttpResponse(404, {}, error_xml("NoSuchKey")), False),
        (TransportFailure("ConnectionRefusedError: refused", sent=False), True),
        (TransportFailure("CertificateError: bad"), False),
    ],
)
def test_what_is_retried(reply: Any, retryable: bool) -> None:
    assert is_retryable(reply) is retryable
