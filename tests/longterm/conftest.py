"""Fixtures of the long-term store's operator job tests: a root with its URL, and a
master key in the environment or none."""

from __future__ import annotations

import base64
import os

import pytest
from backends import Backend

from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV
from objstore_saver.storage.base import ObjectStore


@pytest.fixture
def root_and_url(backend: Backend) -> tuple[ObjectStore, str]:
    """(object store, URL of the same root) on a directory or a fresh bucket."""
    return backend.store("ops/"), backend.url("ops/")


@pytest.fixture(params=[False, True], ids=["clear", "encrypted"])
def encrypted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """A master key in the environment (the stores and the jobs read it), or none."""
    monkeypatch.delenv(KEYS_ENV, raising=False)
    if request.param:
        monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    else:
        monkeypatch.delenv(KEY_ENV, raising=False)
    return bool(request.param)
