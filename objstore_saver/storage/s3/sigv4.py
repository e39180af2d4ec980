"""AWS Signature Version 4 of what the lean S3 transport sends, no I/O: header-based
auth, a known payload hash, a path already percent-encoded by the caller."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True, slots=True)
class Credentials:
    """A frozen set of AWS credentials (never shown by ``repr``)."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:
        return "Credentials(<hidden>)"


#: The RFC 3986 unreserved characters, which SigV4 leaves unencoded.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def quote_query(value: str) -> str:
    """Percent-encode a query name or value as SigV4 wants (RFC 3986 unreserved kept)."""
    if _UNRESERVED.fullmatch(value) is not None:
        return value
    return quote(value, safe="-_.~")


def canonical_query(params: Mapping[str, str]) -> str:
    """The query string, sorted and encoded; also what goes on the wire."""
    return "&".join(f"{quote_query(k)}={quote_query(v)}" for k, v in sorted(params.items()))


class Signer:
    """Signs requests for one region and service, caching the derived key per day."""

    __slots__ = ("_key_cache", "region", "service")

    def __init__(self, region: str, service: str = "s3") -> None:
        self.region = region
        self.service = service
        self._key_cache: tuple[str, str, bytes] | None = None

    def _signing_key(self, secret: str, day: str) -> bytes:
        cached = self._key_cache
        if cached is not None and cached[0] == day and cached[1] == secret:
            return cached[2]
        key = ("AWS4" + secret).encode()
        for part in (day, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._key_cache = (day, secret, key)
        return key

    def sign(
        self,
        method: str,
        host: str,
        path: str,
        query: str,
        headers: dict[str, str],
        payload_sha256: str,
        credentials: Credentials,
        now: datetime,
    ) -> None:
        """Add ``x-amz-date``, the content hash, the token and ``authorization`` to
        ``headers`` (lower-case names; ``query`` built by :func:`canonical_query`)."""
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        day = stamp[:8]
        headers["x-amz-date"] = stamp
        headers["x-amz-content-sha256"] = payload_sha256
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        signed = {"host": host}
        for name, value in headers.items():
            if name[:6] == "x-amz-" or name == "content-md5" or name == "content-type":
                signed[name] = value
        names = sorted(signed)
        canonical_headers = "".join([f"{n}:{' '.join(signed[n].split())}\n" for n in names])
        signed_names = ";".join(names)
        canonical = "\n".join(
            (method, path, query, canonical_headers, signed_names, payload_sha256)
        )
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            (ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest())
        )
        key = self._signing_key(credentials.secret_key, day)
        signature = hmac.digest(key, to_sign.encode(), "sha256").hex()
        headers["authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
