"""A bucket written by format version 1 reads back as the calls that wrote it.

``tests/fixtures/format-v1`` is a local-directory store written by the saver
of format version 1 (``tests/helpers/format_v1_script.py``). Its files never
change: whatever later versions write, this bucket must keep reading the
same. The reference is ``InMemorySaver`` given the same calls.
"""

from __future__ import annotations

import collections
import shutil
from pathlib import Path
from typing import Any

import format_v1_script as script
import msgpack
import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from repo_root import ROOT

from objstore_saver import LocalStore, ObjectStoreSaver

FIXTURE = ROOT / "tests" / "fixtures" / "format-v1"
SCOPES = [(script.CHAT, ""), (script.CHAT, "inner:7b1e"), (script.ODD, "")]


def _kinds(root: Path) -> collections.Counter[tuple[Any, Any]]:
    found: collections.Counter[tuple[Any, Any]] = collections.Counter()
    for path in (root / "threads").rglob("*"):
        if path.is_file() and path.stat().st_size:
            obj = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
            found[(obj["f"], obj["k"])] += 1
    return found


def test_the_fixture_is_version_1_and_holds_every_kind() -> None:
    kinds = _kinds(FIXTURE)
    assert {f for f, _ in kinds} == {1}
    assert {k for _, k in kinds} == {
        "manifest",
        "list",
        "chunk",
        "node",
        "parts",
        "part",
        "write",
        "writes",
    }


@pytest.fixture(scope="module")
def reference() -> InMemorySaver:
    saver = InMemorySaver()
    script.play(saver)
    return saver


@pytest.fixture
def stored(tmp_path: Path) -> ObjectStoreSaver:
    copy = tmp_path / "bucket"
    shutil.copytree(FIXTURE, copy)
    return ObjectStoreSaver(LocalStore(str(copy)))


def _comparable(t: CheckpointTuple) -> dict[str, Any]:
    checkpoint = dict(t.checkpoint)
    return {
        "config": t.config["configurable"],
        "checkpoint": checkpoint,
        "metadata": t.metadata,
        "parent": t.parent_config and t.parent_config["configurable"],
        "writes": sorted(t.pending_writes or [], key=repr),
    }


@pytest.mark.parametrize(("thread", "ns"), SCOPES)
def test_every_checkpoint_reads_as_the_calls_that_wrote_it(
    stored: ObjectStoreSaver, reference: InMemorySaver, thread: str, ns: str
) -> None:
    config = script._config(thread, ns)
    ours = [_comparable(t) for t in stored.list(config)]
    theirs = [_comparable(t) for t in reference.list(config)]
    assert len(ours) == len(theirs) > 0
    assert ours == theirs
    latest = stored.get_tuple(config)
    assert latest is not None and _comparable(latest) == theirs[0]
    for t in theirs:
        one = stored.get_tuple(script._config(thread, ns, t["config"]["checkpoint_id"]))
        assert one is not None and _comparable(one) == t


def test_the_large_value_and_the_long_list_come_back_whole(stored: ObjectStoreSaver) -> None:
    latest = stored.get_tuple(script._config(script.CHAT))
    assert latest is not None
    values = latest.checkpoint["channel_values"]
    assert values["report"] == script.LARGE
    assert len(values["messages"]) == 2 * script.TURNS
    assert {w[1] for w in latest.pending_writes or []} == {
        "messages",
        "turn",
        "summary",
        "__error__",
    }
    assert ("t3", "__error__", "failed twice") in (latest.pending_writes or [])
