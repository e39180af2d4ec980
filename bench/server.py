"""The S3 side of the benchmark, run as its own process.

``python -m bench.server --delay-ms 20`` starts a moto S3 server and a
:class:`~bench.proxy.MeteringProxy` in front of it on loopback, prints one JSON
line ``{"moto": url, "proxy": url}`` and serves until its standard input closes.
Running them in a separate process keeps the server's CPU out of the CPU time
the benchmark charges to the saver.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import subprocess
import sys
import threading
from typing import Any

from bench.proxy import MeteringProxy


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


def serve(delay_ms: float) -> None:
    """Start moto and the proxy, announce their URLs, serve until stdin closes."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    _serialize_moto_puts()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    proxy = MeteringProxy(f"{host}:{port}", delay=delay_ms / 1000)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    print(json.dumps({"moto": f"http://{host}:{port}", "proxy": proxy.url}), flush=True)
    sys.stdin.read()
    proxy.shutdown()
    moto.stop()


class ServerProcess:
    """The server process, started and stopped by the benchmark.

    Args:
        delay_ms: Initial injected round trip in milliseconds.
        python: Interpreter to run the server with.
    """

    def __init__(self, delay_ms: float = 20.0, python: str = sys.executable) -> None:
        self._proc = subprocess.Popen(
            [python, "-m", "bench.server", "--delay-ms", str(delay_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            raise RuntimeError(f"bench.server exited with status {code} before announcing")
        urls = json.loads(line)
        self.moto_url: str = urls["moto"]
        self.proxy_url: str = urls["proxy"]
        self.pid = self._proc.pid

    def stop(self) -> None:
        """Close the server's stdin and wait for it to exit."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    serve(parser.parse_args().delay_ms)


if __name__ == "__main__":
    main()
