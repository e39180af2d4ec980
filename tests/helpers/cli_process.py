"""``objstore-saver`` run in a subprocess, as a user runs it, in a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys

from repo_root import ROOT

from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV, KEYS_URL_ENV

#: Settings a test's own environment must not leak into the command (it gives them in ``env``).
UNSET = ("OBJSTORE_SAVER_URL", "POSTGRES_URL", KEY_ENV, KEYS_ENV, KEYS_URL_ENV)


def run_cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m objstore_saver *args`` with this checkout and the test helpers importable."""
    full_env = {k: v for k, v in os.environ.items() if k not in UNSET}
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "helpers")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "objstore_saver", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        check=False,
    )
