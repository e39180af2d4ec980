"""Requests per turn when two server replicas take turns on one thread (no sticky sessions).

``python -m bench.probes.replicas --turns 30`` plays workload 1's chat on a
local-directory store (counted by :class:`~objstore_saver.MeteredStore`)
with two savers, each with its own memory, as two processes behind a load
balancer would be: even turns go to one, odd turns to the other, so every
turn starts on a replica whose memory of the thread is two turns old. It
prints class A (PUT, LIST) and class B (GET) requests per turn, after the
first two turns, and checks the history came back whole.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bench.graphs import SEED, chat_graph
from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver


def run(turns: int) -> dict[str, Any]:
    """Play ``turns`` of the seed chat on two alternating replicas; count requests."""
    config = {"configurable": {"thread_id": "seed-chat"}}
    with tempfile.TemporaryDirectory() as root:
        store = MeteredStore(LocalStore(root, fsync=False))
        with ObjectStoreSaver(store) as one, ObjectStoreSaver(store) as two:
            graphs = [chat_graph(one, SEED), chat_graph(two, SEED)]
            per_turn = []
            for t in range(turns):
                store.reset()
                graphs[t % 2].invoke({"messages": SEED.inputs(t)}, config)
                per_turn.append(store.snapshot().requests)
            state = graphs[0].get_state(config)
    counted = per_turn[2:]
    n = len(counted)
    class_a = sum(r["put"] + r["list"] for r in counted) / n
    class_b = sum(r["get"] for r in counted) / n
    return {
        "turns": turns,
        "complete": len(state.values["messages"]) == 2 * turns + 1,
        "class_a_per_turn": round(class_a, 2),
        "class_b_per_turn": round(class_b, 2),
        "per_turn": counted,
    }


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    report = run(parser.parse_args().turns)
    report.pop("per_turn")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
