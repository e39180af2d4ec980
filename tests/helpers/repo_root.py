"""The checkout's root directory, wherever the test module using it sits."""

from __future__ import annotations

from pathlib import Path

#: The repository's root: README.md, docs/, pyproject.toml and the package are in it.
ROOT = Path(__file__).resolve().parents[2]
