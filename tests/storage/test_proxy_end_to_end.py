"""LeanS3Store reaches its endpoint through the forward proxy the environment names.

``HTTP_PROXY`` points at a small forward proxy on loopback
(``forward_proxy.py``), the origin is the test endpoint (moto on loopback):
sync and async puts and gets succeed and the proxy relayed them; with the
origin in ``NO_PROXY`` it relays none. Needs the pools' proxy support
(absolute-form requests for http origins, CONNECT tunnels for https).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from forward_proxy import ForwardProxy

from objstore_saver.storage.s3.lean import LeanS3Store

_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD")


@pytest.fixture
def forward_proxy(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    """A forward proxy named by ``HTTP_PROXY`` and ``HTTPS_PROXY``; ``NO_PROXY`` empty.

    The test's bucket is made before (and removed after) the variables are
    set: the test helpers' boto3 client would go through the proxy too.
    """
    for name in _PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "")
        yield proxy


async def test_requests_go_through_the_proxy(
    forward_proxy: ForwardProxy, creds_env: None, s3_endpoint: Any, s3_bucket: str
) -> None:
    store = LeanS3Store(s3_bucket, "via-proxy/", endpoint_url=s3_endpoint.url,
                        region_name=s3_endpoint.region)  # fmt: skip
    try:
        store.put("sync", b"through the proxy")
        assert store.get("sync") == b"through the proxy"
        await store.aput("async", b"through it too")
        assert await store.aget("async") == b"through it too"
        assert store.get("async") == b"through it too"
    finally:
        await store.aclose()
        store.close()
    if urlsplit(s3_endpoint.url).scheme == "http":
        assert len(forward_proxy.relayed) == 5
        bucket_url = f"{s3_endpoint.url}/{s3_bucket}/via-proxy/"
        assert all(target.startswith(bucket_url) for target in forward_proxy.relayed)
    else:  # an https endpoint: tunnels, one per connection
        assert forward_proxy.tunnels


async def test_no_proxy_bypasses_the_proxy(
    forward_proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
    creds_env: None,
    s3_endpoint: Any,
    s3_bucket: str,
) -> None:
    monkeypatch.setenv("NO_PROXY", urlsplit(s3_endpoint.url).hostname or "")
    store = LeanS3Store(s3_bucket, "direct/", endpoint_url=s3_endpoint.url,
                        region_name=s3_endpoint.region)  # fmt: skip
    try:
        store.put("sync", b"direct")
        assert store.get("sync") == b"direct"
        await store.aput("async", b"direct too")
        assert await store.aget("async") == b"direct too"
    finally:
        await store.aclose()
        store.close()
    assert forward_proxy.count == 0
