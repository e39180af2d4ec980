"""How the lean S3 transport reaches an origin: which forward proxy, which TLS trust
(docs/configuration.md, "Network: proxies and TLS (S3)")."""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.http.proxy import Proxy
from objstore_saver.storage.s3.settings import TrustChoice, trust_choice

logger = logging.getLogger(__name__)


def no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """Whether a ``NO_PROXY`` list (comma-separated) exempts ``host:port`` from the proxy."""
    host = host.strip("[]").rstrip(".").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if address is not None:
            try:
                network = ipaddress.ip_network(name, strict=False)
            except ValueError:
                continue  # a domain never matches an address
            if address.version == network.version and address in network:
                return True
            continue
        name = name.removeprefix("*").lstrip(".").rstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """``(name, port)`` of a ``NO_PROXY`` entry; IPv6 addresses keep their colons."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
        return name, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None


def proxy_for(
    scheme: str,
    host: str,
    port: int,
    *,
    proxies: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, str]:
    """``(url, source)`` of the proxy an origin is reached through, or ``(None, reason)``;
    ``proxies`` (botocore's mapping), when given, alone decides, else the environment."""
    if proxies is not None:
        url = proxies.get(scheme)
        return (url, f"proxies[{scheme!r}]") if url else (None, "proxies")
    env = os.environ if environ is None else environ
    found = _environment_proxies(env)
    if scheme not in found:
        return None, f"no {scheme}_proxy"
    url, variable = found[scheme]
    no_proxy = found.get("no", ("", ""))[0]
    if no_proxy and no_proxy_matches(host, port, no_proxy):
        return None, "no_proxy"
    return url, variable


def _environment_proxies(env: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``(value, variable)`` of the ``*_proxy`` variables by scheme, read as
    :func:`urllib.request.getproxies_environment` reads them."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in env.items():
        lowered = name.lower()
        if value and lowered.endswith("_proxy"):
            found[lowered[:-6]] = (value, name)
    if "REQUEST_METHOD" in env:
        found.pop("http", None)
    for name, value in env.items():
        if name.endswith("_proxy"):
            if value:
                found[name[:-6]] = (value, name)
            else:
                found.pop(name[:-6], None)
    return found


def tls_context(choice: TrustChoice) -> ssl.SSLContext:
    """The TLS context of a trust choice (ConfigurationError for an unusable bundle file)."""
    if not choice.verify:
        logger.warning(
            "TLS certificate verification is OFF for the S3 endpoint (%s=False): "
            "anyone on the path can read and change the requests",
            choice.source,
        )
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if choice.bundle is None:
        return ssl.create_default_context()
    if not os.path.isfile(choice.bundle):
        raise ConfigurationError(
            f"CA bundle {choice.bundle!r} (from {choice.source}) does not exist or is not a file"
        )
    try:
        return ssl.create_default_context(cafile=choice.bundle)
    except ssl.SSLError as exc:
        raise ConfigurationError(
            f"CA bundle {choice.bundle!r} (from {choice.source}) holds no usable certificate: {exc}"
        ) from None


class Network(NamedTuple):
    """What a connection pool is given: its TLS context and its forward proxy."""

    tls: ssl.SSLContext | None
    proxy: Proxy | None


def network_for(
    scheme: str,
    host: str,
    *,
    proxies: Mapping[str, str] | None = None,
    verify: bool | str | None = None,
    ca_bundle: str | None = None,
    session: Any = None,
    environ: Mapping[str, str] | None = None,
) -> Network:
    """The TLS context and proxy of the pools reaching ``scheme://host[:port]``, as
    :func:`proxy_for` and :func:`trust_choice` find them. An ``http`` origin's trust is
    not read (a stale ``AWS_CA_BUNDLE`` does not stop a plain-HTTP MinIO)."""
    parts = urlsplit(f"{scheme}://{host}")
    port = parts.port or (443 if scheme == "https" else 80)
    url, source = proxy_for(scheme, parts.hostname or host, port, proxies=proxies, environ=environ)
    proxy = None
    if url is not None:
        try:
            proxy = Proxy.from_url(url)
        except ValueError as exc:
            bypass = "" if proxies is not None else f", or list {parts.hostname} in NO_PROXY"
            raise ConfigurationError(
                f"{exc} (from {source}): set {source} to http://host:port{bypass}"
            ) from None
    choice = trust_choice(verify, ca_bundle, session, environ)
    tls = tls_context(choice) if scheme == "https" else None
    return Network(tls, proxy)
