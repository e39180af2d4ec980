"""The viewer's reads that go beyond ``show``: a checkpoint whose parts may be
corrupt, and the referrers of an object within its thread.

Both are pure plans (request batches, no I/O), run by the viewer's driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from objstore_saver import plans
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Entry, Ref
from objstore_saver.ops.views import READ_AHEAD, SubPlan, describe_entry, resolve_entries
from objstore_saver.plans.requests import Get, ListKeys, list_all, run_batch, run_one

#: Manifests of the thread scanned per referrers request (the page links to the next ones).
REFERRER_MANIFESTS = 50


def _error(exc: CorruptObjectError) -> dict[str, str]:
    return {"key": exc.key, "reason": exc.reason}


def resolve_each(pfx: str, entries: Mapping[str, Entry], referrer: str) -> SubPlan:
    """Sub-plan: like :func:`resolve_entries`, but a corrupt entry does not sink the rest.

    All entries are resolved in one go first (the cost of ``show``). Only when
    that fails is each entry resolved alone, to tell which ones are corrupt:
    one more fetch per entry, paid by corrupt checkpoints only.

    Returns:
        ``(values, errors)``: values by name of the entries that decode, and
        ``{"key", "reason"}`` by name of those that do not.
    """
    try:
        return (yield from resolve_entries(pfx, entries, referrer)), {}
    except CorruptObjectError:
        pass  # one entry or more is corrupt: find which, below
    values: dict[str, Any] = {}
    errors: dict[str, dict[str, str]] = {}
    for name, entry in entries.items():
        try:
            values[name] = (yield from resolve_entries(pfx, {name: entry}, referrer))[name]
        except CorruptObjectError as exc:
            errors[name] = _error(exc)
    return values, errors


def checkpoint_plan(thread_id: str, checkpoint_id: str | None, checkpoint_ns: str) -> SubPlan:
    """Plan: a checkpoint as ``show`` reports it, plus ``errors`` for corrupt parts.

    A channel, the metadata, the checkpoint entry, a pending write or its value
    whose object is corrupt is named in ``errors`` (section → key and reason)
    and left out (``None``); everything else is decoded. A manifest that does
    not decode raises :class:`CorruptObjectError`: nothing of it can be shown.

    Returns:
        The report, or ``None`` when there is no such checkpoint.
    """
    pfx = keys.thread_prefix(thread_id)
    if checkpoint_id is None:
        checkpoint_id = yield from plans.latest_id(plans.Scope(thread_id, checkpoint_ns, None))
        if checkpoint_id is None:
            return None
    mkey = keys.manifest_key(thread_id, checkpoint_ns, checkpoint_id)
    wprefix = keys.writes_prefix(thread_id, checkpoint_ns, checkpoint_id)
    body, page = yield from run_batch(Get(mkey), ListKeys(wprefix))
    if body is None:
        return None
    write_keys = [o.key for o in page.objects]
    if page.truncated and page.objects:
        write_keys += yield from list_all(wprefix, page.objects[-1].key)
    m = codec.decode_manifest(body, mkey)
    entries = {"checkpoint": m.checkpoint, "metadata": m.metadata}
    entries.update({"channel:" + name: e for name, e in m.channels.items()})
    decoded, errors = yield from resolve_each(pfx, entries, mkey)
    write_bodies = yield from run_batch(*(Get(k) for k in write_keys))
    writes = []
    for k, b in zip(write_keys, write_bodies, strict=True):
        if b is None:
            continue  # deleted since the listing (prune): not a pending write any more
        try:
            writes.extend(codec.decode_writes(b, k))
        except CorruptObjectError as exc:
            errors["write " + k] = _error(exc)
    in_force = plans.effective_writes(writes)
    values, write_errors = yield from resolve_each(
        pfx, {str(i): w.value for i, w in enumerate(in_force)}, wprefix
    )
    pending = []
    for i, w in enumerate(in_force):
        if str(i) in write_errors:
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
    return {
        "key": mkey,
        "thread_id": m.thread_id,
        "checkpoint_ns": m.checkpoint_ns,
        "checkpoint_id": m.checkpoint_id,
        "parent_checkpoint_id": m.parent_checkpoint_id,
        "manifest_bytes": len(body),
        "metadata": decoded.get("metadata"),
        "checkpoint": decoded.get("checkpoint"),
        "channel_values": {name: decoded.get("channel:" + name) for name in m.channels},
        "storage": {name: describe_entry(e, pfx) for name, e in m.channels.items()},
        "pending_writes": pending,
        "errors": errors,
    }


# --- referrers -------------------------------------------------------------------------------


def _children(obj: Any) -> set[bytes]:
    """Digests an object references directly."""
    return {digest for _, digest in plans.child_refs(obj)}


def referrers_plan(key: str, after: str | None, limit: int) -> SubPlan:
    """Plan: which manifests, and which objects they reference, refer to object ``key``.

    Scans one page of the thread's manifest keys (``limit`` of them, from
    ``after``): each manifest read is checked for an entry pointing at the
    object, and every list or parts object those manifests point at (read
    once each) for an element or part pointing at it. Objects deeper in a
    list's tree (sealed chunks under nodes) are not read. Cost: one LIST, one
    GET per manifest, one GET per distinct list or parts object referenced.

    Raises:
        ValueError: ``key`` is not a content-addressed object key, or ``after``
            not a manifest key of its thread.
    """
    pfx, rest = keys.split_thread_key(key)
    digest_hex = rest.rsplit("/", 1)[-1]
    if not rest.startswith("objects/") or len(digest_hex) != 64:
        raise ValueError(f"key {key!r} is not an object key: only objects have referrers")
    digest = bytes.fromhex(digest_hex)
    prefix = pfx + "checkpoints/"
    if after is not None and not after.startswith(prefix):
        raise ValueError(f"cursor {after!r} is not a manifest key of the thread of {key!r}")
    page = yield from run_one(ListKeys(prefix, after, limit))
    manifests: list[dict[str, str]] = []
    containers: dict[bytes, str] = {}
    problems: list[dict[str, str]] = []
    infos = page.objects
    for start in range(0, len(infos), READ_AHEAD):
        group = infos[start : start + READ_AHEAD]
        bodies = yield from run_batch(*(Get(o.key) for o in group))
        for info, body in zip(group, bodies, strict=True):
            if body is None:
                continue  # pruned since the listing
            try:
                m = codec.decode_manifest(body, info.key)
            except CorruptObjectError as exc:
                problems.append(_error(exc))
                continue
            named = {"checkpoint": m.checkpoint, "metadata": m.metadata, **m.channels}
            for name, e in named.items():
                if not isinstance(e, Ref):
                    continue
                if e.digest == digest:
                    manifests.append({"key": info.key, "entry": name})
                elif e.tag in ("l", "p", "s"):
                    containers.setdefault(e.digest, e.tag)
    order = sorted(containers)
    okeys = [keys.object_key_in(pfx, d) for d in order]
    bodies: list[Any] = []
    if okeys:
        bodies = yield from run_batch(*(Get(k) for k in okeys))
    objects: list[dict[str, str]] = []
    for d, k, body in zip(order, okeys, bodies, strict=True):
        if body is None:
            continue
        try:
            codec.check_digest(body, d, k)
            obj = codec.decode_object(body, k, containers[d])
        except CorruptObjectError as exc:
            problems.append(_error(exc))
            continue
        if digest in _children(obj):
            objects.append({"key": k, "kind": type(obj).__name__.removesuffix("Obj").lower()})
    return {
        "key": key,
        "manifests": manifests,
        "objects": objects,
        "scanned_manifests": len(infos),
        "scanned_objects": len(okeys),
        "problems": problems,
        "next": infos[-1].key if page.truncated and infos else None,
    }
