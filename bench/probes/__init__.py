"""Measurements run by hand, each a command answering one question.

``python -m bench.probes.NAME --help`` says what each measures; bench/README.md
lists them. They use the suite's parts (the S3 server process, the metering
proxy, the savers, the graphs, the workloads' helpers) and write nothing but
their output. The suite (``python -m bench``) never imports them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a probe's --package-from imports the package from another tree first
    from objstore_saver.storage import ObjectStore
    from objstore_saver.storage.base import ObjectInfo


def write_json(report: Any, where: str | None) -> None:
    """A probe's report as JSON at ``where``: a path, ``-`` (standard output), or None."""
    if not where:
        return
    text = json.dumps(report, indent=2) + "\n"
    if where == "-":
        sys.stdout.write(text)
        return
    with open(where, "w", encoding="utf-8") as f:
        f.write(text)


def stored_objects(raw: ObjectStore) -> list[ObjectInfo]:
    """Every object of a probe's raw store (all pages of its listing)."""
    out: list[ObjectInfo] = []
    after: str | None = None
    while True:
        page = raw.list("", start_after=after)
        out.extend(page.objects)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


#: A spinner: the lowest priority, then busy until its parent is gone or an hour has passed.
_SPIN = """
import os, time
os.nice(19)
parent, end = os.getppid(), time.monotonic() + 3600
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(100_000):
        pass
"""


def busy_core_count(text: str) -> int:
    """``--busy-cores``' argument type: a count from 0 to this machine's cores."""
    cores = os.cpu_count() or 1
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= cores:
        raise argparse.ArgumentTypeError(
            f"must be between 0 and the {cores} cores here, not {text!r}"
        )
    return n


@contextlib.contextmanager
def busy_cores(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` processes spinning at nice 19 for the duration of the block.

    They keep the cores from idling while the measured threads wait; a woken
    thread preempts them (nice 0 against 19). Stopped and reaped on exit.
    """
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            spinners.append(subprocess.Popen([sys.executable, "-c", _SPIN]))
        yield spinners
    finally:
        for proc in spinners:
            proc.terminate()
        for proc in spinners:
            proc.wait(timeout=30)
