"""Fixtures of the benchmark's tests."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bench.proxy import MeteringProxy
from bench.savers import Env


@pytest.fixture
def env(s3_endpoint: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """A benchmark environment with a metering proxy (no delay) before the test's S3."""
    # Env points the AWS_* variables at the proxy. monkeypatch restores (or
    # removes) only what it set itself, so each is set here first.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setenv("AWS_ENDPOINT_URL", os.environ.get("AWS_ENDPOINT_URL", ""))
    server = MeteringProxy(s3_endpoint.url.split("://", 1)[1], delay=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Env(server.url, s3_endpoint.url, str(tmp_path))
    finally:
        server.shutdown()
        server.server_close()
