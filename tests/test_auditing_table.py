"""docs/auditing.md's key table: a row for every kind of key, and what is overwritten."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rows() -> dict[str, str]:
    """The table's rows by the key patterns (code spans) of their first cell."""
    text = (ROOT / "docs" / "auditing.md").read_text()
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) == 4:
            for pattern in re.findall(r"`([^`]+)`", cells[0]):
                rows[pattern] = line
    return rows


def test_every_key_of_the_readme_layout_has_a_row() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## What is stored\n\n```\n(.*?)```", readme, flags=re.S)
    assert block is not None
    patterns = [line.split()[0] for line in block.group(1).splitlines() if line.strip()]
    assert any(p.startswith("jobs/") for p in patterns)
    rows = _rows()
    assert [p for p in patterns if p not in rows] == []


def test_the_rows_of_objects_that_are_overwritten_say_so() -> None:
    rows = _rows()
    overwritten = {p for p, row in rows.items() if "**overwritten**" in row}
    assert overwritten == {
        "keys/threads/<T>",
        "keys/threads/<T>%e<n>",
        "keys/store/<P>/k",
        "store/it/<P>/i/<K>",
        "jobs/<J>/<F>/shard-<k>-of-<n>",
    }
    text = (ROOT / "docs" / "auditing.md").read_text()
    assert "Nothing is ever overwritten" not in text
