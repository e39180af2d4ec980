"""Both HTTP pools through a forward proxy and over TLS with a private CA.

A plain origin is asked through the proxy in absolute form (moto, through the
whole ``LeanS3Store``); an HTTPS origin through a ``CONNECT`` tunnel, TLS
spoken with the origin. A refusing proxy and an untrusted certificate are
transport failures that say so (the proxy named without its credentials).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_servers import ForwardProxy, PrivateCA, TlsOrigin, make_ca
from system_deps import missing

from objstore_saver.storage.http.async_pool import AsyncConnectionPool
from objstore_saver.storage.http.messages import HttpRequest, HttpResponse, Reply, TransportFailure
from objstore_saver.storage.http.proxy import Proxy
from objstore_saver.storage.http.sync_pool import ConnectionPool
from objstore_saver.storage.s3.lean import LeanS3Store

OPTIONS = {"connect_timeout": 3.0, "read_timeout": 3.0, "max_idle": 4}
SECRET = "s3cr3t-pw"
CREDENTIALS = f"agent:{SECRET}"


def _pool(kind: str, scheme: str, host: str, **options: Any) -> Any:
    cls = ConnectionPool if kind == "sync" else AsyncConnectionPool
    return cls(scheme, host, **{**OPTIONS, **options})


def _send_all(pool: Any, requests: list[HttpRequest]) -> list[Reply]:
    if isinstance(pool, ConnectionPool):
        try:
            return [pool.send(request) for request in requests]
        finally:
            pool.close()

    async def run() -> list[Reply]:
        try:
            return [await pool.send(request) for request in requests]
        finally:
            await pool.close()

    return asyncio.run(run())


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    server = ForwardProxy(CREDENTIALS)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    try:
        return make_ca(Path(tmp_path_factory.mktemp("ca")))
    except FileNotFoundError:
        missing("openssl")


@pytest.fixture
def tls_origin(ca: PrivateCA) -> Iterator[TlsOrigin]:
    origin = TlsOrigin(ca.server_context())
    try:
        yield origin
    finally:
        origin.close()


# --- plain origin: absolute form, the whole store through the proxy -------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_store_reaches_moto_through_the_proxy_in_absolute_form(
    kind: str, proxy: ForwardProxy, s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    store = LeanS3Store(
        s3_bucket, endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region, max_attempts=1
    )
    origin = s3_endpoint.url.split("://", 1)[1]
    via = Proxy.from_url(proxy.url(CREDENTIALS))
    try:
        if kind == "sync":
            store._pool = ConnectionPool("http", origin, **OPTIONS, proxy=via)
            store.put("k", b"through the proxy")
            assert store.get("k") == b"through the proxy"
            assert store.get("k", (0, 7)) == b"through"
        else:

            async def run() -> None:
                loop = asyncio.get_running_loop()
                store._aio[loop] = AsyncConnectionPool("http", origin, **OPTIONS, proxy=via)
                await store.aput("k", b"through the proxy")
                assert await store.aget("k") == b"through the proxy"
                await store.aclose()

            asyncio.run(run())
    finally:
        store.close()
    assert proxy.lines and all(f" http://{origin}/" in line for line in proxy.lines)
    assert set(proxy.authorizations) == {Proxy.from_url(proxy.url(CREDENTIALS)).authorization}
    assert len(proxy.lines) >= (3 if kind == "sync" else 2)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_proxy_asking_for_credentials_is_a_failure_naming_it(
    kind: str, proxy: ForwardProxy
) -> None:
    wrong = Proxy.from_url(proxy.url(f"agent:{SECRET}-wrong"))
    for scheme in ("http", "https"):
        pool = _pool(kind, scheme, "origin.invalid:9000", proxy=wrong)
        (reply,) = _send_all(pool, [HttpRequest("GET", "/b/k", {"host": "origin.invalid"})])
        assert isinstance(reply, TransportFailure), reply
        assert reply.sent is False
        assert reply.error.startswith("ProxyError: ")
        assert f"proxy 127.0.0.1:{proxy.port}" in reply.error
        assert "407" in reply.error and "origin.invalid:9000" in reply.error
        assert SECRET not in reply.error and "agent" not in reply.error


@pytest.mark.parametrize("status", [403, 502])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_refused_connect_is_a_failure_naming_the_proxy_and_status(kind: str, status: int) -> None:
    refusing = ForwardProxy(refuse=status)
    try:
        pool = _pool(kind, "https", "origin.invalid:443", proxy=Proxy.from_url(refusing.url()))
        (reply,) = _send_all(pool, [HttpRequest("GET", "/b/k", {"host": "origin.invalid"})])
    finally:
        refusing.close()
    assert isinstance(reply, TransportFailure), reply
    assert reply.error.startswith(f"ProxyError: proxy 127.0.0.1:{refusing.port} refused")
    assert f"HTTP {status}" in reply.error
    assert refusing.lines == ["CONNECT origin.invalid:443 HTTP/1.1"]


# --- TLS: a private CA, directly and through a CONNECT tunnel -------------------------------


@pytest.mark.parametrize("through_proxy", [False, True], ids=["direct", "tunnel"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_context_trusting_the_private_ca_reaches_the_tls_origin(
    kind: str, through_proxy: bool, ca: PrivateCA, tls_origin: TlsOrigin, proxy: ForwardProxy
) -> None:
    via = Proxy.from_url(proxy.url(CREDENTIALS)) if through_proxy else None
    pool = _pool(kind, "https", tls_origin.host, tls=ca.client_context(), proxy=via)
    requests = [HttpRequest("GET", f"/b/k{i}", {"host": tls_origin.host}) for i in range(3)]
    replies = _send_all(pool, requests)
    assert [r.body if isinstance(r, HttpResponse) else r for r in replies] == [b"ok"] * 3
    assert tls_origin.accepted == 1  # one TLS connection, kept alive
    if through_proxy:
        assert proxy.lines == [f"CONNECT {tls_origin.host} HTTP/1.1"]
        assert proxy.authorizations == [via.authorization if via else None]
    else:
        assert proxy.lines == []


@pytest.mark.parametrize("through_proxy", [False, True], ids=["direct", "tunnel"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_untrusted_certificate_is_a_certificate_failure(
    kind: str, through_proxy: bool, tls_origin: TlsOrigin, proxy: ForwardProxy
) -> None:
    via = Proxy.from_url(proxy.url(CREDENTIALS)) if through_proxy else None
    pool = _pool(kind, "https", tls_origin.host, proxy=via)  # the system's trust store
    (reply,) = _send_all(pool, [HttpRequest("GET", "/b/k", {"host": tls_origin.host})])
    assert isinstance(reply, TransportFailure), reply
    assert reply.sent is False
    assert reply.error.startswith("CertificateError: "), reply.error
    assert tls_origin.host in reply.error
    assert "certificate" in reply.error.lower()
    assert SECRET not in reply.error


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_certificate_for_another_host_is_a_certificate_failure(kind: str, ca: PrivateCA) -> None:
    # The certificate names 127.0.0.1 and localhost: served on 127.0.0.2 it must not pass.
    origin = TlsOrigin(ca.server_context(), address="127.0.0.2")
    try:
        pool = _pool(kind, "https", origin.host, tls=ca.client_context())
        (reply,) = _send_all(pool, [HttpRequest("GET", "/b/k", {"host": origin.host})])
    finally:
        origin.close()
    assert isinstance(reply, TransportFailure), reply
    assert reply.error.startswith("CertificateError: "), reply.error
