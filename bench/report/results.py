"""Reading a results document (``bench/results/*.json``): rows by workload and saver."""

from __future__ import annotations

from typing import Any

MIB = 2**20
OURS = "objstore-s3"
"""The saver the targets are about: objstore-saver on S3."""
ENCRYPTED = "objstore-s3-encrypted"
"""objstore-saver on S3 with client-side encryption, which the encryption targets compare."""


def ops(requests: dict[str, int]) -> str:
    """Requests by operation, ``"GET 2, PUT 7"``; ``-`` when there are none."""
    return ", ".join(f"{op} {n}" for op, n in sorted(requests.items())) or "-"


def s3_server(doc: dict[str, Any]) -> str:
    """The S3 server a results document was measured on.

    Runs from before ``--s3-server`` do not record it: they all used moto.
    """
    recorded = doc.get("machine", {}).get("s3_server")
    return recorded or f"moto {doc.get('versions', {}).get('moto', '')}".strip()


def server_flag(server: str) -> str:
    """The ``--s3-server`` value that runs ``server`` (a :func:`s3_server` label)."""
    for flag, label in (("seaweedfs", "SeaweedFS"), ("ceph", "Ceph"), ("moto", "moto")):
        if server.startswith(label):
            return flag
    raise ValueError(f"no --s3-server value for S3 server {server!r}")


class Results:
    """Accessors over a results document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.results = doc["results"]
        self.savers = list(doc["savers"])
        self.labels = {k: v["label"] for k, v in doc["savers"].items()}
        self.sizes = doc["sizes"]
        self.s3_server = s3_server(doc)
        """The S3 server behind the metering proxy in this run."""

    def rows(self, workload: str) -> dict[str, Any]:
        """Every saver's row of a workload (error rows included)."""
        return self.results.get(workload, {})

    def ok(self, workload: str, saver: str) -> dict[str, Any] | None:
        """A saver's row of a workload, or None if it is missing or an error."""
        r = self.rows(workload).get(saver)
        return None if r is None or "error" in r else r

    def errors(self) -> list[tuple[str, str, str]]:
        """(workload, saver, error) of every failed row, in the results' order."""
        out = []
        for w, rows in self.results.items():
            for s, r in rows.items():
                if "error" in r:
                    out.append((w, s, r["error"]))
                elif w == "5" and "error" in r.get("prune", {}):
                    out.append(("5 (prune)", s, r["prune"]["error"]))
                elif w == "7" and "error" in r.get("migrate", {}):
                    out.append(("7 (migrate)", s, r["migrate"]["error"]))
        return out
