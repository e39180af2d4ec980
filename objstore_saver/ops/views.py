"""Read-only jobs: ``threads``, ``history``, ``show``, ``cat``, ``du``.

Each job is a pure plan (a generator of request batches, like the saver's own
in :mod:`objstore_saver.plans`) run by the blocking driver. Values are decoded
structurally (:mod:`objstore_saver.ops.decode`): nothing is unpickled and no
user class is imported.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from objstore_saver import plans
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import (
    Entry,
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
from objstore_saver.longterm import layout as longterm_layout
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    aopen_store,
    never_cancel,
    no_progress,
    open_store,
)
from objstore_saver.ops.checkpoint_reading import checkpoint_plan, resolve_entries
from objstore_saver.ops.decode import decode_payload, jsonable
from objstore_saver.ops.fanout import (
    DEFAULT_CONCURRENCY,
    Target,
    blocking,
    check_concurrency,
    for_each_thread,
)
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.requests import Get, ListKeys, run_batch, run_one
from objstore_saver.storage.base import ObjectInfo

#: Manifests read in parallel by a history.
READ_AHEAD = 16


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


# --- threads ------------------------------------------------------------------------


def thread_prefixes() -> SubPlan:
    """Sub-plan: every thread prefix, by the saver's skip scan (spec §6.4)."""
    return (yield from plans.thread_prefixes())


def _summary(thread_id: str | None, listing: plans.ThreadListing) -> dict[str, Any]:
    every: list[ObjectInfo] = listing.manifests + listing.writes + listing.objects + listing.runs
    last = max((o.last_modified for o in every), default=None)
    namespaces = {keys.namespace_of_manifest_key(o.key)[0] for o in listing.manifests}
    return {
        "thread_id": thread_id,
        "prefix": listing.pfx,
        "checkpoints": len(listing.manifests),
        "namespaces": len(namespaces),
        "writes": len(listing.writes),
        "objects": len(every),
        "bytes": sum(o.size for o in every),
        "last_update": _iso(last),
    }


async def athreads(
    config: OpsConfig | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """List threads with checkpoint counts, sizes and last update, newest first.

    One flat listing of the store finds every thread and its keys (a LIST per
    1,000 keys); only a thread with a hashed token costs a GET, and those run
    ``concurrency`` at once.

    Args:
        config: The store; default from ``OBJSTORE_SAVER_URL``.
        concurrency: Threads worked on at once.
        shard: Only the threads this shard owns (``--shard K/N``).
        progress: Called after each thread.
        should_cancel: Polled between threads; True stops cleanly.

    Returns:
        ``{"threads": [{"thread_id", "checkpoints", "writes", "objects", "bytes",
        "last_update", ...}], "count", "cancelled", "shard", "run": {rate...}}``.
    """
    check_concurrency(concurrency)
    rows: list[dict[str, Any]] = []
    async with aopen_store(config or OpsConfig.from_env()) as (store, driver):

        async def summary(target: Target) -> dict[str, Any]:
            assert target.listing is not None  # a scan
            listing = target.listing
            return _summary(await driver.arun(plans.thread_id_of(listing)), listing)

        run = await for_each_thread(
            driver,
            summary,
            lambda _target, row: rows.append(row),
            concurrency=concurrency,
            shard=shard,
            progress=progress,
            should_cancel=should_cancel,
        )
    rows.sort(key=lambda r: r["last_update"] or "", reverse=True)
    return {
        "threads": rows,
        "count": len(rows),
        "cancelled": run.cancelled,
        "shard": str(shard),
        "store": store.location,
        "run": run.to_dict(),
    }


threads = blocking(athreads)


# --- history ---------------------------------------------------------------------------


def history_plan(thread_id: str) -> SubPlan:
    """Plan of :func:`history`."""
    pfx = keys.thread_prefix(thread_id)
    page_keys: list[ObjectInfo] = []
    after: str | None = None
    prefix = keys.manifests_prefix(thread_id)
    while True:
        page = yield from run_one(ListKeys(prefix, after))
        page_keys += page.objects
        if not page.truncated or not page.objects:
            break
        after = page.objects[-1].key
    chosen = set(plans.checkpoint_manifests(o.key for o in page_keys))
    page_keys = [o for o in page_keys if o.key in chosen]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(page_keys), READ_AHEAD):
        group = page_keys[start : start + READ_AHEAD]
        bodies = yield from run_batch(*(Get(o.key) for o in group))
        for info, body in zip(group, bodies, strict=True):
            if body is None:
                continue  # deleted since listed
            m = codec.decode_manifest(body, info.key)
            md = (yield from resolve_entries(pfx, {"m": m.metadata}, info.key))["m"]
            md = md if isinstance(md, dict) else {}
            rows.append(
                {
                    "checkpoint_id": m.checkpoint_id,
                    "checkpoint_ns": m.checkpoint_ns,
                    "parent_checkpoint_id": m.parent_checkpoint_id,
                    "step": md.get("step"),
                    "source": md.get("source"),
                    "channels": len(m.channels),
                    "manifest_bytes": info.size,
                    # Objects the manifest carries (format version 2), in its bytes.
                    "embedded_objects": len(m.embedded),
                    "embedded_bytes": sum(len(b) for b in m.embedded),
                    "written": _iso(info.last_modified),
                    "key": info.key,
                }
            )
    rows.sort(key=lambda r: r["checkpoint_id"], reverse=True)
    return rows


def history(thread_id: str, config: OpsConfig | None = None) -> dict[str, Any]:
    """Checkpoints of a thread, newest first, with step, source, parent and size.

    Raises:
        JobError: the thread has no checkpoint.
    """
    config = config or OpsConfig.from_env()
    with open_store(config) as (store, driver):
        rows = driver.run(history_plan(thread_id))
    if not rows:
        raise JobError(f"thread {thread_id!r} has no checkpoint in {store.location}")
    return {"thread_id": thread_id, "store": store.location, "checkpoints": rows}


# --- show ---------------------------------------------------------------------------------


def show(
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
    config: OpsConfig | None = None,
) -> dict[str, Any]:
    """A checkpoint (the latest by default) decoded to JSON: manifest, values, writes.

    Nothing is unpickled and no user class is imported; LangChain messages are
    shown as ``{"role", "content"}``.

    Raises:
        JobError: no such checkpoint.
    """
    config = config or OpsConfig.from_env()
    with open_store(config) as (store, driver):
        report = driver.run(checkpoint_plan(thread_id, checkpoint_id, checkpoint_ns))
    if report is None:
        what = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "any checkpoint"
        raise JobError(
            f"thread {thread_id!r} (namespace {checkpoint_ns!r}) has no {what} in {store.location}"
        )
    report["store"] = store.location
    return report


# --- cat --------------------------------------------------------------------------------------


def _raw_entry(raw: Entry, pfx: str) -> Any:
    if isinstance(raw, Inline):
        return {
            "inline": decode_payload(raw.payload, pfx),
            "type": raw.payload.type,
            "encoding": raw.payload.encoding,
        }
    if isinstance(raw, InlineList):
        return {
            "inline list": raw.obj.count,
            "subtrees": [
                {"key": keys.object_key_in(pfx, d), "elements": n} for d, n in raw.obj.sealed
            ],
            # Where the list says each segment is: "located_in" a manifest
            # that embeds it (read it with "cat <manifest key>#<digest>"),
            # or None when it stands alone at "key".
            "segments": [
                {
                    "key": g.loc or keys.object_key_in(pfx, g.digest),
                    "digest": g.digest.hex(),
                    "elements": g.count,
                    "located_in": g.loc,
                }
                for g in raw.obj.segments
            ],
            "tail": [_raw_entry(e, pfx) for e in raw.obj.tail],
        }
    return {
        "ref": codec.KIND_OF_TAG[raw.tag],
        "key": keys.object_key_in(pfx, raw.digest),
    }


#: Separates a manifest key from the SHA-256 of an object it embeds: ``<key>#<hex>``.
EMBEDDED_SEP = "#"


def embedded_address(key: str) -> tuple[str, bytes] | None:
    """``(manifest key, digest)`` of an embedded object's address ``<manifest key>#<hex>``.

    None when ``key`` is a plain key.

    Raises:
        ValueError: the part after ``#`` is not a SHA-256 hex digest.
    """
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
            checkpoint=_raw_entry(m.checkpoint, key),
            metadata=_raw_entry(m.metadata, key),
            channels={name: _raw_entry(e, pfx) for name, e in m.channels.items()},
            # Objects the manifest carries (field "e"), each addressed by its
            # SHA-256: "cat <this key>#<digest>" decodes one.
            embedded=[_embedded_summary(key, b) for b in m.embedded],
        )
        return out
    if section == "writes":
        ws = codec.decode_writes(body, key)
        if codec.unpack_object(body, key, versions=codec.CHECKPOINT_VERSIONS)["k"] == "writes":
            out.update(
                kind="writes",
                format=codec.unpack_object(body, key, versions=codec.CHECKPOINT_VERSIONS)["f"],
                task_id=ws[0].task_id,
                task_path=ws[0].task_path,
                writes=[
                    {"idx": w.idx, "channel": w.channel, "value": _raw_entry(w.value, pfx)}
                    for w in ws
                ],
            )
            return out
        w = ws[0]
        out.update(
            kind="write",
            format=codec.unpack_object(body, key, versions=codec.CHECKPOINT_VERSIONS)["f"],
            task_id=w.task_id,
            task_path=w.task_path,
            idx=w.idx,
            seq=w.seq,
            channel=w.channel,
            value=_raw_entry(w.value, pfx),
        )
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
    out: dict[str, Any] = {"key": name, "bytes": len(body), "embedded_in": mkey}
    out["sha256_ok"] = True
    out.update(_content(codec.decode_object(body, name), pfx, name))
    return out


def _content(obj: StoredObject, pfx: str, key: str) -> dict[str, Any]:
    """The decoded fields of a content object."""
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
            "sealed": [{"key": keys.object_key_in(pfx, d), "elements": n} for d, n in obj.sealed],
            "tail": [_raw_entry(e, pfx) for e in obj.tail],
        }
    if isinstance(obj, SplitObj):
        return {
            "kind": "split",
            "value": _raw_entry(obj.value, pfx),
            "texts": [{"path": list(p), **_raw_entry(ref, pfx)} for p, ref in obj.holes],
        }
    if isinstance(obj, NodeObj):
        return {
            "kind": "node",
            "subtrees": [
                {"key": keys.object_key_in(pfx, d), "elements": n} for d, n in obj.subtrees
            ],
        }
    if isinstance(obj, SegmentObj):
        return {"kind": "segment", "elements": [_raw_entry(e, pfx) for e in obj.items]}
    return {"kind": "chunk", "elements": [_raw_entry(e, pfx) for e in obj.items]}


def object_plan(key: str) -> SubPlan:
    """Plan: any stored object decoded, or why there is none: ``(report, None)`` or
    ``(None, reason)``.

    ``key`` is a key of the store, or ``<manifest key>#<hex>``: the object
    with that SHA-256 embedded in the manifest (format version 2). When that
    manifest is gone, the object is read at ``objects/<H>``, where prune
    stores what a manifest embeds before deleting it (the report names it
    ``found_alone``).

    Raises:
        ValueError: ``key`` holds ``#`` but not a SHA-256 after it.
        CorruptObjectError: the object (or the manifest) does not decode.
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
        if held is None:
            return None, f"manifest {mkey!r} does not embed object {digest.hex()}"
        return describe_embedded(mkey, digest, held), None
    alone = keys.object_key_in(keys.split_thread_key(mkey)[0], digest)
    body = yield from run_one(Get(alone))
    if body is None:
        return None, f"neither manifest {mkey!r} nor {alone!r} is stored"
    out = describe_object(alone, body)
    out["found_alone"] = f"manifest {mkey!r} is gone: the object is stored alone"
    return out, None


def cat(key: str, config: OpsConfig | None = None) -> dict[str, Any]:
    """Any stored object, decoded to JSON (content-addressed ones checked against their hash).

    ``key`` is a key of the store, or ``<manifest key>#<hex>`` for an object
    embedded in a version-2 manifest (``show`` names each list segment's
    manifest and digest); see :func:`object_plan`.

    Raises:
        JobError: nothing is stored at ``key``, or the manifest does not embed it.
        CorruptObjectError: the object does not decode as the format says.
    """
    config = config or OpsConfig.from_env()
    with open_store(config) as (store, driver):
        try:
            report, reason = driver.run(object_plan(key))
        except ValueError as exc:
            raise JobError(str(exc)) from None
        if report is None:
            raise JobError(f"{reason} in {store.location}")
        return report


# --- du ----------------------------------------------------------------------------------------


def _kind_of(rest: str) -> str:
    section, _, inner = rest.partition("/")
    if section == "checkpoints" and keys.V2_WRITES_SUFFIX in inner:
        return "writes"  # a version-2 pending write, under its checkpoint's key
    names = {"checkpoints": "manifests", "runs": "run-markers"}
    return names.get(section, section)


def du_plan(progress: ProgressCallback, should_cancel: CancelCheck, shard: Shard = ALL) -> SubPlan:
    """Plan of :func:`du`: one listing of the whole store.

    With a shard, a thread's keys count only in the shard that owns it, and
    the keys outside threads only in shard 0, so the shards' totals add up.
    """
    by_thread: dict[str, dict[str, Any]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    total = {"objects": 0, "bytes": 0}
    after: str | None = None
    cancelled = False
    while True:
        if should_cancel():
            cancelled = True
            break
        page = yield from run_one(ListKeys("", after))
        for info in page.objects:
            if info.key.startswith(keys.THREADS):
                pfx, rest = keys.split_thread_key(info.key)
                if not shard.owns(pfx[len(keys.THREADS) : -1]):
                    continue
                kind = _kind_of(rest)
                row = by_thread.setdefault(pfx, {"objects": 0, "bytes": 0, "by_kind": {}})
                row["objects"] += 1
                row["bytes"] += info.size
                slot = row["by_kind"].setdefault(kind, {"objects": 0, "bytes": 0})
                slot["objects"] += 1
                slot["bytes"] += info.size
            elif shard.index != 0:
                continue
            elif info.key.startswith(keys.RUNS):
                kind = "run-index"
            elif info.key.startswith(longterm_layout.ROOT):
                kind = "store " + longterm_layout.classify(info.key)[1]
            else:
                kind = "foreign"
            agg = by_kind.setdefault(kind, {"objects": 0, "bytes": 0})
            agg["objects"] += 1
            agg["bytes"] += info.size
            total["objects"] += 1
            total["bytes"] += info.size
        progress(total["objects"], None, "objects listed")
        if not page.truncated or not page.objects:
            break
        after = page.objects[-1].key
    rows = []
    for pfx, row in by_thread.items():
        tid = keys.untoken(pfx[len(keys.THREADS) : -1])
        rows.append({"thread_id": tid, "prefix": pfx, **row})
    rows.sort(key=lambda r: r["bytes"], reverse=True)
    return {
        "total": total,
        "by_kind": by_kind,
        "by_thread": rows,
        "cancelled": cancelled,
        "shard": str(shard),
    }


def du(
    config: OpsConfig | None = None,
    *,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Objects and bytes of the store, in total, by kind and by thread (largest first).

    One flat listing of the whole store, 1,000 keys a LIST: no GET. Objects
    embedded in manifests (format version 2: list segments) are not keys of
    their own: their bytes count within their manifests' (kind ``manifests``).

    Args:
        config: The store; default from ``OBJSTORE_SAVER_URL``.
        shard: Count only this shard's threads (``--shard K/N``).
        progress: Called after each page.
        should_cancel: Polled between pages; True stops cleanly.
    """
    config = config or OpsConfig.from_env()
    with open_store(config) as (store, driver):
        report = driver.run(du_plan(progress, should_cancel, shard))
        report["store"] = store.location
        return report


__all__ = [
    "athreads",
    "cat",
    "describe_embedded",
    "describe_object",
    "du",
    "embedded_address",
    "history",
    "object_plan",
    "show",
    "threads",
]
