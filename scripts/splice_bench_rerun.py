"""Replace some workloads of bench/results/latest.json by those of a later run.

Usage: ``python scripts/splice_bench_rerun.py RERUN.json REASON``. The later
run must cover every saver of those workloads; the report then names it (its
time, its length and the reason) under the run's own header.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LATEST = Path("bench") / "results" / "latest.json"


def main() -> None:
    rerun_path, reason = sys.argv[1], sys.argv[2]
    doc = json.loads(LATEST.read_text())
    rerun = json.loads(Path(rerun_path).read_text())
    if rerun["sizes"] != doc["sizes"] or rerun["mode"] != doc["mode"]:
        raise SystemExit(f"{rerun_path}: sizes or mode differ from {LATEST}")
    workloads = sorted(rerun["results"])
    for w in workloads:
        missing = set(doc["results"].get(w, {})) - set(rerun["results"][w])
        if missing:
            raise SystemExit(f"{rerun_path}: workload {w} lacks savers {sorted(missing)}")
        doc["results"][w] = rerun["results"][w]
    doc.setdefault("reruns", []).append(
        {
            "workloads": workloads,
            "generated_at": rerun["generated_at"],
            "elapsed_s": rerun["elapsed_s"],
            "reason": reason,
        }
    )
    LATEST.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    print(f"{LATEST}: workloads {', '.join(workloads)} from {rerun_path}")


if __name__ == "__main__":
    main()
