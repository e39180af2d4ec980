"""Reading HTTP/1.1 answers: the head's status line and header fields."""

from __future__ import annotations

#: Longest status line plus headers accepted, in bytes.
MAX_HEAD_BYTES = 64 * 1024


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read."""


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers of an answer's head (without its blank line).

    Repeated headers are joined by ``, ``. An HTTP/1.0 answer without
    ``keep-alive`` gets ``connection: close``: its server closes the connection.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if parts[0] == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers["connection"] = "close"
    return int(parts[1]), headers
