"""HTTP/1.1 messages as plain values: what a pool sends and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One signed HTTP request; ``target`` is the path plus query, already encoded."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """One HTTP answer; header names are lower-case."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class TransportFailure:
    """No answer arrived: the connection failed or timed out. ``sent`` is False only when
    the request surely never left (connect failure); else the server may have acted on it."""

    error: str
    sent: bool = True


#: What one attempt of a request ends with.
Reply = HttpResponse | TransportFailure
