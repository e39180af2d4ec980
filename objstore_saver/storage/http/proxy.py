"""A forward proxy a pool reaches its origin through.

Plain ``http`` origins are asked through the proxy in absolute form
(``GET http://host/path``); ``https`` origins through a ``CONNECT`` tunnel, in
which TLS is then spoken with the origin itself, so the proxy never sees the
request or its signature.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True, slots=True)
class Proxy:
    """Where a forward proxy listens and how to authenticate to it.

    Attributes:
        host: The proxy's host name or address.
        port: Its port.
        authorization: The ``Proxy-Authorization`` header value, if the URL
            carried a user; never shown by ``repr``.
    """

    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def from_url(cls, url: str) -> Proxy:
        """The proxy of a URL such as ``http://user:pass@proxy.internal:3128``.

        A URL without a scheme is taken as ``http://``, as curl and botocore
        do. Only ``http`` proxies are supported (the tunnel carries TLS).

        Raises:
            ValueError: the URL is not an ``http`` proxy URL with a host; the
                message names the proxy without its credentials.
        """
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
