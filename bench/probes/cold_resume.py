"""Requests a cold replica sends to resume a long chat: the seed chat's latest read.

``python -m bench.probes.cold_resume --turns 60 [--realistic]`` plays
workload 1's chat (1b's with ``--realistic``)
for that many turns on a local-directory store (counted by
:class:`~objstore_saver.MeteredStore`), then opens a fresh saver on the same
store, one that remembers nothing, and reads the thread's latest checkpoint
as a replica taking over the conversation would: the requests by kind and
the rounds of requests, and that the history came back whole.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bench.graphs import SEED, Script, chat_graph, realistic_script
from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver


def run(turns: int, script: Script = SEED) -> dict[str, Any]:
    """Play ``turns`` of ``script``'s chat, then count a cold replica's latest read."""
    config = {"configurable": {"thread_id": "seed-chat"}}
    with tempfile.TemporaryDirectory() as root:
        store = LocalStore(root, fsync=False)
        with ObjectStoreSaver(store) as writer:
            graph = chat_graph(writer, script)
            for t in range(turns):
                graph.invoke({"messages": script.inputs(t)}, config)
        metered = MeteredStore(store)
        with ObjectStoreSaver(metered) as cold:
            got = cold.get_tuple(config)
            counts = metered.snapshot()
    assert got is not None
    messages = got.checkpoint["channel_values"]["messages"]
    return {
        "turns": turns,
        "messages": len(messages),
        "complete": len(messages) == 2 * turns + 1,
        "requests": counts.requests,
        "total_requests": counts.total_requests,
        "bytes_read": counts.bytes_received,
    }


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument(
        "--realistic", action="store_true", help="workload 1b's chat: every message a value"
    )
    args = parser.parse_args()
    print(json.dumps(run(args.turns, realistic_script() if args.realistic else SEED), indent=1))


if __name__ == "__main__":
    main()
