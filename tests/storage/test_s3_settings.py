"""What the lean S3 transport resolves from options, the environment and the AWS config file.

Pure resolution (no request sent): the proxy of an origin and ``NO_PROXY``,
the CA bundle, the endpoint's precedence, the addressing style, and the AWS
hosts, compared with the URL a botocore client itself would send to (no
host is spelt here). Then one store configured only by a config file talks
to moto.
"""

from __future__ import annotations

import logging
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import certifi
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointResolutionError

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.http.proxy import Proxy
from objstore_saver.storage.s3 import Boto3S3Store
from objstore_saver.storage.s3.endpoints import aws_addressing
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.network import (
    network_for,
    no_proxy_matches,
    proxy_for,
    tls_context,
    trust_choice,
)
from objstore_saver.storage.s3.settings import configured_endpoint, configured_style
from objstore_saver.storage.urls import parse_url, store_from_url

#: Everything that could steer resolution from the test machine's environment.
_SETTINGS_ENV = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT",
    "AWS_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "REQUEST_METHOD",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No setting from the machine: an empty AWS config file and no proxy or CA variable."""
    for name in _SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    (tmp_path / "config").write_text("")
    return monkeypatch


def _config(tmp_path: Path, text: str) -> None:
    (tmp_path / "config").write_text(text)


# --- proxies -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypassed"),
    [
        ("s3.example.com", 443, "example.com", True),
        ("example.com", 443, "example.com", True),
        ("s3.example.com", 443, ".example.com", True),
        ("s3.example.com", 443, "*.example.com", True),
        ("S3.Example.COM", 443, "example.com", True),
        ("notexample.com", 443, "example.com", False),
        ("example.com.evil", 443, "example.com", False),
        ("s3.example.com", 443, "other.org, example.com", True),
        ("anything", 80, "*", True),
        ("minio", 9000, "minio:9000", True),
        ("minio", 9001, "minio:9000", False),
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("127.0.0.1", 9000, "127.0.0.1", True),
        ("127.0.0.1", 9000, "localhost", False),  # loopback is not exempt by itself
        ("localhost", 9000, "", False),
        ("::1", 9000, "::1", True),
        ("[::1]", 9000, "[::1]:9000", True),
        ("[::1]", 9001, "[::1]:9000", False),
        ("127.0.0.1", 80, "0.0.1", False),  # a domain suffix never matches an address
    ],
)
def test_no_proxy_matching(host: str, port: int, no_proxy: str, bypassed: bool) -> None:
    assert no_proxy_matches(host, port, no_proxy) is bypassed


@pytest.mark.parametrize(
    ("host", "no_proxy"),
    [
        ("s3.example.com", "example.com"),
        ("s3.example.com", ".example.com"),
        ("notexample.com", "example.com"),
        ("minio", "minio"),
        ("anything", "*"),
        ("127.0.0.1", "localhost"),
        ("localhost", "other"),
    ],
)
def test_no_proxy_agrees_with_urllib_on_host_names(
    env: pytest.MonkeyPatch, host: str, no_proxy: str
) -> None:
    # urllib's own reading, which botocore uses, for the entries both understand.
    env.setenv("no_proxy", no_proxy)
    assert no_proxy_matches(host, 443, no_proxy) is bool(
        urllib.request.proxy_bypass_environment(host)
    )


def test_proxy_by_scheme_from_the_environment(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    env.setenv("HTTP_PROXY", "http://plain-proxy:3128")
    assert proxy_for("https", "s3.example.com", 443) == ("http://secure-proxy:3128", "HTTPS_PROXY")
    assert proxy_for("http", "minio", 9000) == ("http://plain-proxy:3128", "HTTP_PROXY")
    env.setenv("https_proxy", "http://lower:1")  # lower case wins, as in urllib and curl
    assert proxy_for("https", "s3.example.com", 443)[0] == "http://lower:1"
    env.setenv("NO_PROXY", "example.com")
    assert proxy_for("https", "s3.example.com", 443) == (None, "no_proxy")
    assert proxy_for("http", "minio", 9000)[0] == "http://plain-proxy:3128"


def test_environment_proxies_are_read_as_urllib_reads_them(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTP_PROXY", "http://upper:1")
    env.setenv("https_proxy", "http://lower:2")
    env.setenv("HTTPS_PROXY", "http://upper:3")
    env.setenv("no_proxy", "a.example")
    expected = urllib.request.getproxies_environment()
    assert proxy_for("http", "h", 80)[0] == expected["http"]
    assert proxy_for("https", "h", 443)[0] == expected["https"]
    env.setenv("REQUEST_METHOD", "GET")  # CGI: HTTP_PROXY may come from a client header
    assert "http" not in urllib.request.getproxies_environment()
    assert proxy_for("http", "h", 80)[0] is None


def test_an_explicit_proxies_mapping_decides_alone(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    env.setenv("NO_PROXY", "*")
    proxies = {"https": "http://given:8080"}
    assert proxy_for("https", "s3.example.com", 443, proxies=proxies) == (
        "http://given:8080",
        "proxies['https']",
    )
    assert proxy_for("http", "minio", 9000, proxies=proxies) == (None, "proxies")
    assert proxy_for("https", "s3.example.com", 443, proxies={}) == (None, "proxies")


def test_network_for_gives_the_pools_a_proxy(env: pytest.MonkeyPatch) -> None:
    env.setenv("HTTPS_PROXY", "http://user:p%40ss@proxy.internal:3128")
    env.setenv("HTTP_PROXY", "proxy.internal:8080")  # no scheme: http://, as botocore
    env.setenv("NO_PROXY", "127.0.0.1")
    https = network_for("https", "bkt.s3.eu-west-1.amazonaws.com")
    assert https.proxy == Proxy("proxy.internal", 3128, "Basic dXNlcjpwQHNz")
    assert "p@ss" not in repr(https.proxy)
    assert isinstance(https.tls, ssl.SSLContext)
    plain = network_for("http", "minio.internal:9000")
    assert plain.proxy == Proxy("proxy.internal", 8080)
    assert plain.tls is None  # no TLS to an http origin
    assert network_for("http", "127.0.0.1:9000").proxy is None
    assert network_for("http", "127.0.0.1:9000", proxies={"http": "http://p:1"}).proxy == (
        Proxy("p", 1)
    )


def test_an_https_proxy_url_is_refused_naming_where_it_came_from(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("HTTPS_PROXY", "https://user:secret@proxy:443")
    with pytest.raises(ValueError, match=r"only http:// proxies.*from HTTPS_PROXY") as caught:
        network_for("https", "bkt.s3.eu-west-1.amazonaws.com")
    assert "secret" not in str(caught.value)


# --- TLS trust -----------------------------------------------------------------------------


def test_ca_bundle_precedence(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    session = botocore.session.Session()
    assert trust_choice(session=session).bundle is None
    env.setenv("REQUESTS_CA_BUNDLE", "/requests.pem")
    assert trust_choice(session=session).source == "REQUESTS_CA_BUNDLE"
    _config(tmp_path, "[default]\nca_bundle = /profile.pem\n")
    session = botocore.session.Session()
    assert trust_choice(session=session).bundle == "/profile.pem"
    env.setenv("AWS_CA_BUNDLE", "/env.pem")
    assert trust_choice(session=session).bundle == "/env.pem"
    assert trust_choice(ca_bundle="/option.pem", session=session).bundle == "/option.pem"
    assert trust_choice(verify="/verify.pem", session=session).bundle == "/verify.pem"
    assert trust_choice(verify=True, session=session).bundle == "/env.pem"
    off = trust_choice(verify=False, session=session)
    assert (off.verify, off.bundle) == (False, None)


def test_contradicting_trust_options_are_refused() -> None:
    with pytest.raises(ValueError, match="different files"):
        trust_choice(verify="/a.pem", ca_bundle="/b.pem")
    with pytest.raises(ValueError, match="verify=False"):
        trust_choice(verify=False, ca_bundle="/b.pem")
    with pytest.raises(ValueError, match="verify must be"):
        trust_choice(verify=1)  # type: ignore[arg-type]


def test_a_missing_or_unusable_bundle_is_named(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pem"
    env.setenv("AWS_CA_BUNDLE", str(missing))
    with pytest.raises(ConfigurationError, match=f"{missing}.*AWS_CA_BUNDLE"):
        network_for("https", "bkt.s3.eu-west-1.amazonaws.com")
    with pytest.raises(ValueError, match=str(missing)):  # a ValueError too
        LeanS3Store("bkt", region_name="eu-west-1")
    # A plain-HTTP endpoint reads no trust setting: a stale bundle does not stop it.
    assert network_for("http", "127.0.0.1:9000").tls is None
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigurationError, match=f"{junk}.*ca_bundle"):
        network_for("https", "h", ca_bundle=str(junk))


def test_a_bundle_replaces_the_trust_store() -> None:
    context = tls_context(trust_choice(ca_bundle=certifi.where()))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0


def test_verification_off_only_explicitly_and_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="objstore_saver.storage.s3.network"):
        context = network_for("https", "minio.internal", verify=False).tls
    assert context is not None
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    assert "verification is OFF" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        strict = network_for("https", "minio.internal").tls
    assert strict is not None and strict.verify_mode == ssl.CERT_REQUIRED
    assert not caplog.text


# --- endpoint and addressing ---------------------------------------------------------------

_ENDPOINT_CONFIG = """\
[default]
endpoint_url = http://profile-endpoint:1
services = local
s3 =
  addressing_style = virtual

[services local]
s3 =
  endpoint_url = http://services-endpoint:2
"""


def test_endpoint_precedence_with_a_config_file(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def resolved(argument: str | None = None) -> tuple[str | None, str]:
        return configured_endpoint(argument, botocore.session.Session())

    assert resolved() == (None, "")
    _config(tmp_path, "[default]\nendpoint_url = http://profile-endpoint:1\n")
    assert resolved() == ("http://profile-endpoint:1", "endpoint_url of the AWS profile")
    _config(tmp_path, _ENDPOINT_CONFIG)
    assert resolved()[0] == "http://services-endpoint:2"
    env.setenv("AWS_ENDPOINT_URL", "http://global-env:3")
    assert resolved() == ("http://global-env:3", "AWS_ENDPOINT_URL")
    env.setenv("AWS_ENDPOINT_URL_S3", "http://s3-env:4")
    assert resolved() == ("http://s3-env:4", "AWS_ENDPOINT_URL_S3")
    assert resolved("http://argument:5") == ("http://argument:5", "endpoint_url")
    env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert resolved() == (None, "")
    assert resolved("http://argument:5")[0] == "http://argument:5"


@pytest.mark.parametrize(
    "config",
    [
        "[default]\nendpoint_url = http://profile-endpoint:1\n",
        _ENDPOINT_CONFIG,
        "[profile other]\nendpoint_url = http://other:1\n",
    ],
)
def test_the_config_file_endpoint_is_the_one_boto3_uses(
    env: pytest.MonkeyPatch, tmp_path: Path, config: str
) -> None:
    _config(tmp_path, config)
    env.setenv("AWS_ACCESS_KEY_ID", "k")
    env.setenv("AWS_SECRET_ACCESS_KEY", "s")
    client = boto3.session.Session().client("s3", region_name="eu-west-1")
    mine, _ = configured_endpoint(None, boto3.session.Session())
    if mine is None:
        assert "amazonaws" in client.meta.endpoint_url
    else:
        assert client.meta.endpoint_url == mine


def test_a_missing_services_section_is_a_configuration_error(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _config(tmp_path, "[default]\nservices = absent\n")
    with pytest.raises(ConfigurationError, match="'absent'"):
        configured_endpoint(None, botocore.session.Session())


def test_addressing_style_precedence(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert configured_style(None, botocore.session.Session()) == ("auto", "default")
    _config(tmp_path, "[default]\ns3 =\n  addressing_style = path\n")
    session = botocore.session.Session()
    assert configured_style(None, session)[0] == "path"
    assert configured_style("virtual", session)[0] == "virtual"
    _config(tmp_path, "[default]\ns3 =\n  addressing_style = sideways\n")
    with pytest.raises(ValueError, match=r"s3\.addressing_style.*'sideways'"):
        configured_style(None, botocore.session.Session())


def test_the_config_file_addressing_style_reaches_the_store(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _config(tmp_path, "[default]\ns3 =\n  addressing_style = path\n")
    store = LeanS3Store("bkt", region_name="eu-west-1")
    assert store._protocol.addressing.base_path == "/bkt"
    _config(
        tmp_path,
        "[default]\nendpoint_url = http://minio.internal:9000\n"
        "s3 =\n  addressing_style = virtual\n",
    )
    store = LeanS3Store("bkt", region_name="eu-west-1")
    assert store._protocol.addressing.host == "bkt.minio.internal:9000"
    assert store._protocol.addressing.base_path == ""
    store = LeanS3Store("bkt", region_name="eu-west-1", addressing_style="path")
    assert store._protocol.addressing.host == "minio.internal:9000"


# --- AWS hosts, as botocore builds them ----------------------------------------------------


def _botocore_url(region: str, bucket: str, style: str, fips: bool, dualstack: bool) -> str:
    """The URL a botocore client sends a GetObject of ``key`` to (captured, never sent)."""
    client = boto3.session.Session(
        aws_access_key_id="k", aws_secret_access_key="s", region_name=region
    ).client(
        "s3",
        config=Config(
            s3={"addressing_style": style}, use_fips_endpoint=fips, use_dualstack_endpoint=dualstack
        ),
    )
    sent: list[str] = []

    class Captured(Exception):
        pass

    def capture(request: Any, **_: Any) -> None:
        sent.append(request.url)
        raise Captured

    client.meta.events.register("before-send", capture)
    with pytest.raises(Captured):
        client.get_object(Bucket=bucket, Key="key")
    return sent[0]


def _regions() -> list[str]:
    wanted = ["us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1", "us-iso-east-1"]
    known = {
        region
        for partition in botocore.session.Session().get_data("partitions")["partitions"]
        for region in partition["regions"]
    }
    return [region for region in wanted if region in known]


@pytest.mark.parametrize("region", _regions())
@pytest.mark.parametrize(("fips", "dualstack"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize(("bucket", "style"), [("bkt", "auto"), ("bkt", "path"), ("a.b.c", "auto")])
def test_aws_hosts_are_botocores(
    env: pytest.MonkeyPatch, region: str, fips: bool, dualstack: bool, bucket: str, style: str
) -> None:
    try:
        expected = _botocore_url(region, bucket, style, fips, dualstack)
    except EndpointResolutionError as exc:  # FIPS in China, say: refused alike
        with pytest.raises(ValueError, match=str(exc).split(":")[-1].strip()):
            aws_addressing(bucket, region, style, fips=fips, dualstack=dualstack)
        return
    addressing = aws_addressing(bucket, region, style, fips=fips, dualstack=dualstack)
    assert f"{addressing.origin}{addressing.base_path}/key" == expected


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1", "eu-west-1"])
def test_fips_and_dualstack_come_from_the_environment_and_config_file(
    env: pytest.MonkeyPatch, tmp_path: Path, region: str
) -> None:
    def endpoint() -> str:
        return LeanS3Store("bkt", region_name=region).endpoint

    assert endpoint() == _botocore_url(region, "bkt", "auto", False, False).removesuffix("/key")
    env.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
    assert endpoint() == _botocore_url(region, "bkt", "auto", False, True).removesuffix("/key")
    env.delenv("AWS_USE_DUALSTACK_ENDPOINT")
    _config(tmp_path, "[default]\nuse_fips_endpoint = true\n")
    try:
        expected = _botocore_url(region, "bkt", "auto", True, False).removesuffix("/key")
    except EndpointResolutionError:
        with pytest.raises(ValueError, match="FIPS"):
            endpoint()
    else:
        assert endpoint() == expected
        env.setenv("AWS_USE_FIPS_ENDPOINT", "false")  # the environment beats the file
        assert endpoint() == _botocore_url(region, "bkt", "auto", False, False).removesuffix("/key")


# --- option parity and URLs ----------------------------------------------------------------


def test_the_boto3_transport_takes_the_same_network_options(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundle = certifi.where()
    store = Boto3S3Store(
        "bkt",
        region_name="eu-west-1",
        proxies={"https": "http://proxy:3128"},
        ca_bundle=bundle,
        addressing_style="path",
    )
    endpoint = store.client._endpoint
    assert endpoint.http_session._proxy_config.proxy_url_for("https://x") == "http://proxy:3128"
    assert endpoint.http_session._verify == bundle
    assert store.client.meta.config.s3["addressing_style"] == "path"
    unverified = Boto3S3Store("bkt", region_name="eu-west-1", verify=False)
    assert unverified.client._endpoint.http_session._verify is False
    env.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match=r"missing\.pem"):
        Boto3S3Store("bkt", region_name="eu-west-1")


def test_urls_take_ca_bundle_and_verify(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = parse_url("s3://bkt/p?region=eu-west-1&ca_bundle=/etc/ca.pem&verify=false")
    assert (spec.ca_bundle, spec.verify) == ("/etc/ca.pem", False)
    assert "ca_bundle=/etc/ca.pem" in str(spec) and "verify=false" in str(spec)
    with pytest.raises(ConfigurationError, match="verify"):
        parse_url("s3://bkt/p?verify=maybe")
    missing = tmp_path / "none.pem"
    with pytest.raises(ConfigurationError, match=str(missing)):
        store_from_url(f"s3://bkt/p?region=eu-west-1&ca_bundle={missing}", check=False)


# --- a store configured by the config file alone ---------------------------------------------


async def test_a_config_file_endpoint_reaches_the_server(
    env: pytest.MonkeyPatch, tmp_path: Path, s3_endpoint: Any, s3_bucket: str
) -> None:
    # A profile pointing at an S3-compatible server (moto here, MinIO in life):
    # no endpoint argument, no endpoint variable.
    check = s3_endpoint.client()
    _config(
        tmp_path,
        f"[profile minio]\nregion = {s3_endpoint.region}\nservices = minio\n\n"
        f"[services minio]\ns3 =\n  endpoint_url = {s3_endpoint.url}\n",
    )
    (tmp_path / "credentials").write_text(
        f"[minio]\naws_access_key_id = {s3_endpoint.access_key or 'testing-access-key'}\n"
        f"aws_secret_access_key = {s3_endpoint.secret_key or 'testing-secret-key'}\n"
    )
    env.setenv("AWS_PROFILE", "minio")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.delenv(name, raising=False)
    store = LeanS3Store(s3_bucket, "cfg/")
    assert store.endpoint == s3_endpoint.url
    assert store.region == s3_endpoint.region
    try:
        store.put("k", b"sync")
        assert await store.aget("k") == b"sync"
        await store.aput("a", b"async")
        assert store.get("a") == b"async"
        body = check.get_object(Bucket=s3_bucket, Key="cfg/a")["Body"].read()
        assert body == b"async"
    finally:
        await store.aclose()
        store.close()
