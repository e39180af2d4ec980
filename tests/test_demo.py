"""The demo of README's first command: what it prints is what it did."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import segment_chat

from objstore_saver import demo
from objstore_saver.format import codec
from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage import LocalStore


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = demo.main([str(tmp_path / "store")])
    return code, capsys.readouterr().out


def test_counts_checkpoints_writes_and_objects_apart_and_audits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(tmp_path, capsys)
    assert code == 0, out
    files = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    manifests = [p for p in files if p.name.endswith("~.2")]
    writes = [p for p in files if p.parent.name.endswith("~.w")]
    assert (len(manifests), len(writes)) == (9, 6)
    assert "\n9 checkpoints, newest first" in out
    # One row per kind, the numbers those of the files on disk.
    assert re.search(r"^  9 checkpoints \(manifests\) +\d+ bytes$", out, re.M), out
    assert re.search(r"^  6 pending writes +\d+ bytes$", out, re.M), out
    total = sum(p.stat().st_size for p in files)
    assert re.search(rf"^  15 objects in all +{total} bytes$", out, re.M), out
    assert "checkpoints    15 objects" not in out
    assert "Audited with msgpack and zstandard only" in out
    assert "the newest checkpoint's 6 messages, decoded from its bytes, match" in out
    assert "verify (the saver's fsck): 9 manifests, 6 writes, 0 content objects, no problems" in out


def test_the_audit_decodes_what_the_saver_wrote(tmp_path: Path) -> None:
    """Sealed segments, a value they locate in another manifest, and both read back."""
    with ObjectStoreSaver(LocalStore(tmp_path)) as saver:
        messages = segment_chat.grow(saver, big_at=3)
    found = demo.audit(tmp_path, segment_chat.THREAD)
    assert found.messages == [(m.type, m.content) for m in messages]
    assert found.objects["manifests"] == segment_chat.TURNS
    assert found.embedded > 0


def test_the_audit_follows_an_object_stored_alone_and_checks_its_hash(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with ObjectStoreSaver(store) as saver:
        messages = segment_chat.grow(saver)
    # As after a prune: the segment's manifest is gone, the segment stored alone.
    _, ref = segment_chat.elsewhere(store)
    holder = segment_chat.file_of(store, ref.loc)
    body = codec.embedded_objects(codec.decode_manifest(holder.read_bytes(), ref.loc))[ref.digest]
    key = segment_chat.store_alone(store, segment_chat.THREAD, ref.digest, body)
    holder.unlink()
    found = demo.audit(tmp_path, segment_chat.THREAD)
    assert found.messages == [(m.type, m.content) for m in messages]
    assert found.hashed == 1
    alone = segment_chat.file_of(store, key)
    data = alone.read_bytes()
    alone.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(demo.AuditError, match="does not hash to its name"):
        demo.audit(tmp_path, segment_chat.THREAD)


def test_a_corrupt_object_fails_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = tmp_path / "store/threads/_demo-thread/objects"
    objects.mkdir(parents=True)
    # A map with a format and a kind, not named by the SHA-256 of its bytes.
    (objects / ("ab" * 32)).write_bytes(b"\x82\xa1f\x01\xa1k\xa5value")
    code, out = _run(tmp_path, capsys)
    assert code == 1
    assert "Audit FAILED: threads/_demo-thread/objects/abab" in out
    assert "does not hash to its name" in out


def test_messages_that_differ_from_the_stored_bytes_fail_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = demo.audit

    def altered(root: Path, thread_id: str) -> demo.Audit:
        found = audit(root, thread_id)
        found.messages[-1] = ("ai", "something else")
        return found

    monkeypatch.setattr(demo, "audit", altered)
    code, out = _run(tmp_path, capsys)
    assert code == 1
    assert "6 messages, decoded from its bytes, DO NOT match" in out
