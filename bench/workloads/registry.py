"""The named workloads of ``python -m bench``: one declaration each.

A :class:`Workload` says what it is (id, title, what it measures), which
savers it runs against and how: ``each_saver`` runs it on one saver at a
time (a fresh saver each), ``all_savers`` on every saver at once, their
turns interleaved (workload 6, whose CPU and rate comparisons must meet the
machine's drift alike). :func:`bench.run.run` runs the workloads selected
with ``--workloads`` in the order given and files each row under the
workload's id and its ``also`` sections.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import graphs
from bench.savers import Env, SaverSpec
from bench.workloads import agent, chat, concurrency, large_value, long_thread, operations
from bench.workloads.sizes import Sizes

EachSaver = Callable[[SaverSpec, Env, Sizes, Any], dict[str, Any]]
"""Runs a workload on one saver, given what its ``prepare`` made (or None).

Returns the saver's row; a workload with ``also`` sections returns its rows
by section id instead (its own id first).
"""

AllSavers = Callable[[list[SaverSpec], Env, Sizes], dict[str, dict[str, Any]]]
"""Runs a workload on every saver at once; returns each saver's row by saver name."""


@dataclass(frozen=True)
class Workload:
    """One workload: what it measures, against which savers, and its runner."""

    id: str
    """Its ``--workloads`` id, and the key of its rows in the results."""
    title: str
    measures: str
    each_saver: EachSaver | None = None
    all_savers: AllSavers | None = None
    savers: tuple[str, ...] = ()
    """Names of the savers it runs against; empty: every saver of the run."""
    also: tuple[str, ...] = ()
    """Further result sections its runner fills (workload 2 also fills workload 5)."""
    prepare: Callable[[Sizes], Any] | None = None
    """Builds an input once per run, before any workload runs (not timed)."""

    def __post_init__(self) -> None:
        if (self.each_saver is None) == (self.all_savers is None):
            raise ValueError(f"workload {self.id}: give exactly one of each_saver, all_savers")

    @property
    def sections(self) -> tuple[str, ...]:
        """The result sections its rows go to: its own id, then ``also``."""
        return (self.id, *self.also)

    def runs_on(self, specs: list[SaverSpec]) -> list[SaverSpec]:
        """The savers of ``specs`` it runs against, in their order."""
        return [s for s in specs if not self.savers or s.name in self.savers]


def _seed_chat(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    return chat.run_chat(spec, env, sizes, graphs.SEED, durability=True)


def _realistic_chat(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    return chat.run_chat(spec, env, sizes, graphs.realistic_script())


def _long_and_delete(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    rows = long_thread.run_long_and_delete(spec, env, sizes)
    return {"2": rows["long"], "5": rows["delete"]}


def _large_payload(sizes: Sizes) -> str:
    return graphs.large_payload(sizes.large_bytes)


def _large(spec: SaverSpec, env: Env, sizes: Sizes, payload: str) -> dict[str, Any]:
    return large_value.run_large(spec, env, sizes, payload)


def _agent(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    return agent.run_agent(spec, env, sizes)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "1",
        "seed chat",
        "a 30-turn scripted chat of compressible text: bytes, objects, requests "
        "and latency of every turn",
        each_saver=_seed_chat,
    ),
    Workload(
        "1b",
        "realistic chat",
        "the same chat with words drawn from a 4,000-word vocabulary, so "
        "compression cannot hide the cost: bytes written against the new messages' bytes",
        each_saver=_realistic_chat,
    ),
    Workload(
        "2",
        "long thread, then delete and retention",
        "a thread grown to 1,000 turns (time-capped): the latest-checkpoint lookup "
        "and a whole turn at turns 10, 100 and 1,000; then workload 5: deleting it "
        "beside threads t1 and t10, and pruning another thread",
        each_saver=_long_and_delete,
        also=("5",),
    ),
    Workload(
        "3",
        "large ToolMessage",
        "a chat turn carrying a 20 MiB tool result: the largest request and "
        "response body, peak memory against the value, reading it back",
        each_saver=_large,
        prepare=_large_payload,
    ),
    Workload(
        "4",
        "agent",
        "a supervisor, Send fan-out to 8 workers and a subgraph: checkpoints, "
        "writes, requests and bytes per turn",
        each_saver=_agent,
    ),
    Workload(
        "6a",
        "OS threads",
        "8 conversations on 8 OS threads through one saver: turns per second and "
        "process CPU per turn, savers interleaved in rounds",
        all_savers=concurrency.run_threads,
    ),
    Workload(
        "6b",
        "async conversations",
        "1, 8 and 64 concurrent async conversations: turns per second and process "
        "CPU per turn, the whole measurement repeated with savers interleaved",
        all_savers=concurrency.run_async,
    ),
    Workload(
        "7",
        "Operations at production scale",
        "the operator jobs (threads, verify, du, prune --keep-last 1, delete_threads) "
        "over a bucket of many 3-checkpoint threads and migrate --apply from PostgreSQL: "
        "threads (checkpoints) per second, requests per thread, projections to "
        "1,000,000 threads, two shards against one, peak memory at N and 10 x N threads",
        each_saver=operations.run_operations,
        savers=("objstore-s3",),
    ),
)

BY_ID: dict[str, Workload] = {w.id: w for w in WORKLOADS}
IDS: tuple[str, ...] = tuple(BY_ID)
