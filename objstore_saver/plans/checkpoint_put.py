"""Plans that store a checkpoint and its pending writes: put and put_writes (spec §6.1, §6.5)."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from objstore_saver.caches.facts import CheckpointEntries
from objstore_saver.errors import (
    CheckpointConflictError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjstoreSaverError,
)
from objstore_saver.format import codec, keys, value_encoding
from objstore_saver.format.codec import Encoded, Entry, Inline, InlineList, ListObj, Manifest, Ref
from objstore_saver.format.keys import Scope, checkpoint_config, scope_of
from objstore_saver.plans.context import PUT_ATTEMPTS, Context, Step
from objstore_saver.plans.epochs import lineage_epoch, listed_epoch
from objstore_saver.plans.placement import ListObjects, Placement, recall_segments, unembed
from objstore_saver.plans.reading import (
    child_refs,
    entry_refs,
    fetch_entries,
    materialize,
    read_checkpoint_manifest,
)
from objstore_saver.plans.requests import Batch, Get, ListKeys, Put, run_batch, run_one
from objstore_saver.plans.writing import encode_value, store_objects

#: Largest manifest a writer keeps in memory for the next latest lookup (§6.2).
REMEMBERED_MANIFEST_MAX = 16 * 1024


def remembered_parent(ctx: Context, scope: Scope, parent_id: str) -> CheckpointEntries | None:
    """A parent's entries if memory holds them, believed (``ctx.belief_age``); no request."""
    v1 = keys.checkpoint_key(scope.thread_id, scope.checkpoint_ns, parent_id)
    for key in (v1 + keys.V2_MANIFEST_SUFFIX, v1):
        remembered = ctx.entries.get(key, ctx.belief_age)
        if remembered is not None:
            return remembered
    return None


def recall_parent(
    ctx: Context, pfx: str, scope: Scope, parent_id: str
) -> Generator[Batch, list[Any] | None, CheckpointEntries | None]:
    """Sub-plan: a parent's entries from memory when believed, else from its manifest (§6.1.2.1),
    which also teaches the object memory what its lists hold."""
    ns = scope.checkpoint_ns
    remembered = remembered_parent(ctx, scope, parent_id)
    if remembered is not None:
        return remembered
    found = yield from read_checkpoint_manifest(scope.thread_id, ns, parent_id)
    if found is None:
        return None
    mkey, manifest = found
    ctx.epochs.saw_checkpoint(scope.thread_id, ns, parent_id, manifest.epoch)
    got = yield from fetch_entries(
        ctx, pfx, [manifest.checkpoint], mkey, holders=[(mkey, manifest)]
    )
    checkpoint = materialize(ctx.serde, manifest.checkpoint, got, pfx)
    for e in manifest.channels.values():
        if isinstance(e, InlineList):
            # What stands alone exists: the manifest was written after it.
            o = e.obj
            alone = [d for d, _ in o.sealed] + [g.digest for g in o.segments if g.loc is None]
            tail = [e for e in o.tail if not (isinstance(e, Ref) and e.at is not None)]
            ctx.objects.add_known(pfx, alone + [d for _, d in entry_refs(tail)])
    # Version-1 list objects: what their lists hold is then known stored.
    lists = [
        (e.tag, e.digest) for e in manifest.channels.values() if isinstance(e, Ref) and e.tag == "l"
    ]
    bodies = yield from run_batch(*(Get(keys.object_key_in(pfx, d)) for _, d in lists))
    for (tag, d), body in zip(lists, bodies, strict=True):
        key = keys.object_key_in(pfx, d)
        if body is None:
            raise MissingObjectError(key, mkey)
        codec.check_digest(body, d, key)
        obj = codec.decode_object(body, key, tag)
        ctx.objects.add(pfx, d, obj)
        if isinstance(obj, ListObj):
            # Sealed subtrees and tail elements exist: the list was written after them.
            ctx.objects.add_known(pfx, [c for _, c in child_refs(obj)])
    entries = CheckpointEntries(
        dict(checkpoint.get("channel_versions", {})), manifest.channels, manifest.epoch
    )
    ctx.entries.put(mkey, entries)
    return entries


def _fit_manifest(
    fields: dict[str, Any], encoded: list[Encoded], mkey: str
) -> tuple[bytes, dict[str, Any]]:
    """A manifest's bytes and fields; past the budget its embedded objects, then its largest
    inline entries, are moved out (to ``encoded``)."""
    data = codec.encode_manifest(**fields)
    if len(data) <= codec.MANIFEST_BUDGET:
        return data, fields
    if fields.get("embedded"):
        fields = {**fields, "channels": dict(fields["channels"]), "embedded": ()}
        unembed(
            [(fields, "checkpoint"), (fields, "metadata")]
            + [(fields["channels"], name) for name in fields["channels"]],
            mkey,
            fields["checkpoint_id"],
        )
        data = codec.encode_manifest(**fields)
        if len(data) <= codec.MANIFEST_BUDGET:
            return data, fields
    channels = dict(fields["channels"])
    movable = sorted(
        (name for name, e in channels.items() if isinstance(e, Inline)),
        key=lambda name: len(channels[name].payload.data),
        reverse=True,
    )
    for name in [*movable, "checkpoint", "metadata"]:
        holder = channels if name in movable else fields
        entry = holder[name]
        if not isinstance(entry, Inline):
            continue
        enc = value_encoding.encode_serialized(
            *codec.payload_bytes(entry.payload, name), inline_max=-1, epoch=fields["epoch"]
        )
        encoded.append(enc)
        holder[name] = enc.entry
        fields = {**fields, "channels": channels}
        data = codec.encode_manifest(**fields)
        if len(data) <= codec.MANIFEST_BUDGET:
            return data, fields
    return data, fields


def _put_too_slow(what: str, ctx: Context) -> ObjstoreSaverError:
    return ObjstoreSaverError(
        f"{what}: storing its objects took longer than half the reuse window "
        f"({ctx.trust_age:g} s) {PUT_ATTEMPTS} times in a row; the store is too slow for "
        "the prune safety rules (spec §6.9), nothing was committed"
    )


def put(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Step:
    """Plan: spec §6.1. Returns the config of the stored checkpoint."""
    scope = scope_of(config)
    cid = checkpoint["id"]
    mkey = keys.manifest_key(scope.thread_id, scope.checkpoint_ns, cid)
    pfx = keys.thread_prefix(scope.thread_id)
    parent_id = scope.checkpoint_id
    versions = dict(checkpoint.get("channel_versions", {}))
    values = checkpoint.get("channel_values", {})
    # The id is the manifest's own field; values are the channel entries.
    bare = dict(checkpoint)
    del bare["id"]
    bare.pop("channel_values", None)
    md = get_checkpoint_metadata(config, metadata)
    run_id = md.get("run_id")
    marker = f"{scope.thread_id}\0{run_id}" if isinstance(run_id, str) else None
    epoch: int | None = None
    check: ListKeys | None = None
    # The parent gives the carried channels and where a list's segments are
    # (its values only from memory: worth no request).
    recall = False
    if parent_id is not None:
        for c in versions:
            if c not in new_versions or (type(values.get(c)) is list and values[c]):
                recall = True
                break

    for attempt in range(PUT_ATTEMPTS):
        if attempt:
            # The first attempt trusts memory; a retry re-confirms everything (§6.1 step 3).
            ctx = ctx.distrusting()
        started = ctx.clock()
        parent: CheckpointEntries | None = None
        segments: ListObjects = {}
        if recall:
            assert parent_id is not None
            parent = yield from recall_parent(ctx, pfx, scope, parent_id)
            segments = yield from recall_segments(ctx, pfx, mkey, parent)
        elif parent_id is not None:
            parent = remembered_parent(ctx, scope, parent_id)
        if epoch is None and parent is not None:
            epoch = parent.epoch  # the parent's (spec §6.1 step 1); it never changes
        elif epoch is None:
            # After the parent's recall, which learns its epoch when it reads it.
            epoch, check = yield from lineage_epoch(ctx, scope, parent_id)
        placement = Placement(ctx, pfx, cid, mkey, parent, segments, epoch)

        encoded: list[Encoded] = []
        channels: dict[str, Entry] = {}
        for name, version in versions.items():
            if (
                name not in new_versions
                and parent is not None
                and parent.versions.get(name) == version
            ):
                if name in parent.entries:
                    channels[name] = parent.entries[name]
                continue
            if name in values:
                enc = yield from encode_value(
                    ctx, pfx, values[name], locate=placement.locate, epoch=epoch
                )
                channels[name] = placement.place(enc.entry)
                encoded.append(enc)

        cp_enc = value_encoding.encode_serialized(*ctx.serde.dumps_typed(bare), epoch=epoch)
        md_enc = value_encoding.encode_serialized(*ctx.serde.dumps_typed(md), epoch=epoch)
        encoded += [cp_enc, md_enc]
        cp_entry, md_entry = placement.place(cp_enc.entry), placement.place(md_enc.entry)
        embedded, located = placement.settle(channels, encoded)
        if placement.indexes is not None:
            encoded.append(placement.indexes)  # stored alone if not embedded
        manifest, fields = _fit_manifest(
            {
                "thread_id": scope.thread_id,
                "checkpoint_ns": scope.checkpoint_ns,
                "checkpoint_id": cid,
                "parent_checkpoint_id": parent_id,
                "checkpoint": cp_entry,
                "metadata": md_entry,
                "channels": channels,
                "embedded": list(embedded.values()),
                "epoch": epoch,
            },
            encoded,
            mkey,
        )
        channels = fields["channels"]
        if not fields["embedded"]:
            embedded = {}  # moved out: stored alone with the other objects

        markers: list[Put] = []
        if marker is not None and marker not in ctx.marked_runs:
            markers = [Put(k, b"") for k in keys.run_markers(scope.thread_id, cast(str, run_id))]
        checked = yield from store_objects(
            ctx,
            pfx,
            encoded,
            [*markers, *([check] if check is not None else [])],
            embedded=embedded,
            located=located,
        )
        if marker is not None:
            ctx.marked_runs.add(marker)
        if check is not None:
            check = None
            listed = listed_epoch(ctx, scope.thread_id, checked[-1])
            if listed != epoch:
                # Deleted since this process last looked: encoded again in the new epoch.
                epoch = listed
                continue
        # Invariant: every object the manifest relies on was confirmed stored at
        # most W before the manifest is sent, else a sweep may have removed it.
        if ctx.clock() - started <= ctx.trust_age:
            break
    else:
        raise _put_too_slow(
            f"put of checkpoint {cid!r} of thread {scope.thread_id!r} "
            f"(namespace {scope.checkpoint_ns!r})",
            ctx,
        )

    created = yield from run_one(Put(mkey, manifest))
    if not created:
        # A concurrent writer, or our own request retried after its response
        # was lost: it is ours only if the stored bytes are the same.
        stored = yield from run_one(Get(mkey))
        if stored != manifest:
            raise CheckpointConflictError(scope.thread_id, scope.checkpoint_ns, cid, mkey)
    for d, body in embedded.items():
        ctx.objects.add_embedded(pfx, d, codec.decode_object(body, mkey))
    # Remembered without its embedded objects (in the object memory now) (§6.2 step 4).
    kept = None
    if len(manifest) - sum(map(len, embedded.values())) <= REMEMBERED_MANIFEST_MAX:
        kept = Manifest(**{**fields, "embedded": ()})
    ctx.entries.put(mkey, CheckpointEntries(versions, channels, epoch, kept))
    ctx.epochs.saw_checkpoint(scope.thread_id, scope.checkpoint_ns, cid, epoch)
    ctx.heads.saw(scope.thread_id, scope.checkpoint_ns, cid)
    return checkpoint_config(scope.thread_id, scope.checkpoint_ns, cid)


def put_writes(
    ctx: Context,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> Step:
    """Plan: spec §6.5."""
    scope = scope_of(config, need_checkpoint_id=True)
    assert scope.checkpoint_id is not None
    if not isinstance(task_id, str):
        raise InvalidIdentifierError(f"task_id must be a string, got {task_id!r}")
    pfx = keys.thread_prefix(scope.thread_id)
    regular = tuple(i for i, (ch, _) in enumerate(writes) if WRITES_IDX_MAP.get(ch, i) >= 0)
    # Two or more regular writes are one write group: one request, all or
    # nothing (a long index list names the group by its hash, spec §4.7).
    grouped = len(regular) > 1
    # Taken in call order, before any request: a later special write wins even when
    # its request completes first; of regular writes of one slot the earliest call's.
    seqs = [ctx.seqs.next() for _ in writes]
    # Values up to WRITE_INLINE_MAX compressed are inline; a call whose
    # object would pass the budget stores those over INLINE_MAX alone.
    written_max = codec.WRITE_INLINE_MAX
    # The checkpoint's epoch, else the thread's as believed (its put may still be
    # running): it only keeps the objects apart from another epoch's (spec §4.11).
    epoch = ctx.epochs.of_checkpoint(scope.thread_id, scope.checkpoint_ns, scope.checkpoint_id)
    if epoch is None:
        epoch = ctx.epochs.of_thread(scope.thread_id) or 0
    attempt = 0
    while attempt < PUT_ATTEMPTS:
        if attempt:
            ctx = ctx.distrusting()
        started = ctx.clock()
        encoded: list[Encoded] = []
        write_puts: list[Put] = []
        group_rows: list[tuple[int, str, Entry]] = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            enc = yield from encode_value(
                ctx, pfx, value, written_once=True, written_max=written_max, epoch=epoch
            )
            encoded.append(enc)
            if grouped and idx >= 0:
                group_rows.append((idx, channel, enc.entry))
                continue
            body = codec.encode_write(
                task_id=task_id,
                task_path=task_path,
                idx=idx,
                channel=channel,
                value=enc.entry,
                seq=seqs[i],
            )
            key = keys.write_key(
                scope.thread_id, scope.checkpoint_ns, scope.checkpoint_id, task_id, idx, seqs[i]
            )
            # Create-only: the first regular write wins; a special write's key is new per call.
            write_puts.append(Put(key, body))
        if group_rows:
            # Create-only too: a stored group (a retry, or the task's earlier
            # call with the same indexes) wins.
            body = codec.encode_write_group(
                task_id=task_id, task_path=task_path, writes=group_rows, seq=seqs[regular[0]]
            )
            key = keys.write_group_key(
                scope.thread_id, scope.checkpoint_ns, scope.checkpoint_id, task_id, regular
            )
            write_puts.append(Put(key, body))
        if written_max > codec.INLINE_MAX and any(
            len(p.data) > codec.MANIFEST_BUDGET for p in write_puts
        ):
            written_max = codec.INLINE_MAX
            continue
        yield from store_objects(ctx, pfx, encoded)
        if ctx.clock() - started <= ctx.trust_age:
            break
        attempt += 1
    else:
        raise _put_too_slow(f"put_writes of task {task_id!r} in thread {scope.thread_id!r}", ctx)
    yield from run_batch(*write_puts)
