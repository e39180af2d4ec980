"""Retention by age (spec §6.9 "The idle rule", the age rule) and ``delete_all``.

Ages are the store's ``LastModified``. On the local directory the tests set
file times (``os.utime``) to make checkpoints old; on S3 they move the prune
host's clock (``now``) instead. Nothing sleeps except where S3's one-second
``LastModified`` resolution must separate two writes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from backends import S3_BACKENDS, Backend
from deleted import not_tombstones, the_tombstone
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import ObjectStoreSaver, plans
from objstore_saver.format import keys as k
from objstore_saver.plans.requests import Batch, Delete
from objstore_saver.storage import LocalStore, MeteredStore, ObjectStore

DAY = 24 * 3600.0
IDLE = 30 * DAY


def _cp(values: dict[str, Any], cid: str | None) -> dict:
    cp = empty_checkpoint()
    if cid is not None:
        cp["id"] = cid
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {name: 1 for name in values}
    return cp


def _put(
    saver: ObjectStoreSaver,
    thread: str,
    values: dict[str, Any],
    *,
    ns: str = "",
    parent: dict | None = None,
    cid: str | None = None,
    carry: tuple[str, ...] = (),
) -> dict:
    """Put ``values``, all new but the channels ``carry`` names, whose entries
    the put takes from the parent (a value embedded there stays located there)."""
    config: dict = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = _cp(values, cid)
    new = {c: v for c, v in cp["channel_versions"].items() if c not in carry}
    return saver.put(config, cp, {"step": 0}, new)


def _chain(saver: ObjectStoreSaver, thread: str, n: int, *, tag: str = "") -> list[dict]:
    """``n`` checkpoints, each with a value of its own embedded in its manifest."""
    configs, parent = [], None
    for i in range(n):
        parent = _put(saver, thread, {"v": f"{tag}{thread}-{i}" + "x" * 4000}, parent=parent)
        configs.append(parent)
    return configs


def _age(root: Path, key_prefix: str, days: float) -> None:
    """Make every key under ``key_prefix`` of a local store ``days`` old."""
    at = time.time() - days * DAY
    base = root / key_prefix
    paths = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
    assert paths, f"nothing stored under {key_prefix}"
    for p in paths:
        os.utime(p, (at, at))


def _keys(store: ObjectStore, prefix: str = "") -> list[str]:
    out, after = [], None
    while True:
        page = store.list(prefix, start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _ids(saver: ObjectStoreSaver, thread: str, ns: str = "") -> list[str]:
    conf = {"thread_id": thread, "checkpoint_ns": ns}
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": conf})]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def local(root: Path) -> LocalStore:
    return LocalStore(root)


def _saver(store: ObjectStore) -> ObjectStoreSaver:
    return ObjectStoreSaver(store, prune_grace=timedelta(0))


# --- the idle rule ------------------------------------------------------------------------


def test_idle_threads_are_deleted_and_fresh_ones_untouched(local: LocalStore, root: Path) -> None:
    with _saver(local) as saver:
        for t in ("old-1", "old-2", "fresh", "recent"):
            _chain(saver, t, 3)
        _age(root, k.thread_prefix("old-1"), 40)
        _age(root, k.thread_prefix("old-2"), 31)
        _age(root, k.thread_prefix("recent"), 29)
        untouched = {t: _keys(local, k.thread_prefix(t)) for t in ("fresh", "recent")}
        report = saver.prune(
            ["old-1", "old-2", "fresh", "recent"], keep_last=None, idle_for=IDLE, min_age=0
        )
        assert report["threads_idle"] == ["old-1", "old-2"]
        assert report["checkpoints_deleted"] == 6 and report["checkpoints_kept"] == 0
        assert not_tombstones(_keys(local, k.thread_prefix("old-1"))) == []
        assert not_tombstones(_keys(local, k.thread_prefix("old-2"))) == []
        for t, before in untouched.items():
            assert _keys(local, k.thread_prefix(t)) == before
        rows = {r["thread_id"]: r for r in report["threads"]}
        assert rows["fresh"]["idle"] is False and rows["fresh"]["newest_root_at"] is not None
        assert rows["old-1"]["idle"] is True


def test_idle_rule_with_keep_last_prunes_the_active_threads_too(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        _chain(saver, "old", 3)
        last = _chain(saver, "busy", 4)[-1]
        _age(root, k.thread_prefix("old"), 40)
        report = saver.prune(["old", "busy"], keep_last=2, idle_for=IDLE, min_age=0)
        assert report["threads_idle"] == ["old"]
        assert not_tombstones(_keys(local, k.thread_prefix("old"))) == []
        assert len(_ids(saver, "busy")) == 2
        assert _ids(saver, "busy")[0] == last["configurable"]["checkpoint_id"]


def test_keep_latest_action_reduces_an_idle_thread_to_its_latest_checkpoint(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        configs = _chain(saver, "old", 4)
        _chain(saver, "fresh", 3)
        _age(root, k.thread_prefix("old"), 40)
        rule = {"keep_last": None, "idle_for": IDLE, "idle_action": "keep_latest", "min_age": 0}
        report = saver.prune(["old", "fresh"], **rule)
        assert report["threads_idle"] == ["old"]
        # Two-phase, as keep_last=1: the three deleted manifests' values are
        # stored alone first, and marked by the next run, not deleted.
        assert report["checkpoints_deleted"] == 3 and report["objects_extracted"] == 3
        assert report["objects_marked"] == 0
        assert _ids(saver, "old") == [configs[-1]["configurable"]["checkpoint_id"]]
        assert len(_ids(saver, "fresh")) == 3
        # Still idle (the values just stored alone do not count while a
        # manifest is listed): the next run marks them.
        again = saver.prune(["old", "fresh"], **rule)
        assert again["threads_idle"] == ["old"] and again["checkpoints_deleted"] == 0
        assert again["objects_marked"] == 3 and again["objects_swept"] == 0
        assert len(_keys(local, k.objects_prefix("old"))) == 3
    with ObjectStoreSaver(local) as reader:  # a fresh saver: nothing from memory
        tup = reader.get_tuple({"configurable": {"thread_id": "old"}})
        assert tup is not None and tup.checkpoint["channel_values"]["v"].startswith("old-3")


def test_dry_run_writes_nothing_and_reports_what_a_real_run_does(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        for t in ("a", "b", "c"):
            _chain(saver, t, 3)
        _age(root, k.thread_prefix("a"), 40)
        _age(root, k.thread_prefix("b"), 40)
        before = _keys(local)
        meter = MeteredStore(local)
        with ObjectStoreSaver(meter, prune_grace=timedelta(0)) as dry_saver:
            for action in ("delete", "keep_latest"):
                dry = dry_saver.prune(
                    ["a", "b", "c"],
                    keep_last=None,
                    idle_for=IDLE,
                    idle_action=action,
                    dry_run=True,
                    min_age=0,
                )
                assert dry["threads_idle"] == ["a", "b"]
        assert meter.snapshot().put_requests == meter.snapshot().delete_requests == 0
        assert _keys(local) == before
        real = saver.prune(["a", "b", "c"], keep_last=None, idle_for=IDLE, min_age=0)
        assert real["threads_idle"] == ["a", "b"] and real["checkpoints_deleted"] == 6
        # A thread that holds nothing is not idle: there is nothing to act on.
        again = saver.prune(["a", "b", "c"], keep_last=None, idle_for=IDLE, min_age=0)
        assert again["threads_idle"] == [] and again["checkpoints_deleted"] == 0


def test_dry_run_of_an_idle_delete_reports_the_same_counts(local: LocalStore, root: Path) -> None:
    with _saver(local) as saver:
        _chain(saver, "a", 3)
        _age(root, k.thread_prefix("a"), 40)
        dry = saver.prune(["a"], keep_last=None, idle_for=IDLE, dry_run=True)
        real = saver.prune(["a"], keep_last=None, idle_for=IDLE)
        assert {**dry, "dry_run": False} == real


def test_a_fresh_subgraph_checkpoint_or_write_keeps_an_old_thread_active(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        _chain(saver, "sub", 2)
        writes_parent = _chain(saver, "writes", 2)[-1]
        _age(root, k.thread_prefix("sub"), 40)
        _age(root, k.thread_prefix("writes"), 40)
        # A long root step: the subgraph checkpoints and the pending writes are
        # new, the newest root checkpoint is old.
        _put(saver, "sub", {"s": 1}, ns="child:1")
        saver.put_writes(writes_parent, [("v", "pending")], "task-1")
        before = _keys(local)
        report = saver.prune(["sub", "writes"], keep_last=None, idle_for=IDLE)
        assert report["threads_idle"] == [] and _keys(local) == before
        assert all(r["newest_root_at"] is not None for r in report["threads"])
        assert len(_ids(saver, "sub")) == 2


def test_threads_without_a_root_checkpoint_are_judged_by_their_listing(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        _put(saver, "only-sub-old", {"s": 0}, ns="child:1")
        _put(saver, "only-sub-new", {"s": 0}, ns="child:1")
        _age(root, k.thread_prefix("only-sub-old"), 40)
        # Only the objects of a first put interrupted before its manifest.
        local.put(k.object_key_in(k.thread_prefix("orphans"), b"\x01" * 32), b"x")
        _age(root, k.thread_prefix("orphans"), 40)
        report = saver.prune(
            ["only-sub-old", "only-sub-new", "orphans"], keep_last=None, idle_for=IDLE
        )
        assert report["threads_idle"] == ["only-sub-old", "orphans"]
        assert not_tombstones(_keys(local, k.thread_prefix("only-sub-old"))) == []
        assert not_tombstones(_keys(local, k.thread_prefix("orphans"))) == []
        assert _ids(saver, "only-sub-new", "child:1") != []
        assert all(r["newest_root_at"] is None for r in report["threads"])


# --- the age rule -------------------------------------------------------------------------


def test_age_rule_drops_old_checkpoints_but_keeps_the_keep_last_newest(
    local: LocalStore, root: Path
) -> None:
    with _saver(local) as saver:
        configs = _chain(saver, "t", 6)
        ids = [c["configurable"]["checkpoint_id"] for c in configs]
        for c in configs[:4]:  # the four oldest are ten days old
            _age(root, k.manifest_key("t", "", c["configurable"]["checkpoint_id"]), 10)
        report = saver.prune(["t"], keep_last=1, older_than=5 * DAY, min_age=0)
        assert report["older_than_seconds"] == 5 * DAY
        assert _ids(saver, "t") == ids[::-1][:2]  # the two young ones
        # keep_last is a floor: everything left is young, so nothing more goes.
        assert saver.prune(["t"], keep_last=1, older_than=5 * DAY)["checkpoints_deleted"] == 0

        configs = _chain(saver, "u", 6)
        ids = [c["configurable"]["checkpoint_id"] for c in configs]
        _age(root, k.manifests_prefix("u", ""), 10)
        saver.prune(["u"], keep_last=3, older_than=5 * DAY, min_age=0)
        assert _ids(saver, "u") == ids[::-1][:3]


def test_age_rule_keeps_every_young_subgraph_checkpoint(local: LocalStore, root: Path) -> None:
    """older_than holds in every namespace: a young subgraph checkpoint stays
    whatever run it belongs to and wherever it is in that run; an old one
    goes unless it is the newest of its namespace in a kept run."""
    with _saver(local) as saver:
        # Ids are time-ordered: r<i>.* belongs to the run of root checkpoint r<i>.
        parent = None
        for i in range(4):
            parent = _put(saver, "t", {"v": i}, parent=parent, cid=f"r{i}")
            sub = None
            for j in range(2):
                sub = _put(saver, "t", {"s": j}, ns=f"sub:{i}", parent=sub, cid=f"r{i}.s{j}")
        _age(root, k.thread_prefix("t"), 10)
        # Young: the kept run's first subgraph checkpoint (not its newest), and
        # a subgraph resumed today in the namespace of r1's run (its id sorts
        # in r1's run, which is not kept).
        os.utime(root / k.manifest_key("t", "sub:3", "r3.s0"))
        _put(saver, "t", {"s": 2}, ns="sub:1", cid="r1.s2")
        report = saver.prune(["t"], keep_last=1, older_than=5 * DAY, min_age=0)
        assert _ids(saver, "t") == ["r3"]
        # r3.s1 is its run's last state in sub:3 (old, kept by keep_last).
        assert _ids(saver, "t", "sub:3") == ["r3.s1", "r3.s0"]
        assert _ids(saver, "t", "sub:1") == ["r1.s2"]
        assert _ids(saver, "t", "sub:0") == _ids(saver, "t", "sub:2") == []
        assert report["checkpoints_kept"] == 4 and report["checkpoints_deleted"] == 9

        # No root checkpoint: each namespace's newest, and the young ones.
        first = _put(saver, "n", {"s": 0}, ns="child:1", cid="a")
        second = _put(saver, "n", {"s": 1}, ns="child:1", parent=first, cid="b")
        _put(saver, "n", {"s": 2}, ns="child:1", parent=second, cid="c")
        _age(root, k.manifest_key("n", "child:1", "a"), 10)
        saver.prune(["n"], keep_last=1, older_than=5 * DAY, min_age=0)
        assert _ids(saver, "n", "child:1") == ["c", "b"]


def test_aprune_runs_the_same_idle_rule(local: LocalStore, root: Path) -> None:
    with _saver(local) as saver:
        _chain(saver, "old", 2)
        _chain(saver, "fresh", 2)
        _age(root, k.thread_prefix("old"), 40)
        dry = saver.prune(["old", "fresh"], keep_last=None, idle_for=IDLE, dry_run=True)
        done = asyncio.run(saver.aprune(["old", "fresh"], keep_last=None, idle_for=IDLE))
        assert {**dry, "dry_run": False} == done and done["threads_idle"] == ["old"]
        assert not_tombstones(_keys(local, k.thread_prefix("old"))) == []


# --- strategies and bad input --------------------------------------------------------------


def test_delete_all_is_langgraphs_delete(local: LocalStore) -> None:
    with _saver(local) as saver:
        _chain(saver, "x", 2)
        _chain(saver, "y", 2)
        keep = _keys(local, k.thread_prefix("y"))
        report = saver.prune(["x"], strategy="delete_all")
        assert report["strategy"] == "delete_all" and report["checkpoints_deleted"] == 2
        assert not_tombstones(_keys(local, k.thread_prefix("x"))) == []
        asyncio.run(saver.aprune(["y"], strategy="delete_all", dry_run=True))
        assert _keys(local, k.thread_prefix("y")) == keep
        asyncio.run(saver.aprune(["y"], strategy="delete_all"))
        assert not_tombstones(_keys(local)) == []


def test_bad_rules_are_refused_naming_what_is_wrong(local: LocalStore) -> None:
    with _saver(local) as saver:
        _chain(saver, "b", 2)
        before = _keys(local)
        with pytest.raises(ValueError, match=r"'newest'.*'keep_latest', 'delete', 'delete_all'"):
            saver.prune(["b"], strategy="newest")
        with pytest.raises(ValueError, match="keep_last may be None only with idle_for"):
            saver.prune(["b"], keep_last=None)
        with pytest.raises(ValueError, match="idle_for and older_than apply"):
            saver.prune(["b"], strategy="delete", idle_for=IDLE)
        with pytest.raises(ValueError, match="idle_for must be a positive"):
            saver.prune(["b"], idle_for=0)
        with pytest.raises(ValueError, match="older_than must be a positive"):
            saver.prune(["b"], older_than=-1)
        with pytest.raises(ValueError, match="idle_action 'archive'"):
            saver.prune(["b"], idle_for=IDLE, idle_action="archive")
        assert _keys(local) == before


# --- request counts -----------------------------------------------------------------------


@pytest.fixture
def any_store(backend: Backend) -> ObjectStore:
    return backend.store()


def test_the_idle_decision_costs_one_list_per_thread_and_no_get(any_store: ObjectStore) -> None:
    threads = [f"t{i}" for i in range(12)]
    with _saver(any_store) as saver:
        for t in threads:
            _chain(saver, t, 3)
    meter = MeteredStore(any_store, log=True)
    with _saver(meter) as saver:
        report = saver.prune(threads, keep_last=None, idle_for=IDLE)
        assert report["threads_idle"] == []
        counts = meter.snapshot()
        assert counts.requests == {"put": 0, "get": 0, "list": len(threads), "delete": 0}
        assert [e.key for e in meter.log] == [k.manifests_prefix(t, "") for t in threads]

        # Thirty-one days later every thread is idle: one more (full) LIST each, then deletes.
        meter.reset()
        later = datetime.now(UTC) + timedelta(days=31)
        plan = saver._prune_plan(threads, "keep_latest", None, 0.0, True, now=later, idle_for=IDLE)
        dry = saver._driver.run(plan)
        assert dry["threads_idle"] == threads
        assert meter.snapshot().requests == {
            "put": 0,
            "get": 0,
            "list": 2 * len(threads),
            "delete": 0,
        }


# --- on S3: fresh and idle separated by LastModified ------------------------------------------


# Both transports: idleness is read from the LastModified of each transport's listing.
@pytest.mark.backends(*S3_BACKENDS)
def test_idle_delete_on_s3(any_store: ObjectStore) -> None:
    with _saver(any_store) as saver:
        _chain(saver, "old", 3)
        time.sleep(1.1)  # S3 LastModified has one-second resolution
        _chain(saver, "fresh", 3)
        newest = {
            t: any_store.list(k.manifests_prefix(t, ""), limit=1).objects[0].last_modified
            for t in ("old", "fresh")
        }
        assert newest["old"] < newest["fresh"]
        # The prune host's clock: "old" is just past idle_for, "fresh" just short of it.
        now = newest["fresh"] + timedelta(seconds=IDLE) - timedelta(milliseconds=500)
        fresh_keys = _keys(any_store, k.thread_prefix("fresh"))
        plan = saver._prune_plan(
            ["old", "fresh"], "keep_latest", None, 0.0, False, now=now, idle_for=IDLE
        )
        report = saver._driver.run(plan)
        assert report["threads_idle"] == ["old"]
        assert not_tombstones(_keys(any_store, k.thread_prefix("old"))) == []
        assert _keys(any_store, k.thread_prefix("fresh")) == fresh_keys


# --- a writer during an idle delete ------------------------------------------------------------


def _drive_until_delete(plan: Generator, saver: ObjectStoreSaver) -> tuple[Batch, Generator]:
    reply = None
    while True:
        step = plan.send(reply)
        if any(isinstance(op, Delete) for op in step.ops):
            return step, plan
        reply = saver._driver._run_batch(step)


def _finish(plan: Generator, saver: ObjectStoreSaver, batch: Batch) -> Any:
    reply = saver._driver._run_batch(batch)
    while True:
        try:
            step = plan.send(reply)
        except StopIteration as done:
            return done.value
        reply = saver._driver._run_batch(step)


def _race(root: Path, delete_by_age: bool) -> list[str]:
    """An agent writes a checkpoint between the deleter's listing and its first delete."""
    store = LocalStore(root)
    with _saver(store) as agent, _saver(store) as deleter:
        # "shared" is embedded in a's manifest; b and c carry it, located there.
        a = _put(agent, "t", {"shared": "s" * 2000, "v": "a"}, cid="1-a")
        b = _put(
            agent, "t", {"shared": "s" * 2000, "v": "b"}, parent=a, cid="1-b", carry=("shared",)
        )
        _age(root, k.thread_prefix("t"), 40)
        if delete_by_age:
            plan = deleter._prune_plan(["t"], "keep_latest", None, 0.0, False, idle_for=IDLE)
        else:
            plan = plans.delete_thread(deleter._ctx, "t")
        batch, plan = _drive_until_delete(plan, deleter)
        # The agent's next turn: b was written moments ago, so its entries come
        # from memory and c locates "shared" in a's manifest, as b does. A
        # whole-thread delete stores nothing alone before deleting a.
        _put(agent, "t", {"shared": "s" * 2000, "v": "c"}, parent=b, cid="1-c", carry=("shared",))
        _finish(plan, deleter, batch)
        # The late checkpoint belongs to the ended epoch: the thread stays deleted
        # (it referenced a value the sweep removed, and is never read).
        with ObjectStoreSaver(store) as reader:
            assert reader.get_tuple({"configurable": {"thread_id": "t"}}) is None
            assert list(reader.list({"configurable": {"thread_id": "t"}})) == []
        return _keys(store)


def test_a_thread_deleted_by_age_while_an_agent_writes_ends_as_after_delete_thread(
    tmp_path: Path,
) -> None:
    by_age = _race(tmp_path / "age", delete_by_age=True)
    by_delete = _race(tmp_path / "delete", delete_by_age=False)
    # What is left: the tombstone (its epoch is the delete's clock: the two runs'
    # may differ by a second), and the agent's late manifest, which the next
    # delete or prune sweeps.
    assert by_age[1:] == by_delete[1:] == [k.manifest_key("t", "", "1-c")]
    the_tombstone(by_age[:1])
    the_tombstone(by_delete[:1])
