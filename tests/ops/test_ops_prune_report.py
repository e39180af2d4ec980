"""The prune job on threads with subgraphs, and what its report says of the
threads it left alone (spec §6.9 "Which checkpoints are kept", "Report")."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from ops_helpers import chat, subgraph_chat

from objstore_saver import ObjectStoreSaver, cli
from objstore_saver.format import codec, keys as k
from objstore_saver.ops import OpsConfig, prune
from objstore_saver.ops.maintain import parse_duration
from objstore_saver.storage import LocalStore

DAY = 86400.0


def _ids(url: str, thread: str) -> list[tuple[str, str]]:
    """(namespace, checkpoint id) of every checkpoint of ``thread``, all namespaces."""
    with ObjectStoreSaver.from_url(url) as saver:
        rows = saver.list({"configurable": {"thread_id": thread}})
        return sorted(
            (r.config["configurable"]["checkpoint_ns"], r.config["configurable"]["checkpoint_id"])
            for r in rows
        )


def _make_old(root: Path, thread: str, days: float) -> None:
    at = time.time() - days * DAY
    for p in (root / k.thread_prefix(thread)).rglob("*"):
        if p.is_file():
            os.utime(p, (at, at))


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"file://{tmp_path}/store"


def test_older_than_deletes_no_young_checkpoint_of_a_thread_with_subgraphs(url: str) -> None:
    """``prune --keep-last 20 --older-than 90d --apply`` on threads minutes old
    deletes nothing: 21 root checkpoints (one beyond keep_last) and the
    subgraph checkpoints of every turn are all younger than 90 days."""
    with ObjectStoreSaver.from_url(url) as saver:
        for thread in ("a", "b"):
            subgraph_chat(saver, thread, [f"question {i}" for i in range(7)])
    before = {t: _ids(url, t) for t in ("a", "b")}
    assert sum(ns == "" for ns, _ in before["a"]) == 21
    assert sum(ns != "" for ns, _ in before["a"]) == 21
    report = prune(
        keep_last=20, older_than=parse_duration("90d"), apply=True, config=OpsConfig(url=url)
    )
    assert report["totals"]["checkpoints_deleted"] == 0
    assert report["totals"]["checkpoints_kept"] == 2 * 42
    assert {t: _ids(url, t) for t in ("a", "b")} == before


def test_older_than_deletes_old_subgraph_checkpoints_and_keeps_young_ones(
    url: str, tmp_path: Path
) -> None:
    """Old turns go (root and subgraph checkpoints beyond keep_last), the young
    turn stays whole, whatever the root checkpoint it belongs to."""
    with ObjectStoreSaver.from_url(url) as saver:
        subgraph_chat(saver, "t", ["old 1", "old 2"])
        old = _ids(url, "t")
        _make_old(tmp_path / "store", "t", 100)
        subgraph_chat(saver, "t", ["young"])
    young = sorted(set(_ids(url, "t")) - set(old))
    assert len(young) == 6 and {ns == "" for ns, _ in young} == {True, False}
    prune(
        keep_last=1,
        older_than=parse_duration("90d"),
        min_age=0,
        apply=True,
        config=OpsConfig(url=url),
    )
    assert _ids(url, "t") == young


def _store_with_a_pending_mark(url: str, root: Path) -> None:
    """``fresh`` is written today, ``old`` 40 days ago; ``marked``, written
    today, holds a mark younger than the sweep delay (a prune just ran on it)."""
    with ObjectStoreSaver.from_url(url) as saver:
        for thread in ("fresh", "old", "marked"):
            chat(saver, thread, ["hi", "again"])
    _make_old(root, "old", 40)
    LocalStore(root).put(k.mark_key("marked", time.time_ns(), "00000000"), codec.encode_mark([]))


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["thread_id"]: r for r in report["threads"]}


def test_the_report_names_deferred_threads_and_why_each_thread_was_left_alone(
    url: str, tmp_path: Path
) -> None:
    _store_with_a_pending_mark(url, tmp_path / "store")
    config = OpsConfig(url=url)
    report = prune(keep_last=1, min_age=0, config=config)
    assert report["threads_deferred"] == ["marked"]
    rows = _rows(report)
    assert rows["marked"]["left_alone"] == "deferred" and rows["marked"]["deferred"] is True
    assert rows["fresh"]["left_alone"] is None and rows["fresh"]["checkpoints_deleted"] == 5
    assert rows["old"]["left_alone"] is None

    idle = prune(keep_last=None, idle_for=parse_duration("30d"), config=config)
    assert idle["threads_deferred"] == [] and idle["threads_idle"] == ["old"]
    rows = _rows(idle)
    assert rows["fresh"]["left_alone"] == rows["marked"]["left_alone"] == "not_idle"
    assert rows["old"]["left_alone"] is None

    both = prune(keep_last=1, idle_for=parse_duration("30d"), config=config)
    assert both["threads_deferred"] == ["marked"] and both["threads_idle"] == ["old"]
    assert [r["left_alone"] for r in both["threads"]] == [None, "deferred", None]


def _cli(args: list[str]) -> str:
    out = io.StringIO()
    assert cli.main(args, stdout=out, stderr=io.StringIO()) == 0
    return out.getvalue()


def _lines(text: str) -> dict[str, str]:
    """The rows of the human output, by quoted thread id."""
    return {line.split(":", 1)[0].strip(): line for line in text.splitlines()}


def test_human_output_says_left_alone_and_why_not_checkpoints_kept_0(
    url: str, tmp_path: Path
) -> None:
    _store_with_a_pending_mark(url, tmp_path / "store")
    text = _cli(["prune", "--idle-for", "30d", "--url", url])
    lines = _lines(text)
    for thread in ("'fresh'", "'marked'"):
        assert "left alone: not idle" in lines[thread], text
        assert "checkpoints_kept" not in lines[thread], text
    assert "left alone" not in lines["'old'"] and "idle=True" in lines["'old'"], text
    assert "threads left alone: 2 (2 not idle)" in text, text

    text = _cli(["prune", "--idle-for", "30d", "--keep-last", "1", "--url", url])
    lines = _lines(text)
    assert "left alone: deferred" in lines["'marked'"], text
    assert "checkpoints_kept" not in lines["'marked'"], text
    assert "checkpoints_kept=1" in lines["'fresh'"], text
    assert "deferred threads: 1 ('marked')" in text, text
    assert "threads left alone: 1 (1 deferred)" in text, text
    report = json.loads(_cli(["prune", "--keep-last", "1", "--url", url, "--json"]))
    assert report["threads_deferred"] == ["marked"]


def test_human_output_of_a_pruned_thread_still_shows_its_counts(url: str) -> None:
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "t", ["one", "two"])
    text = _cli(["prune", "--keep-last", "1", "--min-age", "0", "--url", url])
    (row,) = [line for line in text.splitlines() if line.startswith("  't'")]
    assert "checkpoints_kept=1" in row and "checkpoints_deleted=5" in row
    assert "left alone" not in row and "left_alone" not in row
    assert "deferred threads" not in text and "left alone" not in text
