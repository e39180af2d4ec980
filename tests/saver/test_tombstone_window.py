"""A deleted thread's tombstones are swept once their window has passed (spec §4.11).

Prune deletes the tombstones of a thread that holds nothing else once the
newest is older than the window; it stores them again if the thread is
written while they go; and a delete numbers its epoch by its clock, so a
conversation begun while the tombstones were swept is still ended by the
next delete. Run on a local directory and on LeanS3Store over moto; prune's
clock is moved past the window (the store's LastModified cannot be aged).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from backends import Backend
from deleted import the_tombstone
from faultkit import all_keys
from ops_helpers import chat

from objstore_saver import ObjectStoreSaver, ops
from objstore_saver.format import keys
from objstore_saver.ops import OpsConfig
from objstore_saver.storage import ObjectStore
from objstore_saver.storage.base import StoreWrapper

pytestmark = pytest.mark.backends("local", "s3-lean")

DAY = 24 * 3600.0


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _prune(saver: ObjectStoreSaver, days_later: float, **rules: Any) -> dict[str, Any]:
    """``keep_latest`` prune of thread ``t`` with prune's clock ``days_later`` days ahead."""
    now = datetime.now(UTC) + timedelta(days=days_later)
    plan = saver._prune_plan(
        ["t"], "keep_latest", 1, 0.0, rules.pop("dry_run", False), now, **rules
    )
    return saver._driver.run(plan)["threads"][0]


def test_tombstones_go_once_the_window_has_passed_and_not_before(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        chat(saver, "t", ["a question"])
        chat(saver, "u", ["another thread"])
        saver.delete_thread("t")
        tombstone = all_keys(store, "threads/_t/")
        the_tombstone(tombstone)
        young = _prune(saver, 29)
        assert (young["tombstones_swept"], all_keys(store, "threads/_t/")) == (0, tombstone)
        dry = _prune(saver, 31, dry_run=True)
        assert (dry["tombstones_swept"], all_keys(store, "threads/_t/")) == (1, tombstone)
        shorter = _prune(saver, 2, tombstone_window=DAY)
        assert shorter["tombstones_swept"] == 1 and shorter["tombstones_restored"] == 0
        assert all_keys(store, "threads/_t/") == []
        assert all_keys(store, "threads/_u/")  # a thread with checkpoints keeps them
        assert saver.get_tuple(_cfg("t")) is None
        # The id is free: a new conversation reads as any other.
        chat(saver, "t", ["a new conversation"])
        assert "a new conversation" in str(saver.get_tuple(_cfg("t")).checkpoint)


def test_a_window_shorter_than_the_sweep_delay_is_refused(backend: Backend) -> None:
    with ObjectStoreSaver(backend.store()) as saver, pytest.raises(ValueError, match="tombstone"):
        saver.prune(["t"], tombstone_window=60.0)


class _WritesAfterTheSweep(StoreWrapper):
    """Begins a new conversation on the thread right after prune deletes its tombstones."""

    def __init__(self, inner: ObjectStore, writer: ObjectStoreSaver) -> None:
        super().__init__(inner)
        self.writer = writer
        self.done = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete(self, keys_: Any) -> None:
        self._inner.delete(keys_)
        if not self.done and any(keys.is_tombstone_key(k) for k in keys_):
            self.done = True
            chat(self.writer, "t", ["begun while the tombstones went"])


def test_a_conversation_begun_while_they_go_brings_them_back(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        chat(saver, "t", ["the old conversation"])
        saver.delete_thread("t")
        epoch = the_tombstone(k for k in all_keys(store, "threads/_t/"))
    # The writer saw the tombstone: its new conversation is of the epoch it began.
    writer = ObjectStoreSaver(backend.store())
    assert writer.get_tuple(_cfg("t")) is None
    racing = _WritesAfterTheSweep(backend.store(), writer)
    with ObjectStoreSaver(racing) as pruner:
        row = _prune(pruner, 31)
    assert racing.done and (row["tombstones_swept"], row["tombstones_restored"]) == (0, 1)
    left = all_keys(store, "threads/_t/")
    assert keys.tombstone_key("t", "", epoch) in left
    with ObjectStoreSaver(backend.store()) as reader:
        assert "begun while" in str(reader.get_tuple(_cfg("t")).checkpoint)
        reader.delete_thread("t")  # and a delete ends it
        assert reader.get_tuple(_cfg("t")) is None
    writer.close()


def test_a_delete_ends_a_conversation_whose_tombstones_were_swept_meanwhile(
    backend: Backend,
) -> None:
    """The race a restore cannot close: tombstones gone, a conversation of their epoch
    live, no tombstone listed. The next delete's epoch comes from its clock, above it."""
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        chat(saver, "t", ["the old conversation"])
        saver.delete_thread("t")
        chat(saver, "t", ["the new conversation"])  # of the epoch the tombstone began
        epoch = the_tombstone(k for k in all_keys(store, "threads/_t/") if keys.is_tombstone_key(k))
    store.delete([k for k in all_keys(store, "threads/_t/") if keys.is_tombstone_key(k)])
    time.sleep(1.1)  # the next delete's clock is a second later
    with ObjectStoreSaver(backend.store()) as deleter:  # no memory of the thread
        assert "the new conversation" in str(deleter.get_tuple(_cfg("t")).checkpoint)
        deleter.delete_thread("t")
        assert deleter.get_tuple(_cfg("t")) is None
        assert the_tombstone(all_keys(store, "threads/_t/")) > epoch


def test_a_delete_numbers_its_epoch_by_its_clock(backend: Backend) -> None:
    with ObjectStoreSaver(backend.store()) as saver:
        chat(saver, "t", ["a question"])
        before = keys.epoch_floor(time.time())
        saver.delete_thread("t")
        after = keys.epoch_floor(time.time())
        epoch = the_tombstone(all_keys(backend.store(), "threads/_t/"))
    assert before <= epoch <= after


@pytest.mark.backends("local")  # a file's time can be set; an S3 object's LastModified not
def test_the_prune_job_sweeps_them_and_reports_it(backend: Backend) -> None:
    store = backend.store()
    with ObjectStoreSaver(store) as saver:
        chat(saver, "t", ["a question"])
        saver.delete_thread("t")
    config = OpsConfig(url=backend.url())
    kept = ops.prune(config=config, apply=True)
    assert kept["totals"].get("tombstones_swept", 0) == 0 and all_keys(store, "threads/_t/")
    assert kept["tombstone_window"] == 30 * DAY
    month_ago = time.time() - 31 * DAY
    for path in (backend.root / "pfx" / "threads" / "_t").rglob("-*"):
        os.utime(path, (month_ago, month_ago))
    dry = ops.prune(config=config)
    assert dry["totals"]["tombstones_swept"] == 1 and all_keys(store, "threads/_t/")
    swept = ops.prune(config=config, apply=True)
    assert swept["totals"]["tombstones_swept"] == 1
    assert all_keys(store, "threads/_t/") == []
