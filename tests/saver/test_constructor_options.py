"""``from_url`` and ``from_bucket`` take the S3 store's options; an option nobody takes is named.

Store options (``max_attempts``, ``connect_timeout``, ``proxies``,
``backoff_base``, ``max_pool_connections``...) go to the transport's store,
the class's own options (``sweep_delay``, ``index_grace``...) to the class;
anything else is a ``TypeError`` naming the constructor, the option and what
it accepts, raised before any request.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from forward_proxy import ForwardProxy

from objstore_saver import ObjectStoreSaver, ObjectStoreStore
from objstore_saver.errors import ConfigurationError
from objstore_saver.storage import Boto3S3Store, LeanS3Store, LocalStore, StoreUnavailableError
from objstore_saver.storage.http.messages import HttpRequest
from objstore_saver.storage.s3.settings import S3_OPTIONS, STORE_OPTIONS

CLASSES = (ObjectStoreSaver, ObjectStoreStore)
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "REQUEST_METHOD")


def _url(s3_endpoint: Any, bucket: str, query: str = "") -> str:
    return f"s3://{bucket}/p?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}{query}"


@pytest.fixture
def refused_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` where connections are refused: bound, never listening."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{holder.getsockname()[1]}"


def test_the_option_names_are_the_stores_own_parameters() -> None:
    assert {"max_attempts", "connect_timeout", "backoff_base", "proxies"} <= STORE_OPTIONS["lean"]
    assert {"max_attempts", "retry_mode", "max_pool_connections"} <= STORE_OPTIONS["boto3"]
    assert "client" not in S3_OPTIONS  # a client comes through from_client


# --- store options reach the store ---------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_from_url_passes_store_options_to_the_lean_store(
    cls: Any, s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    with cls.from_url(
        _url(s3_endpoint, s3_bucket), max_attempts=2, connect_timeout=1, max_workers=4
    ) as built:
        store = built.store
        assert isinstance(store, LeanS3Store)
        assert store.retry.max_attempts == 2
        assert store.timeouts == (1, 30)


def test_from_url_passes_store_options_to_the_boto3_store(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    with ObjectStoreSaver.from_url(
        _url(s3_endpoint, s3_bucket, "&transport=boto3"),
        max_attempts=2,
        connect_timeout=1,
        max_pool_connections=8,
        retry_mode="adaptive",
        sweep_delay=timedelta(hours=2),
    ) as saver:
        assert isinstance(saver.store, Boto3S3Store)
        config = saver.store.client.meta.config
        assert config.retries == {"mode": "adaptive", "total_max_attempts": 2}
        assert config.connect_timeout == 1
        assert config.max_pool_connections == 8
        assert saver.sweep_delay == timedelta(hours=2)


@pytest.mark.usefixtures("creds")
def test_max_attempts_and_backoff_base_from_from_url_drive_the_retries(refused_url: str) -> None:
    saver = ObjectStoreSaver.from_url(
        f"s3://b/p?endpoint_url={refused_url}", check=False, max_attempts=2, backoff_base=0
    )
    store = saver.store
    assert isinstance(store, LeanS3Store)
    sent: list[HttpRequest] = []
    send = store._send

    def counted(request: HttpRequest) -> Any:
        sent.append(request)
        return send(request)

    store._send = counted  # type: ignore[method-assign]
    with saver, pytest.raises(StoreUnavailableError, match="ConnectionRefusedError"):
        store.get("k")
    assert len(sent) == 2


def test_from_bucket_takes_proxies_backoff_base_and_max_pool_connections(
    s3_endpoint: Any, s3_bucket: str, creds_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in _PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with ForwardProxy() as proxy:
        with ObjectStoreSaver.from_bucket(
            s3_bucket,
            "p/",
            endpoint_url=s3_endpoint.url,
            region_name=s3_endpoint.region,
            proxies={"http": proxy.url, "https": proxy.url},
            backoff_base=0.25,
            max_pool_connections=3,
        ) as saver:
            store = saver.store
            assert isinstance(store, LeanS3Store)
            assert store.retry.backoff_base == 0.25
            assert store.settings.client.max_pool_connections == 3
            store.put("k", b"v")
        # The check and the put went through the proxy.
        assert proxy.count >= 2


def test_from_bucket_passes_class_options_beside_store_options(
    s3_endpoint: Any, s3_bucket: str, creds_env: None
) -> None:
    with ObjectStoreStore.from_bucket(
        s3_bucket,
        "p/",
        endpoint_url=s3_endpoint.url,
        region_name=s3_endpoint.region,
        max_attempts=3,
        index_grace=7.0,
    ) as built:
        assert built.store.retry.max_attempts == 3
        assert built._ctx.grace == 7.0


# --- options nobody takes ------------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES)
def test_an_unknown_option_of_from_url_is_named_with_what_is_accepted(
    cls: Any, refused_url: str
) -> None:
    # Refused before any request: the endpoint would refuse the check.
    with pytest.raises(TypeError) as info:
        cls.from_url(f"s3://b/p?endpoint_url={refused_url}", max_attemps=2)
    message = str(info.value)
    assert message.startswith(f"{cls.__name__}.from_url() got an unexpected option 'max_attemps'")
    assert "did you mean 'max_attempts'?" in message
    assert "S3 store options: addressing_style, backoff_base," in message
    assert f"{cls.__name__} options: " in message
    assert "max_workers" in message


@pytest.mark.parametrize("cls", CLASSES)
def test_an_unknown_option_of_from_bucket_is_named(cls: Any, refused_url: str) -> None:
    with pytest.raises(TypeError) as info:
        cls.from_bucket("b", endpoint_url=refused_url, colour="blue")
    message = str(info.value)
    assert message.startswith(f"{cls.__name__}.from_bucket() got an unexpected option 'colour';")
    assert "it accepts bucket, prefix, transport, check; S3 store options: " in message
    for name in ("max_attempts", "connect_timeout", "proxies", "max_pool_connections"):
        assert name in message


@pytest.mark.parametrize("cls", CLASSES)
def test_store_options_where_no_s3_store_is_built_are_named(cls: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.from_directory\(\) .*'max_attempts'"):
        cls.from_directory(tmp_path, max_attempts=2)
    with pytest.raises(TypeError, match=r"from_client\(\) .*'connect_timeout' is an S3 store opt"):
        cls.from_client(object(), "b", connect_timeout=1)
    with pytest.raises(TypeError, match=rf"{cls.__name__}\.from_store\(\) .*'proxies'"):
        cls.from_store(LocalStore(tmp_path), proxies={})
    with pytest.raises(ConfigurationError, match="local directory: the S3 options max_attempts"):
        cls.from_url(tmp_path.as_uri(), max_attempts=2)


def test_an_option_set_in_the_url_and_given_too_is_refused(s3_endpoint: Any) -> None:
    with pytest.raises(ConfigurationError, match="sets endpoint_url, given as an option too"):
        ObjectStoreSaver.from_url(_url(s3_endpoint, "b"), endpoint_url=s3_endpoint.url)


def test_an_option_of_the_other_transport_is_refused_naming_it(s3_endpoint: Any) -> None:
    with pytest.raises(ValueError, match="options of transport='lean' only: backoff_base"):
        ObjectStoreSaver.from_bucket(
            "b", endpoint_url=s3_endpoint.url, transport="boto3", backoff_base=0
        )
    with pytest.raises(ValueError, match="options of transport='boto3' only: extra_put_args"):
        ObjectStoreSaver.from_url(
            _url(s3_endpoint, "b"), extra_put_args={"StorageClass": "STANDARD_IA"}
        )
