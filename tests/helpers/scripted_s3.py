"""A scripted loopback HTTP server standing in for S3: it records each request and
answers what a test's script says (status, headers, body)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: A script: ``(method, path, headers) -> (status, headers, body)``; headers lower-case.
Script = Callable[[str, str, dict[str, str]], tuple[int, dict[str, str], bytes]]


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]

    @property
    def scope_region(self) -> str:
        """The region of the request's SigV4 credential scope."""
        credential = self.headers.get("authorization", "").partition("Credential=")[2]
        return credential.split("/")[2]


@dataclass
class ScriptedServer:
    """The running server: its URL and the requests it received, in order."""

    url: str
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def error_xml(code: str, **fields: str) -> bytes:
    """An S3 error document."""
    extra = "".join(f"<{k}>{v}</{k}>" for k, v in fields.items())
    return f"<Error><Code>{code}</Code><Message>m</Message>{extra}</Error>".encode()


@contextlib.contextmanager
def scripted_server(script: Script) -> Iterator[ScriptedServer]:
    """Run a server answering by ``script`` on loopback for the ``with`` block."""
    state = ScriptedServer(url="")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # one answer, two writes: no delayed-ACK stall

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            with state.lock:
                state.seen.append(Seen(self.command, self.path, headers))
            status, out_headers, body = script(self.command, self.path, headers)
            self.send_response(status)
            for name, value in out_headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
