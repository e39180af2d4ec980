"""The read-only job ``cat``: one stored object (or one a manifest embeds), described.

Values are decoded structurally (:mod:`objstore_saver.ops.decode`).
"""

from __future__ import annotations

from typing import Any

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import (
    Entry,
    IndexObj,
    Inline,
    InlineList,
    ListObj,
    NodeObj,
    PartObj,
    PartsObj,
    SegmentObj,
    SplitObj,
    StoredObject,
    ValueObj,
)
from objstore_saver.ops._common import JobError, OpsConfig, SubPlan, open_store
from objstore_saver.ops.checkpoint_reading import describe_segments, subtrees, value_address
from objstore_saver.ops.decode import decode_payload, jsonable
from objstore_saver.plans.requests import Get, run_one


def _raw_entry(raw: Entry, pfx: str, holder: str | None = None) -> Any:
    """An entry as stored, to JSON; ``holder``: the manifest whose namespace resolves locations
    (without one, a located value names its ``located_at`` id and ``objects/<H>``)."""
    if isinstance(raw, Inline):
        return {
            "inline": decode_payload(raw.payload, pfx),
            "type": raw.payload.type,
            "encoding": raw.payload.encoding,
        }
    if isinstance(raw, InlineList):
        return {
            "inline list": raw.obj.count,
            "subtrees": subtrees(pfx, raw.obj.sealed),
            "segments": [
                {k: v for k, v in g.items() if k != "embedded_in"}
                for g in describe_segments(raw, pfx)
            ],
            "tail": [_raw_entry(e, pfx, holder) for e in raw.obj.tail],
        }
    out = {"ref": codec.KIND_OF_TAG[raw.tag], "key": value_address(raw, pfx, holder)}
    if raw.at is not None:
        if "#" in out["key"]:
            out["located_in"] = out["key"].rpartition("#")[0]
        else:
            out["located_at"] = raw.at
    return out


#: Separates a manifest key from the SHA-256 of an object it embeds: ``<key>#<hex>``.
EMBEDDED_SEP = "#"


def embedded_address(key: str) -> tuple[str, bytes] | None:
    """``(manifest key, digest)`` of an embedded object's address ``<manifest key>#<hex>``,
    None for a plain key; ``ValueError`` when the part after ``#`` is not a SHA-256."""
    if EMBEDDED_SEP not in key:
        return None
    mkey, _, hexd = key.rpartition(EMBEDDED_SEP)
    if len(hexd) != 64 or hexd.strip("0123456789abcdef"):
        raise ValueError(
            f"{key!r}: an embedded object is <manifest key>#<SHA-256 in lowercase hex>"
        )
    return mkey, bytes.fromhex(hexd)


def _embedded_summary(key: str, body: bytes) -> dict[str, Any]:
    digest = codec.digest_of(body)
    row: dict[str, Any] = {"digest": digest.hex(), "bytes": len(body)}
    try:
        row["kind"] = codec.unpack_object(body, key, versions=codec.CHECKPOINT_VERSIONS)["k"]
    except CorruptObjectError as exc:
        row["error"] = exc.reason
    return row


def describe_object(key: str, body: bytes) -> dict[str, Any]:
    """Decode any stored object to JSON, checking its format (and address, if it has one)."""
    out: dict[str, Any] = {"key": key, "bytes": len(body)}
    if key.startswith(keys.RUNS) or "/runs/" in key:
        out.update(kind="run-marker", note="empty marker object (spec §4.8)")
        return out
    if not key.startswith(keys.THREADS):
        raise CorruptObjectError(key, "not a key of the objstore-saver layout (docs/spec.md §3)")
    pfx, rest = keys.split_thread_key(key)
    section = rest.split("/", 1)[0]
    if section == "checkpoints" and "/" in rest.split("/", 2)[2]:
        section = "writes"  # a version-2 pending write, under its checkpoint's key
    if section == "checkpoints":
        m = codec.decode_manifest(body, key)
        out.update(
            kind="manifest",
            format=m.version,
            thread_id=m.thread_id,
            checkpoint_ns=m.checkpoint_ns,
            checkpoint_id=m.checkpoint_id,
            parent_checkpoint_id=m.parent_checkpoint_id,
            checkpoint=_raw_entry(m.checkpoint, pfx, key),
            metadata=_raw_entry(m.metadata, pfx, key),
            channels={name: _raw_entry(e, pfx, key) for name, e in m.channels.items()},
            embedded=[_embedded_summary(key, b) for b in m.embedded],
        )
        return out
    if section == "writes":
        ws = codec.decode_writes(body, key)
        raw = codec.unpack_object(body, key, versions=codec.CHECKPOINT_VERSIONS)
        group = raw["k"] == "writes"
        w = ws[0]
        out.update(
            kind="writes" if group else "write",
            format=raw["f"],
            task_id=w.task_id,
            task_path=w.task_path,
        )
        if group:
            out["writes"] = [
                {"idx": w.idx, "channel": w.channel, "value": _raw_entry(w.value, pfx)} for w in ws
            ]
        else:
            out.update(idx=w.idx, seq=w.seq, channel=w.channel, value=_raw_entry(w.value, pfx))
        return out
    if section != "objects":
        # A section this reader does not model: show its MessagePack map as it is.
        raw = codec.unpack_object(body, key)
        out.update(kind=str(raw.get("k", section)), fields=jsonable(raw))
        return out
    digest_hex = key.rsplit("/", 1)[1]
    try:
        digest = bytes.fromhex(digest_hex)
    except ValueError:
        raise CorruptObjectError(key, "object key is not a SHA-256 hex digest") from None
    codec.check_digest(body, digest, key)
    out["sha256_ok"] = True
    out.update(_content(codec.decode_object(body, key), pfx, key))
    return out


def describe_embedded(mkey: str, digest: bytes, body: bytes) -> dict[str, Any]:
    """Decode an object embedded in manifest ``mkey`` (addressed ``<mkey>#<hex>``) to JSON."""
    name = f"{mkey}{EMBEDDED_SEP}{digest.hex()}"
    codec.check_digest(body, digest, name)
    pfx, _ = keys.split_thread_key(mkey)
    out: dict[str, Any] = {"key": name, "bytes": len(body), "embedded_in": mkey, "sha256_ok": True}
    out.update(_content(codec.decode_object(body, name), pfx, name, mkey))
    return out


def _content(obj: StoredObject, pfx: str, key: str, holder: str | None = None) -> dict[str, Any]:
    """The decoded fields of a content object; ``holder``: the manifest embedding it, if any
    (whose namespace is that of a segment's located values)."""
    if isinstance(obj, ValueObj):
        return {
            "kind": "value",
            "type": obj.payload.type,
            "encoding": obj.payload.encoding,
            "value": decode_payload(obj.payload, key),
        }
    if isinstance(obj, PartObj):
        return {"kind": "part", "data_bytes": len(obj.data)}
    if isinstance(obj, PartsObj):
        return {
            "kind": "parts",
            "type": obj.type,
            "encoding": obj.encoding,
            "size": obj.size,
            "parts": [keys.object_key_in(pfx, d) for d in obj.parts],
        }
    if isinstance(obj, ListObj):
        return {
            "kind": "list",
            "elements": obj.count,
            "sealed": subtrees(pfx, obj.sealed),
            "tail": [_raw_entry(e, pfx) for e in obj.tail],
        }
    if isinstance(obj, SplitObj):
        return {
            "kind": "split",
            "value": _raw_entry(obj.value, pfx),
            "texts": [{"path": list(p), **_raw_entry(ref, pfx)} for p, ref in obj.holes],
        }
    if isinstance(obj, NodeObj):
        return {"kind": "node", "subtrees": subtrees(pfx, obj.subtrees)}
    if isinstance(obj, SegmentObj):
        return {"kind": "segment", "elements": [_raw_entry(e, pfx, holder) for e in obj.items]}
    if isinstance(obj, IndexObj):
        return {
            "kind": "index",
            "elements": sum(r.count for r in obj.refs),
            "refs": _index_refs(obj, pfx, holder),
        }
    return {"kind": "chunk", "elements": [_raw_entry(e, pfx) for e in obj.items]}


def _index_refs(obj: IndexObj, pfx: str, holder: str | None) -> list[dict[str, Any]]:
    """An index's references (spec §4.4), located in ``holder``'s namespace if there is one."""
    out = []
    for r in obj.refs:
        ref: dict[str, Any] = {
            "kind": "index" if r.index else "segment",
            "digest": r.digest.hex(),
            "elements": r.count,
            "key": keys.object_key_in(pfx, r.digest),
        }
        if r.at is not None:
            ref["located_at"] = r.at
            if holder is not None:
                ref["located_in"] = ref["key"] = keys.manifest_beside(holder, r.at)
        out.append(ref)
    return out


def object_plan(key: str) -> SubPlan:
    """Plan: ``(report, None)`` of any stored object decoded, or ``(None, reason)``.

    ``key`` is a key of the store, or ``<manifest key>#<hex>``: the object with that
    SHA-256 embedded in the manifest. When that manifest is gone or does not embed it,
    the object is read at ``objects/<H>`` (the report's ``found_alone`` says which).
    ``ValueError``: not a SHA-256 after ``#``; ``CorruptObjectError``: no decoding.
    """
    where = embedded_address(key)
    if where is None:
        body = yield from run_one(Get(key))
        if body is None:
            return None, f"no object at key {key!r}"
        return describe_object(key, body), None
    mkey, digest = where
    body = yield from run_one(Get(mkey))
    if body is not None:
        m = codec.decode_manifest(body, mkey)
        held = codec.embedded_objects(m).get(digest)
        if held is not None:
            return describe_embedded(mkey, digest, held), None
    # Gone (prune stored what it embeds alone first), or a writer kept the
    # manifest under 1 MiB by storing a value alone (spec §4.1).
    alone = keys.object_key_in(keys.split_thread_key(mkey)[0], digest)
    found = yield from run_one(Get(alone))
    if found is None:
        if body is not None:
            return None, f"manifest {mkey!r} does not embed object {digest.hex()} (nor {alone!r})"
        return None, f"neither manifest {mkey!r} nor {alone!r} is stored"
    out = describe_object(alone, found)
    why = "is gone" if body is None else "does not embed it"
    out["found_alone"] = f"manifest {mkey!r} {why}: the object is stored alone"
    return out, None


def cat(key: str, config: OpsConfig | None = None) -> dict[str, Any]:
    """Any stored object, decoded to JSON (content-addressed ones checked against their hash).

    ``key`` is a key of the store, or ``<manifest key>#<hex>`` for an object embedded in
    a version-2 manifest (:func:`object_plan`). ``JobError`` when nothing is stored
    there; ``CorruptObjectError`` when it does not decode as the format says.
    """
    with open_store(config) as (store, driver):
        try:
            report, reason = driver.run(object_plan(key))
        except ValueError as exc:
            raise JobError(str(exc)) from None
        if report is None:
            raise JobError(f"{reason} in {store.location}")
        return report


__all__ = [
    "cat",
    "describe_embedded",
    "describe_object",
    "embedded_address",
    "object_plan",
]
