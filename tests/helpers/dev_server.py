"""``langgraph dev`` in a subprocess, for the suites that drive the real LangGraph server.

The server runs in its own process group on 127.0.0.1 with this checkout's
package on PYTHONPATH and nothing leaving the machine (no analytics, version
check or tracing); :func:`dev_server` starts it and waits for ``/ok``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_root import ROOT

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
# Loopback is never reached through a proxy.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else "<no server log>"


def _command(project: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "langgraph_cli",
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--config",
        str(project / "langgraph.json"),
    ]


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server's process group: SIGTERM, then SIGKILL after a bound."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)


def spawn_server(project: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    with (project / "server.log").open("wb") as log:
        # Its own process group: stopping it stops whatever it started.
        return subprocess.Popen(
            _command(project, port),
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextlib.contextmanager
def dev_server(project: Path, env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """Run ``langgraph dev`` in ``project``; yield its URL and log file; stop it."""
    log_path = project / "server.log"
    port = free_port()
    proc = spawn_server(project, env, port)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{server_log(log_path)}")
            # The port was free when chosen; if something took it since, the
            # server says which one it uses instead.
            moved = re.search(r"using port (\d+) instead", server_log(log_path))
            if moved:
                url = f"http://127.0.0.1:{moved.group(1)}"
            try:
                with DIRECT.open(f"{url}/ok", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                waited = f"{START_TIMEOUT_S:.0f} s"
                pytest.fail(f"langgraph dev did not answer in {waited}:\n{server_log(log_path)}")
            time.sleep(0.2)
        yield url, log_path
    finally:
        stop_server(proc)


def server_env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LANGGRAPH_", "LANGSMITH_", "LANGCHAIN_", "OBJSTORE_", "AWS_"))
    }
    env.update(
        # The server imports this checkout's package, not an installed copy.
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
        # Nothing leaves the machine: no analytics, no version check, no tracing.
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        NO_PROXY="127.0.0.1,localhost",
        LOG_COLOR="false",  # a plain log for the failure message
    )
    env.update(extra)
    return env
