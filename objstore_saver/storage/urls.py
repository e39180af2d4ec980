"""Opening a store: from a URL (``s3://bucket/prefix?...``, ``file:///path``, never with
secrets nor proxies) or a bucket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.s3.boto3_store import Boto3S3Store
from objstore_saver.storage.s3.lean import LeanS3Store
from objstore_saver.storage.s3.settings import TRANSPORTS, S3Settings, checked_endpoint

__all__ = ["StoreURL", "open_s3_store", "parse_url", "redact_url", "store_from_url"]

#: Query parameters an ``s3://`` URL accepts, with the aliases people type.
_S3_PARAMS = {
    "endpoint_url": "endpoint_url",
    "endpoint": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
    "transport": "transport",
    "ca_bundle": "ca_bundle",
    "verify": "verify",
}

#: Query parameter names that would put a secret in the URL: refused.
_SECRET_PARAMS = frozenset(
    {
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "access_key",
        "secret_key",
        "secret",
        "password",
        "token",
        "session_token",
    }
)


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL: ``s3`` (bucket, prefix, endpoint, region, TLS) or ``file`` (path)."""

    scheme: str
    bucket: str = ""
    prefix: str = ""
    endpoint_url: str | None = None
    region_name: str | None = None
    path: str = ""
    transport: str = "lean"
    ca_bundle: str | None = None
    verify: bool | None = None

    def __str__(self) -> str:
        if self.scheme == "file":
            return f"file://{self.path}"
        query = []
        if self.endpoint_url:
            query.append(f"endpoint_url={self.endpoint_url}")
        if self.region_name:
            query.append(f"region={self.region_name}")
        if self.transport != "lean":
            query.append(f"transport={self.transport}")
        if self.ca_bundle:
            query.append(f"ca_bundle={self.ca_bundle}")
        if self.verify is not None:
            query.append(f"verify={'true' if self.verify else 'false'}")
        tail = ("?" + "&".join(query)) if query else ""
        return f"s3://{self.bucket}/{self.prefix}{tail}"


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (other text unchanged)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if not parts.netloc or "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    safe = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    return urlunsplit((parts.scheme, safe, parts.path, parts.query, parts.fragment))


def parse_url(url: str) -> StoreURL:
    """Parse an object store URL (docs/configuration.md, "The URL").

    ``s3://bucket[/prefix][?endpoint_url=URL&region=NAME&transport=T]``, plus
    ``ca_bundle=/path/to/ca.pem`` and ``verify=false`` (a warning) or ``true``;
    ``transport`` is ``lean`` (default) or ``boto3``. ``file:///absolute/path``.
    ConfigurationError, naming the URL without credentials: an unknown scheme,
    no bucket or path, credentials in the URL, an unknown query parameter.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError("object store URL is empty: use s3://bucket/prefix or file:///dir")
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise ConfigurationError(
            f"object store URL {redact_url(url)!r} is invalid: {exc}"
        ) from None
    shown = redact_url(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"object store URL {shown!r} carries credentials: URLs must not hold secrets; "
            "use boto3's credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "an instance role) instead"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"object store URL {shown!r}: a file URL is file:///absolute/path "
                f"(found host {parts.netloc!r})"
            )
        if parts.query:
            raise ConfigurationError(f"object store URL {shown!r}: file URLs take no query")
        path = unquote(parts.path)
        if not path or path == "/":
            raise ConfigurationError(f"object store URL {shown!r} names no directory")
        return StoreURL("file", path=path)
    if parts.scheme != "s3":
        raise ConfigurationError(
            f"object store URL {shown!r}: unknown scheme {parts.scheme!r}; "
            "use s3://bucket/prefix or file:///dir"
        )
    bucket = parts.netloc
    if not bucket:
        raise ConfigurationError(f"object store URL {shown!r} names no bucket")
    options: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        lowered = name.lower()
        if lowered in _SECRET_PARAMS:
            raise ConfigurationError(
                f"object store URL s3://{bucket}/... carries the secret parameter {name!r}: "
                "URLs must not hold secrets; use boto3's credential chain instead"
            )
        if lowered not in _S3_PARAMS:
            raise ConfigurationError(
                f"object store URL {shown!r}: unknown parameter {name!r} "
                f"(known: endpoint_url, region, transport, ca_bundle, verify)"
            )
        if not value:
            raise ConfigurationError(f"object store URL {shown!r}: parameter {name!r} is empty")
        options[_S3_PARAMS[lowered]] = value
    endpoint = options.get("endpoint_url")
    if endpoint is not None:
        try:  # the check both S3 transports make, told as a URL's error
            checked_endpoint(endpoint, f"object store URL s3://{bucket}/...: endpoint_url")
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc
    verify_text = options.get("verify")
    if verify_text is not None and verify_text.lower() not in ("true", "false"):
        raise ConfigurationError(
            f"object store URL {shown!r}: verify must be true or false, got {verify_text!r} "
            "(a CA bundle goes in ca_bundle=)"
        )
    transport = options.get("transport", "lean")
    if transport not in TRANSPORTS:
        raise ConfigurationError(
            f"object store URL {shown!r}: unknown transport {transport!r} "
            f"(known: {', '.join(TRANSPORTS)})"
        )
    return StoreURL(
        "s3",
        bucket=bucket,
        prefix=unquote(parts.path).lstrip("/"),
        endpoint_url=endpoint,
        region_name=options.get("region_name"),
        transport=transport,
        ca_bundle=options.get("ca_bundle"),
        verify=None if verify_text is None else verify_text.lower() == "true",
    )


def store_from_url(url: str, *, check: bool = True, **s3_options: Any) -> ObjectStore:
    """Build the store a URL names and, by default, check it can be used.

    ``check``: for S3, one ``HeadBucket``, so a missing bucket, denied access, a
    wrong region or an endpoint that is down fails here (StoreUnavailableError),
    not at the first turn. ``**s3_options``: of the transport's store, ``None``
    keeps the default. ConfigurationError: the URL is invalid, sets an option
    given here too, or is a ``file://`` URL given S3 options.
    """
    spec = parse_url(url)
    given = {name: value for name, value in s3_options.items() if value is not None}
    if spec.scheme == "file":
        if given:
            raise ConfigurationError(
                f"object store URL {redact_url(url)!r} is a local directory: the S3 options "
                f"{', '.join(sorted(given))} do not apply to it"
            )
        return LocalStore(spec.path)
    in_url = {
        name: getattr(spec, name)
        for name in ("endpoint_url", "region_name", "ca_bundle", "verify")
        if getattr(spec, name) is not None
    }
    both = sorted(set(in_url) & set(given))
    if both:
        raise ConfigurationError(
            f"object store URL {redact_url(url)!r} sets {', '.join(both)}, given as an "
            "option too: set it in one place"
        )
    store = open_s3_store(spec.bucket, spec.prefix, transport=spec.transport, **given, **in_url)
    if check:
        store.check()
    return store


def open_s3_store(
    bucket: str, prefix: str = "", *, transport: str = "lean", **options: Any
) -> LeanS3Store | Boto3S3Store:
    """An S3 store on the named transport (``lean`` or ``boto3``); ``from_url`` and
    ``from_bucket`` call it. ``options``: :data:`~.s3.settings.S3_OPTIONS`, ``None`` kept."""
    session = options.pop("session", None)
    if transport == "boto3" and session is not None:
        options["session"] = session  # refused, naming it
    settings = S3Settings.from_options(bucket, prefix, transport=transport, **options)
    if transport == "boto3":
        return Boto3S3Store(settings=settings)
    return LeanS3Store(settings=settings, session=session)
