"""Reading a results document (``bench/results/*.json``): rows by workload and saver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MIB = 2**20
OURS = "objstore-s3"
"""The saver the targets are about: objstore-saver on S3."""
ENCRYPTED = "objstore-s3-encrypted"
"""objstore-saver on S3 with client-side encryption, which the encryption targets compare."""

SUPPLEMENT = Path("bench") / "results" / "long-objstore-s3.json"
"""Workload 2 alone for objstore-saver on S3 with a longer cap, reported if present."""


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
        self.supplement: dict[str, Any] | None = None
        """Workload 2 of objstore-saver on S3 from a separate, longer run, if any."""
        self.s3_server = s3_server(doc)
        """The S3 server behind the metering proxy in this run."""
        self.supplement_server = ""
        """The S3 server of the separate workload 2 run."""

    def load_supplement(self, root: Path) -> None:
        """Read :data:`SUPPLEMENT` under ``root``, if it exists and its row did not fail."""
        path = root / SUPPLEMENT
        if not path.exists():
            return
        extra = json.loads(path.read_text())
        self.supplement = extra["results"]["2"].get(OURS)
        self.supplement_server = s3_server(extra)
        if self.supplement is not None and "error" in self.supplement:
            self.supplement = None

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
