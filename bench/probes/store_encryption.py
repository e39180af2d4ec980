"""What client-side encryption costs the long-term store: requests and bytes, sealed vs clear.

``python -m bench.probes.store_encryption [--users 20] [--memories 5] [--json PATH]``
plays one memory workload twice on fresh local directories counted by
:class:`~objstore_saver.MeteredStore`, once in clear (``client_encryption=False``)
and once encrypted (a random local master key; the environment plays no part):

- **write**: each user's namespace ``("memories", <user>)`` gets ``--memories``
  puts, each followed by the search an agent makes before its next answer;
- **cold read**: a new store (a new process's: no key in memory) searches and
  gets one memory of every user.

It prints requests by kind and bytes sent for each phase and mode, the bytes
stored, and what encryption adds: at a namespace's first write its key
object's create-only PUT, one key object GET per namespace in a cold
process, the same requests otherwise, and about 50 bytes an object.
Counts, not timings: the same on every machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

from bench.probes import stored_objects, write_json
from objstore_saver import LocalStore, MeteredStore, ObjectStoreStore
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.storage import ObjectStore

MODES = ("clear", "encrypted")


def _stored(raw: ObjectStore) -> tuple[int, int]:
    """(objects, bytes) of everything in ``raw``, key objects included."""
    listed = stored_objects(raw)
    return len(listed), sum(o.size for o in listed)


def _phase(meter: MeteredStore) -> dict[str, Any]:
    snap = meter.snapshot()
    meter.reset()
    return {"requests": dict(snap.requests), "bytes_sent": snap.bytes_sent}


def play(raw: ObjectStore, setting: ClientEncryption | bool, users: int, memories: int) -> dict:
    """The workload on ``raw``: requests of each phase, and what is stored after it."""
    meter = MeteredStore(raw)
    with ObjectStoreStore(meter, client_encryption=setting) as store:
        for u in range(users):
            ns = ("memories", f"user-{u:04d}")
            for m in range(memories):
                store.put(ns, f"m{m}", {"fact": f"user {u} said something memorable, #{m}"})
                store.search(ns, limit=20)
    write = _phase(meter)
    with ObjectStoreStore(meter, client_encryption=setting) as cold:
        for u in range(users):
            ns = ("memories", f"user-{u:04d}")
            assert len(cold.search(ns, limit=20)) == memories
            assert cold.get(ns, "m0") is not None
    read = _phase(meter)
    objects, size = _stored(raw)
    return {"write": write, "cold_read": read, "stored_objects": objects, "stored_bytes": size}


def run(users: int, memories: int) -> dict[str, Any]:
    """Both modes, and what encryption adds."""
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    with tempfile.TemporaryDirectory(prefix="store-encryption-") as root:
        report: dict[str, Any] = {"users": users, "memories": memories}
        for mode in MODES:
            raw = LocalStore(os.path.join(root, mode), fsync=False)
            report[mode] = play(raw, settings if mode == "encrypted" else False, users, memories)
    clear, enc = report["clear"], report["encrypted"]
    report["added"] = {
        phase: {
            k: enc[phase]["requests"][k] - clear[phase]["requests"][k]
            for k in clear[phase]["requests"]
        }
        for phase in ("write", "cold_read")
    }
    report["bytes_per_object_added"] = (enc["stored_bytes"] - clear["stored_bytes"]) / max(
        1, clear["stored_objects"]
    )
    return report


def render(r: dict[str, Any]) -> str:
    """A markdown table of the two modes."""
    lines = [
        f"{r['users']} namespaces, {r['memories']} memories each (put + search), "
        "then a cold store searches and gets each namespace",
        "",
        "| mode | write: requests | write: bytes sent | cold read: requests | stored |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        m = r[mode]
        lines.append(
            f"| {mode} | {_ops(m['write']['requests'])} | {m['write']['bytes_sent']:,} | "
            f"{_ops(m['cold_read']['requests'])} | {m['stored_objects']:,} objects, "
            f"{m['stored_bytes']:,} B |"
        )
    added = r["added"]
    lines += [
        "",
        f"encryption adds: write {_ops(added['write'])}, cold read {_ops(added['cold_read'])}, "
        f"{r['bytes_per_object_added']:.0f} B stored an object (key objects included)",
    ]
    return "\n".join(lines)


def _ops(requests: dict[str, int]) -> str:
    return " + ".join(f"{n} {k.upper()}" for k, n in requests.items() if n) or "nothing"


def main(argv: list[str] | None = None) -> int:
    """Run the probe and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--memories", type=int, default=5)
    parser.add_argument("--json", help="also write the report here (- for standard output)")
    args = parser.parse_args(argv)
    report = run(args.users, args.memories)
    print(render(report))
    write_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
