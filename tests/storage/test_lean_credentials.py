"""LeanS3Store's credentials: a slow refresh never holds the event loop; a failed one is named.

A botocore credential provider whose refresh sleeps 0.5 s stands for an
assumed role or a metadata service that answers slowly. While coroutines
wait for it, another coroutine's ticks keep coming (the loop's lag is
measured), and concurrent requests wait for one refresh, not one each.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.credentials import CredentialProvider, RefreshableCredentials
from botocore.exceptions import CredentialRetrievalError

from objstore_saver.errors import StoreUnavailableError
from objstore_saver.storage.s3.lean import LeanS3Store

REFRESH_SECONDS = 0.5


class SlowProvider(CredentialProvider):
    """Temporary credentials about to expire, whose refresh takes half a second."""

    METHOD = "slow-test"
    CANONICAL_NAME = "slow-test"

    def __init__(self, access_key: str, secret_key: str, *, fail: bool = False) -> None:
        super().__init__()
        self.access_key = access_key
        self.secret_key = secret_key
        self.fail = fail
        self.refreshes = 0
        self.threads: set[int] = set()
        self._count = threading.Lock()

    def _metadata(self, lifetime: timedelta) -> dict[str, Any]:
        return {
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "token": None,
            "expiry_time": (datetime.now(UTC) + lifetime).isoformat(),
        }

    def _refresh(self) -> dict[str, Any]:
        with self._count:
            self.refreshes += 1
            self.threads.add(threading.get_ident())
        time.sleep(REFRESH_SECONDS)
        if self.fail:
            raise CredentialRetrievalError(provider=self.METHOD, error_msg="the role is gone")
        return self._metadata(timedelta(hours=1))

    def load(self) -> RefreshableCredentials:
        # Expired already: the first request must refresh.
        return RefreshableCredentials.create_from_metadata(
            self._metadata(timedelta(seconds=-1)), refresh_using=self._refresh, method=self.METHOD
        )


def _session(provider: SlowProvider) -> botocore.session.Session:
    session = botocore.session.Session()
    session.get_component("credential_provider").insert_before("env", provider)
    return session


@pytest.fixture
def no_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))


async def _max_lag_while(start: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """The longest a 10 ms ticker was kept waiting beyond its sleep while ``start()`` ran.

    The work is started only once the ticker ticks (``gather`` would schedule
    its tasks at once, ahead of the ticker).
    """
    lag = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal lag
        while not done.is_set():
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lag = max(lag, time.monotonic() - before - 0.01)

    ticks = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)  # the ticker is ticking before the work starts
    try:
        result = await start()
    finally:
        done.set()
        await ticks
    return lag, result


async def test_a_slow_refresh_does_not_block_the_loop(
    no_profile: None, s3_endpoint: Any, s3_bucket: str
) -> None:
    provider = SlowProvider(
        s3_endpoint.access_key or "testing-access-key",
        s3_endpoint.secret_key or "testing-secret-key",
    )
    store = LeanS3Store(
        s3_bucket, endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
        session=_session(provider),
    )  # fmt: skip
    loop_thread = threading.get_ident()
    try:
        started = time.monotonic()
        lag, _ = await _max_lag_while(
            lambda: asyncio.gather(*(store.aput(f"k{i}", b"v%d" % i) for i in range(8)))
        )
        assert time.monotonic() - started >= REFRESH_SECONDS  # the refresh did run...
        assert lag < 0.2, f"the event loop stalled {lag:.2f} s during a credential refresh"
        assert provider.refreshes == 1  # ...once for the eight requests
        assert loop_thread not in provider.threads  # in a worker thread
        assert await store.aget("k3") == b"v3"
        assert store.get("k7") == b"v7"
        assert provider.refreshes == 1
    finally:
        await store.aclose()
        store.close()


async def test_a_failed_refresh_names_the_bucket(no_profile: None, s3_endpoint: Any) -> None:
    provider = SlowProvider("key", "secret", fail=True)
    store = LeanS3Store(
        "the-bucket", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
        session=_session(provider), max_attempts=1,
    )  # fmt: skip
    with pytest.raises(StoreUnavailableError) as caught:
        await store.aget("k")
    message = str(caught.value)
    assert "'the-bucket'" in message and "credentials could not be refreshed" in message
    assert isinstance(caught.value.__cause__, CredentialRetrievalError)
    with pytest.raises(StoreUnavailableError, match="credentials could not be refreshed"):
        store.put("k", b"v")
    await store.aclose()
    store.close()


async def test_concurrent_waiters_share_a_failed_refresh(
    no_profile: None, s3_endpoint: Any
) -> None:
    provider = SlowProvider("key", "secret", fail=True)
    store = LeanS3Store(
        "the-bucket", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
        session=_session(provider), max_attempts=1,
    )  # fmt: skip
    lag, outcomes = await _max_lag_while(
        lambda: asyncio.gather(*(store.aget("k") for _ in range(4)), return_exceptions=True)
    )
    assert lag < 0.2
    assert all(isinstance(outcome, StoreUnavailableError) for outcome in outcomes)
    assert provider.refreshes == 1
    await store.aclose()
    store.close()
