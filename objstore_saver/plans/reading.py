"""Plans that read: objects, manifests, writes and tuples (the lookup is :mod:`.lookup`)."""

from __future__ import annotations

from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from objstore_saver.caches.facts import CheckpointEntries
from objstore_saver.errors import CorruptObjectError, MissingObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import (
    ChunkObj,
    Entry,
    IndexObj,
    InlineList,
    ListObj,
    Manifest,
    NodeObj,
    PartObj,
    PartsObj,
    Ref,
    SegmentObj,
    SplitObj,
    StoredObject,
    ValueObj,
    WriteObj,
)
from objstore_saver.plans.context import LIST_READ_AHEAD, Context
from objstore_saver.plans.requests import Batch, Get, ListKeys, list_infos, run_batch, run_one
from objstore_saver.plans.values import (
    manifest_values as manifest_values,
    materialize as materialize,
)


def child_refs(obj: StoredObject) -> list[tuple[str, bytes]]:
    """What an object (or an inline list's fields) refers to, as (tag, digest)."""
    if isinstance(obj, ListObj):
        return (
            [("c", d) for d, _ in obj.sealed]
            + [(LIST_TAG[g.index], g.digest) for g in obj.segments]
            + entry_refs(obj.tail)
        )
    if isinstance(obj, IndexObj):
        return [(LIST_TAG[r.index], r.digest) for r in obj.refs]
    if isinstance(obj, NodeObj):
        return [("c", d) for d, _ in obj.subtrees]
    if isinstance(obj, ChunkObj | SegmentObj):
        return [(e.tag, e.digest) for e in obj.items if isinstance(e, Ref)]
    if isinstance(obj, PartsObj):
        return [("d", d) for d in obj.parts]
    if isinstance(obj, SplitObj):
        return entry_refs([obj.value]) + entry_refs(ref for _, ref in obj.holes)
    return []


#: The tag of a list's reference (spec §4.4): ``n`` an index, ``g`` a segment.
LIST_TAG = {True: "n", False: "g"}

#: Tags of objects that only hold data: a reachability walk need not read them.
LEAF_TAGS = frozenset({"b", "d"})


def entry_locations(entries: Iterable[Entry], holder: str | None = None) -> dict[bytes, str]:
    """Where located objects (inline lists' segments, ``b`` values) are: digest → manifest key,
    in the namespace of ``holder``, the manifest holding the entries (spec §4.0)."""
    out: dict[bytes, str] = {}
    for e in entries:
        if isinstance(e, InlineList):
            out.update((g.digest, g.loc) for g in e.obj.segments if g.loc is not None)
            items: Iterable[Entry] = e.obj.tail
        else:
            items = (e,)
        for item in items:
            if isinstance(item, Ref) and item.at is not None:
                out[item.digest] = _beside(holder, item.at, item.digest)
    return out


def _beside(holder: str | None, at: str, digest: bytes) -> str:
    """Key of the manifest ``at`` in the namespace of ``holder`` (a manifest key)."""
    if holder is None or not keys.is_manifest_v2_key(holder):
        raise CorruptObjectError(
            holder or "an entry", f"value {digest.hex()} is located outside a manifest"
        )
    return keys.manifest_beside(holder, at)


def remember_embedded(ctx: Context, m: Manifest, mkey: str) -> dict[bytes, StoredObject]:
    """Decode a manifest's embedded objects and keep them in memory; return them by address."""
    pfx = keys.thread_prefix(m.thread_id)
    out: dict[bytes, StoredObject] = {}
    for d, body in codec.embedded_objects(m).items():
        out[d] = codec.decode_object(body, embedded_name(mkey, d))
        ctx.objects.add_embedded(pfx, d, out[d])
    return out


def embedded_name(mkey: str, digest: bytes) -> str:
    """How errors name an object embedded in a manifest."""
    return f"{mkey} (embedded object {digest.hex()})"


def _take_embedded(
    ctx: Context,
    wanted: Mapping[bytes, str],
    manifests: Mapping[str, bytes | None],
    referrers: Mapping[bytes, str],
    tags: Mapping[bytes, str],
    soft: Collection[bytes] = (),
) -> tuple[dict[bytes, StoredObject], list[bytes]]:
    """Located objects (digest → manifest key) found in their manifests, and those to read alone.

    Only a value, or what an index locates (``soft``), may be stored alone
    while its manifest is there: a segment it does not embed is corruption.
    """
    got: dict[bytes, StoredObject] = {}
    alone: list[bytes] = []
    for mkey, body in manifests.items():
        mine = [d for d, k in wanted.items() if k == mkey]
        if body is None:
            alone += mine
            continue
        held = remember_embedded(ctx, decode_checked_manifest(body, mkey), mkey)
        for d in mine:
            kind = _LOCATED_KINDS[tags[d]]
            if d not in held:
                if kind is ValueObj or d in soft:
                    # A manifest too large to embed it stored it alone (spec §6.1).
                    alone.append(d)
                    continue
                raise CorruptObjectError(
                    mkey, f"does not embed object {d.hex()} that {referrers[d]} locates there"
                )
            if not isinstance(held[d], kind):
                raise CorruptObjectError(
                    embedded_name(mkey, d),
                    f"{referrers[d]} locates a {kind.__name__}, found another kind",
                )
            got[d] = held[d]
    return got, alone


#: What a located reference's tag reaches (spec §4.0, §4.4).
_LOCATED_KINDS: dict[str, type] = {"b": ValueObj, "g": SegmentObj, "n": IndexObj}


def fetch_objects(
    ctx: Context,
    pfx: str,
    refs: Iterable[tuple[str, bytes]],
    referrer: str,
    *,
    reached: set[bytes] | None = None,
    located: Mapping[bytes, str] | None = None,
    gone: set[str] | None = None,
    folders: Mapping[bytes, str] | None = None,
) -> Generator[Batch, list[Any] | None, dict[bytes, StoredObject]]:
    """Sub-plan: every object reachable from ``refs``, level by level, checked and decoded.

    Objects in memory are not fetched. ``reached``: only the structure is read,
    leaf digests added to it. ``located``: the manifest that embeds an object;
    when it is gone (added to ``gone``) the object is read at ``objects/<H>``.
    ``folders``: for a list's segments, the manifest whose namespace resolves
    their elements' locations.
    """
    located = dict(located or {})
    folder_of = dict(folders or {})
    # Values a segment locates: digest -> (manifest of the list's namespace, checkpoint id).
    pending: dict[bytes, tuple[str | None, str]] = {}
    # What an index locates: read alone when its manifest does not embed it (spec §4.4).
    soft: set[bytes] = set()
    # The referrer was read just before: whatever it reaches is stored now.
    as_of = ctx.clock()
    got: dict[bytes, StoredObject] = {}
    referrers: dict[bytes, str] = {}
    level: dict[bytes, str] = {}
    for tag, d in refs:
        level[d] = tag
        referrers.setdefault(d, referrer)
    while level:
        need: list[tuple[str, bytes]] = []
        fresh: list[tuple[bytes, StoredObject]] = []
        for d, tag in level.items():
            if reached is not None:
                reached.add(d)
                if tag in LEAF_TAGS:
                    continue
            cached = ctx.objects.get(pfx, d)
            if cached is None:
                need.append((tag, d))
            else:
                got[d] = cached
                fresh.append((d, cached))
        for _, d in need:
            if d in pending and d not in located:
                located[d] = _beside(*pending[d], d)
        tag_of = {d: tag for tag, d in need if d in located}
        embedded = {d: located[d] for d in tag_of}
        need = [(tag, d) for tag, d in need if d not in embedded]
        holders = sorted(set(embedded.values()))
        replies = yield from run_batch(
            *(Get(keys.object_key_in(pfx, d)) for _, d in need), *(Get(k) for k in holders)
        )
        bodies = replies[: len(need)]
        if holders:
            held = dict(zip(holders, replies[len(need) :], strict=True))
            found, alone = _take_embedded(ctx, embedded, held, referrers, tag_of, soft)
            got |= found
            fresh += found.items()
            if alone:
                # Their manifest is gone (prune stored them alone first), or, for a
                # value, does not embed it (kept under its budget).
                absent = {k for k, body in held.items() if body is None}
                if gone is not None:
                    gone.update(embedded[d] for d in alone if embedded[d] in absent)
                for d in alone:
                    where = "gone" if embedded[d] in absent else "which does not embed it"
                    referrers[d] = f"{referrers[d]} (located in {embedded[d]}, {where})"
                need += [(tag_of[d], d) for d in alone]
                bodies += yield from run_batch(*(Get(keys.object_key_in(pfx, d)) for d in alone))
        for (tag, d), body in zip(need, bodies, strict=True):
            key = keys.object_key_in(pfx, d)
            if body is None:
                raise MissingObjectError(key, referrers[d])
            codec.check_digest(body, d, key)
            obj = codec.decode_object(body, key, tag)
            if isinstance(obj, PartObj):
                ctx.objects.add_known(pfx, [d])
            else:
                ctx.objects.add(pfx, d, obj)
            got[d] = obj
            fresh.append((d, obj))
        level = {}
        for parent, obj in fresh:
            for tag, child in child_refs(obj):
                if child not in got and child not in level:
                    level[child] = tag
                    referrers.setdefault(child, keys.object_key_in(pfx, parent))
            if isinstance(obj, IndexObj):
                _locate_indexed(obj, folder_of.get(parent), located, folder_of, soft)
            if isinstance(obj, SegmentObj):
                # Resolved only if the value is not in memory (below): most are.
                folder = folder_of.get(parent)
                for item in obj.items:
                    if isinstance(item, Ref) and item.at is not None:
                        pending.setdefault(item.digest, (folder, item.at))
    ctx.objects.confirm(pfx, got, as_of)
    if reached is not None:
        ctx.objects.confirm(pfx, reached, as_of)
    return got


def _locate_indexed(
    index: IndexObj,
    folder: str | None,
    located: dict[bytes, str],
    folder_of: dict[bytes, str],
    soft: set[bytes],
) -> None:
    """Where an index's references are: beside ``folder``, the manifest whose list refers to it."""
    for r in index.refs:
        if folder is not None:
            folder_of.setdefault(r.digest, folder)
        if r.at is not None and r.digest not in located:
            located[r.digest] = _beside(folder, r.at, r.digest)
            soft.add(r.digest)


def fetch_entries(
    ctx: Context,
    pfx: str,
    entries: Iterable[Entry],
    referrer: str,
    *,
    holders: Iterable[tuple[str, Manifest]] = (),
    reached: set[bytes] | None = None,
    gone: set[str] | None = None,
) -> Generator[Batch, list[Any] | None, dict[bytes, StoredObject]]:
    """Sub-plan: :func:`fetch_objects` for what ``entries`` reference, each where it is.

    ``holders``: the manifests the entries or their writes come from (what they
    embed costs no request); without them the entries are the ``referrer``'s.
    """
    located: dict[bytes, str] = {}
    folders: dict[bytes, str] = {}
    sources = list(holders)
    for mkey, m in sources:
        remember_embedded(ctx, m, mkey)
        own = manifest_entries(m)
        located |= entry_locations(own, mkey)
        folders |= _list_folders(own, mkey)
    entries = list(entries)
    if not sources:
        here = referrer if keys.is_manifest_v2_key(referrer) else None
        located = entry_locations(entries, here)
        folders = _list_folders(entries, here)
    return (
        yield from fetch_objects(
            ctx,
            pfx,
            entry_refs(entries),
            referrer,
            reached=reached,
            located=located,
            gone=gone,
            folders=folders,
        )
    )


def _list_folders(entries: Iterable[Entry], holder: str | None) -> dict[bytes, str]:
    """Segment digest → the manifest whose namespace resolves its elements' locations."""
    if holder is None:
        return {}
    return {g.digest: holder for e in entries if isinstance(e, InlineList) for g in e.obj.segments}


def effective_writes(writes: Iterable[WriteObj]) -> list[WriteObj]:
    """Writes in force, in ``writes_sort_key`` order (spec §6.5), from ``writes`` in key order.

    Of a task's index, the regular write of least sequence (the first call)
    and the special write of greatest sequence (the last call) are in force;
    a call's regular writes not all stored yet are not (LangGraph would take
    the task as done and lose the others).
    """
    latest: dict[tuple[str, int], WriteObj] = {}
    for w in writes:
        slot = (w.task_id, w.idx)
        held = latest.get(slot)
        if held is None or (w.seq > held.seq if w.idx < 0 else w.seq < held.seq):
            latest[slot] = w
    complete = [w for w in latest.values() if all((w.task_id, i) in latest for i in w.group)]
    return sorted(complete, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))


def read_writes(write_keys: Sequence[str]) -> Generator[Batch, list[Any] | None, list[WriteObj]]:
    """Sub-plan: the writes at ``write_keys``, one round, in key order (one deleted since it
    was listed left out)."""
    bodies = yield from run_batch(*(Get(k) for k in write_keys))
    return [
        w
        for k, body in zip(write_keys, bodies, strict=True)
        if body is not None
        for w in codec.decode_writes(body, k)
    ]


def entry_refs(entries: Iterable[Entry]) -> list[tuple[str, bytes]]:
    refs: list[tuple[str, bytes]] = []
    for e in entries:
        if isinstance(e, Ref):
            refs.append((e.tag, e.digest))
        elif isinstance(e, InlineList):
            refs += child_refs(e.obj)
    return refs


def decode_checked_manifest(data: bytes, key: str) -> Manifest:
    """Decode a manifest and check that it is stored under its own key, of its version."""
    manifest = codec.decode_manifest(data, key)
    own = keys.manifest_key if manifest.version == 2 else keys.v1_manifest_key
    if own(manifest.thread_id, manifest.checkpoint_ns, manifest.checkpoint_id) != key:
        raise CorruptObjectError(
            key,
            f"manifest of thread {manifest.thread_id!r}, namespace "
            f"{manifest.checkpoint_ns!r}, checkpoint {manifest.checkpoint_id!r} is "
            "stored under another checkpoint's key",
        )
    return manifest


def read_checkpoint_manifest(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str
) -> Generator[Batch, list[Any] | None, tuple[str, Manifest] | None]:
    """Sub-plan: a checkpoint's manifest and its key, version 2 first, else version 1."""
    for key in (
        keys.manifest_key(thread_id, checkpoint_ns, checkpoint_id),
        keys.v1_manifest_key(thread_id, checkpoint_ns, checkpoint_id),
    ):
        data = yield from run_one(Get(key))
        if data is not None:
            return key, decode_checked_manifest(data, key)
    return None


def read_manifests(
    manifest_keys: Sequence[str], known: Mapping[str, Manifest] | None = None
) -> Generator[Batch, list[Any] | None, dict[str, Manifest]]:
    """Sub-plan: GET and decode manifests in parallel groups, but those ``known``; absent ones
    are left out."""
    known = known or {}
    out: dict[str, Manifest] = {k: known[k] for k in manifest_keys if k in known}
    wanted = [k for k in manifest_keys if k not in known]
    for start in range(0, len(wanted), LIST_READ_AHEAD * 4):
        group = wanted[start : start + LIST_READ_AHEAD * 4]
        bodies = yield from run_batch(*(Get(k) for k in group))
        for k, body in zip(group, bodies, strict=True):
            if body is not None:
                out[k] = decode_checked_manifest(body, k)
    return out


def checkpoint_manifests(listed: Iterable[str]) -> list[str]:
    """The manifest to read of each checkpoint among listed keys: ``<R>.2``, else ``<R>``.

    A key the format does not define is a :class:`CorruptObjectError`.
    """
    out: list[str] = []
    for k in listed:
        try:
            parts = keys.parse_checkpoint_key(k)
        except ValueError as exc:
            raise CorruptObjectError(k, "unknown key under a checkpoint namespace") from exc
        if parts.kind != "manifest":
            continue
        if parts.version == 2 and out and out[-1] + keys.V2_MANIFEST_SUFFIX == k:
            out[-1] = k
        else:
            out.append(k)
    return out


def list_write_keys(
    manifests: Sequence[tuple[str, Manifest]],
) -> Generator[Batch, list[Any] | None, list[list[str]]]:
    """Sub-plan: the pending-write keys of each manifest, all pages, in one round (a version-1
    manifest's also under ``writes/``)."""
    prefixes: list[list[str]] = []
    for _, m in manifests:
        mine = [keys.checkpoint_writes_prefix(m.thread_id, m.checkpoint_ns, m.checkpoint_id)]
        if m.version == 1:
            mine.insert(0, keys.writes_prefix(m.thread_id, m.checkpoint_ns, m.checkpoint_id))
        prefixes.append(mine)
    flat = [p for ps in prefixes for p in ps]
    pages = yield from run_batch(*(ListKeys(p) for p in flat))
    found: dict[str, list[str]] = {}
    for prefix, page in zip(flat, pages, strict=True):
        found[prefix] = [o.key for o in (yield from list_infos(prefix, page=page))]
    return [[k for p in ps for k in found[p]] for ps in prefixes]


def read_tuples(
    ctx: Context,
    manifests: Sequence[tuple[str, Manifest]],
    configs: Sequence[RunnableConfig | None] | None = None,
    write_keys: Sequence[list[str]] | None = None,
    decoded: Sequence[tuple[dict[str, Any], Any] | None] | None = None,
    write_bodies: Mapping[str, bytes | None] | None = None,
) -> Generator[Batch, list[Any] | None, list[CheckpointTuple]]:
    """Sub-plan: full tuples of manifests; ``write_keys``, ``write_bodies`` and ``decoded``
    (:func:`manifest_values`): what the caller already listed, fetched or decoded."""
    if not manifests:
        return []
    if write_keys is None:
        write_keys = yield from list_write_keys(manifests)
    flat = [k for ks in write_keys for k in ks]
    fetched = dict(write_bodies or {})
    missing = [k for k in flat if k not in fetched]
    fetched.update(zip(missing, (yield from run_batch(*(Get(k) for k in missing))), strict=True))
    writes_by_key: dict[str, list[WriteObj]] = {}
    for k in flat:
        body = fetched[k]
        if body is None:
            raise MissingObjectError(k, "the listing of its checkpoint's writes")
        writes_by_key[k] = codec.decode_writes(body, k)

    sorted_writes = [
        effective_writes(w for k in wkeys for w in writes_by_key[k]) for wkeys in write_keys
    ]
    by_pfx: dict[str, tuple[list[Entry], list[tuple[str, Manifest]]]] = {}
    done = decoded if decoded is not None else [None] * len(manifests)
    for (mkey, m), writes, values in zip(manifests, sorted_writes, done, strict=True):
        entries, holders = by_pfx.setdefault(keys.thread_prefix(m.thread_id), ([], []))
        entries += [w.value for w in writes]
        if values is None:
            entries += manifest_entries(m)
            holders.append((mkey, m))
    got: dict[bytes, StoredObject] = {}
    for pfx, (entries, holders) in by_pfx.items():
        got |= yield from fetch_entries(ctx, pfx, entries, manifests[0][0], holders=holders)

    out: list[CheckpointTuple] = []
    for i, ((mkey, m), writes) in enumerate(zip(manifests, sorted_writes, strict=True)):
        pfx = keys.thread_prefix(m.thread_id)
        checkpoint, metadata = done[i] or manifest_values(ctx.serde, m, got, pfx)
        known = ctx.entries.get(mkey)
        ctx.entries.put(
            mkey,
            CheckpointEntries(
                dict(checkpoint.get("channel_versions", {})),
                m.channels,
                m.epoch,
                known.manifest if known is not None else None,
            ),
        )
        given = configs[i] if configs is not None else None
        out.append(
            CheckpointTuple(
                config=given
                or keys.checkpoint_config(m.thread_id, m.checkpoint_ns, m.checkpoint_id),
                checkpoint=checkpoint,
                metadata=metadata,
                parent_config=(
                    keys.checkpoint_config(m.thread_id, m.checkpoint_ns, m.parent_checkpoint_id)
                    if m.parent_checkpoint_id
                    else None
                ),
                pending_writes=[
                    (w.task_id, w.channel, materialize(ctx.serde, w.value, got, pfx))
                    for w in writes
                ],
            )
        )
    return out


def manifest_entries(m: Manifest) -> list[Entry]:
    return [m.checkpoint, m.metadata, *m.channels.values()]


def values_from_memory(ctx: Context, m: Manifest, mkey: str) -> tuple[dict[str, Any], Any] | None:
    """A manifest's values when every object they need is in memory, else None (no request)."""
    pfx = keys.thread_prefix(m.thread_id)
    walk = fetch_entries(ctx, pfx, manifest_entries(m), mkey, holders=[(mkey, m)])
    try:
        next(walk)
    except StopIteration as done:
        return manifest_values(ctx.serde, m, done.value, pfx)
    walk.close()  # it asked for a request: an object is not in memory
    return None


def read_metadata(
    ctx: Context, m: Manifest, key: str
) -> Generator[Batch, list[Any] | None, dict[str, Any]]:
    """Sub-plan: a manifest's decoded metadata (no request when it is inline)."""
    pfx = keys.thread_prefix(m.thread_id)
    got = yield from fetch_entries(ctx, pfx, [m.metadata], key)
    return materialize(ctx.serde, m.metadata, got, pfx)
