"""CPU of one warm ``get_tuple`` on a long chat: what reading a thread's messages costs.

``python -m bench.probes.read_cost --turns 50 [--calls 100] [--repeats 7]``
plays workload 1's chat (``turns`` turns: ``2 * turns + 1`` messages) on a
local-directory store, then calls ``get_tuple`` on its latest checkpoint
``calls`` times, ``repeats`` times over, and prints the median CPU per call
(``time.process_time``). The saver remembers the thread, so no request is
sent: the figure is decoding (the checkpoint, the messages) alone. CPU
figures vary between machines and runs; compare two trees on one machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from bench.graphs import SEED, chat_graph
from objstore_saver import LocalStore, ObjectStoreSaver


def run(turns: int, calls: int, repeats: int) -> dict[str, Any]:
    """Play the chat, then time ``get_tuple``; the median CPU per call in ms."""
    config = {"configurable": {"thread_id": "seed-chat"}}
    with tempfile.TemporaryDirectory() as root:
        saver = ObjectStoreSaver(LocalStore(root, fsync=False), client_encryption=False)
        with saver:
            graph = chat_graph(saver, SEED)
            for t in range(turns):
                graph.invoke({"messages": SEED.inputs(t)}, config, durability="exit")
            rounds = []
            for _ in range(repeats):
                started = time.process_time()
                for _ in range(calls):
                    saver.get_tuple(config)
                rounds.append((time.process_time() - started) * 1000 / calls)
            latest = saver.get_tuple(config)
    assert latest is not None
    return {
        "turns": turns,
        "messages": len(latest.checkpoint["channel_values"]["messages"]),
        "cpu_ms_per_get_tuple": round(statistics.median(rounds), 3),
        "rounds_ms": [round(r, 3) for r in rounds],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(json.dumps(run(args.turns, args.calls, args.repeats)))


if __name__ == "__main__":
    main()
