"""``docs/benchmarks.md`` and its plots, from a results document.

- ``results.py``: reading a results document (rows by workload and saver).
- ``targets.py``: the targets for objstore-saver on S3, met or not.
- ``figures.py``: every other figure the report quotes, and its tables' rows.
- ``template.md``: the report's text, in named blocks with placeholders.
- ``render.py``: fills the template with the figures.
- ``plots.py``: the PNG plots of ``docs/img/``.

``python -m bench --report-only`` regenerates the report from
``bench/results/latest.json`` without running anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report.figures import figures
from bench.report.render import render
from bench.report.results import Results


def write(doc: dict[str, Any], root: Path) -> list[Path]:
    """Write ``docs/benchmarks.md`` and the plots under ``root``; return the paths."""
    from bench.report.plots import plots

    d = Results(doc)
    made = plots(d, root / "docs" / "img")
    md = root / "docs" / "benchmarks.md"
    md.write_text(render(figures(d)))
    return [md, *made]
