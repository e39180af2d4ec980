"""The namespace delete as an operator job (``store_delete``, ``store-delete``) and what
``store-sweep`` does with what deletes leave (spec §8.4.9): clear markers retired once
the tombstone window has passed and nothing else is there, and the index objects a
delete stopped before its last step left. On a directory and on S3 (moto), in clear and
with a master key in the environment (the namespaces' keys are shredded)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import ROOT, blocks

from objstore_saver import ObjectStoreStore, cli
from objstore_saver.crypto.names import KEY_ENV, KEYS_ENV
from objstore_saver.driver import Driver
from objstore_saver.format import store_keys
from objstore_saver.longterm import plans
from objstore_saver.ops import longterm as store_ops, longterm_delete
from objstore_saver.ops._common import OpsConfig
from objstore_saver.storage.base import ObjectStore, PutMode, StorageError
from objstore_saver.testing.faults import FailWhere, FaultyStore

pytestmark = pytest.mark.backends("local", "s3-lean")

DAY = 86400.0
U1 = ("users", "u1")
NOTES = ("users", "u1", "notes")
#: Below ``U1``: a label over 200 characters is a hashed token (``~…``), so the path
#: names no labels; three of 190 make the path over 400 characters, so it is hashed.
LONG_TOKEN = ("users", "u1", "z" * 300)
HASHED = ("users", "u1", "a" * 190, "b" * 190, "c" * 190)
#: Siblings the deletes of ``U1`` never touch.
U10 = ("users", "u10")
U2 = ("users", "u2")
U10_HASHED = ("users", "u10", "a" * 190, "b" * 190, "c" * 190)
UNDER_U1 = [U1, NOTES, LONG_TOKEN, HASHED]
assert all(
    store_keys.path_labels(store_keys.namespace_path(ns)) is None for ns in (HASHED, U10_HASHED)
)
KEPT = [U10, U2, U10_HASHED]


def _seed(root: ObjectStore) -> None:
    """Two items in ``U1``, one in each other namespace."""
    with ObjectStoreStore(root) as st:
        st.put(U1, "a", {"x": 1})
        st.put(U1, "b", {"x": 2}, ttl=600)
        for ns in [*UNDER_U1[1:], *KEPT]:
            st.put(ns, "k", {"ns": list(ns)})


def _keys(root: ObjectStore, prefix: str = "store/") -> list[str]:
    driver = Driver(root, max_workers=1)
    try:
        return [i.key for i in driver.run(plans.list_infos(prefix))]
    finally:
        driver.close()


def _of(root: ObjectStore, ns: tuple[str, ...]) -> list[str]:
    """Keys of one namespace's items and index (not of those below it)."""
    return _keys(root, store_keys.items_prefix(ns)) + _keys(root, store_keys.index_prefix(ns))


def _items(root: ObjectStore) -> dict[tuple[str, ...], dict[str, Any]]:
    """What readers see: every live item, by namespace and key."""
    with ObjectStoreStore(root) as st:
        found: dict[tuple[str, ...], dict[str, Any]] = {}
        for item in st.search((), limit=1000):
            found.setdefault(item.namespace, {})[item.key] = item.value
            got = st.get(item.namespace, item.key)
            assert got is not None and got.value == item.value
        return found


def _rows(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (tuple(n["namespace"]), n["items"], n["index_objects"], n["action"])
        for n in report["namespaces"]
    ]


def test_dry_run_changes_nothing_and_counts_what_would_go(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    root, url = root_and_url
    _seed(root)
    before = _keys(root)
    keys_before = _keys(root, "keys/")
    r = longterm_delete.store_delete(list(U1), config=OpsConfig(url=url))
    assert r["apply"] is False and r["cancelled"] is False and r["prefix"] == list(U1)
    assert _rows(r) == sorted(
        [(U1, 2, 2, "would delete")] + [(ns, 1, 1, "would delete") for ns in UNDER_U1[1:]]
    )
    assert r["totals"] == {"namespaces": 4, "items": 5, "index_objects": 5}
    assert all(n["clear"] is None and n["rewritten"] == [] for n in r["namespaces"])
    assert _keys(root) == before and _keys(root, "keys/") == keys_before
    assert len(_items(root)) == 7


def test_apply_deletes_the_namespace_and_those_below_it_only(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    root, url = root_and_url
    _seed(root)
    cfg = OpsConfig(url=url)
    key_objects = {ns: f"keys/store/{store_keys.namespace_path(ns)}/k" for ns in UNDER_U1 + KEPT}
    assert (set(key_objects.values()) <= set(_keys(root, "keys/"))) is encrypted

    r = longterm_delete.store_delete(list(U1), apply=True, config=cfg)
    assert _rows(r) == sorted(
        [(U1, 2, 2, "deleted")] + [(ns, 1, 1, "deleted") for ns in UNDER_U1[1:]]
    )
    assert all(n["clear"] and n["shredded"] is encrypted for n in r["namespaces"])
    assert r["totals"] == {"namespaces": 4, "items": 5, "index_objects": 5}

    assert _items(root) == {ns: {"k": {"ns": list(ns)}} for ns in KEPT}
    for ns in UNDER_U1:  # nothing but the clear marker is left
        assert _of(root, ns) == [store_keys.clears_prefix(ns) + r_clear(r, ns)], ns
    left = set(_keys(root, "keys/"))
    if encrypted:  # the deleted namespaces' keys are gone, the siblings' stay
        assert not left & {key_objects[ns] for ns in UNDER_U1}
        assert {key_objects[ns] for ns in KEPT} <= left

    again = longterm_delete.store_delete(list(U1), apply=True, config=cfg)
    assert again["namespaces"] == []
    assert again["totals"] == {"namespaces": 0, "items": 0, "index_objects": 0}
    dry = longterm_delete.store_delete(["users"], config=cfg)
    assert [tuple(n["namespace"]) for n in dry["namespaces"]] == sorted(KEPT)

    with ObjectStoreStore(root) as st:  # the namespace lives again after its delete
        st.put(U1, "a", {"x": "new"})
        item = st.get(U1, "a")
        assert item is not None and item.value == {"x": "new"}


def r_clear(report: dict[str, Any], ns: tuple[str, ...]) -> str:
    """The clear version the report gives for ``ns``."""
    return next(n["clear"] for n in report["namespaces"] if tuple(n["namespace"]) == ns)


@pytest.mark.parametrize("prefix", [[], ()])
def test_an_empty_prefix_is_refused(
    root_and_url: tuple[ObjectStore, str], prefix: Sequence[str]
) -> None:
    root, url = root_and_url
    _seed(root)
    before = _keys(root)
    for apply in (False, True):
        with pytest.raises(ValueError, match=r"namespace prefix \[\] is empty.*at least one label"):
            longterm_delete.store_delete(prefix, apply=apply, config=OpsConfig(url=url))
    with pytest.raises(longterm_delete.JobError):
        longterm_delete.store_delete(prefix, config=OpsConfig(url=url))
    assert _keys(root) == before


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([*args, "--no-progress"], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_cli_deletes_and_sweeps(
    root_and_url: tuple[ObjectStore, str], encrypted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    root, url = root_and_url
    _seed(root)
    before = _keys(root)
    code, out, _ = _cli("store-delete", "users", "u1", "--url", url)
    assert code == 0 and "dry run (add --apply to delete)" in out
    assert '["users", "u1", "notes"]' in out and out.count("would delete") == 4
    assert "totals: namespaces=4, items=5, index_objects=5" in out
    assert _keys(root) == before

    code, out, _ = _cli("store-delete", "users", "u1", "--url", url, "--apply")
    assert code == 0 and "applied" in out and out.count(" deleted") == 4
    assert sorted(_items(root)) == sorted(KEPT)
    code, out, _ = _cli("store-delete", "users", "u1", "--url", url, "--apply", "--json")
    assert code == 0 and json.loads(out)["namespaces"] == []
    with pytest.raises(SystemExit) as exc:  # no label: argparse refuses it
        _cli("store-delete", "--url", url, "--apply")
    assert exc.value.code == 2
    assert "LABEL" in capsys.readouterr().err

    markers = [k for k in _keys(root) if "/x/c/" in k]
    assert len(markers) == 4
    code, out, _ = _cli("store-sweep", "users", "--url", url, "--apply")
    assert code == 0 and "clear markers" not in out  # the 30-day window holds them
    assert [k for k in _keys(root) if "/x/c/" in k] == markers
    time.sleep(1.5)
    code, out, _ = _cli("store-sweep", "users", "--url", url, "--tombstone-window", "1s", "--apply")
    assert code == 0 and out.count("1 clear markers, deleted") == 4, out
    assert "deleted namespaces: namespaces=4, markers=4, ended=0" in out
    assert [k for k in _keys(root) if "/x/c/" in k] == []
    assert sorted(_items(root)) == sorted(KEPT)


def _delete(root: ObjectStore, ns: tuple[str, ...]) -> None:
    with ObjectStoreStore(root) as st:
        st.delete_namespace(ns)


def _clears(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (tuple(c["namespace"]), c["markers"], c["ended"], c["action"]) for c in report["clears"]
    ]


def test_the_sweep_retires_markers_past_the_window_of_namespaces_holding_nothing_else(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    root, url = root_and_url
    _seed(root)
    cfg = OpsConfig(url=url)
    for ns in (U1, U2, U10):
        _delete(root, ns)
    _delete(root, U1)  # two deletes: two markers, the older ended by the newer (and deleted)
    with ObjectStoreStore(root) as st:
        st.put(U2, "back", {"x": 1})  # a new life: an item and its record beside the marker
    u1_marker = _keys(root, store_keys.clears_prefix(U1))
    assert len(u1_marker) == 1

    def sweep(days: float, apply: bool = False, **kw: Any) -> dict[str, Any]:
        return store_ops.store_sweep(
            ["users"], apply=apply, config=cfg, clock=lambda: time.time() + days * DAY, **kw
        )

    assert sweep(0, apply=True)["clears"] == []
    assert sweep(29, apply=True)["clears"] == []  # within the 30-day default
    assert _keys(root, store_keys.clears_prefix(U1)) == u1_marker

    before = _keys(root)
    dry = sweep(31)
    assert _clears(dry) == [(U1, 1, 0, "would delete"), (U10, 1, 0, "would delete")]
    assert dry["clear_totals"] == {"namespaces": 2, "markers": 2, "ended": 0}
    assert dry["tombstone_window"] == 30 * DAY
    assert _keys(root) == before  # a dry run deletes nothing

    assert sweep(0.5, apply=True, tombstone_window=DAY)["clears"] == []
    done = sweep(2, apply=True, tombstone_window=DAY)
    assert _clears(done) == [(U1, 1, 0, "deleted"), (U10, 1, 0, "deleted")]
    assert _of(root, U1) == [] and _of(root, U10) == []
    assert len(_keys(root, store_keys.clears_prefix(U2))) == 1  # U2 holds an item: kept
    assert sweep(400, apply=True)["clears"] == []
    assert len(_keys(root, store_keys.clears_prefix(U2))) == 1
    assert _items(root)[U2] == {"back": {"x": 1}}

    with pytest.raises(store_ops.ConfigurationError, match="tombstone-window"):
        sweep(0, tombstone_window=-1)
    with ObjectStoreStore(root) as st:  # a retired namespace is written and read anew
        st.put(U1, "again", {"x": 2})
    assert _items(root)[U1] == {"again": {"x": 2}}


def test_the_sweep_deletes_what_a_stopped_delete_ended(
    root_and_url: tuple[ObjectStore, str], encrypted: bool
) -> None:
    """A delete stopped before its last step (the DELETE of what it ended) leaves ended
    index objects; one stopped before its items go also leaves the items. The sweep
    deletes the ended objects once the delete is a minute old, never the marker of a
    namespace that holds anything else."""
    root, url = root_and_url
    _seed(root)
    cfg = OpsConfig(url=url)

    def stop_at_first_delete(under: str, ns: tuple[str, ...]) -> None:
        plan = FailWhere(lambda r: r.op == "delete" and r.key.startswith(under), times=1)
        with ObjectStoreStore(FaultyStore(root, plan)) as st, pytest.raises(StorageError):
            st.delete_namespace(ns)

    stop_at_first_delete(store_keys.INDEX, U1)  # after its items, keys: the index stays
    stop_at_first_delete(store_keys.ITEMS, U2)  # after its marker: items and index stay
    assert U1 not in _items(root) and U2 not in _items(root)
    u1_index = _keys(root, store_keys.index_prefix(U1))
    assert len(u1_index) == 3  # two records and the marker
    assert len(_keys(root, store_keys.items_prefix(U2))) == 1

    def sweep(seconds: float, apply: bool) -> dict[str, Any]:
        later = time.time() + seconds
        return store_ops.store_sweep(["users"], apply=apply, config=cfg, clock=lambda: later)

    assert sweep(0, apply=True)["clears"] == []  # the delete may still be running
    assert _keys(root, store_keys.index_prefix(U1)) == u1_index
    dry = sweep(120, apply=False)
    assert _clears(dry) == [(U1, 0, 2, "would delete"), (U2, 0, 1, "would delete")]
    # past the window too: the markers stay while the namespace holds anything else
    assert _clears(sweep(31 * DAY, apply=False)) == _clears(dry)
    assert _keys(root, store_keys.index_prefix(U1)) == u1_index
    done = sweep(120, apply=True)
    assert _clears(done) == [(U1, 0, 2, "deleted"), (U2, 0, 1, "deleted")]
    assert done["clear_totals"] == {"namespaces": 2, "markers": 0, "ended": 3}
    assert _of(root, U1) == [k for k in u1_index if "/x/c/" in k]
    assert len(_keys(root, store_keys.items_prefix(U2))) == 1  # an item: the marker stays
    assert len(_keys(root, store_keys.clears_prefix(U2))) == 1
    assert sweep(120, apply=True)["clears"] == []
    # past the window: U1 holds only its marker now, U2 still its item
    assert _clears(sweep(31 * DAY, apply=False)) == [(U1, 1, 0, "would delete")]

    assert U1 not in _items(root) and U2 not in _items(root)
    r = longterm_delete.store_delete(list(U2), apply=True, config=cfg)  # completes it
    assert _rows(r) == [(U2, 1, 1, "deleted")]  # its item, and the older marker
    assert _of(root, U2) == _keys(root, store_keys.clears_prefix(U2))
    assert sorted(_items(root)) == sorted([*UNDER_U1[1:], *KEPT[:1], *KEPT[2:]])


def test_the_store_md_delete_commands_run(
    root_and_url: tuple[ObjectStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/store.md's ``store-delete`` block, as written, on a store holding the
    namespaces it names and their siblings."""
    root, url = root_and_url
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv(KEYS_ENV, raising=False)
    _seed(root)
    (block,) = [
        b
        for b in blocks(ROOT / "docs" / "store.md")
        if "test_the_store_md_delete_commands_run" in (b.reason or "")
    ]
    env = {
        **os.environ,
        "OBJSTORE_SAVER_URL": url,
        "PYTHONPATH": str(ROOT),
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", block.text],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert sum(line.endswith(" would delete") for line in lines) == 4
    assert sum(line.endswith(" deleted") for line in lines) == 4
    assert sorted(_items(root)) == sorted(KEPT)
    assert len([k for k in _keys(root) if "/x/c/" in k]) == 4  # the window keeps the markers


def test_a_hashed_namespace_that_tells_no_labels_is_left_and_the_cli_exits_1(
    root_and_url: tuple[ObjectStore, str],
) -> None:
    root, url = root_and_url
    with ObjectStoreStore(root, client_encryption=False) as st:
        st.put(U1, "a", {"x": 1})
    junk = store_keys.item_key(HASHED, "k")  # a hashed path whose only object is not an item
    root.put(junk, b"not a store object", PutMode.CREATE)
    code, out, _ = _cli("store-delete", "users", "u1", "--url", url, "--apply", "--json")
    report = json.loads(out)
    assert code == 1
    (left,) = [n for n in report["namespaces"] if n["action"] == "unreadable"]
    assert left["namespace"] == store_keys.namespace_path(HASHED) and junk in left["detail"]
    assert _keys(root, store_keys.items_prefix(HASHED)) == [junk]  # left alone
    assert _keys(root, store_keys.items_prefix(U1)) == []
