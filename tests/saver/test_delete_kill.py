"""``kill -9`` of ``delete_thread`` and of a whole-thread prune, then readers and a rerun.

The delete runs in a child process whose store deletes one key at a time, a
little slowed; the parent sends SIGKILL once a chosen share of the thread's
files is gone (or as soon as the tombstone exists, before any delete). A
reader then finds the thread deleted, whole: no checkpoint, no error, never
an older one. A new conversation on the id reads right, and the rerun of
the same delete removes what the killed one left.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from deleted import not_tombstones
from kill_child import kill_when
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver, ops
from objstore_saver.format import keys
from objstore_saver.ops import OpsConfig
from objstore_saver.storage import LocalStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

#: The child: argv[1] "delete" (delete_thread) or "prune" (an idle prune), on store
#: argv[2]; its store deletes one key at a time, 4 ms apart.
CHILD = textwrap.dedent(
    """
    slowed("delete", 0.004, one_key_at_a_time=True)
    from objstore_saver import ObjectStoreSaver, ops
    from objstore_saver.ops import OpsConfig

    job, root = sys.argv[1:3]
    if job == "delete":
        with ObjectStoreSaver(LocalStore(root)) as saver:
            saver.delete_thread("t")
    else:
        ops.prune(config=OpsConfig(url="file://" + root), idle_for=3600, apply=True)
    """
)


def _files(root: Path) -> list[Path]:
    """The thread's files (directories removed meanwhile are skipped, as os.walk does)."""
    return [
        Path(where) / name
        for where, _dirs, names in os.walk(root / "threads" / "_t")
        for name in names
        if "#" not in name  # a write's temporary file
    ]


def _write(root: Path) -> int:
    with ObjectStoreSaver(LocalStore(root)) as saver:
        chat(saver, "t", [f"question {i} " + "x" * 3000 for i in range(12)])
    return len(_files(root))


def _kill_when(job: str, root: Path, left: int | None) -> int:
    """Run the job; SIGKILL it once at most ``left`` of the thread's files are not
    tombstones (None: as soon as a tombstone exists)."""

    def ready() -> bool:
        files = _files(root)
        stones = [p for p in files if keys.is_tombstone_key("/".join(p.parts[-5:]))]
        return bool(stones) and (left is None or len(files) - len(stones) <= left)

    return kill_when(CHILD, [job, str(root)], ready)


@pytest.mark.parametrize("job", ["delete", "prune"])
@pytest.mark.parametrize("share", [None, 0.8, 0.4, 0.05])
def test_a_killed_delete_has_deleted_the_thread_and_a_rerun_finishes_it(
    tmp_path: Path, job: str, share: float | None
) -> None:
    root = tmp_path / "store"
    total = _write(root)
    if job == "prune":  # idle for an hour and more
        old = time.time() - 7200
        for path in _files(root):
            os.utime(path, (old, old))
    left = None if share is None else int(total * share)
    assert _kill_when(job, root, left) == -signal.SIGKILL
    remaining = not_tombstones(_files(root))
    assert 0 < len(remaining) < total or share is None  # stopped part-way
    cfg = {"configurable": {"thread_id": "t"}}
    with ObjectStoreSaver(LocalStore(root)) as reader:
        assert reader.get_tuple(cfg) is None  # whole, or nothing: nothing
        assert list(reader.list(cfg)) == []
        report = reader.verify("t", read_data=True)
        assert report.ok, report.problems
    # The same job again completes it: the tombstone alone is left.
    if job == "delete":
        with ObjectStoreSaver(LocalStore(root)) as saver:
            saver.delete_thread("t")
    else:
        ops.prune(config=OpsConfig(url=f"file://{root}"), idle_for=3600, apply=True)
    assert not_tombstones(_files(root)) == []
    with ObjectStoreSaver(LocalStore(root)) as saver:
        chat(saver, "t", ["a new conversation"])
        assert "a new conversation" in str(saver.get_tuple(cfg).checkpoint)
