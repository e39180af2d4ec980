"""What ``du`` and ``store-sweep`` print for people: aligned columns, no Python literals."""

from __future__ import annotations

import base64
import io
import os
import re
import time
from pathlib import Path

import pytest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver, ObjectStoreStore, cli


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([*args, "--no-progress"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    return code, out.getvalue()


def _by_kind(out: str) -> list[str]:
    """The rows under ``by kind:`` (indented; the tables after them are not)."""
    lines = out.splitlines()
    start = lines.index("by kind:") + 1
    return [line for line in lines[start:] if line.startswith("  ")]


def _assert_aligned(rows: list[str]) -> None:
    assert len(rows) > 1
    counts = {row.index(" objects ") for row in rows}
    assert len(counts) == 1, "\n".join(rows)  # the counts end in one column
    assert len({len(row) for row in rows}) == 1, "\n".join(rows)  # so do the sizes
    labels = [re.match(r"  (\S+(?: \S+)*) +\d+ objects", row) for row in rows]
    assert all(labels), "\n".join(rows)


def test_du_columns_line_up_whatever_the_kinds_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OBJSTORE_SAVER_ENCRYPTION_KEY", base64.b64encode(os.urandom(32)).decode())
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "alice", ["hello", "second question"])
    with ObjectStoreStore.from_url(url) as store:
        store.put(("memories", "ada"), "m1", {"fact": "likes cats"})
    _, out = _cli("du", "--url", url)
    rows = _by_kind(out)
    labels = {row.split("  ")[1].strip() for row in rows}
    assert {"encryption keys", "store index records", "store items", "manifests"} <= labels
    _assert_aligned(rows)
    _, out = _cli("store", "du", "--url", url)
    _assert_aligned(_by_kind(out))


def test_store_sweep_says_what_it_found_in_words(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/store"
    with ObjectStoreStore.from_url(url) as store:
        store.put(("memories", "ada"), "m1", {"fact": "likes cats"})
    _, out = _cli("store-sweep", "--url", url)
    assert out.splitlines() == [
        f"store-sweep {url}, every namespace: dry run (add --apply to delete)",
        "  nothing expired",
        "totals: expired=0, deleted=0, renewed=0",
    ]
    with ObjectStoreStore.from_url(url) as store:
        store.put(("memories", "ada"), "m2", {"fact": "brief"}, ttl=0.001)  # minutes
    time.sleep(0.2)
    _, out = _cli("store-sweep", "memories", "--url", url)
    lines = out.splitlines()
    assert lines[0] == (
        f'store-sweep {url}, namespaces under ["memories"]: dry run (add --apply to delete)'
    )
    assert re.fullmatch(r'  \["memories", "ada"\] "m2": expired \S+, would delete', lines[1])
    assert "nothing expired" not in out and "[]" not in out
