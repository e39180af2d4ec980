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
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
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


#: The checkout these probes belong to (a --compare round runs them from here).
REPO = Path(__file__).resolve().parents[2]


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """A probe's ``--compare TREE`` and ``--rounds``, and the hidden options of one round."""
    parser.add_argument(
        "--compare",
        metavar="TREE",
        help="another checkout: its objstore_saver and this tree's measured in alternating "
        "rounds against one server; the medians and their ratio are printed",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --compare")
    parser.add_argument("--attach", help=argparse.SUPPRESS)  # a --compare round: the server
    parser.add_argument("--package-from", help=argparse.SUPPRESS)  # ...and the tree measured


def attached_round(args: argparse.Namespace) -> dict[str, Any] | None:
    """In a ``--compare`` round: the package imported from its tree, the server it attaches to.

    Call it before anything imports ``objstore_saver``. Returns the server
    (``proxy``, ``bucket``), its keys put in the environment; None outside a round.

    Raises:
        SystemExit: the package came from another tree than the round's.
    """
    if args.package_from:
        sys.path.insert(0, args.package_from)
        import objstore_saver  # from that tree, before anything imports it

        sys.path.pop(0)
        if not objstore_saver.__file__.startswith(os.path.abspath(args.package_from)):
            raise SystemExit(
                f"objstore_saver came from {objstore_saver.__file__}, not {args.package_from}"
            )
    if not args.attach:
        return None
    attached: dict[str, Any] = json.loads(args.attach)
    access, secret = attached["keys"]
    os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
    return attached


def compare_rounds(
    module: str,
    args: argparse.Namespace,
    server: dict[str, Any],
    options: Sequence[str],
) -> tuple[dict[str, str], dict[str, list[Any]]]:
    """Run ``python -m module`` on ``args.compare``'s package and this tree's, alternately.

    Each round is a process of its own attached to ``server`` (``proxy``,
    ``bucket``, ``keys``), given ``options`` and writing its results as JSON.
    Returns the trees by label (``before``, ``now``) and each one's results,
    round by round.
    """
    trees = {"before": os.path.abspath(args.compare), "now": str(REPO)}
    rounds: dict[str, list[Any]] = {label: [] for label in trees}
    for number in range(args.rounds):
        for label, tree in trees.items():
            out = os.path.join(tempfile.mkdtemp(prefix="probe-compare-"), "r.json")
            command = [sys.executable, "-m", module, "--attach", json.dumps(server)]
            command += ["--package-from", tree, "--json", out, *options]
            subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
            with open(out) as f:
                rounds[label].append(json.load(f))
            print(f"round {number + 1}/{args.rounds}: {label} measured", flush=True)
    return trees, rounds


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
