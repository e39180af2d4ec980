"""Shared fixtures, and the environment variables the tests read.

* ``OBJSTORE_TEST_ENDPOINT`` (with ``OBJSTORE_TEST_ACCESS_KEY``,
  ``OBJSTORE_TEST_SECRET_KEY``, ``OBJSTORE_TEST_REGION``): the S3 endpoint of
  the S3 tests, instead of moto's server started on loopback;
  ``OBJSTORE_TEST_SERVER`` (``ceph``, ...) and ``OBJSTORE_TEST_KMS_KEY_ID`` say
  what that server supports (s3_helpers.py; scripts/ceph-rgw.sh sets the first).
* ``OBJSTORE_TEST_REQUIRE``: the programs from the system that must be there
  (comma-separated: ``browser`` for Debian's chromium, ``postgres`` for
  PostgreSQL's initdb and pg_ctl, or ``all``). Without it, a test needing a
  missing program is skipped, the reason naming the program and its
  ``apt-get install`` command; with it, the test fails. ``.ci/run`` sets
  ``OBJSTORE_TEST_REQUIRE=all``. See system_deps.py.
* ``OBJSTORE_VIEWER_SCREENSHOTS``: where the viewer's browser tests put the
  screenshots of their local-directory run (docs/viewer.md).

Options: ``--long`` runs the fault, race and stateful suites at their full
counts; pytest-timeout's ``--timeout=0`` lifts the 300 s limit per test (to
sit in a debugger, say).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import system_deps
from backends import BACKENDS, Backend, S3Endpoint, open_backend
from moto_process import moto_server

from objstore_saver.storage import Boto3S3Store

pytest_plugins = ["pytester"]  # test_system_deps.py runs the fixtures in an inner session

# The shipped store contract's assertions explain themselves like a test module's.
pytest.register_assert_rewrite("objstore_saver.testing")


def pytest_configure(config: pytest.Config) -> None:
    system_deps.required()  # a misspelt OBJSTORE_TEST_REQUIRE stops the run at once


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the fault, race and stateful suites at their full counts",
    )


@pytest.fixture(scope="session")
def long_run(request: pytest.FixtureRequest) -> bool:
    """True under ``--long``: suites use their full counts instead of CI's."""
    return bool(request.config.getoption("--long"))


#: pytest-timeout's limit (pyproject: 300 s) for the tests taking ``long_run``, under
#: ``--long``: their counts grow 10 to 30 times there.
LONG_RUN_TIMEOUT = 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--long"):
        return
    for item in items:
        if "long_run" in getattr(item, "fixturenames", ()) and not item.get_closest_marker(
            "timeout"
        ):
            item.add_marker(pytest.mark.timeout(LONG_RUN_TIMEOUT))


# --- S3 endpoint fixtures ---
#
# Tests run against a real HTTP S3 endpoint: the one named by
# OBJSTORE_TEST_ENDPOINT (credentials OBJSTORE_TEST_ACCESS_KEY /
# OBJSTORE_TEST_SECRET_KEY, else boto3's usual chain; region
# OBJSTORE_TEST_REGION), or an in-process moto server on loopback.


def _serialize_moto_puts(mp: pytest.MonkeyPatch) -> None:
    """Make moto's ``If-None-Match: *`` check atomic, as it is on S3.

    moto checks for an existing object and then stores the new one without a
    lock, so two racing create-only puts could both succeed. Serializing its
    PutObject handler keeps the race tests about this package, not moto.
    """
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    lock = threading.Lock()

    @functools.wraps(original)
    def put_object(self: Any) -> Any:
        with lock:
            return original(self)

    mp.setattr(S3Response, "put_object", put_object)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """The S3 endpoint of the test session."""
    url = os.environ.get("OBJSTORE_TEST_ENDPOINT")
    if url:
        yield S3Endpoint(
            url=url,
            access_key=os.environ.get("OBJSTORE_TEST_ACCESS_KEY"),
            secret_key=os.environ.get("OBJSTORE_TEST_SECRET_KEY"),
            region=os.environ.get("OBJSTORE_TEST_REGION", "us-east-1"),
        )
        return
    mp = pytest.MonkeyPatch()
    _serialize_moto_puts(mp)
    try:
        with moto_server() as url:
            yield S3Endpoint(
                url=url,
                access_key="testing-access-key",
                secret_key="testing-secret-key",
                region="us-east-1",
            )
    finally:
        mp.undo()


@pytest.fixture
def s3_bucket(s3_endpoint: S3Endpoint) -> Iterator[str]:
    """A new, uniquely named bucket; emptied and removed afterwards."""
    with s3_endpoint.new_bucket() as bucket:
        yield bucket


def _credentials_in_env(monkeypatch: pytest.MonkeyPatch, key_id: str, secret: str) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def creds_env(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint's credentials in boto3's default chain (environment)."""
    _credentials_in_env(
        monkeypatch,
        s3_endpoint.access_key or "testing-access-key",
        s3_endpoint.secret_key or "testing-secret-key",
    )


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Made-up credentials in boto3's default chain, for scripted loopback servers."""
    _credentials_in_env(monkeypatch, "testing-access-key", "testing-secret-key")


@pytest.fixture
def s3_store(s3_endpoint: S3Endpoint, s3_bucket: str) -> Boto3S3Store:
    """An :class:`Boto3S3Store` under the prefix ``pfx/`` of a new bucket."""
    return Boto3S3Store(s3_bucket, "pfx/", client=s3_endpoint.client())


@pytest.fixture(scope="module")
def kms() -> Iterator[Any]:
    """A KMS client on a moto server of its own on loopback (the S3 endpoint may be Ceph's)."""
    import boto3

    with moto_server() as url:
        yield boto3.client(
            "kms",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


# --- the backends a suite runs on ---


@pytest.hookimpl(tryfirst=True)  # the backend first in test ids: test[local-sync]
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test using ``backend`` once per backend id.

    ``@pytest.mark.backends("local", ...)`` on a test or module names fewer; a
    test may also parametrize ``backend`` with other arguments itself
    (``indirect=["backend"]``).
    """
    if "backend" not in metafunc.fixturenames or _parametrizes_backend(metafunc):
        return
    marker = metafunc.definition.get_closest_marker("backends")
    kinds = marker.args if marker is not None else BACKENDS
    unknown = [k for k in kinds if k not in BACKENDS]
    if not kinds or unknown:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: backends {kinds} not in {BACKENDS}")
    metafunc.parametrize("backend", kinds, indirect=True)


def _parametrizes_backend(metafunc: pytest.Metafunc) -> bool:
    """Whether the test parametrizes ``backend`` itself (with other arguments, indirect)."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.kwargs.get("argnames", mark.args[0] if mark.args else ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "backend" in names:
            return True
    return False


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Where the test stores objects: one of ``local``, ``s3-lean``, ``s3-boto3``.

    The directory is ``tmp_path / "store"``; a bucket is new for the test.
    """
    with open_backend(request.param, tmp_path / "store", request) as b:
        yield b


# --- PostgreSQL (migration tests) ---
from pg_server import postgres_server, postgres_url  # noqa: E402, F401
