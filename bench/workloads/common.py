"""What every workload shares: the run config, the injected round trip, measuring a step.

Counts come from the saver's meter; wall-clock seconds are only ever compared
between savers of the same run.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bench import graphs
from bench.meters import Reading, set_proxy_delay
from bench.savers import Env, Handle


def cfg(thread_id: str) -> dict[str, Any]:
    """A run config for a thread."""
    return {"configurable": {"thread_id": thread_id}}


class Delay:
    """Sets the proxy's injected round trip for the duration of a block.

    With ``local=True`` the local-directory saver gets the same round trip
    (workload 6: the saver's own concurrency, with no S3 server to saturate).
    """

    def __init__(self, env: Env, ms: float, *, local: bool = False) -> None:
        self.env, self.ms, self.local = env, ms, local

    def __enter__(self) -> None:
        set_proxy_delay(self.env.proxy_url, self.ms)
        if self.local:
            self.env.local_delay_s = self.ms / 1000

    def __exit__(self, *exc: object) -> None:
        set_proxy_delay(self.env.proxy_url, 0)
        self.env.local_delay_s = 0.0


def measured(handle: Handle, fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` and return its result with what the saver did meanwhile."""
    calls0 = handle.calls.snapshot()
    r0 = handle.meter.begin()
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    d = handle.meter.snapshot() - r0
    calls1 = handle.calls.snapshot()
    row = d.to_dict()
    row["wall_s"] = wall
    row["cpu_s"] = cpu
    row["saver_calls"] = {k: calls1.get(k, 0) - calls0.get(k, 0) for k in calls1}
    return result, row


def chat_turns(
    handle: Handle,
    graph: Any,
    thread: str,
    script: graphs.Script,
    turns: range,
    *,
    deadline: float | None = None,
    on_turn: Callable[[int], None] | None = None,
    durability: str | None = None,
) -> list[dict[str, Any]]:
    """Drive ``turns`` of a scripted chat, one measured row per turn.

    ``durability`` is LangGraph's mode for each run (its default when None).
    """
    options = {} if durability is None else {"durability": durability}
    rows = []
    for t in turns:
        if deadline is not None and time.monotonic() > deadline:
            break
        if on_turn is not None:
            on_turn(t)
        msgs = script.inputs(t)
        _, row = measured(
            handle, lambda msgs=msgs: graph.invoke({"messages": msgs}, cfg(thread), **options)
        )
        row["turn"] = t
        rows.append(row)
    return rows


def mean(xs: list[float]) -> float:
    """The mean of ``xs``, NaN when empty."""
    return sum(xs) / len(xs) if xs else float("nan")


def bytes_row(row: dict[str, Any]) -> dict[str, Any]:
    """A turn's row as stored in the results: what it wrote, read and sent."""
    return {
        "turn": row["turn"],
        "bytes_written": row["bytes_sent"],
        "bytes_read": row["bytes_received"],
        "objects_written": row["objects_written"],
        "requests": row["requests"],
        "total_requests": row["total_requests"],
        "wall_s": row["wall_s"],
        "server_s": row["server_s"],
        "saver_calls": row["saver_calls"],
    }


def compact(row: dict[str, Any]) -> dict[str, Any]:
    """A measured call's requests, bytes and times, without its saver calls.

    ``cpu_s`` is this process's CPU during the call (the saver's and
    LangGraph's; the S3 server and the metering proxy run elsewhere).
    """
    return {
        "requests": row["requests"],
        "total_requests": row["total_requests"],
        "bytes_sent": row["bytes_sent"],
        "bytes_received": row["bytes_received"],
        "wall_s": row["wall_s"],
        "cpu_s": row["cpu_s"],
        "server_s": row["server_s"],
    }


def describe(exc: BaseException) -> str:
    """An error for a results row: its type and the first line of its message, bounded."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}"[:400]


def error_row(exc: BaseException) -> dict[str, str]:
    """The row of a saver that failed a workload."""
    return {"error": describe(exc)}


def settle() -> None:
    """Free the cyclic garbage of whatever ran before, outside the measured time.

    Workload 6 measures each saver's CPU per turn and turns per second in one
    process, after the other savers and workloads. Their cyclic garbage stays
    until a full collection, and the first one inside a measurement would
    charge freeing it to the saver measured: after the S3 peers' turns the
    process held 220,000-300,000 objects instead of 160,000.
    """
    gc.collect()


@dataclass
class Step:
    """What one measured step of workload 6 cost: process CPU, wall time, requests."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    reading: Reading = field(default_factory=Reading)


@contextlib.contextmanager
def measured_step(handle: Handle) -> Iterator[Step]:
    """Measure the ``with`` block, after :func:`settle`; the :class:`Step` is filled at its end."""
    settle()
    step = Step()
    r0 = handle.meter.begin()
    cpu0, w0 = time.process_time(), time.perf_counter()
    yield step
    step.cpu_s, step.wall_s = time.process_time() - cpu0, time.perf_counter() - w0
    step.reading = handle.meter.snapshot() - r0


def task_children(pid: int) -> list[int]:
    """The child processes of every thread of ``pid`` (Linux's ``/proc``).

    A thread or process that exits while they are read has none: the
    benchmark's own worker threads come and go during a reading.
    """
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:  # the process exited meanwhile
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(k) for k in f.read().split()]
        except FileNotFoundError:  # the thread exited meanwhile
            continue
    return out
