"""What the tests need from the machine besides Python packages, and what happens without it.

Four suites need programs that ``pip install -e '.[test]'`` cannot provide:

* ``browser``: Debian's Chromium, which Playwright drives by path in the
  viewer's browser tests (no browser is ever downloaded);
* ``postgres``: PostgreSQL's ``initdb`` and ``pg_ctl``, with which
  ``pg_server.py`` starts a server on loopback (migrations from PostgreSQL,
  the fallback saver, ``POSTGRES_URL`` checkpointers);
* ``openssl``: the ``openssl`` program, which makes a private CA and a
  server certificate for the TLS tests (``http_servers.make_ca``);
* ``rclone``: Debian's ``rclone``, the replicator of the tests that read a
  bucket copied by a tool run on a schedule (docs/replication.md).

A test needing a missing one is skipped, with a reason naming the program and
the command that installs it, so that the README's second command passes on a
fresh machine. When :data:`REQUIRE_ENV` names it (a comma-separated list of the
names above, or ``all``), the missing program fails those tests instead:
``.ci/run`` sets ``OBJSTORE_TEST_REQUIRE=all``, so CI never skips them.
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from typing import NoReturn

import pytest

#: Comma-separated names of :data:`REQUIREMENTS` (or ``all``) that must be present.
REQUIRE_ENV = "OBJSTORE_TEST_REQUIRE"


@dataclass(frozen=True)
class Requirement:
    """A program some tests need, and how to get it."""

    what: str
    install: str
    needed_by: str


REQUIREMENTS = {
    "browser": Requirement(
        what="Debian's chromium",
        install="apt-get install chromium",
        needed_by="the viewer's browser tests",
    ),
    "postgres": Requirement(
        what="PostgreSQL (initdb, pg_ctl)",
        install="apt-get install postgresql",
        needed_by="the tests against a PostgreSQL server (migrations, POSTGRES_URL)",
    ),
    "openssl": Requirement(
        what="the openssl program",
        install="apt-get install openssl",
        needed_by="the TLS tests with a private CA",
    ),
    "rclone": Requirement(
        what="rclone",
        install="apt-get install rclone",
        needed_by="the tests of a bucket replicated by rclone",
    ),
}


def required() -> frozenset[str]:
    """The requirements :data:`REQUIRE_ENV` makes mandatory.

    Raises:
        pytest.UsageError: The variable names something not in :data:`REQUIREMENTS`.
    """
    names = {n.strip() for n in os.environ.get(REQUIRE_ENV, "").split(",") if n.strip()}
    if "all" in names:
        return frozenset(REQUIREMENTS)
    unknown = names - REQUIREMENTS.keys()
    if unknown:
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={os.environ[REQUIRE_ENV]!r} names {sorted(unknown)}; "
            f"known: {', '.join(sorted(REQUIREMENTS))} or all"
        )
    return frozenset(names)


def missing(name: str) -> NoReturn:
    """Skip the running test for want of requirement ``name``, or fail it if it is required."""
    req = REQUIREMENTS[name]
    message = f"{req.what} is not installed ({req.install}): {req.needed_by} need it"
    if name in required():
        pytest.fail(f"{message}, and {REQUIRE_ENV} requires it", pytrace=False)
    pytest.skip(f"{message}; set {REQUIRE_ENV}={name} to make this a failure")


def chromium() -> str | None:
    """Path of Debian's Chromium: ``chromium`` on PATH, else ``/usr/bin/chromium``, else None."""
    found = shutil.which("chromium") or "/usr/bin/chromium"
    return found if os.path.exists(found) else None


def postgres_bin_dir() -> str | None:
    """The directory of ``initdb`` and ``pg_ctl``: on PATH, else ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return candidate
    return None
