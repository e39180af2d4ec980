"""A job in a child process, killed with SIGKILL at a chosen moment (the ``kill -9`` tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

#: The slowing every child uses: a store method that sleeps before each call.
SLOWED = """
import sys, time
from objstore_saver.storage.local import LocalStore

def slowed(name, seconds, one_key_at_a_time=False):
    real = getattr(LocalStore, name)
    if one_key_at_a_time:
        def each(self, keys):
            for key in keys:
                time.sleep(seconds)
                real(self, [key])
        setattr(LocalStore, name, each)
    else:
        def slow(self, *args, **kwargs):
            time.sleep(seconds)
            return real(self, *args, **kwargs)
        setattr(LocalStore, name, slow)
"""


def kill_when(program: str, args: Sequence[str], ready: Callable[[], bool]) -> int:
    """Run ``python -c SLOWED + program args``; SIGKILL it once ``ready()`` is true.

    Returns the child's exit status (``-SIGKILL`` when it was killed); a child
    that outlives two minutes without ``ready()`` is killed all the same.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", SLOWED + program, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    try:
        while child.poll() is None and time.monotonic() < deadline:
            if ready():
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.001)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode
