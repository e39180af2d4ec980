"""Requests and bytes of the long-term store, counted by MeteredStore (docs/store.md).

Usage: python scripts/longterm_costs.py [PUTS]   (a temporary directory, no server)
"""

from __future__ import annotations

import hashlib
import sys
import tempfile

from objstore_saver import LocalStore, MeteredStore, ObjectStoreStore


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic 16-dimension bag-of-words embedding (no model needed)."""
    out = []
    for text in texts:
        vec = [0.0] * 16
        for word in text.lower().split():
            vec[hashlib.sha256(word.encode()).digest()[0] % 16] += 1.0
        out.append(vec)
    return out


def main(puts: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        meter = MeteredStore(LocalStore(root))
        index = {"dims": 16, "embed": embed, "fields": ["text"]}
        with ObjectStoreStore(meter, index=index, index_grace=5.0) as store:
            meter.reset()
            for i in range(puts):
                store.put(("mem", "u1"), f"m{i}", {"text": f"fact {i} about cats and tea", "i": i})
            snap = meter.snapshot()
            print(
                f"put x{puts}: {snap.total_requests / puts:.2f} requests/put "
                f"{ {k: round(v / puts, 2) for k, v in snap.requests.items()} }, "
                f"{snap.bytes_sent / puts / 1024:.1f} KiB sent/put"
            )
            cases = {
                "get": lambda: store.get(("mem", "u1"), "m7"),
                "search filter": lambda: store.search(("mem", "u1"), filter={"i": {"$gte": 3}}),
                "search query": lambda: store.search(("mem", "u1"), query="tea cats", limit=5),
                "list_namespaces": lambda: store.list_namespaces(),
                "delete": lambda: store.delete(("mem", "u1"), "m7"),
            }
            for name, call in cases.items():
                meter.reset()
                call()
                snap = meter.snapshot()
                print(f"{name}: {snap.requests}, {snap.bytes_received / 1024:.1f} KiB received")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
