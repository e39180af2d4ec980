"""Loopback servers of the HTTP pool tests: a scripted (hostile) origin, a forward
proxy (absolute form and CONNECT) and a TLS origin under a private CA.

Threads and plain sockets; every loop is bounded by a deadline or a count, and
every socket has a timeout, so a test that goes wrong ends instead of hanging.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

#: A sound keep-alive answer.
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
#: Longest any helper thread runs.
LIFETIME_S = 20.0

#: What answers a request: bytes to send, or a function writing to the socket itself.
Script = bytes | Callable[[socket.socket], None]


def read_request(conn: socket.socket, data: bytes = b"") -> tuple[bytes, bytes] | None:
    """The next request head and body on ``conn`` (``None`` at its end), and what follows."""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, data = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(data) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return head + b"\r\n\r\n" + data[:length], data[length:]


class _Listener:
    """A loopback listener handing each connection to a thread of its own until closed.

    ``accepted`` counts connections. Subclasses set themselves up, then call
    :meth:`_begin`, and implement :meth:`_handle` (one connection, in its thread).
    """

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.listener = socket.create_server((address, 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.host = f"{address}:{self.port}"
        self.accepted = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._main = threading.Thread(target=self._serve, daemon=True)

    def _begin(self) -> None:
        self._main.start()

    def _serve(self) -> None:
        end = time.monotonic() + LIFETIME_S
        while not self._stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            self._start(self._handle, conn)

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def _stopping(self) -> None:
        """Called between stopping the accept loop and joining the handlers."""

    def close(self) -> None:
        self._stop.set()
        self._main.join(5)
        self._stopping()
        for thread in self._threads:
            thread.join(5)
        self.listener.close()


class ScriptedServer(_Listener):
    """An origin on loopback: the first connection gets ``script``, later ones sound answers.

    ``accepted`` counts connections; ``heads`` holds every request head received.
    """

    def __init__(self, script: Script, *, close_after: bool = False) -> None:
        super().__init__()
        self._script = script
        self._close_after = close_after
        self.heads: list[bytes] = []
        self._begin()

    def _handle(self, conn: socket.socket) -> None:
        (self._hostile if self.accepted == 1 else self._sound)(conn)

    def _hostile(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(LIFETIME_S)
            request = read_request(conn)
            if request is None:
                return
            self.heads.append(request[0])
            if isinstance(self._script, bytes):
                conn.sendall(self._script)
            else:
                self._script(conn)
            if self._close_after:
                return
            # Answer later requests soundly until the client closes (or the test ends).
            conn.settimeout(0.2)
            while not self._stop.is_set():
                try:
                    request = read_request(conn)
                except TimeoutError:
                    continue
                if request is None:
                    return
                self.heads.append(request[0])
                conn.sendall(OK)

    def _sound(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(5)
            data = b""
            while (request := read_request(conn, data)) is not None:
                self.heads.append(request[0])
                data = request[1]
                conn.sendall(OK)


def repeat(piece: bytes, *, every: float, first: bytes = b"", then: bytes = b"") -> Script:
    """A script sending ``first``, then ``piece`` every ``every`` s until the client leaves."""

    def script(conn: socket.socket) -> None:
        conn.sendall(first)
        end = time.monotonic() + LIFETIME_S / 2
        while time.monotonic() < end:
            conn.sendall(piece)  # an OSError (client gone) ends the script
            time.sleep(every)
        conn.sendall(then)

    return script


# --- a forward proxy ----------------------------------------------------------------


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes from ``src`` to ``dst`` until either ends."""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class ForwardProxy(_Listener):
    """A forward proxy on loopback: absolute-form requests and ``CONNECT`` tunnels.

    With ``credentials`` (``user:password``) a request without the matching
    ``Proxy-Authorization`` gets 407. ``refuse`` answers every request with
    that status instead. ``lines`` records each request line received,
    ``authorizations`` each ``Proxy-Authorization`` value.
    """

    def __init__(self, credentials: str | None = None, *, refuse: int | None = None) -> None:
        self._expected = (
            "Basic " + base64.b64encode(credentials.encode()).decode() if credentials else None
        )
        self._refuse = refuse
        super().__init__()
        self.lines: list[str] = []
        self.authorizations: list[str | None] = []
        self._sockets: list[socket.socket] = []
        self._begin()

    @property
    def connections(self) -> int:
        """Connections the proxy accepted."""
        return self.accepted

    def url(self, credentials: str | None = None) -> str:
        """The proxy's URL, with ``credentials`` as its user info if given."""
        return f"http://{credentials + '@' if credentials else ''}127.0.0.1:{self.port}"

    def _handle(self, conn: socket.socket) -> None:
        self._client(conn)

    def _denied(self, head: bytes) -> int | None:
        """The status refusing this request, or None to forward it."""
        lines = head.decode("latin-1").split("\r\n")
        self.lines.append(lines[0])
        found = None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "proxy-authorization":
                found = value.strip()
        self.authorizations.append(found)
        if self._refuse is not None:
            return self._refuse
        if self._expected is not None and found != self._expected:
            return 407
        return None

    def _client(self, conn: socket.socket) -> None:
        self._sockets.append(conn)
        upstream: socket.socket | None = None
        with conn, contextlib.suppress(OSError):
            conn.settimeout(LIFETIME_S)
            data = b""
            while (request := read_request(conn, data)) is not None:
                raw, data = request
                head, _, body = raw.partition(b"\r\n\r\n")
                refusal = self._denied(head)
                if refusal is not None:
                    conn.sendall(
                        b'HTTP/1.1 %d Refused\r\nProxy-Authenticate: Basic realm="t"\r\n'
                        b"Content-Length: 0\r\nConnection: close\r\n\r\n" % refusal
                    )
                    return
                method, target, version = head.split(b"\r\n", 1)[0].split(b" ")
                if method == b"CONNECT":
                    host, _, port = target.decode().rpartition(":")
                    upstream = socket.create_connection((host, int(port)), timeout=LIFETIME_S)
                    self._sockets.append(upstream)
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self._start(_pipe, upstream, conn)
                    _pipe(conn, upstream)
                    return
                parts = urlsplit(target.decode())
                if upstream is None:
                    upstream = socket.create_connection(
                        (parts.hostname, parts.port or 80), timeout=LIFETIME_S
                    )
                    self._sockets.append(upstream)
                    self._start(_pipe, upstream, conn)
                origin_form = parts.path + (f"?{parts.query}" if parts.query else "")
                rest = head.split(b"\r\n", 1)[1]
                kept = b"\r\n".join(
                    line
                    for line in rest.split(b"\r\n")
                    if not line.lower().startswith(b"proxy-authorization:")
                )
                line = b" ".join((method, origin_form.encode(), version))
                upstream.sendall(line + b"\r\n" + kept + b"\r\n\r\n" + body)

    def _stopping(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


# --- a private CA and a TLS origin ------------------------------------------------------


@dataclass(frozen=True)
class PrivateCA:
    """A CA made with ``openssl`` and a server certificate for 127.0.0.1 it signed."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context trusting this CA only."""
        return ssl.create_default_context(cafile=str(self.ca_cert))

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def make_ca(folder: Path) -> PrivateCA:
    """Make a private CA and a server certificate (SAN ``IP:127.0.0.1``) in ``folder``.

    Raises:
        FileNotFoundError: the ``openssl`` program is not installed.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("the openssl program is not installed")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    ca_key, ca_cert = folder / "ca.key", folder / "ca.pem"
    key, csr, cert = folder / "server.key", folder / "server.csr", folder / "server.pem"
    ext = folder / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key)),
        *("-out", str(ca_cert), "-days", "2", "-subj", "/CN=objstore test CA"),
    )
    run(
        *("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr)),
        *("-subj", "/CN=127.0.0.1"),
    )
    run(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key)),
        *("-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext)),
    )
    return PrivateCA(ca_cert, cert, key)


class TlsOrigin(_Listener):
    """A keep-alive HTTPS origin on loopback answering every request with :data:`OK`."""

    def __init__(self, context: ssl.SSLContext, address: str = "127.0.0.1") -> None:
        self._context = context
        super().__init__(address)
        self._begin()

    def _handle(self, conn: socket.socket) -> None:
        self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(5)
            with self._context.wrap_socket(conn, server_side=True) as tls:
                data = b""
                while (request := read_request(tls, data)) is not None:
                    data = request[1]
                    tls.sendall(OK)


@contextlib.contextmanager
def serving(server: ScriptedServer | ForwardProxy | TlsOrigin) -> Iterator[None]:
    """Close ``server`` when the block ends."""
    try:
        yield
    finally:
        server.close()
