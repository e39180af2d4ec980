"""A real PostgreSQL server for the test session, started on loopback in a temp dir.

``initdb`` and ``pg_ctl`` are looked up on PATH, then in
``/usr/lib/postgresql/*/bin``. PostgreSQL refuses to run as root, so under root
the server runs as the ``postgres`` user if there is one, else ``nobody``
(through ``runuser``). Without PostgreSQL the tests using it skip, or fail
when ``OBJSTORE_TEST_REQUIRE`` requires ``postgres`` (system_deps.py); ``.ci/run``
installs it and requires it, so CI never skips.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import system_deps

#: The password of the test role; tests grep output and errors for it.
PG_PASSWORD = "pg-S3cret-Pw-7391"
PG_USER = "saver"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PostgresServer:
    """A running server: ``url(db)`` gives a connection URL with the password."""

    host: str
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{PG_USER}:{PG_PASSWORD}@{self.host}:{self.port}/{database}"


def _runner() -> tuple[list[str], int | None, int | None]:
    """Command prefix to run the server's programs, and the uid/gid to own its files."""
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"], entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start PostgreSQL for the session (skips, or fails if required, when it is missing)."""
    bin_dir = system_deps.postgres_bin_dir()
    if bin_dir is None:
        system_deps.missing("postgres")
    prefix, uid, gid = _runner()
    root = tempfile.mkdtemp(prefix="objstore-pg-")
    os.chmod(root, 0o755)
    data, sock, log = (os.path.join(root, n) for n in ("data", "sock", "log"))
    os.mkdir(sock)
    pwfile = os.path.join(root, "pw")
    with open(pwfile, "w") as f:
        f.write(PG_PASSWORD + "\n")
    if uid is not None:
        for path in (root, sock, pwfile):
            os.chown(path, uid, gid)  # type: ignore[arg-type]
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(
        [
            *prefix,
            os.path.join(bin_dir, "initdb"),
            "-D",
            data,
            "-U",
            PG_USER,
            "-A",
            "scram-sha-256",
            "--pwfile",
            pwfile,
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    subprocess.run(
        [
            *prefix,
            os.path.join(bin_dir, "pg_ctl"),
            "-D",
            data,
            "-l",
            log,
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {sock} -F -c fsync=off",
            "start",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        yield PostgresServer("127.0.0.1", port)
    finally:
        subprocess.run(
            [*prefix, os.path.join(bin_dir, "pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
            env=env,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of a new, empty database on the session's server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.url(name)
