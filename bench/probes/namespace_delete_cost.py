"""Requests of a long-term store namespace's delete, and what a reader sees after it.

``python -m bench.probes.namespace_delete_cost --items 1000`` puts that many
items into one namespace of an :class:`~objstore_saver.ObjectStoreStore` on a
local-directory store (compacting as writers do), then deletes the namespace
through :class:`~objstore_saver.MeteredStore` (spec §8.4.9): the requests by
kind, the store keys left (the clear marker alone) and what a fresh store
finds. ``--encrypted`` seals with a local master key, so the delete also
shreds the namespace's key. Counts, not timings: the same on every machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

from objstore_saver import LocalStore, MeteredStore, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.driver import Driver
from objstore_saver.plans.requests import list_all

NAMESPACE = ("users", "u42", "memories")


def run(items: int, encrypted: bool = False) -> dict[str, Any]:
    """Fill one namespace with ``items`` items, delete it, and count the delete."""
    sealing: ClientEncryption | bool = (
        ClientEncryption.of(LocalMasterKey(os.urandom(32))) if encrypted else False
    )
    with tempfile.TemporaryDirectory() as root:
        store = LocalStore(root, fsync=False)
        with ObjectStoreStore(store, client_encryption=sealing) as writer:
            for i in range(items):
                writer.put(NAMESPACE, f"memory-{i}", {"text": f"fact {i} " * 20})
        before = len(_keys(store, "store/")) + len(_keys(store, "keys/"))
        metered = MeteredStore(store)
        with ObjectStoreStore(metered, client_encryption=sealing) as deleter:
            done = deleter.delete_namespace(NAMESPACE)
            counts = metered.snapshot()
        with ObjectStoreStore(store, client_encryption=sealing) as reader:
            found = reader.search(NAMESPACE, limit=10)
            got = reader.get(NAMESPACE, "memory-0")
        return {
            "items": items,
            "encrypted": encrypted,
            "keys_before": before,
            "items_deleted": done.items,
            "index_objects_deleted": done.index_objects,
            "requests": counts.requests,
            "total_requests": counts.total_requests,
            "keys_left": _keys(store, "store/") + _keys(store, "keys/"),
            "reader_finds_an_item": bool(found) or got is not None,
        }


def _keys(store: LocalStore, prefix: str) -> list[str]:
    driver = Driver(store)
    try:
        return driver.run(list_all(prefix))
    finally:
        driver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--encrypted", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.items, args.encrypted), indent=2))


if __name__ == "__main__":
    main()
