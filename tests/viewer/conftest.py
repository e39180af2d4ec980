"""Fixtures of the viewer tests: Debian's Chromium and a loopback listener (browser
tests, module-scoped), and the viewer served over the module's ``store``."""

from collections.abc import Iterator

import pytest
from browser_helpers import browser, listener  # noqa: F401
from viewer_graphs import Server

from objstore_saver.storage import ObjectStore


@pytest.fixture
def server(store: ObjectStore) -> Iterator[Server]:
    """The viewer over the test module's ``store`` fixture, on loopback."""
    s = Server(store)
    yield s
    s.close()
