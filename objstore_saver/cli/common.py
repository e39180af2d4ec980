"""What every command of ``objstore-saver`` shares: :class:`Command`, the global options,
the progress bar, the exit codes, the renderers' text helpers and :func:`run_command`."""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from objstore_saver.config import OBJSTORE_SAVER_URL
from objstore_saver.errors import ConfigurationError, ObjstoreSaverError
from objstore_saver.ops._common import OpsConfig, redact
from objstore_saver.ops.fanout import DEFAULT_CONCURRENCY, check_concurrency, shown_rate
from objstore_saver.ops.maintain import parse_duration
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.storage.base import StorageError

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
EXIT_ERROR = 3

#: A command's JSON-serializable report and its exit code.
Outcome = tuple[dict[str, Any], int]


class ProgressBar:
    """A plain-text progress bar on a stream: done/total, rate and ETA.

    Redrawn in place at most ten times a second on a terminal; elsewhere (a log)
    a line at most every ten seconds, and the last one. The rate counts from
    :meth:`begin` (else the bar's creation), as the report's ``threads_per_second``.
    """

    def __init__(
        self,
        stream: TextIO,
        label: str,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.label = label
        self.enabled = enabled
        self.tty = stream.isatty()
        self.drawn = False
        self.clock = clock
        self.started = clock()
        self.shown_at = -float("inf")

    def begin(self, at: float) -> None:
        """The job began at ``at`` (a time of the bar's clock): its rate counts from there."""
        self.started = at

    def __call__(self, done: int, total: int | None, item: str) -> None:
        if not self.enabled:
            return
        now = self.clock()
        last = total is not None and done >= total
        if not last and now - self.shown_at < (0.1 if self.tty else 10.0):
            return
        self.shown_at = now
        per_second = shown_rate(done, now - self.started)
        if total:
            filled = int(30 * done / total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}"
        else:
            bar = f"{done}"
        if per_second:
            bar += f" {per_second:.1f}/s"
            if total and not last:
                bar += f" ETA {_duration_text((total - done) / per_second)}"
        line = f"{self.label} {bar} {item}"[:160]
        if self.tty:
            self.stream.write("\r\x1b[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the bar's line on a terminal, so that what follows starts on its own line."""
        if self.enabled and self.drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _duration_text(seconds: float) -> str:
    """``42s``, ``7m05s``, ``3h12m``: an ETA for people."""
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _concurrency(text: str) -> int:
    try:
        return check_concurrency(int(text))
    except (ValueError, ConfigurationError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of 1 or more") from exc


def duration(text: str) -> float:
    """argparse type of a duration option (``30d``, ``12h``...), in seconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _shard(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ConfigurationError as exc:
        # argparse names the flag itself: "argument --shard: ..."
        raise argparse.ArgumentTypeError(re.sub(r"^--shard:? ", "", str(exc))) from exc


def add_scale_options(parser: argparse.ArgumentParser, *, concurrency: bool = True) -> None:
    """``--shard K/N`` and (for jobs that work on threads at once) ``--concurrency N``."""
    if concurrency:
        parser.add_argument(
            "--concurrency",
            type=_concurrency,
            default=DEFAULT_CONCURRENCY,
            metavar="N",
            help=f"threads worked on at once (default {DEFAULT_CONCURRENCY})",
        )
    parser.add_argument(
        "--shard",
        type=_shard,
        default=ALL,
        metavar="K/N",
        help="only the threads of shard K of N (K from 0, e.g. $JOB_COMPLETION_INDEX/8): "
        "N workers split the bucket with no coordination",
    )


def add_resumable_job_options(
    parser: argparse.ArgumentParser, *, apply_help: str, unit: str
) -> None:
    """``--apply``, ``--restart`` and the scale options of a job that keeps a cursor."""
    parser.add_argument("--apply", action="store_true", help=apply_help)
    parser.add_argument(
        "--restart",
        action="store_true",
        help=f"ignore the cursor an interrupted run left; start from the first {unit}",
    )
    add_scale_options(parser)


def job_options(args: argparse.Namespace, config: OpsConfig, bar: ProgressBar) -> dict[str, Any]:
    """The job's keyword arguments: the configuration, the progress bar and the job options
    the command took."""
    names = ("apply", "restart", "concurrency", "shard")
    return {n: v for n, v in vars(args).items() if n in names} | {"config": config, "progress": bar}


def mode(report: dict[str, Any], verb: str = "delete") -> str:
    """``applied``, or the dry run's note of what ``--apply`` would do."""
    return "applied" if report["apply"] else f"dry run (add --apply to {verb})"


def pairs(counts: dict[str, Any]) -> str:
    """``name=value, ...``: a report's totals on one line."""
    return ", ".join(f"{k}={v}" for k, v in counts.items())


def cancelled_mark(report: dict[str, Any]) -> str:
    """`` [cancelled]`` after a job's first line when the job was cancelled, else nothing."""
    return " [cancelled]" if report["cancelled"] else ""


def resumed_note(report: dict[str, Any]) -> str:
    """`` (resumed after <position>)`` when the job resumed from its cursor, else nothing."""
    after = report.get("resumed_after")
    return f" (resumed after {after!r})" if after else ""


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``add_arguments`` of a command that takes only the global options."""


@dataclass(frozen=True, kw_only=True)
class Command:
    """One command of ``objstore-saver``: its options, its handler and its renderer.

    ``run(args, config, progress)`` does the work and returns the report and the
    exit code; ``render`` is the report as text (``--json`` prints the report).
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None] = no_arguments
    run: Callable[[argparse.Namespace, OpsConfig, ProgressBar], Outcome]
    render: Callable[[dict[str, Any]], str]


@dataclass(frozen=True, kw_only=True)
class CommandGroup:
    """A command whose work is done by subcommands (``store ls``, ``store get``, ...);
    ``dest`` is the parsed arguments' attribute naming the chosen one."""

    name: str
    help: str
    commands: Sequence[Command]
    dest: str
    metavar: str


def global_options() -> argparse.ArgumentParser:
    """``--url``, ``--json`` and ``--no-progress``: a parent parser without ``--help``."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--url",
        help=f"object store URL (default ${OBJSTORE_SAVER_URL}): "
        "s3://bucket/prefix?endpoint_url=...&region=... or file:///dir",
    )
    options.add_argument(
        "--replica-lag",
        type=float,
        metavar="SECONDS",
        help="the store is a replica whose objects arrive up to SECONDS after what "
        "references them (default $OBJSTORE_SAVER_REPLICA_LAG; docs/replication.md)",
    )
    options.add_argument("--json", action="store_true", help="print the report as JSON")
    options.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return options


def run_command(
    command: Command, args: argparse.Namespace, *, stdout: TextIO, stderr: TextIO
) -> int:
    """Run a parsed command and print its report on ``stdout``, or its error on
    ``stderr``, with no secret in either; return the exit code."""
    try:
        config = OpsConfig.from_env(
            url=args.url,
            postgres_url=getattr(args, "source_url", None),
            replica_lag=args.replica_lag,
        )
    except (TypeError, ValueError) as exc:
        print(f"objstore-saver: error: {exc}", file=stderr)
        return EXIT_USAGE
    secrets = config.secrets()
    bar = ProgressBar(stderr, args.command, enabled=not args.no_progress)
    try:
        report, code = command.run(args, config, bar)
    except (ObjstoreSaverError, StorageError) as exc:
        bar.close()
        print(f"objstore-saver: error: {redact(str(exc), secrets)}", file=stderr)
        return EXIT_USAGE if isinstance(exc, ConfigurationError) else EXIT_ERROR
    bar.close()
    if args.json:
        stdout.write(redact(json.dumps(report, indent=2), secrets) + "\n")
    else:
        stdout.write(redact(command.render(report), secrets) + "\n")
    return code


def human_size(n: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ..., at most GiB."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """Rows as aligned text columns (two spaces apart) under a header; ``None`` prints empty."""
    cells = [list(header)] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def json_text(report: dict[str, Any]) -> str:
    """The text rendering of a report that has no table: the report as indented JSON."""
    return json.dumps(report, indent=2, sort_keys=False)
