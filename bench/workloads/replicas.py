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
from typing import Any

from langchain_core.messages import HumanMessage

from bench.graphs import noisy_chat_graph
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


def _at(checkpoint_id: str) -> dict[str, Any]:
    return {"configurable": THREAD["configurable"] | {"checkpoint_id": checkpoint_id}}


def same_checkpoint(replica: Any, source: Any) -> bool:
    """Whether a replica's tuple is the source's checkpoint, its pending writes a subset."""
    writes = {(w[0], w[1]) for w in source.pending_writes or []}
    return (
        replica.checkpoint == source.checkpoint
        and replica.metadata == source.metadata
        and replica.parent_config == source.parent_config
        and {(w[0], w[1]) for w in replica.pending_writes or []} <= writes
    )


class Probes:
    """What the probes of a replica found."""

    def __init__(self) -> None:
        self.count = self.errors = self.wrong = self.empty = 0
        self.behind: list[int] = []
        self.seconds = 0.0
        self.first_error = ""

    def probe(self, reader: ObjectStoreSaver, writer: ObjectStoreSaver, history: list[str]) -> None:
        """One ``get_tuple`` of the replica, checked against the source."""
        self.count += 1
        t0 = time.perf_counter()
        try:
            got = reader.get_tuple(THREAD)
        except Exception as exc:  # noqa: BLE001 -- counted: the figure is how many
            self.errors += 1
            self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:300]
            return
        finally:
            self.seconds += time.perf_counter() - t0
        if got is None:
            self.empty += 1
            return
        cid = got.config["configurable"]["checkpoint_id"]
        source = writer.get_tuple(_at(cid))
        if cid not in history or source is None or not same_checkpoint(got, source):
            self.wrong += 1
            return
        self.behind.append(history.index(cid))

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
    turns = 12 if sizes.chat_turns == QUICK.chat_turns else 30
    return measure_replicas(env, turns=turns, probes=2_100, rclone_turns=8)


def measure_replicas(env: Env, *, turns: int, probes: int, rclone_turns: int) -> dict[str, Any]:
    """Probes of a replica over a chat of ``turns`` (about ``probes`` of them, in clear and
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
    }
