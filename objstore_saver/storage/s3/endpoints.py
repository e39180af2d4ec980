"""Where an S3 store's requests go, and how both transports' stores describe themselves.

Hosts on AWS come from botocore's own endpoint rule set, given what a botocore
client gives it, so every partition gets the host boto3 would use.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit

from botocore.endpoint_provider import EndpointProvider
from botocore.exceptions import EndpointResolutionError
from botocore.loaders import create_loader

from objstore_saver.storage.base import RequestFacts
from objstore_saver.storage.s3.protocol import Addressing
from objstore_saver.storage.s3.settings import (
    S3Encryption,
    S3Settings,
    checked_endpoint,
    endpoint_variants,
    public_url,
)


@functools.lru_cache(maxsize=1)
def _s3_rules() -> EndpointProvider:
    loader = create_loader()
    return EndpointProvider(
        ruleset_data=loader.load_service_model("s3", "endpoint-rule-set-1"),
        partition_data=loader.load_data("partitions"),
    )


def aws_addressing(
    bucket: str,
    region: str,
    style: str = "auto",
    *,
    fips: bool = False,
    dualstack: bool = False,
    global_us_east_1: bool = True,
) -> Addressing:
    """How a bucket on AWS is addressed, as botocore's rule set says (``auto``: path style
    for a dotted name); ValueError, with its reason, when it refuses the combination."""
    try:
        resolved = _s3_rules().resolve_endpoint(
            Bucket=bucket,
            Region=region,
            UseFIPS=fips,
            UseDualStack=dualstack,
            ForcePathStyle=style == "path",
            Accelerate=False,
            UseGlobalEndpoint=global_us_east_1,
        )
    except EndpointResolutionError as exc:
        variants = [name for name, on in (("FIPS", fips), ("dual-stack", dualstack)) if on]
        shown = f"region {region!r}" + (f" with {' and '.join(variants)}" if variants else "")
        raise ValueError(f"S3 bucket {bucket!r}: no AWS endpoint for {shown}: {exc}") from None
    parts = urlsplit(resolved.url)
    origin = f"{parts.scheme}://{parts.netloc}"
    return Addressing(parts.scheme, parts.netloc, parts.path.rstrip("/"), origin)


def custom_addressing(
    bucket: str, endpoint_url: str, style: str = "auto", source: str = "endpoint_url"
) -> Addressing:
    """How a bucket on a configured endpoint (MinIO, Ceph...) is addressed: path style
    (``endpoint/bucket``) unless ``style`` is ``virtual`` (``bucket.host``)."""
    parts = checked_endpoint(endpoint_url, source)
    path = parts.path.rstrip("/")
    if style == "virtual":
        if "." in bucket and parts.scheme == "https":
            raise ValueError(
                f"S3 bucket {bucket!r}: a dotted bucket name cannot be addressed "
                "virtual-hosted over https (the certificate would not match); use "
                "addressing_style='path'"
            )
        host = f"{bucket}.{parts.netloc}"
        return Addressing(parts.scheme, host, path, f"{parts.scheme}://{host}{path}")
    return Addressing(parts.scheme, parts.netloc, f"{path}/{bucket}", public_url(endpoint_url))


def resolve_addressing(
    bucket: str,
    endpoint_url: str | None,
    endpoint_source: str,
    region: str,
    style: str,
    session: Any,
) -> Addressing:
    """The addressing of a bucket: on its configured endpoint, else on AWS."""
    if endpoint_url is not None:
        return custom_addressing(bucket, endpoint_url, style, endpoint_source or "endpoint_url")
    variants = endpoint_variants(session)
    return aws_addressing(
        bucket,
        region,
        style,
        fips=variants["UseFIPS"],
        dualstack=variants["UseDualStack"],
        global_us_east_1=variants["UseGlobalEndpoint"],
    )


def request_facts(
    prefix: str, bucket: str, endpoint_url: str | None, region: str | None
) -> RequestFacts:
    """How an S3 transport's requests are named: ``S3.PutObject``, AWS SDK attributes."""
    common: dict[str, Any] = {"rpc.system": "aws-api", "rpc.service": "S3", "aws.s3.bucket": bucket}
    endpoint = urlsplit(endpoint_url or "")
    if endpoint.hostname:
        common["server.address"] = endpoint.hostname
        common["server.port"] = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    if region:
        common["cloud.region"] = region
    return RequestFacts("S3", s3=True, key_prefix=prefix, attributes=common)


class S3StoreFacts:
    """What both S3 stores say of themselves: their settings and location."""

    _settings: S3Settings
    _location: str

    @property
    def bucket(self) -> str:
        """Bucket name."""
        return self._settings.bucket

    @property
    def prefix(self) -> str:
        """Normalized key prefix, ``""`` or ending with ``/``."""
        return self._settings.prefix

    @property
    def encryption(self) -> S3Encryption | None:
        """The server-side encryption of every object, ``None`` for the bucket's default."""
        return self._settings.encryption

    @property
    def settings(self) -> S3Settings:
        """What the store was built with (settings not given are read at construction)."""
        return self._settings

    @property
    def location(self) -> str:
        """``s3://bucket/prefix``, plus `` at <endpoint>`` for a custom endpoint."""
        return self._location

    def __repr__(self) -> str:
        tail = "" if self.encryption is None else f", encryption={self.encryption!r}"
        return f"{type(self).__name__}({self._location!r}{tail})"
