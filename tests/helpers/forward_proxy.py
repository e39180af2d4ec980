"""A small threaded forward HTTP proxy on loopback that counts what it relays.

Plain-HTTP requests arrive in absolute form (``GET http://host:port/path``)
and are forwarded to the origin with their headers (``Host`` and the
signature untouched, ``Proxy-*`` dropped); ``CONNECT host:port`` opens a
tunnel whose bytes are piped both ways. Connections are kept alive, as a
real proxy keeps them. For tests only: no access control, loopback only.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

#: Headers that concern one hop, never forwarded.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


class ForwardProxy:
    """A forward proxy on ``127.0.0.1``; :attr:`url` is its ``http://`` URL.

    Attributes:
        relayed: The absolute-form targets forwarded, in order.
        tunnels: The ``host:port`` of every ``CONNECT`` tunnel opened.
        authorizations: The ``Proxy-Authorization`` values received.
    """

    def __init__(self) -> None:
        self.relayed: list[str] = []
        self.tunnels: list[str] = []
        self.authorizations: list[str] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: one line per request otherwise."""

            def _relay(self) -> None:
                target = urlsplit(self.path)
                if target.scheme != "http" or not target.hostname:
                    self.send_error(400, "absolute-form http:// target expected")
                    return
                proxy._note(self, relayed=self.path)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                path = target.path or "/"
                if target.query:
                    path += "?" + target.query
                origin = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=30)
                try:
                    origin.request(self.command, path, body=body, headers=headers)
                    answer = origin.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in _HOP and name.lower() != "content-length":
                            self.send_header(name, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    origin.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

            def do_CONNECT(self) -> None:
                host, _, port = self.path.rpartition(":")
                proxy._note(self, tunnel=self.path)
                try:
                    upstream = socket.create_connection((host, int(port)), timeout=30)
                except OSError:
                    self.send_error(502, "origin unreachable")
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                _pipe(self.connection, upstream)
                self.close_connection = True

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _note(self, handler: Any, *, relayed: str | None = None, tunnel: str | None = None) -> None:
        with self._lock:
            if relayed is not None:
                self.relayed.append(relayed)
            if tunnel is not None:
                self.tunnels.append(tunnel)
            auth = handler.headers.get("proxy-authorization")
            if auth:
                self.authorizations.append(auth)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def count(self) -> int:
        """Requests relayed plus tunnels opened."""
        with self._lock:
            return len(self.relayed) + len(self.tunnels)

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _pipe(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""

    def copy(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass  # the other side closed: the tunnel ends
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)

    back = threading.Thread(target=copy, args=(upstream, client), daemon=True)
    back.start()
    copy(client, upstream)
    back.join(timeout=30)
    upstream.close()
