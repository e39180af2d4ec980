"""show, cat, history, du and the CLI over values embedded in manifests (format version 2).

Long chat messages are ``value`` objects embedded in the manifest of the put
that adds them, and found through located references ``["b", H, L]`` in the
list's tail, in its segments, in a channel's entry and in the metadata; after
a prune deleted those manifests, at ``objects/<H>``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from long_messages import LONG_METADATA_AT, THREAD, grow

from objstore_saver import ObjectStoreSaver, cli, ops
from objstore_saver.driver import Driver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import Ref
from objstore_saver.ops import OpsConfig
from objstore_saver.ops.views import history_plan
from objstore_saver.storage import LocalStore, MeteredStore


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[tuple[LocalStore, list[Any]]]:
    st = LocalStore(tmp_path / "store")
    with ObjectStoreSaver(st) as saver:
        messages = grow(saver)
    yield st, messages


def _config(st: LocalStore) -> OpsConfig:
    return OpsConfig(url=st.location)


def _contents(report: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in report["channel_values"]["messages"]]


def _segment_values(report: dict[str, Any], config: OpsConfig) -> list[dict[str, Any]]:
    """The value references of the head's segments, as ``cat`` shows them."""
    out = []
    for g in report["storage"]["messages"]["segments"]:
        seg = ops.cat(f"{g['key']}#{g['digest']}" if g["embedded_in"] else g["key"], config)
        out += [e for e in seg["elements"] if e.get("ref") == "value"]
    return out


def test_show_reads_every_value_where_its_reference_locates_it(chat: Any) -> None:
    st, messages = chat
    config = _config(st)
    report = ops.show(THREAD, config=config)
    assert _contents(report) == [m.content for m in messages]
    assert isinstance(report["channel_values"]["notes"], str)
    assert report["metadata"]["step"] == 20
    hkey = report["key"]
    tail = report["storage"]["messages"]["objects"]
    assert tail and all(a.startswith(hkey + "#") for a in tail)  # the new question, embedded here
    notes = report["storage"]["notes"]
    assert notes["stored"] == "value" and notes["embedded_in"] == notes["located_in"] != hkey
    assert notes["key"] == f"{notes['embedded_in']}#{notes['key'].rpartition('#')[2]}"


def test_cat_follows_each_address_show_and_segments_give(chat: Any) -> None:
    st, _ = chat
    config = _config(st)
    report = ops.show(THREAD, config=config)
    notes = ops.cat(report["storage"]["notes"]["key"], config)
    assert notes["kind"] == "value" and notes["sha256_ok"] is True
    assert notes["value"] == report["channel_values"]["notes"]
    (address,) = report["storage"]["messages"]["objects"]
    question = ops.cat(address, config)
    assert question["kind"] == "value" and question["embedded_in"] == report["key"]
    assert question["value"]["content"] == report["channel_values"]["messages"][40]["content"]
    # A segment's elements are located by checkpoint id: cat names their manifests.
    values = _segment_values(report, config)
    assert len(values) > 8 and all("#" in v["key"] and v["located_in"] for v in values)
    contents = {m["content"] for m in report["channel_values"]["messages"]}
    for v in values[:4]:
        shown = ops.cat(v["key"], config)
        assert shown["kind"] == "value" and shown["value"]["content"] in contents
    # The head manifest's own entries carry their locations too.
    manifest = ops.cat(report["key"], config)
    assert manifest["channels"]["notes"]["key"] == report["storage"]["notes"]["key"]
    assert manifest["channels"]["messages"]["tail"][0]["key"] == address
    assert {e["kind"] for e in manifest["embedded"]} == {"value"}


def test_history_reads_located_metadata_with_one_get_a_manifest(chat: Any) -> None:
    st, _ = chat
    metered = MeteredStore(st)
    driver = Driver(metered)
    try:
        rows = driver.run(history_plan(THREAD))
    finally:
        driver.close()
    assert [r["step"] for r in rows] == list(range(20, -1, -1))
    # Metadata embedded in its own manifest is read with it: one GET a manifest.
    for info in st.list(k.manifests_prefix(THREAD)).objects:
        m = codec.decode_manifest(st.get(info.key) or b"", info.key)
        if isinstance(m.metadata, Ref):
            assert m.metadata.digest in codec.embedded_objects(m), info.key
    assert metered.snapshot().get_requests == len(rows)
    embeds = {r["step"]: r["embedded_objects"] for r in rows}
    assert embeds[LONG_METADATA_AT] >= 2  # its question and its metadata


def test_after_prune_show_and_cat_read_the_values_stored_alone(chat: Any) -> None:
    st, messages = chat
    config = _config(st)
    before = ops.show(THREAD, config=config)
    with ObjectStoreSaver(st) as saver:
        saver.prune([THREAD], keep_last=2)
    report = ops.show(THREAD, config=config)
    assert _contents(report) == [m.content for m in messages]
    assert report["channel_values"]["notes"] == before["channel_values"]["notes"]
    notes = report["storage"]["notes"]
    assert (
        notes["embedded_in"] is None
        and notes["located_in"] == before["storage"]["notes"]["key"].rpartition("#")[0]
    )
    assert notes["key"] == k.object_key_in(
        k.thread_prefix(THREAD), bytes.fromhex(before["storage"]["notes"]["key"].rpartition("#")[2])
    )
    gone = ops.cat(before["storage"]["notes"]["key"], config)
    assert gone["kind"] == "value" and "is gone" in gone["found_alone"]
    values = _segment_values(report, config)
    for v in values[:4]:  # located in pruned manifests: read alone
        assert ops.cat(v["key"], config)["kind"] == "value"
    du = ops.du(config)
    assert du["by_kind"]["objects"]["objects"] > 0  # what prune stored alone


def test_du_counts_embedded_values_within_the_manifests(chat: Any) -> None:
    st, _ = chat
    du = ops.du(_config(st))
    assert du["by_kind"]["manifests"]["objects"] == 21
    alone = st.list(k.objects_prefix(THREAD)).objects
    assert du["by_kind"].get("objects", {"objects": 0})["objects"] == len(alone)


def test_cli_show_names_where_embedded_values_are(chat: Any) -> None:
    st, _ = chat
    report = ops.show(THREAD, config=_config(st))
    out = io.StringIO()
    assert cli.main(["show", THREAD, "--url", st.location, "--no-progress"], stdout=out) == 0
    assert f"notes (value in {report['storage']['notes']['key']})" in out.getvalue()
    out = io.StringIO()
    address = report["storage"]["messages"]["objects"][0]
    assert cli.main(["cat", address, "--url", st.location, "--json"], stdout=out) == 0
    assert '"kind": "value"' in out.getvalue()
