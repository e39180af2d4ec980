"""Measurements run by hand, each a command answering one question.

``python -m bench.probes.NAME --help`` says what each measures; bench/README.md
lists them. They use the suite's parts (the S3 server process, the metering
proxy, the savers, the graphs, the workloads' helpers) and write nothing but
their output. The suite (``python -m bench``) never imports them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from objstore_saver.storage import ObjectStore
from objstore_saver.storage.base import ObjectInfo


def write_json(report: Any, where: str | None) -> None:
    """A probe's report as JSON at ``where``: a path, ``-`` (standard output), or None."""
    if not where:
        return
    text = json.dumps(report, indent=2) + "\n"
    if where == "-":
        sys.stdout.write(text)
        return
    with open(where, "w", encoding="utf-8") as f:
        f.write(text)


def stored_objects(raw: ObjectStore) -> list[ObjectInfo]:
    """Every object of a probe's raw store (all pages of its listing)."""
    out: list[ObjectInfo] = []
    after: str | None = None
    while True:
        page = raw.list("", start_after=after)
        out.extend(page.objects)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key
