"""Workload 8: a replicated bucket probed, failed over and healed, on a small chat."""

from __future__ import annotations

import shutil

import system_deps
from langchain_core.messages import HumanMessage

from bench.graphs import noisy_chat_graph
from bench.savers import Env
from bench.workloads import replicas


def test_a_small_run_fills_every_part_of_the_row(env: Env) -> None:
    row = replicas.measure_replicas(env, turns=3, probes=45, rclone_turns=2, agent_turns=2)
    for mode in ("clear", "encrypted"):
        r = row[mode]
        assert r["probes"] >= 45 and r["converged"], mode
        assert (r["errors"], r["wrong"], r["conflicts"]) == (0, 0, 0), r
        assert r["at_head"] + r["empty"] <= r["probes"]
        agent = row["agent"][mode]
        assert agent["converged"] and agent["conflicts"] == 0, agent
        assert (agent["namespaces"], agent["interrupts"], agent["parallel_writes"]) == (2, 2, 3)
        assert sum(agent[k]["probes"] for k in ("root", "subgraphs", "state")) >= 45, agent
        for kind in ("root", "subgraphs", "state"):
            assert (agent[kind]["errors"], agent[kind]["wrong"]) == (0, 0), (kind, agent[kind])
    for mode in ("failover", "failover_encrypted"):
        f = row[mode]
        assert f["written"] > 0 and f["lost"] == 0 and f["heads_agree"] and f["verify_clean"], f
    if shutil.which("rclone") is None:
        assert "rclone is not installed" in row["rclone"]["error"]
        system_deps.missing("rclone")
    assert row["rclone"]["errors"] == 0 and row["rclone"]["lost"] == 0, row["rclone"]


def test_a_probe_that_answers_another_conversation_is_wrong(env: Env) -> None:
    from objstore_saver import ObjectStoreSaver

    stores = [replicas._store(env, env.new_bucket(n)) for n in ("source", "other")]
    savers = [ObjectStoreSaver(s, client_encryption=False) for s in stores]
    for seed, saver in enumerate(savers):
        noisy_chat_graph(saver, seed=seed).invoke(
            {"messages": [HumanMessage("hi", id="h0")]}, replicas.THREAD
        )
    probes = replicas.Probes()
    probes.probe(savers[1], savers[0], replicas._history(savers[0]))
    probes.probe(savers[0], savers[0], replicas._history(savers[0]))
    for saver in savers:
        saver.close()
    assert (probes.count, probes.wrong, probes.behind) == (2, 1, [0])
