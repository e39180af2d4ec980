"""``objstore-saver``: the operator's command line, a thin shell over :mod:`objstore_saver.ops`.

Every command takes ``--url`` (default ``$OBJSTORE_SAVER_URL``) and ``--json``;
long work shows a progress bar on stderr; commands that write or delete are
dry runs unless ``--apply``. Exit codes: 0 success, 1 the command found a
problem (``verify`` corruption, ``migrate`` diverged threads, ``upgrade``
failed threads, ``rekey`` failed key objects), 2 bad usage or configuration,
3 an error while running.

Each command is one :class:`~objstore_saver.cli.common.Command` (its options,
handler and text renderer together) in the module of its kind:

- :mod:`~objstore_saver.cli.reading`: ``threads``, ``history``, ``show``, ``cat``, ``du``
- :mod:`~objstore_saver.cli.maintenance`: ``verify``, ``delete-thread``, ``prune``
- :mod:`~objstore_saver.cli.jobs`: ``migrate``, ``upgrade``, ``rekey`` (resumable jobs)
- :mod:`~objstore_saver.cli.serve`: ``serve``
- :mod:`~objstore_saver.cli.store`: ``store ls|get|du``, ``store-sweep``, ``store-delete``
- :mod:`~objstore_saver.cli.common`: global options, progress bar, exit codes, the runner
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from objstore_saver.cli import jobs, maintenance, reading
from objstore_saver.cli.common import (
    EXIT_ERROR,
    EXIT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Command,
    CommandGroup,
    ProgressBar,
    global_options,
    run_command,
)
from objstore_saver.cli.serve import SERVE
from objstore_saver.cli.store import STORE, STORE_DELETE, STORE_SWEEP

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FOUND",
    "EXIT_OK",
    "EXIT_USAGE",
    "Command",
    "CommandGroup",
    "ProgressBar",
    "build_parser",
    "entry_point",
    "main",
]

#: Every command, in the order ``objstore-saver --help`` lists them.
COMMANDS: tuple[Command | CommandGroup, ...] = (
    *reading.COMMANDS,
    *maintenance.COMMANDS,
    *jobs.COMMANDS,
    SERVE,
    STORE,
    STORE_SWEEP,
    STORE_DELETE,
)


def _add_command(subparsers: Any, command: Command, options: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(command.name, parents=[options], help=command.help)
    command.add_arguments(parser)
    parser.set_defaults(cli_command=command)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``objstore-saver``; the chosen :class:`Command` is ``cli_command``."""
    options = global_options()
    parser = argparse.ArgumentParser(
        prog="objstore-saver",
        description="Inspect, migrate, prune and verify LangGraph checkpoints in an object store.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in COMMANDS:
        if isinstance(entry, CommandGroup):
            group = subparsers.add_parser(entry.name, help=entry.help)
            inner = group.add_subparsers(dest=entry.dest, required=True, metavar=entry.metavar)
            for command in entry.commands:
                _add_command(inner, command, options)
        else:
            _add_command(subparsers, entry, options)
    return parser


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line; return the exit code (bad usage raises argparse's ``SystemExit``).

    ``stdout`` gets the report, ``stderr`` the progress bar and errors.
    """
    args = build_parser().parse_args(argv)
    return run_command(
        args.cli_command, args, stdout=stdout or sys.stdout, stderr=stderr or sys.stderr
    )


def entry_point() -> None:
    """Console-script entry point: runs :func:`main` and exits with its code."""
    sys.exit(main())
