"""A throwaway PostgreSQL server on loopback for the benchmark."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

_BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin")


def _find(binary: str) -> str:
    for d in _BIN_DIRS:
        path = Path(d) / binary
        if path.exists():
            return str(path)
    found = shutil.which(binary)
    if found is None:
        raise FileNotFoundError(f"PostgreSQL binary {binary!r} not found in {_BIN_DIRS} or PATH")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """``initdb`` into a temporary directory, start ``postgres`` on a free port.

    As root the server runs as the ``postgres`` user (PostgreSQL refuses root).
    :meth:`stop` shuts it down and removes the directory.
    """

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-pg-")
        self.port = _free_port()
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, user="postgres")
            self._prefix = ["runuser", "-u", "postgres", "--"]
        data = os.path.join(self.dir, "data")
        subprocess.run(
            [*self._prefix, _find("initdb"), "-D", data, "-U", "bench", "-A", "trust"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._proc = subprocess.Popen(
            [
                *self._prefix,
                _find("postgres"),
                "-D",
                data,
                "-p",
                str(self.port),
                "-k",
                self.dir,
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=on",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.conninfo = f"host=127.0.0.1 port={self.port} user=bench dbname=postgres"
        self._wait_ready()

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(self.conninfo, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def create_database(self, name: str) -> str:
        """Create a database and return its connection string."""
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"host=127.0.0.1 port={self.port} user=bench dbname={name}"

    def version(self) -> str:
        """The server's version string."""
        import psycopg

        with psycopg.connect(self.conninfo) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "unknown"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.dir)
