"""One checkpoint decoded to JSON: the plan behind ``objstore-saver show`` and the viewer.

Values are decoded structurally (:mod:`objstore_saver.ops.decode`). A corrupt part
raises (``show``) or is collected and left out (the viewer).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver import plans
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Entry, Inline, InlineList, Ref
from objstore_saver.ops._common import SubPlan
from objstore_saver.ops.decode import STRUCTURAL
from objstore_saver.plans.requests import Get, run_batch

#: ``{"key", "reason"}`` of a corrupt part, by the name of what it held.
Errors = dict[str, dict[str, str]]


def _ctx() -> plans.Context:
    return plans.Context(JsonPlusSerializer())


def manifest_context(m: codec.Manifest, mkey: str) -> plans.Context:
    """A memory of objects holding what manifest ``mkey`` embeds: reading them costs no request."""
    ctx = _ctx()
    plans.remember_embedded(ctx, m, mkey)
    return ctx


def resolve_entries(
    pfx: str,
    entries: Mapping[str, Entry],
    referrer: str,
    *,
    ctx: plans.Context | None = None,
    gone: set[str] | None = None,
) -> SubPlan:
    """Sub-plan: the JSON of each entry of thread ``pfx`` by name, fetching what they reference.

    ``referrer`` (the key holding the entries) is named in errors; ``ctx``: the objects
    already read; ``gone``: gets the manifests that locate a segment but are deleted.
    A missing or undecodable object raises ``CorruptObjectError``.
    """
    got = yield from plans.fetch_entries(ctx or _ctx(), pfx, entries.values(), referrer, gone=gone)
    return {name: plans.materialize(STRUCTURAL, e, got, pfx) for name, e in entries.items()}


def error_of(exc: CorruptObjectError) -> dict[str, str]:
    """``{"key", "reason"}`` of a corrupt part, as reports name it."""
    return {"key": exc.key, "reason": exc.reason}


def resolve_each(pfx: str, entries: Mapping[str, Entry], referrer: str, **seen: Any) -> SubPlan:
    """Sub-plan: ``(values, errors)`` by name, like :func:`resolve_entries` but a corrupt
    entry does not sink the rest.

    All entries are resolved at once first; only when that fails is each resolved alone
    (one more fetch per entry, paid by corrupt checkpoints only).
    """
    try:
        return (yield from resolve_entries(pfx, entries, referrer, **seen)), {}
    except CorruptObjectError:
        pass  # one entry or more is corrupt: find which, below
    values: dict[str, Any] = {}
    errors: Errors = {}
    for name, entry in entries.items():
        try:
            values[name] = (yield from resolve_entries(pfx, {name: entry}, referrer, **seen))[name]
        except CorruptObjectError as exc:
            errors[name] = error_of(exc)
    return values, errors


def subtrees(pfx: str, sealed: Iterable[tuple[bytes, int]]) -> list[dict[str, Any]]:
    """``{"key", "elements"}`` of each object a list or a node names by its digest."""
    return [{"key": keys.object_key_in(pfx, d), "elements": n} for d, n in sealed]


def describe_segments(entry: InlineList, pfx: str, gone: Collection[str] = ()) -> list[Any]:
    """Where each segment (or root index) of an inline list is.

    ``embedded_in``: the manifest holding it, None when alone at ``objects/<H>``;
    ``located_in``: the manifest the list names (in ``gone``: prune stored it alone).
    """
    out = []
    for g in entry.obj.segments:
        inside = g.loc if g.loc is not None and g.loc not in gone else None
        out.append(
            {
                "key": inside or keys.object_key_in(pfx, g.digest),
                "kind": "index" if g.index else "segment",
                "digest": g.digest.hex(),
                "elements": g.count,
                "embedded_in": inside,
                "located_in": g.loc,
            }
        )
    return out


def value_address(ref: Ref, pfx: str, holder: str | None, gone: Collection[str] = ()) -> str:
    """Where a referenced object was read: ``<manifest key>#<hex>`` when a manifest embeds it.

    A located value (``ref.at``) is in the manifest of that checkpoint id beside
    ``holder`` (spec §4.0), unless that manifest is in ``gone``: then ``objects/<H>``.
    """
    if ref.at is not None and holder is not None and keys.is_manifest_v2_key(holder):
        mkey = keys.manifest_beside(holder, ref.at)
        if mkey not in gone:
            return f"{mkey}#{ref.digest.hex()}"
    return keys.object_key_in(pfx, ref.digest)


def describe_entry(entry: Entry, pfx: str, gone: Collection[str], holder: str) -> dict[str, Any]:
    """How an entry is stored: inline (type, encoding, size) or the key of its object.

    An inline list names its sealed subtrees, segments and tail objects; a located
    value its :func:`value_address`, ``embedded_in`` and ``located_in`` as segments do.
    """
    if isinstance(entry, Inline):
        return {
            "stored": "inline",
            "type": entry.payload.type,
            "encoding": entry.payload.encoding,
            "bytes": len(entry.payload.data),
        }
    if isinstance(entry, InlineList):
        # The list's root is inline in the manifest: its sealed subtrees,
        # segments and the tail's elements too large to sit inline are apart.
        o = entry.obj
        return {
            "stored": "inline list",
            "elements": o.count,
            "sealed": subtrees(pfx, o.sealed),
            "segments": describe_segments(entry, pfx, gone),
            "objects": [value_address(e, pfx, holder, gone) for e in o.tail if isinstance(e, Ref)],
        }
    kind = codec.KIND_OF_TAG[entry.tag]
    key = value_address(entry, pfx, holder, gone)
    if entry.at is None:
        return {"stored": kind, "key": key}
    inside = key.rpartition("#")[0] or None
    located = keys.manifest_beside(holder, entry.at)
    return {"stored": kind, "key": key, "embedded_in": inside, "located_in": located}


def _resolve(
    pfx: str, entries: Mapping[str, Entry], referrer: str, errors: Errors | None, **seen: Any
) -> SubPlan:
    """:func:`resolve_entries` when ``errors`` is None, else :func:`resolve_each` into it."""
    if errors is None:
        return (yield from resolve_entries(pfx, entries, referrer, **seen))
    values, failed = yield from resolve_each(pfx, entries, referrer, **seen)
    errors.update(failed)
    return values


def checkpoint_plan(
    thread_id: str, checkpoint_id: str | None, checkpoint_ns: str, *, collect_errors: bool = False
) -> SubPlan:
    """Plan: a checkpoint (the latest when ``checkpoint_id`` is None) decoded to JSON, or
    None when there is no such checkpoint.

    The manifest and a LIST of its writes in one batch, then what its entries reference
    (with the manifests embedding its segments), then its pending writes and theirs.
    With ``collect_errors`` a corrupt part is named in ``errors`` (what it held → key and
    reason) and left out; without, it raises. A manifest that does not decode always raises.
    """
    pfx = keys.thread_prefix(thread_id)
    if checkpoint_id is None:
        checkpoint_id = yield from plans.latest_id(plans.Scope(thread_id, checkpoint_ns, None))
        if checkpoint_id is None:
            return None
    found = yield from plans.find_checkpoint(thread_id, checkpoint_ns, checkpoint_id)
    if found is None:
        return None
    mkey, body, m, write_keys = found.manifest_key, found.body, found.manifest, found.write_keys
    wprefix = keys.checkpoint_writes_prefix(thread_id, checkpoint_ns, checkpoint_id)
    errors: Errors | None = {} if collect_errors else None
    entries = {"checkpoint": m.checkpoint, "metadata": m.metadata}
    entries.update({"channel:" + name: e for name, e in m.channels.items()})
    # One memory for the checkpoint: its own embedded segments cost no request,
    # and an entry read again alone (collecting errors) fetches nothing twice.
    ctx = manifest_context(m, mkey)
    gone: set[str] = set()
    decoded = yield from _resolve(pfx, entries, mkey, errors, ctx=ctx, gone=gone)
    write_bodies = yield from run_batch(*(Get(k) for k in write_keys))
    writes = []
    for k, b in zip(write_keys, write_bodies, strict=True):
        if b is None:
            continue  # deleted since the listing (prune): not a pending write any more
        try:
            writes.extend(codec.decode_writes(b, k))
        except CorruptObjectError as exc:
            if errors is None:
                raise
            errors["write " + k] = error_of(exc)
    in_force = plans.effective_writes(writes)
    write_errors: Errors | None = {} if collect_errors else None
    values = yield from _resolve(
        pfx, {str(i): w.value for i, w in enumerate(in_force)}, wprefix, write_errors
    )
    pending = []
    for i, w in enumerate(in_force):
        if write_errors and str(i) in write_errors:
            assert errors is not None
            errors[f"write {w.task_id}/{w.channel}"] = write_errors[str(i)]
        pending.append(
            {
                "task_id": w.task_id,
                "task_path": w.task_path,
                "channel": w.channel,
                "idx": w.idx,
                "value": values.get(str(i)),
            }
        )
    report = {
        "key": mkey,
        "thread_id": m.thread_id,
        "checkpoint_ns": m.checkpoint_ns,
        "checkpoint_id": m.checkpoint_id,
        "parent_checkpoint_id": m.parent_checkpoint_id,
        "manifest_bytes": len(body),
        "metadata": decoded.get("metadata"),
        "checkpoint": decoded.get("checkpoint"),
        "channel_values": {name: decoded.get("channel:" + name) for name in m.channels},
        "storage": {name: describe_entry(e, pfx, gone, mkey) for name, e in m.channels.items()},
        "embedded": {"objects": len(m.embedded), "bytes": sum(len(b) for b in m.embedded)},
        "pending_writes": pending,
    }
    if errors is not None:
        report["errors"] = errors
    return report
