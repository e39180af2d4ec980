"""Workload 8: a replicated bucket, read while objects arrive, failed over and healed.

Two buckets on the S3 server are two regions. A chat whose answers do not
compress (:func:`bench.graphs.noisy_chat_graph`) writes in ``east``; the
replicator of :mod:`objstore_saver.testing.replication` copies its objects
to ``west`` one by one, in random order, with lag; between copies a saver on
``west`` with ``replica_lag`` is probed (``get_tuple`` of the thread, at
random moments), in clear and encrypted. Each answer is compared with what
``east`` holds for the same checkpoint id: an error or a different
checkpoint is a failure; staleness is how many checkpoints the answer is
behind ``east``'s head.

The same probes run over an agent (:func:`bench.graphs.noisy_agent_graph`)
with a subgraph, an interrupt in it and parallel writes: ``get_tuple`` of the
root namespace and of the subgraphs' namespaces, and ``get_state(config,
subgraphs=True)`` of the graph on ``west``, each compared with ``east``'s
checkpoint of the same id and namespace.

Then a failover: ``east`` and ``west`` are cut off, both write to the same
thread (``west`` from its newest complete checkpoint), then replicate both
ways until settled; a checkpoint either region wrote and either bucket lacks
is lost. Last, the same probes with Debian's ``rclone copy`` as the
replicator (when installed).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import Command

from bench.graphs import noisy_agent_graph, noisy_chat_graph
from bench.savers import REGION, Env, SaverSpec
from bench.workloads.sizes import QUICK, Sizes
from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.storage import LeanS3Store
from objstore_saver.testing.replication import BothWays, Replicator, rclone_copy

#: The replica's bound: S3 Replication Time Control's 15 minutes.
LAG_S = 900.0
THREAD = {"configurable": {"thread_id": "replicated", "checkpoint_ns": ""}}


def _store(env: Env, bucket: str) -> LeanS3Store:
    return LeanS3Store(bucket, endpoint_url=env.proxy_url, region_name=REGION)


def _saver(store: Any, encryption: ClientEncryption | None, **options: Any) -> ObjectStoreSaver:
    return ObjectStoreSaver(store, client_encryption=encryption or False, **options)


def _at(checkpoint_id: str, config: dict[str, Any] = THREAD) -> dict[str, Any]:
    return {"configurable": config["configurable"] | {"checkpoint_id": checkpoint_id}}


def same_checkpoint(replica: Any, source: Any) -> bool:
    """Whether a replica's tuple is the source's checkpoint, its pending writes a subset."""
    writes = {(w[0], w[1]) for w in source.pending_writes or []}
    return (
        replica.checkpoint == source.checkpoint
        and replica.metadata == source.metadata
        and replica.parent_config == source.parent_config
        and {(w[0], w[1]) for w in replica.pending_writes or []} <= writes
    )


def wrong_tuple(got: Any, writer: ObjectStoreSaver, history: list[str], config: Any) -> str:
    """Why a replica's answer ``got`` to ``get_tuple(config)`` is wrong ("" when it is the
    source's checkpoint of the same id and namespace, ``history`` the source's ids there)."""
    c = got.config["configurable"]
    if c["checkpoint_ns"] != config["configurable"]["checkpoint_ns"]:
        return f"namespace {c['checkpoint_ns']!r} for {config['configurable']['checkpoint_ns']!r}"
    if c["checkpoint_id"] not in history:
        return f"checkpoint {c['checkpoint_id']} the source never wrote there"
    source = writer.get_tuple(_at(c["checkpoint_id"], config))
    if source is None or not same_checkpoint(got, source):
        return f"checkpoint {c['checkpoint_id']} differs from the source's"
    return ""


#: What :meth:`Probes.timed` returns for a read that raised.
_FAILED = object()


class Probes:
    """What the probes of a replica found."""

    def __init__(self) -> None:
        self.count = self.errors = self.wrong = self.empty = 0
        self.behind: list[int] = []
        self.seconds = 0.0
        self.first_error = self.first_wrong = ""

    def probe(
        self,
        reader: ObjectStoreSaver,
        writer: ObjectStoreSaver,
        history: list[str],
        config: dict[str, Any] = THREAD,
    ) -> None:
        """One ``get_tuple`` of the replica (the thread's namespace of ``config``), judged by
        :func:`wrong_tuple`."""
        got = self.timed(reader.get_tuple, config)
        if got is _FAILED:
            return
        if got is None:
            self.empty += 1
            return
        self.judge(wrong_tuple(got, writer, history, config), history, got.config)

    def judge(self, wrong: str, history: list[str], config: dict[str, Any]) -> None:
        """Count an answer: ``wrong`` (why, or "" when right), else how far it is behind."""
        if wrong:
            self.wrong += 1
            self.first_wrong = self.first_wrong or wrong[:300]
            return
        self.behind.append(history.index(config["configurable"]["checkpoint_id"]))

    def timed(self, read: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``read(*args, **kwargs)``, counted and timed; :data:`_FAILED` when it raised."""
        self.count += 1
        t0 = time.perf_counter()
        try:
            return read(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- counted: the figure is how many
            self.errors += 1
            self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:300]
            return _FAILED
        finally:
            self.seconds += time.perf_counter() - t0

    def row(self) -> dict[str, Any]:
        return {
            "probes": self.count,
            "errors": self.errors,
            "wrong": self.wrong,
            "empty": self.empty,
            "behind_mean": sum(self.behind) / len(self.behind) if self.behind else 0.0,
            "behind_max": max(self.behind, default=0),
            "at_head": sum(1 for b in self.behind if b == 0),
            "ms_per_probe": self.seconds / max(1, self.count) * 1000,
            "first_error": self.first_error,
            "first_wrong": self.first_wrong,
        }


def _history(writer: ObjectStoreSaver) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in writer.list(THREAD)]


def _probed_chat(
    env: Env, turns: int, probes_wanted: int, encryption: ClientEncryption | None
) -> dict[str, Any]:
    east, west = (_store(env, env.new_bucket(f"replica-{r}")) for r in ("east", "west"))
    rep = Replicator(east, west, seed=8, max_lag=3, per_tick=1)
    rng = random.Random(8)
    probes = Probes()
    per_turn = probes_wanted // turns + 1
    with _saver(east, encryption) as writer, _saver(west, encryption, replica_lag=LAG_S) as reader:
        graph = noisy_chat_graph(writer, seed=8)
        for turn in range(turns):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, THREAD)
            history = _history(writer)
            for _ in range(per_turn):
                if rng.random() < 0.3:
                    rep.tick()
                probes.probe(reader, writer, history)
        rep.drain()
        caught_up = reader.get_tuple(THREAD)
        head = writer.get_tuple(THREAD)
        converged = caught_up is not None and head is not None and caught_up.config == head.config
    return probes.row() | {
        "turns": turns,
        "checkpoints": len(history),
        "converged": converged,
        "copied": rep.stats.copied,
        "conflicts": len(rep.conflicts),
    }


#: The agent's thread; each ``review`` run has a namespace of its own under it.
AGENT = {"configurable": {"thread_id": "replicated-agent", "checkpoint_ns": ""}}


def _in(ns: str) -> dict[str, Any]:
    return {"configurable": AGENT["configurable"] | {"checkpoint_ns": ns}}


def histories(writer: ObjectStoreSaver) -> dict[str, list[str]]:
    """Each namespace of the agent's thread in the source: its checkpoint ids, newest first."""
    out: dict[str, list[str]] = {}
    for t in writer.list({"configurable": {"thread_id": AGENT["configurable"]["thread_id"]}}):
        c = t.config["configurable"]
        out.setdefault(c["checkpoint_ns"], []).append(c["checkpoint_id"])
    return {ns: sorted(ids, reverse=True) for ns, ids in out.items()}


class Expected(BaseCheckpointSaver):
    """What a replica's graph should show: a read-only checkpointer of one tuple per namespace
    (the source's checkpoints with the replica's pending writes) under a graph built by
    ``graph``, which shows its state from them."""

    def __init__(self, graph: Callable[[Any], Any]) -> None:
        super().__init__()
        self.tuples: dict[str, CheckpointTuple] = {}
        self.graph = graph(self)

    def hold(self, replica: CheckpointTuple, source: CheckpointTuple) -> None:
        """Hold ``source`` with only the pending writes ``replica`` has."""
        have = {(w[0], w[1]) for w in replica.pending_writes or []}
        writes = [w for w in source.pending_writes or [] if (w[0], w[1]) in have]
        self.tuples[source.config["configurable"]["checkpoint_ns"]] = source._replace(
            pending_writes=writes
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.tuples.get(config["configurable"].get("checkpoint_ns", ""))


def same_state(replica: Any, expected: Any) -> bool:
    """Whether two ``get_state(subgraphs=True)`` snapshots show the same checkpoints and state."""
    pinned = [s.config["configurable"].get("checkpoint_id") for s in (replica, expected)]
    subs = [[t.state for t in s.tasks if t.state is not None] for s in (replica, expected)]
    return (
        pinned[0] == pinned[1]
        and replica.values == expected.values
        and replica.next == expected.next
        and replica.metadata == expected.metadata
        and [i.id for i in replica.interrupts] == [i.id for i in expected.interrupts]
        and len(subs[0]) == len(subs[1])
        and all(same_state(a, b) for a, b in zip(*subs, strict=True))
    )


def _pin(config: dict[str, Any]) -> dict[str, Any]:
    c = config["configurable"]
    return {"configurable": {k: c[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}}


def wrong_state(
    snap: Any,
    reader: ObjectStoreSaver,
    writer: ObjectStoreSaver,
    expected: Expected,
    hist: dict[str, list[str]],
) -> str:
    """Why a replica graph's ``get_state(subgraphs=True)`` snapshot ``snap`` is wrong ("" when
    right; ``hist``: the source's ids by namespace, newest first).

    Right when its checkpoint and each subgraph's are ones the source wrote in
    their namespaces, equal to the source's, and the snapshot is the one the
    source's graph shows from the source's checkpoints with the replica's
    pending writes (the latest state applies the writes of the finished tasks).
    """
    expected.tuples.clear()
    for state in [snap, *(t.state for t in snap.tasks if t.state is not None)]:
        c = state.config["configurable"]
        if "checkpoint_id" not in c:
            continue  # a subgraph none of whose checkpoints is complete here yet
        mine = reader.get_tuple(_pin(state.config))
        if mine is None:
            return f"{c['checkpoint_ns']!r} {c['checkpoint_id']}: not complete on a second read"
        wrong = wrong_tuple(mine, writer, hist.get(c["checkpoint_ns"], []), state.config)
        if wrong:
            return wrong
        expected.hold(mine, writer.get_tuple(_pin(state.config)))
    if not same_state(snap, expected.graph.get_state(AGENT, subgraphs=True)):
        return f"the state at {snap.config['configurable']['checkpoint_id']} differs"
    return ""


def probe_state(
    probes: Probes,
    replica_graph: Any,
    reader: ObjectStoreSaver,
    writer: ObjectStoreSaver,
    expected: Expected,
    hist: dict[str, list[str]],
) -> None:
    """One ``get_state(subgraphs=True)`` of the replica graph, judged by :func:`wrong_state`."""
    snap = probes.timed(replica_graph.get_state, AGENT, subgraphs=True)
    if snap is _FAILED:
        return
    if snap.metadata is None:  # no checkpoint yet
        probes.empty += 1
        return
    probes.judge(wrong_state(snap, reader, writer, expected, hist), hist[""], snap.config)


def _agent_shape(writer: ObjectStoreSaver, hist: dict[str, list[str]]) -> dict[str, Any]:
    """What the source holds of the agent: checkpoints, namespaces, interrupts, parallel writes."""
    interrupts = parallel = 0
    for tup in writer.list(AGENT):
        channels = [w[1] for w in tup.pending_writes or []]
        interrupts += "__interrupt__" in channels
        parallel = max(parallel, len({w[0] for w in tup.pending_writes or [] if w[1] == "notes"}))
    return {
        "checkpoints": len(hist.get("", [])),
        "subgraph_checkpoints": sum(len(ids) for ns, ids in hist.items() if ns),
        "namespaces": sum(1 for ns in hist if ns),
        "interrupts": interrupts,
        "parallel_writes": parallel,
    }


def _probed_agent(
    env: Env, turns: int, probes_wanted: int, encryption: ClientEncryption | None
) -> dict[str, Any]:
    """The probes of :func:`_probed_chat` over :func:`bench.graphs.noisy_agent_graph`: the
    root namespace, the subgraphs' namespaces and ``get_state(subgraphs=True)``."""
    east, west = (_store(env, env.new_bucket(f"agent-{r}")) for r in ("east", "west"))
    rep = Replicator(east, west, seed=8, max_lag=3, per_tick=1)
    rng = random.Random(8)
    kinds = {"root": Probes(), "subgraphs": Probes(), "state": Probes()}
    per_invoke = probes_wanted // (2 * turns) + 1
    with _saver(east, encryption) as writer, _saver(west, encryption, replica_lag=LAG_S) as reader:
        graph, replica_graph = noisy_agent_graph(writer, seed=8), noisy_agent_graph(reader, seed=8)
        expected = Expected(lambda saver: noisy_agent_graph(saver, seed=8))
        for turn in range(turns):
            # A turn stops at the subgraph's interrupt; the second invocation resumes it.
            human = {"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}
            for given in (human, Command(resume=f"approved {turn}")):
                graph.invoke(given, AGENT)
                hist = histories(writer)
                subgraphs = sorted((ns for ns in hist if ns), key=lambda ns: hist[ns][0])
                for _ in range(per_invoke):
                    if rng.random() < 0.3:
                        rep.tick()
                    kind = rng.choice(list(kinds))
                    if kind == "state":
                        probe_state(kinds[kind], replica_graph, reader, writer, expected, hist)
                        continue
                    # The subgraph run being written half the time, any one else.
                    newest = rng.random() < 0.5
                    ns = (
                        "" if kind == "root" else subgraphs[-1] if newest else rng.choice(subgraphs)
                    )
                    kinds[kind].probe(reader, writer, hist[ns], _in(ns))
        rep.drain()
        converged = all(
            (a := reader.get_tuple(_in(ns))) is not None
            and a.config == writer.get_tuple(_in(ns)).config
            for ns in hist
        )
        shape = _agent_shape(writer, hist)
    return (
        {k: p.row() for k, p in kinds.items()}
        | shape
        | {
            "turns": turns,
            "converged": converged,
            "copied": rep.stats.copied,
            "conflicts": len(rep.conflicts),
        }
    )


def _failover(env: Env, encryption: ClientEncryption | None) -> dict[str, Any]:
    east, west = (_store(env, env.new_bucket(f"failover-{r}")) for r in ("east", "west"))
    pair = BothWays.between(east, west, seed=9, max_lag=3, per_tick=4)
    with (
        _saver(east, encryption, replica_lag=LAG_S) as in_east,
        _saver(west, encryption, replica_lag=LAG_S) as in_west,
    ):
        east_graph, west_graph = noisy_chat_graph(in_east, seed=1), noisy_chat_graph(in_west, 2)
        for turn in range(6):
            east_graph.invoke({"messages": [HumanMessage(f"e{turn}", id=f"e{turn}")]}, THREAD)
            pair.tick()
        # A conversation fails over once a checkpoint of it is complete in the
        # other region (docs/replication.md: an encrypted thread's key with it).
        for _ in range(1000):
            if in_west.get_tuple(THREAD) is not None:
                break
            pair.tick()
        with pair.partitioned():
            for turn in range(6, 10):
                east_graph.invoke({"messages": [HumanMessage(f"e{turn}", id=f"e{turn}")]}, THREAD)
            for turn in range(4):
                west_graph.invoke({"messages": [HumanMessage(f"w{turn}", id=f"w{turn}")]}, THREAD)
            written = set(_history(in_east)) | set(_history(in_west))
            west_head = in_west.get_tuple(THREAD)
        pair.drain()
        in_both = set(_history(in_east)) & set(_history(in_west))
        heads = [s.get_tuple(THREAD) for s in (in_east, in_west)]
        agree = all(
            h is not None and west_head is not None and h.config == west_head.config for h in heads
        )
        clean = in_east.verify().ok and in_west.verify().ok
    return {
        "written": len(written),
        "lost": len(written - in_both),
        "heads_agree": agree,
        "verify_clean": clean,
        "conflicts": len(pair.a_to_b.conflicts) + len(pair.b_to_a.conflicts),
    }


def _rclone(env: Env, turns: int) -> dict[str, Any]:
    exe = shutil.which("rclone")
    if exe is None:
        return {"error": "rclone is not installed (apt-get install rclone)"}
    east_b, west_b = env.new_bucket("rclone-east"), env.new_bucket("rclone-west")
    command, rc_env = rclone_copy(
        east_b,
        west_b,
        endpoint_url=env.s3_url,
        region=REGION,
        access_key=env.keys[0],
        secret_key=env.keys[1],
        rclone=exe,
    )
    probes = Probes()
    east, west = _store(env, east_b), _store(env, west_b)
    with _saver(east, None) as writer, _saver(west, None, replica_lag=LAG_S) as reader:
        graph = noisy_chat_graph(writer, seed=10)
        for turn in range(turns):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, THREAD)
            history = _history(writer)
            copying = subprocess.Popen(command, env=rc_env, stderr=subprocess.PIPE, text=True)
            try:
                for _ in range(500):
                    probes.probe(reader, writer, history)
                    if copying.poll() is not None:
                        break
            finally:
                _, err = copying.communicate(timeout=300)
            if copying.returncode != 0:
                return {"error": f"rclone copy exited {copying.returncode}: {err[-300:]}"}
        lost = len(set(_history(writer)) - set(_history(reader)))
    return probes.row() | {"lost": lost}


def run_replicas(spec: SaverSpec, env: Env, sizes: Sizes, _: Any = None) -> dict[str, Any]:
    """Workload 8's row for objstore-saver on S3 (the replicas are its own buckets)."""
    quick = sizes.chat_turns == QUICK.chat_turns
    return measure_replicas(
        env,
        turns=12 if quick else 30,
        probes=2_100,
        rclone_turns=8,
        agent_turns=4 if quick else 10,
    )


def measure_replicas(
    env: Env, *, turns: int, probes: int, rclone_turns: int, agent_turns: int
) -> dict[str, Any]:
    """Probes of a replica over a chat of ``turns`` and over ``agent_turns`` of the agent with a
    subgraph, an interrupt and parallel writes (about ``probes`` of each, in clear and
    encrypted), the failovers, and ``rclone_turns`` turns copied by rclone."""

    def key() -> ClientEncryption:
        return ClientEncryption.of(LocalMasterKey(os.urandom(32)))

    return {
        "lag_s": LAG_S,
        "clear": _probed_chat(env, turns, probes, None),
        "encrypted": _probed_chat(env, turns, probes, key()),
        "failover": _failover(env, None),
        "failover_encrypted": _failover(env, key()),
        "rclone": _rclone(env, rclone_turns),
        "agent": {
            "clear": _probed_agent(env, agent_turns, probes, None),
            "encrypted": _probed_agent(env, agent_turns, probes, key()),
        },
    }
