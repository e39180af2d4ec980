"""Operator side of the long-term store: ``store ls/get/du``, ``store-sweep`` and
``verify`` of store objects, as library jobs and through the CLI, on a directory
and on S3 (moto); the reads, the sweep and the CLI in clear and with a master key
in the environment (every item and index object sealed, docs/encryption.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from repo_root import ROOT

from objstore_saver import MeteredStore, ObjectStoreSaver, ObjectStoreStore, cli
from objstore_saver.crypto.sealing import is_sealed
from objstore_saver.driver import Driver
from objstore_saver.format import store_keys
from objstore_saver.longterm import plans
from objstore_saver.ops import longterm as store_ops, views
from objstore_saver.ops._common import OpsConfig
from objstore_saver.storage.base import ObjectStore, StorageError
from objstore_saver.storage.local import LocalStore
from objstore_saver.testing.faults import FailAt, Fault, FaultyStore, InjectedFaultError

HOUR = 3600.0


def _past() -> float:
    """A clock an hour behind: items it puts with ttl=1 (minute) are already expired."""
    return time.time() - HOUR


pytestmark = pytest.mark.backends("local", "s3-lean")


def _sealed_as_expected(root: ObjectStore, encrypted: bool) -> None:
    """Every store object is sealed when a key is configured, none otherwise."""
    stored = _keys(root)
    assert stored
    assert all(is_sealed(root.get(k)) is encrypted for k in stored), stored


def _seed(root: ObjectStore) -> None:
    with (
        ObjectStoreStore(root) as now,
        ObjectStoreStore(root, clock=_past) as past,
    ):
        now.put(("users", "a/b c"), "prefs", {"theme": "dark"})
        now.put(("users", "bob"), "k1", {"x": 1})
        now.put(("users", "bob"), "k2", {"x": 2}, ttl=600)  # expires in ~10 h
        past.put(("users", "bob"), "gone", {"x": 3}, ttl=1)
        past.put(("teams", "t"), "old", {"x": 4}, ttl=1)
        now.put(("usersx",), "k", {"x": 5})


def _keys(root: ObjectStore) -> dict[str, int]:
    driver = Driver(root, max_workers=1)
    try:
        return {i.key: i.size for i in driver.run(plans.list_infos("store/"))}
    finally:
        driver.close()


def test_ls_get_du(root_and_url: tuple[ObjectStore, str], encrypted: bool) -> None:
    root, url = root_and_url
    _seed(root)
    _sealed_as_expected(root, encrypted)
    cfg = OpsConfig(url=url)
    stored = _keys(root)

    r = store_ops.store_ls(["users"], config=cfg)
    assert r["namespaces"] == [
        {"namespace": ["users", "a/b c"], "items": 1, "expired": 0},
        {"namespace": ["users", "bob"], "items": 2, "expired": 1},
    ]
    got = [(i["namespace"][1], i["key"], i["expired"]) for i in r["items"]]
    assert got == [("a/b c", "prefs", False), ("bob", "gone", True), ("bob", "k1", False),
                   ("bob", "k2", False)]  # fmt: skip
    assert r["total"] == 4 and r["next_offset"] is None
    for item in r["items"]:
        ns = tuple(item["namespace"])
        assert item["size"] == stored[store_keys.item_key(ns, item["key"])]
    k2 = next(i for i in r["items"] if i["key"] == "k2")
    assert k2["expires_at"] is not None and k2["expires_at"] > k2["updated_at"]

    pages, offset = [], 0
    while offset is not None:
        page = store_ops.store_ls(["users"], limit=3, offset=offset, config=cfg)
        pages += page["items"]
        offset = page["next_offset"]
    assert pages == r["items"]
    assert store_ops.store_ls([], config=cfg)["total"] == 6

    g = store_ops.store_get(["users", "a/b c"], "prefs", config=cfg)
    assert g["value"] == {"theme": "dark"} and g["expired"] is False
    assert g["object"].endswith("/i/_prefs") and g["size"] == stored[g["object"]]
    assert store_ops.store_get(["users", "bob"], "gone", config=cfg)["expired"] is True
    with pytest.raises(store_ops.JobError, match=r"no item 'nope' in namespace \('users',\)"):
        store_ops.store_get(["users"], "nope", config=cfg)

    du = store_ops.store_du([], config=cfg)
    assert du["total"] == {"objects": len(stored), "bytes": sum(stored.values())}
    assert du["by_kind"]["items"]["objects"] == 6
    assert du["by_kind"]["index records"]["objects"] == 6
    assert du["by_kind"]["other"]["objects"] == 0
    users = store_ops.store_du(["users"], config=cfg)
    assert [n["namespace"] for n in users["by_namespace"]] == [["users", "a/b c"], ["users", "bob"]]
    assert users["by_kind"]["items"]["objects"] == 4


def test_whole_store_du_counts_store_objects_by_kind(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    """The saver's ``du`` names the long-term store's objects instead of calling them foreign."""
    root, url = root_and_url
    _seed(root)
    stored = _keys(root)
    du = views.du(OpsConfig(url=url))
    assert "foreign" not in du["by_kind"]
    # One key object per namespace written: users/a/b c, users/bob, teams/t, usersx.
    assert du["by_kind"].get("encryption keys", {}).get("objects", 0) == (4 if encrypted else 0)
    assert du["by_kind"]["store items"]["objects"] == 6
    assert du["by_kind"]["store index records"]["objects"] == 6
    store_kinds = {k: v for k, v in du["by_kind"].items() if k.startswith("store ")}
    assert sum(v["bytes"] for v in store_kinds.values()) == sum(stored.values())


def test_ls_reads_the_index_not_every_item(tmp_path: Path) -> None:
    """ls of 300 items: the index reads (1 snapshot + records past it) and LIST pages,
    never one GET per item."""
    root = LocalStore(tmp_path)
    with ObjectStoreStore(root) as st:
        st.batch([])
        for n in range(300):
            st.put(("many",), f"k{n:03d}", {"n": n})
    metered = MeteredStore(root)
    driver = Driver(metered, max_workers=8)
    try:
        namespaces, rows = driver.run(store_ops._ls_plan(("many",), int(time.time() * 1e6)))
    finally:
        driver.close()
    assert len(rows) == 300 and namespaces[0]["items"] == 300
    meter = metered.snapshot()
    assert meter.get_requests <= 1 + 33, meter
    assert meter.list_requests == 2, meter


@contextlib.contextmanager
def _on(store: ObjectStore) -> Iterator[tuple[ObjectStore, Driver]]:
    driver = Driver(store, max_workers=4)
    try:
        yield store, driver
    finally:
        driver.close()


@contextlib.asynccontextmanager
async def _aon(store: ObjectStore) -> AsyncIterator[tuple[ObjectStore, Driver]]:
    with _on(store) as pair:
        yield pair


def _visible(root: ObjectStore) -> dict[tuple[tuple[str, ...], str], Any]:
    """What LangGraph readers see: search over everything, and get of each key."""
    with ObjectStoreStore(root) as st:
        found = {(i.namespace, i.key): i.value for i in st.search((), limit=1000)}
        for (ns, key), value in found.items():
            got = st.get(ns, key)
            assert got is not None and got.value == value
        return found


LIVE = {
    (("users", "a/b c"), "prefs"): {"theme": "dark"},
    (("users", "bob"), "k1"): {"x": 1},
    (("users", "bob"), "k2"): {"x": 2},
    (("usersx",), "k"): {"x": 5},
}


def test_sweep_dry_run_apply_idempotent(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    root, url = root_and_url
    _seed(root)
    cfg = OpsConfig(url=url)
    before = _keys(root)
    dry = store_ops.store_sweep(config=cfg)
    assert [(i["namespace"], i["key"], i["action"]) for i in dry["items"]] == [
        (["teams", "t"], "old", "would delete"),
        (["users", "bob"], "gone", "would delete"),
    ]
    assert _keys(root) == before  # a dry run writes nothing

    only_users = store_ops.store_sweep(["users"], apply=True, config=cfg)
    assert only_users["totals"] == {"expired": 1, "deleted": 1, "renewed": 0}
    assert store_ops.store_get(["teams", "t"], "old", config=cfg)["expired"] is True
    with pytest.raises(store_ops.JobError, match="no item 'gone'"):
        store_ops.store_get(["users", "bob"], "gone", config=cfg)

    rest = store_ops.store_sweep(apply=True, config=cfg)
    assert rest["totals"] == {"expired": 1, "deleted": 1, "renewed": 0}
    again = store_ops.store_sweep(apply=True, config=cfg)
    assert again["totals"] == {"expired": 0, "deleted": 0, "renewed": 0}
    assert _visible(root) == LIVE
    items = [k for k in _keys(root) if k.startswith("store/it/")]
    assert len(items) == 4
    _sealed_as_expected(root, encrypted)  # the sweep's writes (index records) too


def test_sweep_lets_a_concurrent_put_win(tmp_path: Path) -> None:
    root = LocalStore(tmp_path)
    _seed(root)
    cfg = OpsConfig(url=f"file://{tmp_path}")

    def put_first() -> bool:  # polled just before each item is swept
        with ObjectStoreStore(root) as st:
            st.put(("teams", "t"), "old", {"x": "renewed"})
        return False

    r = store_ops.store_sweep(["teams"], apply=True, config=cfg, should_cancel=put_first)
    assert r["items"][0]["action"] == "renewed"
    with ObjectStoreStore(root) as st:
        assert st.get(("teams", "t"), "old").value == {"x": "renewed"}


def test_sweep_crash_at_every_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep interrupted at request i shows readers nothing that had not expired,
    and the next run completes it."""
    i = 0
    while True:
        root = LocalStore(tmp_path / f"r{i}")
        _seed(root)
        cfg = OpsConfig(url=f"file://{tmp_path}/r{i}")
        faulty = FaultyStore(root, FailAt({i}, Fault.ERROR))
        monkeypatch.setattr(store_ops, "aopen_store", lambda c, s=faulty: _aon(s))
        try:
            store_ops.store_sweep(apply=True, config=cfg)
            finished = True
        except StorageError as exc:
            # A DELETE the item shared with others fails as a StorageError of its own key.
            assert isinstance(exc, InjectedFaultError) or isinstance(
                exc.__cause__, InjectedFaultError
            ), exc
            finished = False
        monkeypatch.undo()
        assert _visible(root) == LIVE
        assert _verify(root)["ok"], i  # a crashed sweep leaves leftovers, not corruption
        if not finished:
            store_ops.store_sweep(apply=True, config=cfg)
        last = store_ops.store_sweep(apply=True, config=cfg)
        assert last["totals"]["expired"] == 0, (i, last)
        assert len([k for k in _keys(root) if k.startswith("store/it/")]) == 4
        assert _visible(root) == LIVE
        assert _verify(root)["store_unswept"] == 0
        if finished:
            break
        i += 1
    assert i >= 8  # listing, reads and two sweeps' writes were each interrupted


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--no-progress" if a == "@np" else a for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_store_commands(root_and_url: tuple[ObjectStore, str], encrypted: bool) -> None:
    root, url = root_and_url
    _seed(root)
    _sealed_as_expected(root, encrypted)
    code, out, _ = _cli("store", "ls", "users", "bob", "--url", url)
    assert code == 0
    assert '["users", "bob"]: 2 items, 1 expired' in out and '"gone"' in out and "(expired)" in out
    code, out, _ = _cli("store", "get", "users", "a/b c", "prefs", "--url", url, "--json")
    assert code == 0 and json.loads(out)["value"] == {"theme": "dark"}
    code, _, err = _cli("store", "get", "users", "a/b c", "missing", "--url", url)
    assert code == 3 and "no item 'missing' in namespace ('users', 'a/b c')" in err
    code, _, err = _cli("store", "get", "prefs", "--url", url)
    assert code == 3 and "namespace of key 'prefs' is empty" in err
    code, out, _ = _cli("store", "du", "--url", url, "--json")
    assert code == 0 and json.loads(out)["by_kind"]["items"]["objects"] == 6
    code, out, _ = _cli("store-sweep", "--url", url, "@np")
    assert code == 0 and "dry run" in out and "expired=2, deleted=0" in out
    code, out, _ = _cli("store-sweep", "--url", url, "--apply", "@np")
    assert code == 0 and "expired=2, deleted=2" in out
    assert _visible(root) == LIVE


def _verify(root: ObjectStore) -> dict[str, Any]:
    with ObjectStoreSaver(root) as saver:
        return saver.verify(read_data=True).to_dict()


def test_verify_covers_store_objects(root_and_url: tuple[ObjectStore, str]) -> None:
    root, url = root_and_url
    _seed(root)
    with ObjectStoreStore(root, compact_after=2) as st:  # snapshots too
        for n in range(4):
            st.put(("users", "bob"), "k1", {"x": n})
        before_k1 = root.get(store_keys.item_key(("users", "bob"), "k1"))
        st.put(("users", "bob"), "k1", {"x": "newest"})
    ok = _verify(root)
    assert ok["ok"], ok["problems"]
    assert ok["store_items"] == 6 and ok["store_namespaces"] == 4 and ok["store_unswept"] == 2
    assert any("/x/s/" in k for k in _keys(root))

    prefs = store_keys.item_key(("users", "a/b c"), "prefs")
    k1 = store_keys.item_key(("users", "bob"), "k1")
    k = store_keys.item_key(("usersx",), "k")
    record = next(k for k in _keys(root) if k.startswith(store_keys.index_prefix(("teams", "t"))))
    root.put(prefs, b"\x93not an item")
    root.put(k1, before_k1)  # an older version than the index's newest
    root.delete([k])  # a live put of the index has no item
    root.put(record, b"junk")
    root.put("store/it/stray", b"?")
    snap = max(k for k in _keys(root) if "/x/s/" in k)
    version, count = snap.rsplit("/", 1)[1].rsplit("-", 1)
    miscounted = f"{snap.rsplit('/', 1)[0]}/{version}-{int(count) + 1}"
    root.put(miscounted, root.get(snap))
    root.delete([snap])
    bad = _verify(root)
    assert not bad["ok"]
    found = {(p["key"], p["kind"]) for p in bad["problems"]}
    assert found == {
        (prefs, "unreadable"),
        (k1, "disagrees"),
        (k, "missing"),
        (record, "unreadable"),
        ("store/it/stray", "unknown-key"),
        (miscounted, "shape"),
    }, bad["problems"]
    code, out, _ = _cli("verify", "--url", url)
    assert code == 1 and f"PROBLEM disagrees: {k1}" in out


def test_verify_after_a_sweep_counts_nothing_unswept(tmp_path: Path) -> None:
    root = LocalStore(tmp_path)
    _seed(root)
    store_ops.store_sweep(apply=True, config=OpsConfig(url=f"file://{tmp_path}"))
    report = _verify(root)
    assert report["ok"] and report["store_unswept"] == 0 and report["store_items"] == 4


def test_entry_point_reads_the_url_from_the_environment(tmp_path: Path) -> None:
    """The real ``objstore-saver`` process, configured by ``OBJSTORE_SAVER_URL`` alone."""
    _seed(LocalStore(tmp_path))
    env = {**os.environ, "OBJSTORE_SAVER_URL": f"file://{tmp_path}"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "objstore_saver", "store", "ls", "--json", "--", "users", "bob"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["prefix"] == ["users", "bob"] and report["total"] == 3
