"""A forward proxy: ``http`` origins are asked through it in absolute form, ``https``
ones through a ``CONNECT`` tunnel (the proxy never sees the request)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True, slots=True)
class Proxy:
    """Where a forward proxy listens, and its ``Proxy-Authorization`` (never in ``repr``)."""

    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def from_url(cls, url: str) -> Proxy:
        """The proxy of a URL such as ``http://user:pass@proxy.internal:3128`` (no scheme:
        ``http://``, as curl and botocore do); another scheme, or no host, is a ValueError
        naming the proxy without its credentials."""
        text = url if "://" in url else f"http://{url}"
        parts = urlsplit(text)
        shown = f"{parts.scheme}://{parts.hostname or ''}" + (
            f":{parts.port}" if parts.port else ""
        )
        if parts.scheme != "http":
            raise ValueError(
                f"proxy {shown}: only http:// proxies are supported (HTTPS origins go "
                "through a CONNECT tunnel)"
            )
        if not parts.hostname:
            raise ValueError(f"proxy {url!r} names no host")
        authorization = None
        if parts.username is not None:
            user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            authorization = "Basic " + base64.b64encode(user.encode()).decode("ascii")
        return cls(parts.hostname, parts.port or 80, authorization)
