"""Requests of ``delete_thread`` on a long thread, and what a reader sees after it.

``python -m bench.probes.delete_cost --checkpoints 1000`` writes a thread of
that many checkpoints, each with a value stored apart from its manifest and a
``put_writes`` call, on a local-directory store, then deletes it through
:class:`~objstore_saver.MeteredStore`: the requests by kind (one listing
pass, the tombstone's PUT, batched DeleteObjects), the keys left (the
tombstone alone), and that a fresh saver finds no checkpoint. Counts, not
timings: the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.plans.requests import list_all


def run(checkpoints: int) -> dict[str, Any]:
    """Write a thread of ``checkpoints`` checkpoints, delete it, and count the delete."""
    config: Any = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    with tempfile.TemporaryDirectory() as root:
        store = LocalStore(root, fsync=False)
        with ObjectStoreSaver(store, client_encryption=False) as writer:
            for i in range(checkpoints):
                cp = empty_checkpoint()
                cp["id"] = str(uuid6(clock_seq=i))
                cp["channel_values"] = {"step": i, "notes": f"note {i} " * 400}
                cp["channel_versions"] = {"step": i + 1, "notes": i + 1}
                config = writer.put(config, cp, {"step": i}, {"step": i + 1, "notes": i + 1})
                writer.put_writes(config, [("a", i), ("b", -i)], f"task-{i}")
        stored = len(_keys(store))
        metered = MeteredStore(store)
        with ObjectStoreSaver(metered, client_encryption=False) as deleter:
            deleter.delete_thread("long")
            counts = metered.snapshot()
        with ObjectStoreSaver(store, client_encryption=False) as reader:
            found = reader.get_tuple({"configurable": {"thread_id": "long"}})
        return {
            "checkpoints": checkpoints,
            "keys_before": stored,
            "requests": counts.requests,
            "total_requests": counts.total_requests,
            "keys_left": _keys(store),
            "reader_finds_a_checkpoint": found is not None,
        }


def _keys(store: LocalStore) -> list[str]:
    driver = Driver(store)
    try:
        return driver.run(list_all("threads/"))
    finally:
        driver.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.probes.delete_cost``: print the counts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=1000)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.checkpoints), indent=1))


if __name__ == "__main__":
    main()
