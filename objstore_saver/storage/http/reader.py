"""Reading HTTP/1.1 answers, sans I/O: one strict reader both pools feed bytes to
(docs/transport.md, "One strict reader"); anything else raises :class:`ProtocolError`."""

from __future__ import annotations

import re

from objstore_saver.storage.http.messages import HttpResponse

#: Longest status line plus headers accepted, in bytes (each interim answer too).
MAX_HEAD_BYTES = 64 * 1024
#: Longest chunk-size line or trailer line, in bytes.
MAX_LINE_BYTES = 8 * 1024
#: Interim (``1xx``) answers accepted before the final one.
MAX_INTERIM = 10
#: Trailer lines accepted after the last chunk.
MAX_TRAILERS = 32
#: Default cap on an answer's body, in bytes: 16x our largest object (2 MiB) or LIST page
#: (under 2 MB of XML); a 20 MB value stored whole by an older writer still fits.
MAX_BODY_BYTES = 32 * 1024 * 1024

_STATUS = re.compile(r"HTTP/1\.([0-9]) ([1-5][0-9][0-9])(?: [^\x00-\x08\x0a-\x1f\x7f]*)?")
# Possessive quantifiers: a line that fails is rejected in one pass, never backtracked.
_FIELD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]++:[ \t]*+[^\x00-\x08\x0a-\x1f\x7f]*+")
_FIELDS = re.compile(rf"(?:{_FIELD.pattern}\r\n)*+")
#: Name and value (leading blanks left out) of each line of lines ``_FIELDS`` matched.
_PAIRS = re.compile(r"([^:]++):[ \t]*+([^\r]*+)\r\n")
_DIGITS = re.compile(r"[0-9]{1,19}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")

# States of an AnswerReader.
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read."""


def _shown(line: str | bytes) -> str:
    return repr(line[:80])


def parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    """Status and lower-cased headers (repeats joined by ``, ``) of an answer's head; an
    HTTP/1.0 answer without ``keep-alive`` gets ``connection: close``, as its server closes."""
    text = head.decode("latin-1")
    first, _, fields = text.partition("\r\n")
    status = _STATUS.fullmatch(first)
    if status is None:
        raise ProtocolError(f"bad status line {_shown(first)}")
    headers: dict[str, str] = {}
    if fields:
        fields += "\r\n"
        if _FIELDS.fullmatch(fields) is None:  # one pass over all lines; then split them
            for line in fields.split("\r\n")[:-1]:
                if _FIELD.fullmatch(line) is None:
                    raise ProtocolError(f"bad header line {_shown(line)}")
            raise ProtocolError("bad header lines")  # unreachable: some line failed above
        for name, value in _PAIRS.findall(fields):
            name = name.lower()
            value = value.rstrip(" \t")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if status[1] == "0" and "keep-alive" not in headers.get("connection", "").lower():
        headers["connection"] = "close"
    return int(status[2]), headers


def _content_length(value: str, max_body: int) -> int:  # repeats must agree
    values = {v.strip() for v in value.split(",")} if "," in value else {value}
    if len(values) != 1:
        raise ProtocolError(f"conflicting Content-Length values {value[:80]!r}")
    (text,) = values
    if _DIGITS.fullmatch(text) is None:
        raise ProtocolError(
            f"Content-Length {text[:80]!r} is not a decimal number (19 digits at most)"
        )
    length = int(text)
    if length > max_body:
        raise ProtocolError(f"Content-Length {length} is over the {max_body}-byte body cap")
    return length


class AnswerReader:
    """The answer to one request, from the pieces :meth:`feed` gets in order (or
    :meth:`end` at the connection's end); then :attr:`leftover` holds the bytes past it
    and :attr:`reusable` says whether the connection may carry another request.
    ``bodiless``: no body whatever the headers say (``HEAD``, a ``CONNECT``'s 2xx).
    """

    __slots__ = (
        "_bodiless",
        "_buf",
        "_got",
        "_headers",
        "_interims",
        "_max_body",
        "_need",
        "_parts",
        "_state",
        "_status",
        "_trailers",
        "leftover",
        "reusable",
    )

    def __init__(self, *, bodiless: bool = False, max_body: int = MAX_BODY_BYTES) -> None:
        self._bodiless = bodiless
        self._max_body = max_body
        self._state = _HEAD
        self._buf: bytes = b""
        self._parts: list[bytes] = []
        self._got = 0
        self._need = 0
        self._interims = 0
        self._trailers = 0
        self._status = 0
        self._headers: dict[str, str] = {}
        self.leftover: bytes = b""
        self.reusable = False

    @classmethod
    def chunked_body(cls, max_body: int = MAX_BODY_BYTES) -> AnswerReader:
        """A reader past the head of a chunked answer (its answer: status 0, the chunks)."""
        reader = cls(max_body=max_body)
        reader._state = _CHUNK_SIZE
        reader._headers = {"transfer-encoding": "chunked"}
        return reader

    @property
    def status(self) -> int:
        """The status of the last head read (an interim one while reading on)."""
        return self._status

    @property
    def wanted(self) -> int:
        """Bytes needed next if known (a chunk and its CRLF), else 0 (a line): a caller that
        must not read past the answer (a relaying proxy) reads that many, or up to a CRLF."""
        if self._state == _CHUNK_DATA:
            return self._need + 2
        if self._state == _LENGTH:
            return self._need
        if self._state == _CHUNK_END:
            return 2 - len(self._buf)
        return 0

    def feed(self, data: bytes) -> HttpResponse | None:
        """Take the next bytes received; the answer once it is whole, else None."""
        buf = self._buf + data if self._buf else data
        self._buf = b""
        return self._run(buf, 0)

    def end(self) -> HttpResponse:
        """The connection reached its end: the answer if it was complete, else ProtocolError."""
        if self._state == _UNTIL_CLOSE:
            self._state = _DONE
            return self._answer(b"")
        if self._state == _HEAD and not self._buf and not self._interims:
            raise ProtocolError("connection closed by the server before an answer")
        if self._state in (_LENGTH, _CHUNK_DATA):
            raise ProtocolError(
                f"connection closed after {self._got} body bytes, {self._need} more announced"
            )
        raise ProtocolError("connection closed by the server inside an answer")

    def _run(self, buf: bytes, pos: int) -> HttpResponse | None:
        size = len(buf)
        while True:
            state = self._state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0 or end - pos > MAX_HEAD_BYTES:
                    if size - pos > MAX_HEAD_BYTES:
                        raise ProtocolError(f"answer head longer than {MAX_HEAD_BYTES} bytes")
                    break
                self._head(buf[pos:end])
                pos = end + 4
            elif state in (_LENGTH, _CHUNK_DATA):
                take = min(self._need, size - pos)
                if take:
                    self._parts.append(buf[pos : pos + take] if take < size or pos else buf)
                    pos += take
                    self._need -= take
                    self._got += take
                if self._need:
                    break
                self._state = _DONE if state == _LENGTH else _CHUNK_END
            elif state == _CHUNK_END:
                if size - pos < 2:
                    if size > pos and buf[pos] != 13:
                        raise ProtocolError("chunk not followed by CRLF")
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ProtocolError("chunk not followed by CRLF")
                pos += 2
                self._state = _CHUNK_SIZE
            elif state in (_CHUNK_SIZE, _TRAILERS):
                end = buf.find(b"\r\n", pos)
                if end < 0 or end - pos > MAX_LINE_BYTES:
                    if size - pos > MAX_LINE_BYTES:
                        what = "chunk-size" if state == _CHUNK_SIZE else "trailer"
                        raise ProtocolError(f"{what} line longer than {MAX_LINE_BYTES} bytes")
                    break
                line = buf[pos:end]
                pos = end + 2
                if state == _CHUNK_SIZE:
                    self._chunk_size(line)
                elif not line:
                    self._state = _DONE
                else:
                    self._trailer(line)
            elif state == _UNTIL_CLOSE:
                if size > pos:
                    self._got += size - pos
                    if self._got > self._max_body:
                        raise ProtocolError(f"body over the {self._max_body}-byte cap")
                    self._parts.append(buf[pos:] if pos else buf)
                return None
            if self._state == _DONE:
                return self._answer(buf[pos:] if pos < size else b"")
        if pos < size:
            self._buf = buf[pos:] if pos else buf
        return None

    def _head(self, head: bytes) -> None:  # an interim one, or the final one and its framing
        status, headers = parse_head(head)
        self._status = status
        if status < 200:
            if status == 101:
                raise ProtocolError("101 Switching Protocols to a request that asked no upgrade")
            self._interims += 1
            if self._interims > MAX_INTERIM:
                raise ProtocolError(f"more than {MAX_INTERIM} interim 1xx answers")
            return
        self._headers = headers
        self.reusable = "close" not in headers.get("connection", "").lower()
        if self._bodiless or status in (204, 304):
            self._state = _DONE
            return
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if coding is not None:
            if length is not None:
                raise ProtocolError("both Transfer-Encoding and Content-Length in one answer")
            if coding.strip().lower() != "chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding {coding[:80]!r}")
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._need = _content_length(length, self._max_body)
            self._state = _LENGTH if self._need else _DONE
        else:
            self._state = _UNTIL_CLOSE
            self.reusable = False

    def _chunk_size(self, line: bytes) -> None:  # hex digits, maybe ``;`` and an extension
        digits, semicolon, _ = line.partition(b";")
        if semicolon:
            digits = digits.rstrip(b" \t")
        if _HEX.fullmatch(digits) is None:
            raise ProtocolError(f"bad chunk-size line {_shown(line)}")
        size = int(digits, 16)
        if self._got + size > self._max_body:
            raise ProtocolError(f"chunked body over the {self._max_body}-byte cap")
        if size:
            self._need = size
            self._state = _CHUNK_DATA
        else:
            self._state = _TRAILERS

    def _trailer(self, line: bytes) -> None:
        self._trailers += 1
        if self._trailers > MAX_TRAILERS:
            raise ProtocolError(f"more than {MAX_TRAILERS} trailer lines")
        if _FIELD.fullmatch(line.decode("latin-1")) is None:
            raise ProtocolError(f"bad trailer line {_shown(line)}")

    def _answer(self, leftover: bytes) -> HttpResponse:
        self.leftover = leftover
        if leftover:
            self.reusable = False
        parts = self._parts
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        return HttpResponse(self._status, self._headers, bytes(body))
