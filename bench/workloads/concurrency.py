"""Workloads 6a and 6b: concurrency and CPU per turn, every saver interleaved."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any, TypeVar

from bench import graphs
from bench.savers import Env, Handle, SaverSpec
from bench.workloads.common import Delay, cfg, describe, error_row, measured_step
from bench.workloads.sizes import Sizes

T = TypeVar("T")


def _rotated(items: list[T], r: int) -> list[T]:
    """``items`` starting at position ``r`` (modulo their count): round ``r``'s order."""
    first = r % len(items) if items else 0
    return items[first:] + items[:first]


def run_threads(specs: list[SaverSpec], env: Env, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """Workload 6a: OS threads, each its own conversation, through one saver; savers interleaved.

    Every saver is opened first; then each conversation's turns are run in
    ``sizes.thread_rounds`` rounds, every saver taking its share of a round in
    turn, the order rotated each round. The savers' CPU per turn is compared,
    and this machine's speed drifts by tens of percent over a minute: run one
    after the other, the first saver and the last can meet different machines.
    Interleaved, every saver meets the same drift. A saver that fails (to open
    or in a round) gets a row with the error and leaves the later rounds.
    """
    rows: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        runs: list[_ThreadRun] = []
        for spec in specs:
            try:
                handle = stack.enter_context(spec.open_sync(env))
            except Exception as exc:  # noqa: BLE001 -- the saver's row says why
                rows[spec.name] = error_row(exc)
                continue
            runs.append(_ThreadRun(spec.name, handle, sizes))
        with Delay(env, sizes.delay_ms, local=True):
            rounds = _round_sizes(sizes.thread_turns, sizes.thread_rounds)
            for r, turns in enumerate(rounds):
                for run in _rotated(runs, r):
                    if run.error is None:
                        run.round(turns, sizes.concurrency_cap_s / len(rounds))
        for run in runs:
            rows[run.name] = run.row()
    return rows


def _round_sizes(turns: int, rounds: int) -> list[int]:
    """Turns of each conversation in each round: ``turns`` split into ``rounds`` (none empty)."""
    rounds = max(1, min(rounds, turns))
    return [turns * (i + 1) // rounds - turns * i // rounds for i in range(rounds)]


class _ThreadRun:
    """One saver's conversations of workload 6a, advanced a round at a time."""

    def __init__(self, name: str, handle: Handle, sizes: Sizes) -> None:
        self.name, self.handle, self.threads = name, handle, sizes.os_threads
        self.graph = graphs.chat_graph(handle.saver, graphs.SEED)
        self.done = [0] * self.threads
        self.per_thread = sizes.thread_turns
        self.cpu_s: list[float] = []
        self.turns: list[int] = []
        self.wall_s = 0.0
        self.requests = 0
        self.server_s = 0.0
        self.error: str | None = None

    def round(self, turns: int, cap_s: float) -> None:
        """Run the next ``turns`` turns of every conversation, on one OS thread each.

        No turn starts after ``cap_s``; a conversation stopped by the cap
        goes on from where it stopped in the next round.
        """
        script, graph, done, last = graphs.SEED, self.graph, self.done, self.per_thread
        errors: list[str] = []
        deadline = time.monotonic() + cap_s
        before = sum(done)

        def worker(i: int) -> None:
            try:
                for t in range(done[i], min(done[i] + turns, last)):
                    if time.monotonic() > deadline:
                        return
                    graph.invoke({"messages": script.inputs(t)}, cfg(f"os-{i}"))
                    done[i] += 1
            except Exception as exc:  # noqa: BLE001 -- becomes the row's error
                errors.append(describe(exc))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(self.threads)]
        try:
            with measured_step(self.handle) as step:
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
        except Exception as exc:  # noqa: BLE001 -- the meter failed: the row says why
            self.error = describe(exc)
            return
        if errors:
            self.error = f"{len(errors)} thread(s) failed; first: {errors[0]}"
            return
        self.cpu_s.append(step.cpu_s)
        self.turns.append(sum(done) - before)
        self.wall_s += step.wall_s
        self.requests += step.reading.total_requests
        self.server_s += step.reading.server_s

    def row(self) -> dict[str, Any]:
        """The saver's row: totals over the rounds, and CPU per turn of each round."""
        if self.error is not None:
            return {"error": self.error}
        graph = self.graph
        complete = all(
            len(graph.get_state(cfg(f"os-{i}")).values.get("messages", [])) == 2 * n + 1
            for i, n in enumerate(self.done)
            if n
        )
        turns = sum(self.turns)
        return {
            "threads": self.threads,
            "turns": turns,
            "turns_target": self.threads * self.per_thread,
            "rounds": len(self.turns),
            "wall_s": self.wall_s,
            "turns_per_s": turns / self.wall_s if self.wall_s else None,
            "cpu_s_per_turn": sum(self.cpu_s) / turns if turns else None,
            "cpu_s_per_turn_rounds": [
                c / n if n else None for c, n in zip(self.cpu_s, self.turns, strict=True)
            ],
            "histories_complete": complete,
            "requests": self.requests,
            "server_s_per_request": self.server_s / self.requests if self.requests else None,
        }


def run_async(specs: list[SaverSpec], env: Env, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """Workload 6b: 1, 8 and 64 concurrent async conversations; savers interleaved.

    The whole measurement (every conversation count, fresh conversations on a
    fresh saver each time) is repeated ``sizes.async_repeats`` times, every
    saver taking its turn in each repetition, the order rotated: the ratios
    compared (64 against 1 conversations of one saver, CPU per turn against
    another saver) then meet the machine's drift alike. Turns per second and
    CPU per turn are over all repetitions. A saver that fails leaves the
    later repetitions with its error as its row.
    """
    return asyncio.run(_run_async(specs, env, sizes))


async def _run_async(specs: list[SaverSpec], env: Env, sizes: Sizes) -> dict[str, dict[str, Any]]:
    samples: dict[str, list[dict[str, dict[str, Any]]]] = {s.name: [] for s in specs}
    failed: dict[str, dict[str, Any]] = {}
    for r in range(max(1, sizes.async_repeats)):
        for spec in _rotated(specs, r):
            if spec.name in failed:
                continue
            try:
                samples[spec.name].append(await _async_sizes(spec, env, sizes))
            except Exception as exc:  # noqa: BLE001 -- the saver's row says why
                failed[spec.name] = error_row(exc)
    return {
        spec.name: failed.get(spec.name)
        or {
            str(n): _async_totals([rep[str(n)] for rep in samples[spec.name]])
            for n in sizes.async_conversations
        }
        for spec in specs
    }


def _async_totals(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """One conversation count's row over the repetitions: sums, and each repetition's rate."""
    turns, wall = sum(x["turns"] for x in reps), sum(x["wall_s"] for x in reps)
    cpu, requests = sum(x["cpu_s"] for x in reps), sum(x["requests"] for x in reps)
    server_s = sum(x["server_s"] for x in reps)
    return {
        "conversations": reps[0]["conversations"],
        "turns": turns,
        "turns_target": sum(x["turns_target"] for x in reps),
        "repeats": len(reps),
        "wall_s": wall,
        "turns_per_s": turns / wall,
        "turns_per_s_repeats": [x["turns"] / x["wall_s"] for x in reps],
        "cpu_s_per_turn": cpu / turns if turns else None,
        "requests": requests,
        "server_s_per_request": server_s / requests if requests else None,
    }


async def _async_sizes(spec: SaverSpec, env: Env, sizes: Sizes) -> dict[str, dict[str, Any]]:
    """One repetition of workload 6b for one saver: every conversation count, fresh."""
    script = graphs.SEED
    out: dict[str, Any] = {}
    for n in sizes.async_conversations:
        async with spec.open_async(env) as h:
            graph = graphs.chat_graph(h.saver, script)
            deadline = time.monotonic() + sizes.concurrency_cap_s / max(1, sizes.async_repeats)
            done = [0] * n

            async def convo(
                i: int,
                n: int = n,
                graph: Any = graph,
                deadline: float = deadline,
                done: list[int] = done,
            ) -> None:
                for t in range(sizes.async_turns(n)):
                    if time.monotonic() > deadline:
                        return
                    await graph.ainvoke({"messages": script.inputs(t)}, cfg(f"a{n}-{i}"))
                    done[i] += 1

            with Delay(env, sizes.delay_ms, local=True), measured_step(h) as step:
                await asyncio.gather(*(convo(i) for i in range(n)))
            if not sum(done):
                raise RuntimeError(f"no turn of {n} conversations within the time cap")
            out[str(n)] = {
                "conversations": n,
                "turns": sum(done),
                "turns_target": n * sizes.async_turns(n),
                "wall_s": step.wall_s,
                "cpu_s": step.cpu_s,
                "requests": step.reading.total_requests,
                "server_s": step.reading.server_s,
            }
    return out
