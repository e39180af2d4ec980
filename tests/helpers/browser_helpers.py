"""The viewer's browser tests' kit: Debian's Chromium under Playwright, a loopback listener
that script payloads would call, the payloads, and checked screenshots.

``browser`` and ``listener`` are module-scoped fixtures (the viewer folder's
conftest.py shares them); the browser is Debian's ``chromium``, found by path,
never a downloaded one: without it the tests skip, or fail when
``OBJSTORE_TEST_REQUIRE`` requires ``browser`` (system_deps.py).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import system_deps
from playwright.sync_api import sync_playwright

#: Where the screenshots of the local store's run go (docs/viewer when regenerating them).
SHOTS_ENV = "OBJSTORE_VIEWER_SCREENSHOTS"


class Listener:
    """An HTTP listener on loopback that records every request a payload might make."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # no stderr lines per request

        self.hits = hits
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


def script_payloads(listener: str) -> list[str]:
    """Messages that would change the page, call home or open a dialog if not escaped."""
    call = f"fetch('{listener}/{{}}')"
    return [
        "<script>window.__pwned=1;document.title='pwned';"
        + call.format("script")
        + ";alert(1)</script>",
        f'<img src=x onerror="window.__pwned=2;{call.format("img")};alert(2)">',
        f'<svg onload="window.__pwned=3;{call.format("svg")}"></svg>',
        f'<a href="javascript:alert(4)" id="js-link">click</a><iframe src="{listener}/iframe">',
    ]


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    lst = Listener()
    yield lst
    lst.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Debian Chromium for the module (never a downloaded browser)."""
    exe = system_deps.chromium()
    if exe is None:
        system_deps.missing("browser")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=args)
        yield b
        b.close()


def shoot(page: Any, out: Path, name: str) -> None:
    """A full-page screenshot, checked to be a non-empty PNG."""
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, path
