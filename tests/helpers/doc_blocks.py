"""The shell and Python blocks of README.md and docs/*.md, with what the docs say of each.

A block is run by ``tests/test_doc_blocks.py`` unless the line just above
its fence is one of:

- ``<!-- doc-test: skip: <reason> -->``: not runnable here, and why;
- ``<!-- doc-test: elsewhere: tests/<file>.py::<test> -->``: a test of its own
  runs it (the runner checks that the test exists and reads the doc);
- ``<!-- doc-test: continues -->``: a Python block run after the doc's
  previous Python block, in the same interpreter (it uses its names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = ("sh", "bash", "console", "python")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_MARK = re.compile(r"<!-- doc-test: (skip|elsewhere|continues)(?:: (.+?))? -->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a doc."""

    doc: str
    line: int
    language: str
    text: str
    mark: str | None
    reason: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The blocks of a doc in the languages the runner knows, in order."""
    text = path.read_text()
    doc = str(path.relative_to(ROOT))
    out = []
    for m in _FENCE.finditer(text):
        language = m.group(1)
        if language not in LANGUAGES:
            continue
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.search(before)
        out.append(
            Block(
                doc=doc,
                line=text[: m.start()].count("\n") + 1,
                language=language,
                text=m.group(2),
                mark=mark.group(1) if mark else None,
                reason=(mark.group(2) or "").strip() or None if mark else None,
            )
        )
    return out


def every_block() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)]


def python_programs(doc_blocks: list[Block]) -> list[list[Block]]:
    """The doc's runnable Python blocks as programs: a block and those that continue it."""
    programs: list[list[Block]] = []
    for b in doc_blocks:
        if b.language != "python" or b.mark in ("skip", "elsewhere"):
            continue
        if b.mark == "continues":
            if not programs:
                raise ValueError(f"{b.id}: 'continues' with no Python block before it")
            programs[-1].append(b)
        else:
            programs.append([b])
    return programs


def shell_script(block: Block) -> str:
    """A shell block as a script: a console block's commands without their ``$`` prompt
    (its other lines are output, checked by the caller)."""
    if block.language != "console":
        return block.text
    return "\n".join(line[2:] for line in block.text.splitlines() if line.startswith("$ "))
