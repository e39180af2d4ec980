"""Every S3 setting as :class:`S3Settings` (with :class:`ClientSettings` and
:class:`RetrySettings`); one left ``None`` is resolved here in boto3's order
(docs/configuration.md), but an origin's proxy per host (:mod:`.network`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from objstore_saver.errors import ConfigurationError
from objstore_saver.storage.base import validate_key
from objstore_saver.storage.s3.retry import DEFAULT_BACKOFF_BASE
from objstore_saver.storage.s3.rules import check_bucket
from objstore_saver.storage.s3.sse import (
    EncryptionNotConfirmedError as EncryptionNotConfirmedError,
    S3Encryption,
)

#: Defaults of the client options (see ``docs/s3-compatibility.md``).
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_POOL_CONNECTIONS = 64
#: Default of ``max_connections`` (the lean transport's): open connections per pool.
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_RETRY_MODE = "standard"
RETRY_MODES = ("standard", "adaptive")
#: S3 transports by name: the lean one (default) and boto3's client.
TRANSPORTS = ("lean", "boto3")
#: Environment variables naming the endpoint, most specific first (as boto3 reads them).
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: Environment variables naming the region, most specific first.
REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")
#: Addressing styles, as botocore's ``s3.addressing_style`` names them.
ADDRESSING_STYLES = ("auto", "path", "virtual")


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How connections are made (timeouts in seconds); checked when built.

    ``max_pool_connections``: idle connections kept per pool (boto3: the
    pool's size; at least the threads using the store at once).
    ``max_connections``: connections open at once per lean pool (the blocking
    one and each event loop's); a request beyond it waits up to
    ``read_timeout`` for one, then fails as not sent (and is retried).
    ``proxies``: by origin scheme, as botocore's ``Config(proxies=...)``;
    given, it alone decides, ``None``: ``HTTPS_PROXY``/``HTTP_PROXY`` unless
    ``NO_PROXY`` lists the origin; the lean transport takes ``http://`` ones only.
    ``verify``: ``False`` turns TLS verification off (logged as a warning), a
    path is a CA bundle. ``ca_bundle``: replaces the system's trust store;
    ``None``: as :func:`trust_choice` finds it.
    """

    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_pool_connections: int = DEFAULT_MAX_POOL_CONNECTIONS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    proxies: Mapping[str, str] | None = field(default=None, repr=False)  # may hold a password
    verify: bool | str | None = None
    ca_bundle: str | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout"):
            object.__setattr__(self, name, positive_seconds(name, getattr(self, name)))
        for name in ("max_pool_connections", "max_connections"):
            at_least_one(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """How often a request is tried (``max_attempts``, the first included) and how
    long between; checked when built. ``retry_mode``: boto3 only (the lean
    transport retries like ``"standard"``). ``backoff_base``: lean only, the
    largest wait before the second attempt, doubling per attempt (full jitter,
    capped at 20 s).
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry_mode: str = DEFAULT_RETRY_MODE
    backoff_base: float = DEFAULT_BACKOFF_BASE

    def __post_init__(self) -> None:
        at_least_one("max_attempts", self.max_attempts)
        if self.retry_mode not in RETRY_MODES:
            raise ValueError(
                f"retry_mode must be 'standard' or 'adaptive', got {self.retry_mode!r}"
            )
        base = self.backoff_base
        if isinstance(base, bool) or not isinstance(base, int | float) or not 0 <= base <= 20:
            raise ValueError(f"backoff_base must be between 0 and 20 seconds, got {base!r}")
        object.__setattr__(self, "backoff_base", float(base))


#: Options only the lean transport takes, and only boto3's.
LEAN_ONLY_OPTIONS = ("backoff_base", "extra_get_headers", "extra_put_headers", "max_connections")
BOTO3_ONLY_OPTIONS = ("extra_get_args", "extra_put_args", "retry_mode")
_CLIENT_OPTIONS = frozenset(f.name for f in fields(ClientSettings))
_RETRY_OPTIONS = frozenset(f.name for f in fields(RetrySettings))
_HEADERS_OF_THE_STORE = ("if-none-match", "range", "authorization", "host")


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where an S3 store keeps its objects and how it reaches them; checked when built.

    Build one directly or with :meth:`from_options` (the flat keyword options
    ``from_url``, ``from_bucket`` and the stores take); the stores take it as
    ``settings=``. ``bucket``: not empty, not a directory bucket. ``prefix``:
    normalized to ``""`` or ending with ``/``. ``endpoint_url`` (path-style
    addressed, user info refused), ``region_name`` and ``addressing_style``
    (``"path"``, ``"virtual"`` or ``"auto"``) left ``None`` are found by
    :func:`configured_endpoint`, :func:`configured_region` and
    :func:`configured_style`. ``encryption``: every PUT answer must confirm
    it; ``None`` leaves it to the bucket's default. ``extra_put_headers`` /
    ``extra_get_headers`` (lean; names lower-cased) and ``extra_put_args`` /
    ``extra_get_args`` (boto3) go with every PUT / GET.
    """

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    region_name: str | None = None
    addressing_style: str | None = None
    encryption: S3Encryption | None = None
    extra_put_headers: Mapping[str, str] = field(default_factory=dict)
    extra_get_headers: Mapping[str, str] = field(default_factory=dict)
    extra_put_args: Mapping[str, Any] = field(default_factory=dict)
    extra_get_args: Mapping[str, Any] = field(default_factory=dict)
    client: ClientSettings = field(default_factory=lambda: ClientSettings())
    retry: RetrySettings = field(default_factory=lambda: RetrySettings())

    def __post_init__(self) -> None:
        check_bucket(self.bucket)
        object.__setattr__(self, "prefix", bucket_prefix(self.prefix))
        if self.encryption is not None and not isinstance(self.encryption, S3Encryption):
            raise ValueError(
                f"encryption must be an S3Encryption, not {type(self.encryption).__name__}"
            )
        for name in ("extra_put_headers", "extra_get_headers"):
            headers = {k.lower(): v for k, v in getattr(self, name).items()}
            object.__setattr__(self, name, headers)
        clash = sorted(
            name
            for name in (*self.extra_put_headers, *self.extra_get_headers)
            if name.startswith("x-amz-server-side-encryption")
            or name in _HEADERS_OF_THE_STORE
            or (name.startswith("x-amz-") and name[6:] in ("date", "content-sha256"))
        )
        if clash:
            raise ValueError(
                f"extra headers {', '.join(clash)} are set by the store itself; "
                "use encryption= for server-side encryption"
            )
        if self.encryption is not None:
            clash = sorted(
                (set(self.encryption.put_args()) & set(self.extra_put_args))
                | (set(self.encryption.get_args()) & set(self.extra_get_args))
            )
            if clash:
                raise ValueError(
                    f"extra arguments {', '.join(clash)} clash with encryption={self.encryption!r}"
                )

    @classmethod
    def from_options(
        cls, bucket: str, prefix: str = "", *, transport: str = "lean", **options: Any
    ) -> S3Settings:
        """The settings of the flat keyword options (``None`` keeps a default); TypeError
        for an option no S3 store takes, ValueError for an unknown transport, an option
        of the other one, or out of range."""
        given = {name: value for name, value in options.items() if value is not None}
        check_transport(transport, given)
        unknown = sorted(set(options) - SETTINGS_OPTIONS)
        if unknown:
            raise TypeError(f"S3Settings got an unexpected option {unknown[0]!r}")
        check_bucket(bucket)
        bucket_prefix(prefix)

        def pick(names: Iterable[str]) -> dict[str, Any]:
            return {name: given.pop(name) for name in names if name in given}

        retry = RetrySettings(**pick(_RETRY_OPTIONS))
        client = ClientSettings(**pick(_CLIENT_OPTIONS))
        return cls(bucket, prefix, client=client, retry=retry, **given)

    def changed(self) -> dict[str, Any]:
        """The options set to other than their defaults, by name."""
        default = S3Settings(self.bucket)
        return {
            f.name: getattr(mine, f.name)
            for mine, base in (
                (self.client, default.client),
                (self.retry, default.retry),
                (self, default),
            )
            for f in fields(mine)
            if f.name not in ("bucket", "prefix", "client", "retry")
            and getattr(mine, f.name) != getattr(base, f.name)
        }


#: The options :meth:`S3Settings.from_options` takes: every field, by name.
SETTINGS_OPTIONS = frozenset(
    _CLIENT_OPTIONS
    | _RETRY_OPTIONS
    | ({f.name for f in fields(S3Settings)} - {"bucket", "prefix", "client", "retry"})
)
#: Every option ``from_url`` and ``from_bucket`` hand the store (the lean
#: one's ``session`` too; boto3's ``client`` comes through ``from_client``).
S3_OPTIONS = SETTINGS_OPTIONS | {"session"}
#: The options of each transport's store.
STORE_OPTIONS: dict[str, frozenset[str]] = {
    "lean": S3_OPTIONS - set(BOTO3_ONLY_OPTIONS),
    "boto3": SETTINGS_OPTIONS - set(LEAN_ONLY_OPTIONS),
}


#: What configures boto3's client: not with a client passed in.
BUILT_INTO_THE_CLIENT = tuple(
    sorted(
        (_CLIENT_OPTIONS | _RETRY_OPTIONS | {"endpoint_url", "region_name", "addressing_style"})
        - set(LEAN_ONLY_OPTIONS)
    )
)


def check_transport(transport: str, given: Mapping[str, Any]) -> None:
    """Refuse (ValueError) an unknown transport or an option set in ``given`` it does not take."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    if transport == "boto3":
        lean_only = sorted(set((*LEAN_ONLY_OPTIONS, "session")) & set(given))
        if lean_only:
            raise ValueError(
                f"options of transport='lean' only: {', '.join(lean_only)} "
                "(boto3's Boto3S3Store takes client= or its own options instead)"
            )
        return
    retry_mode = given.get("retry_mode")
    if retry_mode not in (None, DEFAULT_RETRY_MODE):
        raise ValueError(
            f"retry_mode {retry_mode!r} needs transport='boto3'; the lean "
            "transport retries like botocore's 'standard' mode"
        )
    boto3_only = sorted(set(BOTO3_ONLY_OPTIONS) - {"retry_mode"} & set(given))
    if boto3_only:
        raise ValueError(
            f"options of transport='boto3' only: {', '.join(boto3_only)} "
            "(the lean transport takes extra_put_headers / extra_get_headers instead)"
        )


def store_settings(
    owner: str,
    transport: str,
    bucket: str | None,
    prefix: str,
    settings: S3Settings | None,
    options: dict[str, Any],
) -> S3Settings:
    """What a store of ``transport`` is built with: ``settings``, or its keyword options."""
    if settings is None:
        unexpected = sorted(set(options) - STORE_OPTIONS[transport])
        if unexpected:
            raise TypeError(
                f"{owner}.__init__() got an unexpected keyword argument {unexpected[0]!r}"
            )
        return S3Settings.from_options(bucket or "", prefix, transport=transport, **options)
    if bucket is not None or prefix or options:
        raise TypeError(f"{owner}(settings=...) takes no bucket, prefix or other option")
    check_transport(transport, settings.changed())
    return settings


def public_url(url: str) -> str:
    """``url`` without any user info, so errors never carry credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def bucket_prefix(prefix: str) -> str:
    """A key prefix normalized to ``""`` or a valid key followed by ``/`` (else InvalidKeyError)."""
    prefix = prefix.lstrip("/")
    if not prefix:
        return ""
    validate_key(prefix.rstrip("/"))
    return prefix.rstrip("/") + "/"


def positive_seconds(name: str, value: Any) -> float:
    """``value`` as seconds if it is a finite positive number, else ValueError naming ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def at_least_one(name: str, value: Any) -> int:
    """``value`` if it is an integer of at least 1, else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")
    return value


def botocore_session(session: Any) -> Any:
    """The botocore session of a boto3 one, or ``session`` itself."""
    return getattr(session, "_session", session)


def configured_endpoint(endpoint_url: str | None, session: Any) -> tuple[str | None, str]:
    """The endpoint an S3 store talks to and where it came from, in boto3's order:
    the argument, ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the profile's services
    section (ConfigurationError if missing), its ``endpoint_url``, else none (AWS); all
    but the argument ignored when ``ignore_configured_endpoint_urls`` is set."""
    if endpoint_url is not None:
        return endpoint_url, "endpoint_url"
    core = botocore_session(session)
    if core.get_config_variable("ignore_configured_endpoint_urls"):
        return None, ""
    for name in ENDPOINT_ENV:
        value = os.environ.get(name)
        if value:
            return value, name
    profile = core.get_scoped_config()
    section = profile.get("services")
    if section:
        services = core.full_config.get("services", {}).get(section)
        if not services:
            raise ConfigurationError(
                f"the AWS profile names the services section {section!r}, which the "
                "config file does not have"
            )
        value = services.get("s3", {}).get("endpoint_url")
        if value:
            return value, f"endpoint_url of [services {section}] s3 in the AWS config file"
    value = profile.get("endpoint_url")
    if value:
        return value, "endpoint_url of the AWS profile"
    return None, ""


def checked_endpoint(endpoint_url: str, source: str = "endpoint_url") -> SplitResult:
    """The parts of an endpoint URL; ValueError naming ``source`` for user info or not http(s)."""
    parts = urlsplit(endpoint_url)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{source} {public_url(endpoint_url)!r} carries user info: give "
            "credentials through boto3's chain (environment, profile, role) instead"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{source} {public_url(endpoint_url)!r} is not an http:// or https:// URL")
    return parts


def configured_region(region_name: str | None, session: Any) -> str:
    """The region requests are signed for: the argument, the session's own, ``AWS_REGION``,
    ``AWS_DEFAULT_REGION``, the profile's, else ``us-east-1``."""
    if region_name is not None:
        return region_name
    core = botocore_session(session)
    candidates = [core.get_config_variable("region", methods=("instance",))]
    candidates += [os.environ.get(name) for name in REGION_ENV]
    candidates.append(core.get_config_variable("region"))
    return next((str(region) for region in candidates if region), "us-east-1")


def s3_config(session: Any) -> dict[str, Any]:
    """The profile's ``s3`` section as botocore reads it (environment overrides included)."""
    return dict(botocore_session(session).get_config_variable("s3") or {})


def configured_style(argument: str | None, session: Any) -> tuple[str, str]:
    """The addressing style and its source: the argument, the profile's, else ``auto``."""
    if argument is not None:
        style, source = argument, "addressing_style"
    else:
        configured = s3_config(session).get("addressing_style")
        if configured is None:
            return "auto", "default"
        style, source = configured, "s3.addressing_style of the AWS profile"
    if style not in ADDRESSING_STYLES:
        raise ValueError(f"{source} must be one of {', '.join(ADDRESSING_STYLES)}, got {style!r}")
    return style, source


def endpoint_variants(session: Any) -> dict[str, bool]:
    """The rule set's ``UseFIPS``, ``UseDualStack`` and ``UseGlobalEndpoint`` inputs, as
    botocore reads them (the profile's ``s3`` section first for dual-stack)."""
    core = botocore_session(session)
    s3 = s3_config(session)
    dualstack = s3.get("use_dualstack_endpoint")
    if dualstack is None:
        dualstack = core.get_config_variable("use_dualstack_endpoint")
    regional = s3.get("us_east_1_regional_endpoint", "legacy")
    if regional not in ("legacy", "regional"):
        raise ValueError(
            f"s3 us_east_1_regional_endpoint must be 'legacy' or 'regional', got {regional!r}"
        )
    return {
        "UseFIPS": bool(core.get_config_variable("use_fips_endpoint")),
        "UseDualStack": bool(dualstack),
        "UseGlobalEndpoint": regional == "legacy",
    }


@dataclass(frozen=True, slots=True)
class TrustChoice:
    """How ``https`` origins are verified: ``verify`` (False only when turned off), the
    CA ``bundle`` replacing the system's trust store, and the ``source`` of the choice."""

    verify: bool
    bundle: str | None
    source: str


def trust_choice(
    verify: bool | str | None = None,
    ca_bundle: str | None = None,
    session: Any = None,
    environ: Mapping[str, str] | None = None,
) -> TrustChoice:
    """Which CA bundle verifies ``https`` origins, in botocore's order: ``verify``
    (False or a path), ``ca_bundle``, ``AWS_CA_BUNDLE``, the profile's ``ca_bundle``,
    ``REQUESTS_CA_BUNDLE``, the system's. ValueError when ``verify`` and
    ``ca_bundle`` contradict each other."""
    env = os.environ if environ is None else environ
    if verify is not None and not isinstance(verify, bool | str):
        raise ValueError(f"verify must be True, False or a CA bundle path, got {verify!r}")
    if isinstance(verify, str):
        if ca_bundle is not None and ca_bundle != verify:
            raise ValueError(f"verify={verify!r} and ca_bundle={ca_bundle!r} name different files")
        return TrustChoice(True, verify, "verify")
    if verify is False:
        if ca_bundle is not None:
            raise ValueError("verify=False turns verification off: ca_bundle cannot be given too")
        return TrustChoice(False, None, "verify")
    if ca_bundle is not None:
        return TrustChoice(True, ca_bundle, "ca_bundle")
    if env.get("AWS_CA_BUNDLE"):
        return TrustChoice(True, env["AWS_CA_BUNDLE"], "AWS_CA_BUNDLE")
    if session is not None:
        profile = botocore_session(session).get_scoped_config()
        if profile.get("ca_bundle"):
            return TrustChoice(True, str(profile["ca_bundle"]), "ca_bundle of the AWS profile")
    if env.get("REQUESTS_CA_BUNDLE"):
        return TrustChoice(True, env["REQUESTS_CA_BUNDLE"], "REQUESTS_CA_BUNDLE")
    return TrustChoice(True, None, "the system's trust store")
