"""boto3's S3 client as :class:`~.boto3_store.Boto3S3Store` builds it: its settings
resolved as the lean transport's, PutObject sent without ``Expect: 100-continue``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.config

from objstore_saver.storage.s3.network import tls_context
from objstore_saver.storage.s3.settings import (
    S3Settings,
    checked_endpoint,
    configured_endpoint,
    configured_style,
    trust_choice,
)

_EXPECT_HOOK_ID = "objstore_saver.s3.drop-expect-100-continue"


def _drop_expect_header(request: Any, **_: Any) -> None:
    """Send PutObject bodies at once instead of waiting for ``100 Continue``.

    When a server answers ``Expect: 100-continue`` with an error before the body
    (Ceph RGW does), botocore leaves that status line on the pooled connection and
    the next PutObject on it hangs until the read timeout; our objects are small.
    """
    if "Expect" in request.headers:
        del request.headers["Expect"]


def build_client(settings: S3Settings) -> Any:
    """A boto3 S3 client with the bounded retries and timeouts of ``settings``."""
    retry, network = settings.retry, settings.client
    options: dict[str, Any] = {
        "retries": {"mode": retry.retry_mode, "total_max_attempts": retry.max_attempts},
        "connect_timeout": network.connect_timeout,
        "read_timeout": network.read_timeout,
        "max_pool_connections": network.max_pool_connections,
    }
    session = boto3.session.Session()
    # Resolved as the lean transport does: a configured endpoint selects path style.
    endpoint_url, source = configured_endpoint(settings.endpoint_url, session)
    style, _ = configured_style(settings.addressing_style, session)
    if endpoint_url is not None:
        checked_endpoint(endpoint_url, source or "endpoint_url")
        options["s3"] = {"addressing_style": "path" if style == "auto" else style}
    elif settings.addressing_style is not None:
        options["s3"] = {"addressing_style": style}
    if network.proxies is not None:
        options["proxies"] = dict(network.proxies)
    trust = trust_choice(network.verify, network.ca_bundle, session)
    client_verify: bool | str | None = None
    if not trust.verify:
        client_verify = False
        tls_context(trust)  # the same warning as the lean transport's
    elif trust.bundle is not None:
        if endpoint_url is None or urlsplit(endpoint_url).scheme == "https":
            tls_context(trust)  # a missing or unusable bundle is named here
        client_verify = trust.bundle
    return session.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=settings.region_name,
        verify=client_verify,
        config=botocore.config.Config(**options),
    )


def send_puts_without_waiting(client: Any) -> None:
    """Make ``client`` send PutObject bodies without ``Expect: 100-continue`` (idempotent)."""
    client.meta.events.register(
        "before-sign.s3.PutObject", _drop_expect_header, unique_id=_EXPECT_HOOK_ID
    )
