"""``kill -9`` in the middle of ``migrate --apply`` and ``prune --apply``, then a rerun.

The job runs in a child process whose store writes are slowed a little, so the
parent can send SIGKILL after a chosen number of objects is stored; the same
command run again must leave the bucket an uninterrupted run leaves.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kill_child import kill_when
from ops_helpers import chat
from payloads import incompressible_text

from objstore_saver.ops import OpsConfig, migrate, prune
from objstore_saver.storage import LocalStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

THREADS = [f"k{i:02d}" for i in range(10)]

#: The child: the job of argv[1] on store argv[2] (source argv[3]), each PUT 3 ms slower.
CHILD = textwrap.dedent(
    """
    slowed("put", 0.003)
    from objstore_saver.ops import OpsConfig, migrate, prune

    job, url, source = sys.argv[1:4]
    if job == "migrate":
        migrate("sqlite", source, config=OpsConfig(url=url), apply=True, concurrency=4)
    else:
        prune(config=OpsConfig(url=url), keep_last=1, min_age=0, apply=True, concurrency=4)
    """
)


def _keys(root: Path) -> list[str]:
    """Every key the store lists (a killed write's temporary file is not one, spec §2)."""
    store, out, after = LocalStore(root), [], None
    while True:
        page = store.list("", start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _normalized(keys_: list[str]) -> Counter[str]:
    """Keys without what is a clock, not content: the sequence of special writes,
    prune's mark names, and the job cursor (a rerun that completes deletes it)."""
    out: Counter[str] = Counter()
    for key in keys_:
        if "/marks/" in key or key.startswith("jobs/"):
            continue
        out[re.sub(r"(\.-\d+)\.\d{26}$", r"\1", key)] += 1
    return out


def _files(root: Path) -> list[tuple[str, str]]:
    """(directory, file name) of every file; directories removed meanwhile are skipped."""
    return [
        (os.path.basename(where), name)
        for where, _dirs, names in os.walk(root)
        for name in names
        if "#" not in name  # a write's temporary file
    ]


def _objects(root: Path) -> int:
    return len(_files(root))


def _marks(root: Path) -> int:
    return sum(1 for where, _ in _files(root) if where == "marks")


def _stored_alone(root: Path) -> int:
    """Content objects at ``objects/<H>`` and sweep marks: the files a prune creates."""
    return sum(1 for where, _ in _files(root) if where in ("objects", "marks"))


def _kill_after(job: str, root: Path, source: str, objects: int, count: Any = _objects) -> int:
    """Run the job in a child, SIGKILL it once ``count(root)`` reaches ``objects``."""
    return kill_when(
        CHILD, [job, f"file://{root}", source], lambda: root.exists() and count(root) >= objects
    )


@pytest.fixture(scope="module")
def sqlite_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path_factory.mktemp("source") / "agent.sqlite"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for i, t in enumerate(THREADS):
            chat(saver, t, [f"question {j}" for j in range(1 + i % 3)])
    return str(db)


@pytest.fixture(scope="module")
def clean_migration(tmp_path_factory: pytest.TempPathFactory, sqlite_source: str) -> list[str]:
    root = tmp_path_factory.mktemp("clean")
    migrate("sqlite", sqlite_source, config=OpsConfig(url=f"file://{root}"), apply=True)
    return _keys(root)


@pytest.mark.parametrize("fraction", [0.1, 0.45, 0.8])
def test_migrate_killed_then_rerun_leaves_the_bucket_of_one_run(
    tmp_path: Path, sqlite_source: str, clean_migration: list[str], fraction: float
) -> None:
    root = tmp_path / "target"
    at = max(1, int(len(clean_migration) * fraction))
    assert _kill_after("migrate", root, sqlite_source, at) == -signal.SIGKILL
    assert 0 < _objects(root) < len(clean_migration)
    report = migrate("sqlite", sqlite_source, config=OpsConfig(url=f"file://{root}"), apply=True)
    assert report["complete"] is True and report["diverged"] == []
    assert _normalized(_keys(root)) == _normalized(clean_migration)
    again = migrate("sqlite", sqlite_source, config=OpsConfig(url=f"file://{root}"), apply=True)
    assert again["checkpoints"]["copied"] == again["writes"]["copied"] == 0


def _chats(root: Path) -> None:
    """Four turns a thread, and a pending write on its first checkpoint whose
    value (over 1 KiB compressed) stands alone: pruning deletes that
    checkpoint, stores what its manifest embeds alone and marks the value."""
    from objstore_saver import ObjectStoreSaver

    with ObjectStoreSaver(LocalStore(root)) as saver:
        for i, t in enumerate(THREADS):
            chat(saver, t, [f"question {j}" for j in range(4)])
            first = list(saver.list({"configurable": {"thread_id": t}}))[-1]
            saver.put_writes(first.config, [("notes", incompressible_text(30_000, i))], "task-n")


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6])
def test_prune_killed_then_rerun_leaves_the_bucket_of_one_run(
    tmp_path: Path, fraction: float
) -> None:
    clean, root = tmp_path / "clean", tmp_path / "target"
    _chats(clean)
    shutil.copytree(clean, root)
    before = _stored_alone(clean)
    assert before == len(THREADS)  # the written values
    report = prune(config=OpsConfig(url=f"file://{clean}"), keep_last=1, min_age=0, apply=True)
    # A prune stores embedded objects alone and marks in every thread: kill
    # points among its writes (the extractions, before each thread's deletes,
    # and the marks, after them).
    assert report["totals"]["objects_extracted"] >= len(THREADS)
    assert _marks(clean) == len(THREADS) and report["totals"]["objects_marked"] == len(THREADS)
    created = _stored_alone(clean) - before
    assert created == report["totals"]["objects_extracted"] + len(THREADS)
    at = before + max(1, int(created * fraction))
    assert _kill_after("prune", root, "", at, count=_stored_alone) == -signal.SIGKILL
    assert _stored_alone(root) < before + created
    # The rerun comes after the reuse window (300 s): only then are the writes the
    # killed run left behind known to be orphans, not writes of a checkpoint being
    # written (spec §6.9 step 2). Age the writes, not the marks (their ripeness).
    hour_ago = time.time() - 3600
    for where, _dirs, names in os.walk(root / "threads"):
        # Pending writes: under a checkpoint's <R>.w/ (version 2) or writes/ (version 1).
        if where.endswith(".w") or "/writes" in where:
            for name in names:
                os.utime(os.path.join(where, name), (hour_ago, hour_ago))
    prune(config=OpsConfig(url=f"file://{root}"), keep_last=1, min_age=0, apply=True)
    assert _normalized(_keys(root)) == _normalized(_keys(clean))
