"""verify, show, cat, history and du over lists whose segments are embedded in manifests.

A real saver grows a ``messages`` list by two messages a put over 28 puts:
segments of 8 elements seal, two of one size merge (up to one of 32 here),
and each is embedded in the manifest of the put that made it (format
version 2). Grown to 40 puts, its full segment goes under a root index.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from segment_chat import (
    THREAD,
    elsewhere,
    file_of,
    flip_embedded,
    grow,
    head,
    manifests,
    rewrite_manifest,
    segments,
    store_alone,
)

from objstore_saver import ObjectStoreSaver, cli, ops
from objstore_saver.driver import Driver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import InlineList, Manifest, Ref, ValueObj
from objstore_saver.ops import JobError, OpsConfig
from objstore_saver.ops.checkpoint_reading import checkpoint_plan
from objstore_saver.storage import LocalStore, MeteredStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    st = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(st) as saver:
        grow(saver)
    yield st


@pytest.fixture
def config(store: LocalStore) -> OpsConfig:
    return OpsConfig(url=store.location)


def _verify(store: Any) -> Any:
    with ObjectStoreSaver(store) as fresh:
        return fresh.verify(THREAD, read_data=True)


def _tail_refs(m: Manifest) -> set[bytes]:
    """Objects the tail of a manifest's ``messages`` list refers to."""
    e = m.channels["messages"]
    return (
        {t.digest for t in e.obj.tail if isinstance(t, Ref)} if isinstance(e, InlineList) else set()
    )


def _objects_key(digest: bytes) -> str:
    return k.object_key_in(k.thread_prefix(THREAD), digest)


def test_the_thread_has_merged_segments_located_in_older_manifests(store: LocalStore) -> None:
    hkey, hm = head(store)
    counts = [g.count for g in segments(hm)]
    assert counts == [32, 16, 8]  # sealed and merged: 7 runs of 8 are 0b111
    assert all(g.loc is not None for g in segments(hm))
    assert {g.loc for g in segments(hm)} - {hkey}  # located in older manifests
    assert not store.list(k.objects_prefix(THREAD)).objects  # nothing stands alone


# --- verify ----------------------------------------------------------------------------------


def test_verify_resolves_segments_in_their_manifests_with_one_get_each(store: LocalStore) -> None:
    metered = MeteredStore(store)
    report = _verify(metered)
    assert report.ok, report.problems
    n = len(manifests(store))
    assert report.manifests == n and report.objects == 0 and report.orphan_objects == 0
    every = [b for m in manifests(store).values() for b in m.embedded]
    assert report.embedded_objects == len(every) > 0
    assert report.embedded_bytes == sum(len(b) for b in every)
    cost = metered.snapshot()
    # One GET per manifest: a location in a manifest verify read is not read again.
    assert cost.get_requests == n, cost
    assert cost.put_requests == 0 and cost.delete_requests == 0


@pytest.mark.parametrize(
    ("at", "kinds"),
    [
        # The map header: the bytes no longer decode, and they no longer
        # hash to the address the lists locate there.
        (0, ["unreadable", "missing"]),
        (-1, ["missing"]),  # a data byte: it decodes, under another address
    ],
)
def test_verify_names_the_manifest_whose_embedded_bytes_are_corrupt(
    store: LocalStore, at: int, kinds: list[str]
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    flip_embedded(store, g.loc, g.digest, at)
    report = _verify(store)
    assert not report.ok
    mine = [p for p in report.problems if p.key == g.loc]
    assert [p.kind for p in mine] == kinds, report.problems
    assert f"does not embed object {g.digest.hex()}" in mine[-1].detail
    # Not mistaken for a missing object alone: the manifest is there.
    assert not [p for p in report.problems if p.key == _objects_key(g.digest)]


def test_verify_names_both_keys_when_the_locating_manifest_is_gone(store: LocalStore) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    file_of(store, g.loc).unlink()  # deleted without storing its objects alone first
    metered = MeteredStore(store)
    report = _verify(metered)
    alone = _objects_key(g.digest)
    missing = [p for p in report.problems if p.kind == "missing"]
    assert [p.key for p in missing] == [alone], report.problems
    assert g.loc in missing[0].detail and alone in missing[0].detail
    # Beyond one GET a manifest, only the fallback (objects/<H>) and, both
    # missing, the manifest once more in case it was written after the listing.
    assert metered.snapshot().get_requests == len(manifests(store)) + 2


def test_verify_reads_a_segment_stored_alone_once_its_manifest_is_gone(
    store: LocalStore,
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    body = codec.embedded_objects(manifests(store)[g.loc])[g.digest]
    held = codec.embedded_objects(manifests(store)[g.loc])
    for d, b in held.items():  # what prune does before it deletes a manifest
        store_alone(store, THREAD, d, b)
    file_of(store, g.loc).unlink()
    report = _verify(store)
    assert report.ok, report.problems
    assert report.objects == len(held) and body in held.values()
    # Reached through the fallback: not an orphan.
    assert report.orphan_objects == 0


def test_verify_walks_the_elements_of_embedded_segments(tmp_path: Path) -> None:
    st = LocalStore(tmp_path / "big")
    with ObjectStoreSaver(st) as saver:
        grow(saver, big_at=1)  # its question is a value the first segments locate
    assert st.list(k.objects_prefix(THREAD)).objects == []
    # The value is embedded in the manifest of the put that added it.
    [(home, digest, body)] = [
        (key, d, b)
        for key, m in manifests(st).items()
        for d, b in codec.embedded_objects(m).items()
        if isinstance(codec.decode_object(b, key), ValueObj)
    ]
    # Only segments refer to it once the manifests holding it in their tail
    # are gone; its own manifest stored it alone first, as prune does.
    in_tail = [key for key, m in manifests(st).items() if digest in _tail_refs(m)]
    assert home in in_tail
    value = store_alone(st, THREAD, digest, body)
    st.delete(in_tail)
    report = _verify(st)
    assert report.ok, report.problems
    assert report.objects == 1 and report.orphan_objects == 0  # reached through a segment
    st.delete([value])
    report = _verify(st)
    [problem] = report.problems
    assert (problem.key, problem.kind) == (value, "missing")
    # Named by the segment that refers to it, in the manifest that embeds it.
    assert "/checkpoints/" in problem.detail and "(embedded object " in problem.detail


def test_verify_reports_a_segment_count_its_list_gets_wrong(store: LocalStore) -> None:
    hkey, hm = head(store)
    i, g = next((i, g) for i, g in enumerate(segments(hm)) if g.count == 16)

    def claim_32(fields: dict[str, Any]) -> None:
        entry = fields["channels"]["messages"]
        entry[1] += 16
        entry[2][i][1] = 32

    rewrite_manifest(store, hkey, claim_32)
    report = _verify(store)
    assert [p.kind for p in report.problems] == ["shape"], report.problems
    assert report.problems[0].key == g.loc
    assert "holds 16 elements" in report.problems[0].detail and hkey in report.problems[0].detail


# --- show, cat, history, du ------------------------------------------------------------------


def test_show_names_where_each_segment_is(store: LocalStore, config: OpsConfig) -> None:
    report = ops.show(THREAD, config=config)
    _, hm = head(store)
    where = report["storage"]["messages"]
    assert where["stored"] == "inline list" and where["elements"] == 56
    assert [(s["digest"], s["elements"], s["embedded_in"]) for s in where["segments"]] == [
        (g.digest.hex(), g.count, g.loc) for g in segments(hm)
    ]
    assert all(s["key"] == s["embedded_in"] for s in where["segments"])
    assert len(report["channel_values"]["messages"]) == 56
    assert report["embedded"] == {
        "objects": len(hm.embedded),
        "bytes": sum(len(b) for b in hm.embedded),
    }


def test_show_reads_each_locating_manifest_once(store: LocalStore) -> None:
    hkey, hm = head(store)
    others = {g.loc for g in segments(hm)} - {hkey}
    metered = MeteredStore(store)
    driver = Driver(metered)
    try:
        assert driver.run(checkpoint_plan(THREAD, None, "")) is not None
    finally:
        driver.close()
    # The head's manifest, then each other manifest locating a segment, once:
    # no object is read alone, and the head is not read again for its own.
    assert metered.snapshot().get_requests == 1 + len(others)


def test_show_and_cat_after_the_locating_manifest_went_alone(
    store: LocalStore, config: OpsConfig
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    held = codec.embedded_objects(manifests(store)[g.loc])
    for d, b in held.items():
        store_alone(store, THREAD, d, b)
    file_of(store, g.loc).unlink()
    report = ops.show(THREAD, config=config)
    seg = next(
        s for s in report["storage"]["messages"]["segments"] if s["digest"] == g.digest.hex()
    )
    assert seg == {
        "key": _objects_key(g.digest),
        "kind": "segment",
        "digest": g.digest.hex(),
        "elements": g.count,
        "embedded_in": None,
        "located_in": g.loc,
    }
    assert len(report["channel_values"]["messages"]) == 56
    shown = ops.cat(f"{g.loc}#{g.digest.hex()}", config)
    assert shown["key"] == _objects_key(g.digest) and shown["kind"] == "segment"
    assert "is gone" in shown["found_alone"]


def test_cat_decodes_an_embedded_object_and_names_what_is_not_there(
    store: LocalStore, config: OpsConfig
) -> None:
    _, g = elsewhere(store)
    assert g.loc is not None
    seg = ops.cat(f"{g.loc}#{g.digest.hex()}", config)
    assert seg["kind"] == "segment" and seg["sha256_ok"] is True
    assert seg["embedded_in"] == g.loc and len(seg["elements"]) == g.count
    assert all("inline" in e for e in seg["elements"])
    manifest = ops.cat(g.loc, config)
    assert {e["digest"] for e in manifest["embedded"]} == {
        d.hex() for d in codec.embedded_objects(manifests(store)[g.loc])
    }
    assert all(e["kind"] == "segment" for e in manifest["embedded"])
    listed = manifest["channels"]["messages"]["segments"]
    assert g.digest.hex() in {s["digest"] for s in listed}
    with pytest.raises(JobError, match="does not embed"):
        ops.cat(f"{g.loc}#{'0' * 64}", config)
    with pytest.raises(JobError, match="SHA-256"):
        ops.cat(f"{g.loc}#nothex", config)
    file_of(store, g.loc).unlink()
    with pytest.raises(JobError, match="neither manifest"):
        ops.cat(f"{g.loc}#{g.digest.hex()}", config)


def test_history_and_du_count_embedded_bytes_within_the_manifests(
    store: LocalStore, config: OpsConfig
) -> None:
    ms = manifests(store)
    rows = {r["key"]: r for r in ops.history(THREAD, config)["checkpoints"]}
    assert set(rows) == set(ms)
    for key, m in ms.items():
        assert rows[key]["embedded_objects"] == len(m.embedded)
        assert rows[key]["embedded_bytes"] == sum(len(b) for b in m.embedded)
        assert rows[key]["manifest_bytes"] > rows[key]["embedded_bytes"]
    du = ops.du(config)
    manifest_bytes = sum(file_of(store, key).stat().st_size for key in ms)
    assert du["by_kind"]["manifests"] == {"objects": len(ms), "bytes": manifest_bytes}
    assert manifest_bytes > sum(r["embedded_bytes"] for r in rows.values()) > 0
    assert "objects" not in du["by_kind"]  # embedded objects are not keys of their own


def test_cli_show_lists_segments_and_cat_takes_their_address(
    store: LocalStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _, hm = head(store)
    url = ["--url", store.location, "--no-progress"]
    out = io.StringIO()
    assert cli.main(["show", THREAD, *url], stdout=out) == 0
    lines = [line.strip() for line in out.getvalue().splitlines()]
    for g in segments(hm):
        assert f"segment of {g.count} in {g.loc}#{g.digest.hex()}" in lines
    g = segments(hm)[0]
    out = io.StringIO()
    assert cli.main(["cat", f"{g.loc}#{g.digest.hex()}", *url, "--json"], stdout=out) == 0
    assert json.loads(out.getvalue())["kind"] == "segment"
    with pytest.raises(SystemExit):
        cli.main(["cat", "--help"])
    assert "<manifest key>#<hash>" in " ".join(capsys.readouterr().out.split())


def test_show_cat_and_verify_name_a_root_index(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "indexed")
    with ObjectStoreSaver(store) as saver:
        messages = grow(saver, turns=40)  # 80: a full segment of 64 under a root index, then 16
    hkey, hm = head(store)
    root, *rest = segments(hm)
    assert root.index and root.count == 64 and [g.count for g in rest] == [16]
    assert root.loc is not None and root.loc != hkey  # made by the put that filled the 64
    config = OpsConfig(url=store.location)
    report = ops.show(THREAD, config=config)
    listed = report["storage"]["messages"]["segments"]
    assert [(s["kind"], s["elements"], s["embedded_in"]) for s in listed] == [
        ("index", 64, root.loc),
        ("segment", 16, rest[0].loc),
    ]
    assert len(report["channel_values"]["messages"]) == len(messages) == 80
    shown = ops.cat(f"{root.loc}#{root.digest.hex()}", config)
    assert shown["kind"] == "index" and shown["elements"] == 64 and shown["sha256_ok"]
    [ref] = shown["refs"]
    # Located by checkpoint id, resolved beside the manifest embedding the index.
    assert ref["kind"] == "segment" and ref["elements"] == 64
    assert ref["located_in"] in manifests(store) and ref["key"] == ref["located_in"]
    seg = ops.cat(f"{ref['key']}#{ref['digest']}", config)
    assert seg["kind"] == "segment" and len(seg["elements"]) == 64
    out = io.StringIO()
    assert cli.main(["show", THREAD, "--url", store.location, "--no-progress"], stdout=out) == 0
    assert f"index of 64 in {root.loc}#{root.digest.hex()}" in out.getvalue()
    assert _verify(store).ok
