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

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench import graphs
from bench.savers import Env, Handle, ObjstoreS3Encrypted, SaverSpec
from bench.workloads import (
    agent,
    chat,
    concurrency,
    large_value,
    long_thread,
    operations,
    replicas,
)
from bench.workloads.common import settle
from bench.workloads.sizes import Sizes

ENCRYPTED = ObjstoreS3Encrypted.name
"""objstore-saver on S3 with client-side encryption runs where encryption may change a figure.

Workloads 1 and 1b (bytes, requests and CPU of a chat turn, sealed against
clear: the encryption targets), 3 (a 20 MiB value sealed: largest body,
peak memory), 4 (a turn's parallel first writes, which must create one key
object) and 6a/6b (CPU per turn under concurrency). Not workload 2 and its
delete (5): a time-capped minute per saver for request counts encryption
does not change (docs/encryption.md); nor 7, the operator jobs on threads
in clear (objstore-saver on S3 only).
"""

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
    skips: tuple[str, ...] = ()
    """Names of savers it never runs against, even when the run selects them."""
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
        return [
            s
            for s in specs
            if (not self.savers or s.name in self.savers)
            and s.name not in self.skips
            and (not s.workloads or self.id in s.workloads)
        ]


class _CpuTimed(SaverSpec):
    """A saver spec that adds up the process CPU while its saver is open.

    The clock runs from the moment ``inner`` has opened a saver (bucket
    created, saver constructed) to the moment the workload lets it go, after
    a full garbage collection (:func:`~bench.workloads.common.settle`), so
    the cycles earlier savers left are not charged to this one. Every thread
    of the process counts (the saver's request pool included); the S3
    server and the metering proxy run in another process.
    """

    def __init__(self, inner: SaverSpec) -> None:
        self.inner = inner
        self.name, self.label = inner.name, inner.label
        self.storage, self.package = inner.storage, inner.package
        self.workloads = inner.workloads
        self.cpu_s = 0.0
        """Process CPU seconds while the saver was open, over every opening."""

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        with self.inner.open_sync(env) as handle:
            settle()
            start = time.process_time()
            try:
                yield handle
            finally:
                self.cpu_s += time.process_time() - start


def _with_cpu(spec: SaverSpec, run: Callable[[SaverSpec], dict[str, Any]]) -> dict[str, Any]:
    """``run(spec)``'s chat row, with ``cpu_s_per_turn``: process CPU per turn played.

    The turns are the chat's and, with ``durability``, those of each
    durability mode's thread; the CPU is LangGraph's and the saver's (and
    compiling the graph, once). Compared between savers of one run only,
    like every timing: the encryption targets' CPU ratio.
    """
    timed = _CpuTimed(spec)
    row = run(timed)
    turns = len(row["turns"]) + sum(m["turns"] for m in row.get("durability", {}).values())
    row["cpu_s_per_turn"] = timed.cpu_s / turns if turns else None
    return row


def _seed_chat(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    return _with_cpu(spec, lambda s: chat.run_chat(s, env, sizes, graphs.SEED, durability=True))


def _realistic_chat(spec: SaverSpec, env: Env, sizes: Sizes, _: Any) -> dict[str, Any]:
    return _with_cpu(spec, lambda s: chat.run_chat(s, env, sizes, graphs.realistic_script()))


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
        skips=(ENCRYPTED,),
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
    Workload(
        "8",
        "replicated bucket",
        "a chat written in one bucket and copied to another object by object, in random "
        "order, with lag, while a replica reader is probed (clear and encrypted): errors, "
        "wrong answers and staleness over 2,000 probes; a failover with both regions "
        "writing, then healing: checkpoints lost; rclone as the replicator",
        each_saver=replicas.run_replicas,
        savers=("objstore-s3",),
    ),
)

BY_ID: dict[str, Workload] = {w.id: w for w in WORKLOADS}
IDS: tuple[str, ...] = tuple(BY_ID)
