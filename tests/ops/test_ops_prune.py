"""The prune job: a thin wrapper over the core prune with dry run, selection, progress, cancel."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from backends import S3_BACKENDS, Backend
from layout import is_manifest
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver, plans
from objstore_saver.driver import Driver
from objstore_saver.format import keys as k
from objstore_saver.ops import JobError, OpsConfig, prune
from objstore_saver.ops.maintain import parse_duration
from objstore_saver.plans.requests import Emit
from objstore_saver.storage import Boto3S3Store, LocalStore, MeteredStore
from objstore_saver.storage.s3.lean import LeanS3Store


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
    return sum(is_manifest(o.key) for o in store.list(k.manifests_prefix(thread, "")).objects)


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
    prune(["long"], keep_last=3, min_age=0, apply=True, config=config)
    assert _root_checkpoints(tmp_path, "long") == 3


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


# --- retention by age (spec §6.9, the idle and age rules) ------------------------------------


def _make_old(tmp_path: Path, thread: str, days: float) -> None:
    at = time.time() - days * 86400
    for p in (tmp_path / "store" / k.thread_prefix(thread)).rglob("*"):
        if p.is_file():
            os.utime(p, (at, at))


def test_idle_rule_deletes_idle_threads_only(config: OpsConfig, tmp_path: Path) -> None:
    _make_old(tmp_path, "short", 40)
    long_before = [f for f in _files(tmp_path) if "/_long/" in f]
    seen: list[str] = []
    dry = prune(
        keep_last=None,
        idle_for=parse_duration("30d"),
        config=config,
        progress=lambda d, t, i: seen.append(i),
    )
    assert sorted(seen) == ["long", "short"] and dry["threads_idle"] == ["short"]
    assert _root_checkpoints(tmp_path, "short") == 3  # a dry run
    done = prune(keep_last=None, idle_for=parse_duration("30d"), apply=True, config=config)
    assert done["threads_idle"] == ["short"] and done["idle_for"] == 30 * 86400
    # Its tombstone alone is left (spec §4.11).
    assert [f for f in _files(tmp_path) if "/_short/" in f and "/-" not in f] == []
    assert any("/_short/checkpoints/_/-" in f for f in _files(tmp_path))
    assert [f for f in _files(tmp_path) if "/_long/" in f] == long_before


def test_idle_keep_latest_and_keep_last_together(config: OpsConfig, tmp_path: Path) -> None:
    _make_old(tmp_path, "short", 40)
    report = prune(
        keep_last=2,
        min_age=0,
        idle_for=30 * 86400,
        idle_action="keep_latest",
        apply=True,
        config=config,
    )
    assert report["threads_idle"] == ["short"]
    assert _root_checkpoints(tmp_path, "short") == 1
    assert _root_checkpoints(tmp_path, "long") == 2


def test_parse_duration() -> None:
    assert parse_duration("30d") == 30 * 86400
    assert parse_duration("1d12h") == 36 * 3600
    assert parse_duration("2w") == 14 * 86400
    assert parse_duration("90m") == parse_duration("1.5h") == 5400
    assert parse_duration("45s") == 45
    for bad in ("30", "", "d", "3x", "-1d", "0h", "1d 2h"):
        with pytest.raises(ValueError, match="invalid duration"):
            parse_duration(bad)


def test_bad_age_arguments(config: OpsConfig) -> None:
    with pytest.raises(JobError, match="keep_last may be left out only with idle_for"):
        prune(keep_last=None, config=config)
    with pytest.raises(JobError, match="idle_for must be more than 0"):
        prune(idle_for=0, config=config)
    with pytest.raises(JobError, match="unknown idle_action 'archive'"):
        prune(idle_for=60, idle_action="archive", config=config)


def test_enumeration_is_one_flat_listing_and_names_hashed_threads(
    config: OpsConfig, tmp_path: Path
) -> None:
    long_id = "L" * 250  # over 200 quoted characters: a hashed key token
    with ObjectStoreSaver.from_url(config.require_url()) as saver:
        chat(saver, long_id, ["hello"])
    meter = MeteredStore(LocalStore(tmp_path / "store"))
    driver = Driver(meter, max_workers=1)

    def names() -> Any:
        found = []
        listings: list[plans.ThreadListing] = []
        scan = plans.scan_threads(page_size=40)
        reply = None
        while True:
            try:
                step = scan.send(reply)
            except StopIteration as stop:
                lists = stop.value
                break
            reply = None
            if isinstance(step, Emit):
                listings.append(step.item)
            else:
                reply = yield step
        for listing in listings:
            found.append((yield from plans.thread_id_of(listing)))
        return found, lists, sum(len(x.every()) for x in listings)

    try:
        ids, lists, keys_seen = driver.run(names())
    finally:
        driver.close()
    assert sorted(ids) == sorted(["long", "short", long_id])
    # One flat listing, 40 keys a page, the last page may be short; the hashed
    # thread costs one GET to be named, the others none.
    assert lists == keys_seen // 40 + 1
    assert meter.snapshot().requests == {"put": 0, "get": 1, "list": lists, "delete": 0}
    _make_old(tmp_path, long_id, 40)
    report = prune(keep_last=None, idle_for=30 * 86400, apply=True, config=config)
    assert report["threads_idle"] == [long_id]


# --- on S3, over both transports --------------------------------------------------------------


# Both transports: the job enumerates threads with start-after listings and
# deletes with DeleteObjects, through the store its URL opens.
@pytest.mark.backends(*S3_BACKENDS)
def test_prune_on_s3_over_each_transport(backend: Backend) -> None:
    url = backend.url("ops", name_transport=True)
    with ObjectStoreSaver.from_url(url) as saver:
        assert type(saver.store) is (Boto3S3Store if backend.transport == "boto3" else LeanS3Store)
        chat(saver, "long", [f"question {i}" for i in range(4)])
        chat(saver, "short", ["just one"])
    report = prune(keep_last=1, min_age=0, apply=True, config=OpsConfig(url=url))
    assert sorted(row["thread_id"] for row in report["threads"]) == ["long", "short"]
    with ObjectStoreSaver.from_url(url) as saver:
        for thread in ("long", "short"):
            listed = saver.store.list(k.manifests_prefix(thread, "")).objects
            assert sum(is_manifest(o.key) for o in listed) == 1
        latest = saver.get_tuple({"configurable": {"thread_id": "long"}})
        assert latest is not None
        assert len(latest.checkpoint["channel_values"]["messages"]) == 8
