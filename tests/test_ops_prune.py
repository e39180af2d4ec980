"""The prune job: a thin wrapper over the core prune with dry run, selection, progress, cancel."""

from __future__ import annotations

from pathlib import Path

import pytest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver
from objstore_saver import keys as k
from objstore_saver.ops import JobError, OpsConfig, prune
from objstore_saver.ops.maintain import _core_prune_takes_keep_last
from objstore_saver.storage import LocalStore


@pytest.fixture
def config(tmp_path: Path) -> OpsConfig:
    url = f"file://{tmp_path}/store"
    with ObjectStoreSaver.from_url(url) as saver:
        chat(saver, "long", [f"question {i}" for i in range(4)])
        chat(saver, "short", ["just one"])
    return OpsConfig(url=url)


def _files(tmp_path: Path) -> list[str]:
    return sorted(str(p) for p in (tmp_path / "store").rglob("*") if p.is_file())


def _root_checkpoints(tmp_path: Path, thread: str) -> int:
    store = LocalStore(tmp_path / "store")
    return len(store.list(k.manifests_prefix(thread, "")).objects)


def _core_has_keep_last(config: OpsConfig) -> bool:
    with ObjectStoreSaver.from_url(config.require_url()) as saver:
        return _core_prune_takes_keep_last(saver)


def test_dry_run_deletes_nothing(config: OpsConfig, tmp_path: Path) -> None:
    before = _files(tmp_path)
    seen: list[str] = []
    report = prune(keep_last=1, min_age=0, config=config, progress=lambda d, t, i: seen.append(i))
    assert report["apply"] is False and report["cancelled"] is False
    assert sorted(seen) == ["long", "short"]
    assert {row["thread_id"] for row in report["threads"]} == {"long", "short"}
    assert _files(tmp_path) == before


def test_apply_keeps_the_newest_and_the_state_reads_back(config: OpsConfig, tmp_path: Path) -> None:
    assert _root_checkpoints(tmp_path, "long") == 12
    report = prune(["long"], keep_last=1, min_age=0, apply=True, config=config)
    assert [row["thread_id"] for row in report["threads"]] == ["long"]
    assert _root_checkpoints(tmp_path, "long") == 1
    assert _root_checkpoints(tmp_path, "short") == 3  # not selected
    with ObjectStoreSaver.from_url(config.require_url()) as saver:
        latest = saver.get_tuple({"configurable": {"thread_id": "long"}})
        assert latest is not None
        assert len(latest.checkpoint["channel_values"]["messages"]) == 8


def test_keep_last_n(config: OpsConfig, tmp_path: Path) -> None:
    if _core_has_keep_last(config):
        prune(["long"], keep_last=3, min_age=0, apply=True, config=config)
        assert _root_checkpoints(tmp_path, "long") == 3
    else:
        # Until the core prune takes keep_last, the job refuses rather than keep only one.
        with pytest.raises(JobError, match="keep-last 3"):
            prune(["long"], keep_last=3, min_age=0, apply=True, config=config)
        assert _root_checkpoints(tmp_path, "long") == 12


def test_cancel_between_threads(config: OpsConfig) -> None:
    polls = iter([False, True])
    report = prune(keep_last=1, min_age=0, config=config, should_cancel=lambda: next(polls))
    assert report["cancelled"] is True
    assert len(report["threads"]) == 1


def test_bad_arguments(config: OpsConfig) -> None:
    with pytest.raises(JobError, match="keep_last"):
        prune(keep_last=0, config=config)
    with pytest.raises(JobError, match="min_age"):
        prune(min_age=-1, config=config)
