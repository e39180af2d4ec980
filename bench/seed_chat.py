"""Workload 1 alone: a 30-turn chat, bytes and requests per turn.

Run ``python -m bench.seed_chat [--realistic]`` (local directory store,
counts through MeteredStore; ``--realistic`` plays workload 1b's script).
Counts, not timings: they are the same on every machine. The same workload
against every saver is workload 1 of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bench.graphs import SEED, Script, chat_graph, realistic_script
from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver


def run(turns: int, script: Script = SEED) -> dict[str, Any]:
    """``turns`` turns of ``script``'s chat: bytes, objects and requests of each."""
    with tempfile.TemporaryDirectory() as root:
        store = MeteredStore(LocalStore(root, fsync=False))
        rows = []
        with ObjectStoreSaver(store, client_encryption=False) as saver:
            graph = chat_graph(saver, script)
            config = {"configurable": {"thread_id": "seed-chat"}}
            for t in range(turns):
                store.reset()
                graph.invoke({"messages": script.inputs(t)}, config)
                m = store.snapshot()
                rows.append(
                    {
                        "turn": t,
                        "bytes_written": m.bytes_sent,
                        "objects_written": m.put_requests,
                        "requests": m.requests,
                    }
                )
    written = [r["bytes_written"] for r in rows]
    early, late = written[5:10], written[25:30]
    return {
        "turns": rows,
        "total_bytes_written": sum(written),
        "total_mib": round(sum(written) / 2**20, 4),
        "flatness_25_29_over_5_9": round((sum(late) / len(late)) / (sum(early) / len(early)), 3)
        if len(written) >= 30
        else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument(
        "--realistic",
        action="store_true",
        help="workload 1b's script: the same lengths, words that compress like prose",
    )
    parser.add_argument("--json", action="store_true", help="print the full JSON report")
    args = parser.parse_args()
    report = run(args.turns, realistic_script() if args.realistic else SEED)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("turn  bytes  objects  requests")
    for r in report["turns"]:
        print(f"{r['turn']:>4} {r['bytes_written']:>6} {r['objects_written']:>8}  {r['requests']}")
    print(f"total bytes written: {report['total_bytes_written']} ({report['total_mib']} MiB)")
    print(f"flatness (mean turns 25-29 / mean turns 5-9): {report['flatness_25_29_over_5_9']}")


if __name__ == "__main__":
    main()
