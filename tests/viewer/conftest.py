"""The browser tests' module-scoped fixtures: Debian's Chromium and a loopback listener."""

from browser_helpers import browser, listener  # noqa: F401
