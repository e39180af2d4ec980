"""Reading a replica while its objects arrive one by one (spec §6.16, docs/replication.md).

A graph writes in one region (``east``); :class:`Replicator` copies the
bucket's objects to the other (``west``) one by one, in random order, with
lag; a saver there, told the bucket is a replica (``replica_lag``), is
probed between copies. It never raises and returns only checkpoints the
source wrote, equal to the source's (pending writes may be fewer).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.backends import Backend
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from replicas import cfg, encryption, ids, messages, open_saver, same

from bench.graphs import noisy_agent_graph, noisy_chat_graph
from bench.workloads.replicas import AGENT, Expected, histories, wrong_state, wrong_tuple
from objstore_saver import ObjectStoreSaver
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.errors import ConfigurationError, MissingObjectError
from objstore_saver.testing.replication import BothWays, Replicator

pytestmark = pytest.mark.backends("local", "s3-lean")
__all__ = ["encryption"]  # the fixture, imported for pytest to find


def test_a_replica_reader_never_raises_and_returns_what_the_source_wrote(
    backend: Backend, encryption: Any
) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    rep = Replicator(east, west, seed=17, max_lag=3, per_tick=4)
    rng = random.Random(5)
    probes = found = 0
    with (
        open_saver(east, encryption) as writer,
        open_saver(west, encryption, replica_lag=900) as reader,
    ):
        graph = noisy_chat_graph(writer, seed=1)
        for turn in range(10):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
            history = [t.config["configurable"]["checkpoint_id"] for t in writer.list(cfg("t"))]
            for _ in range(rng.randint(4, 9)):
                rep.tick()
                probes += 1
                latest = reader.get_tuple(cfg("t"))
                if latest is None:
                    continue
                found += 1
                cid = latest.config["configurable"]["checkpoint_id"]
                assert cid in history, "the replica returned a checkpoint the source never wrote"
                same(latest, writer.get_tuple(cfg("t", cid)))
                # The newest complete one: no newer checkpoint reads complete here.
                for newer in history[: history.index(cid)]:
                    assert reader.get_tuple(cfg("t", newer)) is None, newer
                old = rng.choice(history)
                by_id = reader.get_tuple(cfg("t", old))
                if by_id is not None:
                    same(by_id, writer.get_tuple(cfg("t", old)))
            for tup in reader.list(cfg("t"), limit=5):
                cid = tup.config["configurable"]["checkpoint_id"]
                same(tup, writer.get_tuple(cfg("t", cid)))
        rep.drain()
        head = writer.get_tuple(cfg("t"))
        assert head is not None
        caught_up = reader.get_tuple(cfg("t"))
        assert caught_up is not None
        assert caught_up.config == head.config
        same(caught_up, head)
        assert len(list(reader.list(cfg("t")))) == len(list(writer.list(cfg("t"))))
    assert probes >= 40 and found > probes // 2


def _agent_turn(graph: Any, turn: int) -> Iterator[None]:
    """One turn of :func:`noisy_agent_graph`: to the subgraph's interrupt, then resumed."""
    graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, AGENT)
    yield
    graph.invoke(Command(resume=f"approved {turn}"), AGENT)
    yield


def _in(ns: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    at = {"checkpoint_id": checkpoint_id} if checkpoint_id else {}
    return {"configurable": AGENT["configurable"] | {"checkpoint_ns": ns} | at}


def test_a_replica_reader_of_subgraphs_interrupts_and_parallel_writes_is_never_wrong(
    backend: Backend, encryption: Any
) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    rep = Replicator(east, west, seed=31, max_lag=3, per_tick=3)
    rng = random.Random(6)
    answers = {"root": 0, "subgraph": 0, "state": 0}
    with (
        open_saver(east, encryption) as writer,
        open_saver(west, encryption, replica_lag=900) as reader,
    ):
        graph, replica_graph = noisy_agent_graph(writer, seed=1), noisy_agent_graph(reader, seed=1)
        expected = Expected(lambda saver: noisy_agent_graph(saver, seed=1))
        for turn in range(3):
            for _ in _agent_turn(graph, turn):
                hist = histories(writer)
                newest = max((ns for ns in hist if ns), key=lambda ns: hist[ns][0])
                for _ in range(rng.randint(3, 5)):
                    rep.tick()
                    for kind, ns in (("root", ""), ("subgraph", newest), ("subgraph", None)):
                        ns = rng.choice(sorted(n for n in hist if n)) if ns is None else ns
                        got = reader.get_tuple(_in(ns))
                        if got is not None:
                            answers[kind] += 1
                            assert not wrong_tuple(got, writer, hist[ns], _in(ns))
                    snap = replica_graph.get_state(AGENT, subgraphs=True)
                    if snap.metadata is not None:
                        answers["state"] += 1
                        assert not wrong_state(snap, reader, writer, expected, hist)
        rep.drain()
        for ns in hist:  # caught up: every namespace's head
            head, caught_up = writer.get_tuple(_in(ns)), reader.get_tuple(_in(ns))
            assert head is not None and caught_up is not None and caught_up.config == head.config
        # Three turns: three subgraph runs, each interrupted; three parallel writes a step.
        assert len(hist) == 4
        tuples = list(writer.list(AGENT))
        assert sum(any(w[1] == "__interrupt__" for w in t.pending_writes) for t in tuples) == 3
        assert max(sum(w[1] == "notes" for w in t.pending_writes) for t in tuples) == 3
        assert (
            replica_graph.get_state(AGENT, subgraphs=True).values == graph.get_state(AGENT).values
        )
    assert min(answers.values()) >= 10, answers


def test_manifests_before_their_objects_raise_unless_the_bucket_is_a_replica(
    backend: Backend,
) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    with open_saver(east, False) as writer:
        graph = noisy_chat_graph(writer, seed=1, big=400 * 1024)
        for turn in range(2):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
        first = list(writer.list(cfg("t")))[-1]
    # The manifests and writes have arrived, the content objects not yet.
    Replicator(east, west, prefix="threads/_t/checkpoints/", seed=0, max_lag=0).drain()
    with open_saver(west, False) as plain, pytest.raises(MissingObjectError):
        plain.get_tuple(cfg("t"))
    with open_saver(west, False, replica_lag=900) as replica:
        newest_complete = replica.get_tuple(cfg("t"))
        assert newest_complete is not None
        same(newest_complete, first)
        assert newest_complete.config == first.config
        assert [t.config for t in replica.list(cfg("t"))] == [first.config]


def test_an_object_missing_longer_than_the_lag_is_corruption(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    with open_saver(east, False) as writer:
        graph = noisy_chat_graph(writer, seed=1, big=400 * 1024)  # parts: never embedded
        for turn in range(2):
            graph.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
    Replicator(east, west, seed=0, max_lag=0).drain()
    big = [o.key for o in west.list("threads/", limit=1000).objects if "/objects/" in o.key]
    assert big, "the big answer is an object of its own"
    west.delete(big)  # never arrives
    with open_saver(west, False, replica_lag=900) as patient:
        # The newest complete checkpoint: the input of turn 0 (step -1). Step 0
        # holds the big answer as its pending write, every later one as a value.
        older = patient.get_tuple(cfg("t"))
        assert older is not None
        assert older.metadata["step"] == -1
        assert "messages" not in older.checkpoint["channel_values"]
    with open_saver(west, False, replica_lag=1e-3) as strict, pytest.raises(MissingObjectError):
        strict.get_tuple(cfg("t"))


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "soon"])
def test_a_replica_lag_that_is_no_positive_duration_is_refused(backend: Backend, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="replica_lag"):
        ObjectStoreSaver(backend.store("west/"), client_encryption=False, replica_lag=bad)


def test_failover_then_heal_loses_nothing_and_both_regions_agree(
    backend: Backend, encryption: Any
) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    pair = BothWays.between(east, west, seed=23, max_lag=3, per_tick=5)
    with (
        open_saver(east, encryption, replica_lag=900) as in_east,
        open_saver(west, encryption, replica_lag=900) as in_west,
    ):
        east_graph = noisy_chat_graph(in_east, seed=1)
        west_graph = noisy_chat_graph(in_west, seed=2)
        for turn in range(4):
            east_graph.invoke({"messages": [HumanMessage(f"e{turn}", id=f"e{turn}")]}, cfg("t"))
            pair.tick()
        # Fail over once a checkpoint is complete there (docs/replication.md).
        for _ in range(1000):
            if in_west.get_tuple(cfg("t")) is not None:
                break
            pair.tick()
        with pair.partitioned():
            # East goes on, unheard; west fails over and continues from the
            # newest checkpoint that is complete there.
            for turn in range(4, 7):
                east_graph.invoke({"messages": [HumanMessage(f"e{turn}", id=f"e{turn}")]}, cfg("t"))
            resumed = in_west.get_tuple(cfg("t"))
            assert resumed is not None
            for turn in range(3):
                west_graph.invoke({"messages": [HumanMessage(f"w{turn}", id=f"w{turn}")]}, cfg("t"))
            east_tail = in_east.get_tuple(cfg("t"))
            west_head = in_west.get_tuple(cfg("t"))
            assert east_tail is not None and west_head is not None
            written = ids(in_east, "t") | ids(in_west, "t")
        pair.drain()
        assert pair.a_to_b.conflicts == [] and pair.b_to_a.conflicts == []
        # Every checkpoint either region wrote is in both.
        assert ids(in_east, "t") == ids(in_west, "t") == written
        # The newer branch is the head in both; the other region's tail is history.
        for saver in (in_east, in_west):
            head = saver.get_tuple(cfg("t"))
            assert head is not None and head.config == west_head.config
            assert messages(head) == messages(west_head)
            assert messages(head)[-2:] == ["w2", "ai-" + str(len(messages(head)) - 1)]
            tail = saver.get_tuple(east_tail.config)
            assert tail is not None and messages(tail) == messages(east_tail)
            assert saver.verify().ok
        resumed_at = messages(resumed)
        assert messages(west_head)[: len(resumed_at)] == resumed_at


def test_region_local_prune_and_verify_leave_what_is_still_arriving(backend: Backend) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    with open_saver(east, False) as writer:
        chat = noisy_chat_graph(writer, seed=1, big=400 * 1024)
        for turn in range(3):
            chat.invoke({"messages": [HumanMessage(f"turn {turn}", id=f"h{turn}")]}, cfg("t"))
    Replicator(east, west, prefix="threads/_t/checkpoints/", seed=0, max_lag=0).drain()
    with open_saver(west, False, replica_lag=900) as replica:
        report = replica.verify()
        assert report.ok and report.arriving > 0
        pruned = replica.prune(["t"], keep_last=1, min_age=0)
        assert pruned["threads"][0]["left_alone"] == "arriving"
        assert pruned["checkpoints_deleted"] == 0
    with open_saver(west, False) as plain:  # not a replica: the same state is corruption
        report = plain.verify()
        assert not report.ok and {p.kind for p in report.problems} == {"missing"}
    Replicator(east, west, seed=0, max_lag=0).drain()
    with open_saver(west, False, replica_lag=900) as replica:
        report = replica.verify()
        assert report.ok and report.arriving == 0


def test_the_jobs_and_the_command_line_take_the_replica_lag(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from objstore_saver import ops
    from objstore_saver.cli import main

    east, west = backend.store("east/"), backend.store("west/")
    with open_saver(east, False) as writer:
        chat = noisy_chat_graph(writer, seed=1, big=400 * 1024)
        chat.invoke({"messages": [HumanMessage("turn 0", id="h0")]}, cfg("t"))
    Replicator(east, west, prefix="threads/_t/checkpoints/", seed=0, max_lag=0).drain()
    url = backend.url("west/")
    monkeypatch.setenv("OBJSTORE_SAVER_REPLICA_LAG", "900")
    report = ops.verify(config=ops.OpsConfig.from_env(url=url))
    assert report["ok"] and report["arriving"] > 0
    monkeypatch.delenv("OBJSTORE_SAVER_REPLICA_LAG")
    assert not ops.verify(config=ops.OpsConfig.from_env(url=url))["ok"]
    assert main(["verify", "--url", url, "--replica-lag", "900", "--json", "--no-progress"]) == 0
    assert main(["verify", "--url", url, "--json", "--no-progress"]) != 0
    monkeypatch.setenv("OBJSTORE_SAVER_REPLICA_LAG", "soon")
    with pytest.raises(ConfigurationError, match="OBJSTORE_SAVER_REPLICA_LAG"):
        ops.OpsConfig.from_env(url=url)


def test_a_replica_makes_no_second_key_for_a_thread_whose_key_is_arriving(
    backend: Backend,
) -> None:
    from objstore_saver.errors import ThreadKeyError

    master = LocalMasterKey(os.urandom(32))
    east, west = backend.store("east/"), backend.store("west/")
    with ObjectStoreSaver(east, client_encryption=ClientEncryption.of(master)) as writer:
        chat = noisy_chat_graph(writer, seed=1)
        chat.invoke({"messages": [HumanMessage("turn 0", id="h0")]}, cfg("t"))
    # The thread's objects have arrived, its key object (keys/threads/_t) not.
    Replicator(east, west, prefix="threads/", seed=0, max_lag=0).drain()
    settings = ClientEncryption.of(master)
    with ObjectStoreSaver(west, client_encryption=settings, replica_lag=900) as replica:
        assert replica.get_tuple(cfg("t")) is None  # nothing complete yet
        chat = noisy_chat_graph(replica, seed=2)
        with pytest.raises(ThreadKeyError, match="not arrived on this replica"):
            chat.invoke({"messages": [HumanMessage("w0", id="w0")]}, cfg("t"))
        assert not [o.key for o in west.list("keys/", limit=10).objects]
        # A thread the bucket holds nothing of is new: it gets its key.
        chat.invoke({"messages": [HumanMessage("n0", id="n0")]}, cfg("new"))
    Replicator(east, west, seed=0, max_lag=0).drain()
    with ObjectStoreSaver(west, client_encryption=settings, replica_lag=900) as replica:
        assert replica.get_tuple(cfg("t")) is not None  # the key arrived: complete


def _thread_keys(store: Any, thread: str) -> list[str]:
    """Every key under the thread's prefix but its tombstones."""
    from objstore_saver.format.keys import is_tombstone_key, thread_prefix

    held = store.list(thread_prefix(thread), limit=1000).objects
    return [o.key for o in held if not is_tombstone_key(o.key)]


@pytest.mark.parametrize(
    ("replicated", "cleanup"), [("all", "delete_thread"), ("part", "prune")], ids=str
)
def test_a_delete_travels_as_its_tombstone_and_the_replica_then_sweeps(
    backend: Backend, encryption: Any, replicated: str, cleanup: str
) -> None:
    east, west = backend.store("east/"), backend.store("west/")
    rep = Replicator(east, west, seed=13, max_lag=2, per_tick=4)
    thread = AGENT["configurable"]["thread_id"]
    with open_saver(east, encryption) as in_east:
        for turn in range(2):
            for _ in _agent_turn(noisy_agent_graph(in_east, seed=1), turn):
                pass
        noisy_chat_graph(in_east, seed=2).invoke({"messages": [HumanMessage("hi")]}, cfg("other"))
        old = histories(in_east)
        if replicated == "all":
            rep.drain()
        else:  # the delete comes while the thread is still arriving
            for _ in range(3):
                rep.tick()
        in_east.delete_thread(thread)
        assert _thread_keys(east, thread) == []
    # Deletes are not replicated: the tombstone travels, the old objects stay.
    rep.drain()
    assert _thread_keys(west, thread), "west still holds the deleted conversation"
    with open_saver(west, encryption, replica_lag=900) as in_west:
        for ns, ids in old.items():
            assert in_west.get_tuple(_in(ns)) is None, ns
            assert list(in_west.list(_in(ns))) == [], ns
            assert all(in_west.get_tuple(_in(ns, i)) is None for i in ids), ns
        assert list(in_west.list({"configurable": {"thread_id": thread}})) == []
        assert noisy_agent_graph(in_west, seed=1).get_state(AGENT).metadata is None
        assert in_west.get_tuple(cfg("other")) is not None  # the neighbour is untouched
        assert in_west.verify().ok
    if cleanup == "delete_thread":
        with open_saver(west, encryption, replica_lag=900) as in_west:
            in_west.delete_thread(thread)
        assert _thread_keys(west, thread) == []
    else:
        # West's prune leaves the thread while its objects may be arriving
        # (spec §6.16), then removes the ended conversation's checkpoints and
        # writes and marks its objects for the sweep.
        with open_saver(west, encryption, replica_lag=900) as in_west:
            report = in_west.prune([thread], keep_last=1, min_age=0)
            assert report["threads"][0]["left_alone"] == "arriving"
        time.sleep(1.1)
        with open_saver(west, encryption, replica_lag=1.0) as in_west:
            report = in_west.prune([thread], keep_last=1, min_age=0)
        assert report["checkpoints_kept"] == 0 and report["checkpoints_deleted"] > 0, report
        # Writes whose checkpoint never arrived are orphans, left until older
        # than the reuse window and the lag (spec §6.9); no manifest is left.
        left = [k for k in _thread_keys(west, thread) if "/checkpoints/" in k]
        assert all(".w/" in k for k in left), left
    # A new conversation on the same thread id in west.
    with open_saver(west, encryption, replica_lag=900) as in_west:
        chat = noisy_chat_graph(in_west, seed=3)
        chat.invoke({"messages": [HumanMessage("again", id="w0")]}, cfg(thread))
        head = in_west.get_tuple(cfg(thread))
        assert head is not None and messages(head) == ["w0", "ai-1"]
        assert len(list(in_west.list({"configurable": {"thread_id": thread}}))) == 3
        assert in_west.verify().ok
