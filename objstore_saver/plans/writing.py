"""Plans that write: values, put and put_writes (spec §6.1, §6.5)."""

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

from objstore_saver.caches import message_keys
from objstore_saver.caches.facts import CheckpointEntries, ElementCache
from objstore_saver.errors import (
    CheckpointConflictError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjstoreSaverError,
)
from objstore_saver.format import codec, keys, list_encoding, split_values, value_encoding
from objstore_saver.format.codec import (
    Encoded,
    Entry,
    Inline,
    InlineList,
    ListObj,
    PartObj,
    Ref,
)
from objstore_saver.format.list_encoding import EncodedElement
from objstore_saver.large_value_gate import Hold
from objstore_saver.plans.context import PUT_ATTEMPTS, Context, Step
from objstore_saver.plans.reading import (
    child_refs,
    entry_refs,
    fetch_objects,
    materialize,
    read_checkpoint_manifest,
)
from objstore_saver.plans.requests import (
    Batch,
    Get,
    Put,
    run_batch,
    run_one,
)
from objstore_saver.plans.scope import Scope, checkpoint_config, scope_of
from objstore_saver.storage.base import PutMode

#: Largest manifest a writer keeps in memory for the next latest lookup (§6.2).
REMEMBERED_MANIFEST_MAX = 16 * 1024
#: Bytes of streamed part objects sent per batch while a large value is encoded.
STREAM_WINDOW = 8 * codec.PART_SIZE


class _StreamedFirst:
    """An element cache that answers first from the elements just streamed."""

    def __init__(
        self, streamed: dict[tuple[str, bytes], EncodedElement], inner: ElementCache
    ) -> None:
        self._streamed = streamed
        self._inner = inner

    def get(self, key: tuple[str, bytes]) -> EncodedElement | None:
        return self._streamed.get(key) or self._inner.get(key)

    def put(self, key: tuple[str, bytes], value: EncodedElement) -> None:
        self._inner.put(key, value)


def encode_value(
    ctx: Context, pfx: str, value: Any, *, trust: bool = True, written_once: bool = False
) -> Generator[Batch | Hold, list[Any] | None, Encoded]:
    """Sub-plan: entry and objects for one value (spec §4).

    ``written_once`` is for the value of a pending write, whose entry is
    stored in one object and never carried on to another: it is also inline
    when its compressed payload fits the inline limit (spec §6.5 step 2).

    Data larger than a part is streamed: its part objects are stored while
    the compressor produces them (:func:`stream_large`), so the returned
    :class:`Encoded` holds only small objects. A value holding a very large
    message text is split (:func:`encode_split`, spec §4.4a): the serializer
    never sees the text. The value is serialized under the saver's gate,
    kept while large data is streamed (spec §6.1 step 2.2).
    """
    if not ctx.gate.try_acquire():
        yield Hold(ctx.gate)
    try:
        split = split_values.splits_for(ctx.serde)
        if type(value) is list and value:
            listed = yield from _encode_list(
                ctx, pfx, value, split=split, trust=trust, written_once=written_once
            )
            if listed is not None:
                return listed
        # A list's elements were searched above (none holds a large text).
        holes = split_values.find_holes(value) if split and type(value) is not list else []
        if holes:
            return (yield from encode_split(ctx, pfx, value, holes, trust=trust))
        type_, data = ctx.serde.dumps_typed(value)
        if len(data) > codec.PART_SIZE:
            ref, (d, body) = yield from stream_large(
                ctx, pfx, value_encoding.large_objects(type_, data), trust=trust
            )
            return Encoded(ref, {d: body})
    finally:
        ctx.gate.release()
    return value_encoding.encode_serialized(type_, data, written_once=written_once)


def _encode_list(
    ctx: Context, pfx: str, value: list[Any], *, split: bool, trust: bool, written_once: bool
) -> Generator[Batch, list[Any] | None, Encoded | None]:
    """Sub-plan of :func:`encode_value`: a list element by element (spec §4.4), or None.

    None when the list is stored as one value (small, or small elements) and
    none of its elements holds a large text. Elements with large texts are
    found first and split; the others are serialized, and those larger than
    a part are streamed before the list is encoded. A pending write's list
    that compresses whole to the inline limit is inline instead (spec §6.5
    step 2).
    """
    elements, found = _serialize_elements(ctx, value, split=split)
    if not found and not list_encoding.use_list_encoding(elements):
        return None
    if written_once and not found:
        whole = _whole_list_inline(ctx, value, elements)
        if whole is not None:
            return whole
    streamed: dict[tuple[str, bytes], EncodedElement] = {}
    for i, e in enumerate(value):
        holes = found.get(i)
        if holes:
            enc = yield from encode_split(ctx, pfx, e, holes, trust=trust)
            assert isinstance(enc.entry, Ref)
            # Not a serializer's type: the key stands for this element only.
            elements[i] = (_SPLIT_ELEMENT, enc.entry.digest)
            streamed[elements[i]] = EncodedElement(
                codec.entry_to_msgpack(enc.entry), enc.entry.digest, enc.objects, enc.children
            )
            continue
        element = elements[i]
        if (
            len(element[1]) > codec.PART_SIZE
            and element not in streamed
            and ctx.elements.get(element) is None
        ):
            ref, (d, body) = yield from stream_large(
                ctx, pfx, value_encoding.large_objects(*element), trust=trust
            )
            streamed[element] = EncodedElement(codec.entry_to_msgpack(ref), d, {d: body}, {})
    return list_encoding.encode_list(
        elements, _StreamedFirst(streamed, ctx.elements), ctx.elements.sealed
    )


#: A pending write's list whose elements serialize to at most this many bytes
#: is also compressed whole, to see if it fits inline (spec §6.5 step 2).
WRITE_LIST_WHOLE_MAX = 8 * 1024


def _whole_list_inline(
    ctx: Context, value: list[Any], elements: list[tuple[str, bytes]]
) -> Encoded | None:
    """The list as one inline entry, if it compresses to the inline limit; else None."""
    if sum(len(data) for _, data in elements) > WRITE_LIST_WHOLE_MAX:
        return None
    return value_encoding.inline_written(codec.make_payload(*ctx.serde.dumps_typed(value)))


def _serialize_elements(
    ctx: Context, value: list[Any], *, split: bool
) -> tuple[list[tuple[str, bytes]], dict[int, list[tuple[split_values.Path, str]]]]:
    """Each element serialized, and the large texts of those to split (not serialized).

    A message serialized before by this process, in the same state, is not
    serialized again (:mod:`objstore_saver.caches.message_keys`): it was not split
    then, and it holds the same text now.
    """
    memory = ctx.elements.serialized
    if message_keys.applies_to(ctx.serde):
        state_keys, pairs = message_keys.known_pairs(value, memory.get)
    else:
        state_keys, pairs = [None] * len(value), [None] * len(value)
    elements: list[tuple[str, bytes]] = []
    found: dict[int, list[tuple[split_values.Path, str]]] = {}
    for i, e in enumerate(value):
        known = pairs[i]
        if known is not None:
            elements.append(known)
            continue
        key = state_keys[i]
        holes = split_values.holes_of_element(e) if split else None
        if holes:
            found[i] = holes
            elements.append((_SPLIT_ELEMENT, b""))
            continue
        pair = ctx.serde.dumps_typed(e)
        if key is not None:
            memory.put(key, pair)
        elements.append(pair)
    return elements, found


#: Element key type of a split list element (never a serializer's type).
_SPLIT_ELEMENT = "\0split"


def encode_split(
    ctx: Context,
    pfx: str,
    value: Any,
    holes: list[tuple[split_values.Path, str]],
    *,
    trust: bool = True,
) -> Generator[Batch, list[Any] | None, Encoded]:
    """Sub-plan: a value with its large message texts stored apart (spec §4.4a).

    Each text's parts are stored as they are made (:func:`stream_large`);
    the value is serialized with those texts emptied. Returns the ``s``
    entry and the small objects (split object, text containers, value).
    """
    objects: dict[bytes, bytes] = {}
    refs: list[tuple[split_values.Path, Ref]] = []
    for path, text in holes:
        ref, (d, body) = yield from stream_large(
            ctx, pfx, value_encoding.text_objects(text), trust=trust
        )
        objects[d] = body
        refs.append((path, ref))
    rest = value_encoding.encode_serialized(
        *ctx.serde.dumps_typed(split_values.emptied(value, [p for p, _ in holes]))
    )
    body = codec.encode_split(rest.entry, refs)
    d = codec.digest_of(body)
    inner = [rest.entry.digest] if isinstance(rest.entry, Ref) else []
    children = {**rest.children, d: (*inner, *(r.digest for _, r in refs))}
    return Encoded(Ref("s", d), {**rest.objects, **objects, d: body}, children)


def stream_large(
    ctx: Context,
    pfx: str,
    stream: Generator[tuple[bytes, bytes], None, value_encoding.LargeResult],
    *,
    trust: bool = True,
) -> Generator[Batch, list[Any] | None, tuple[Ref, tuple[bytes, bytes]]]:
    """Sub-plan: store the parts of large data as ``stream`` produces them (spec §4.3).

    ``stream`` is :func:`value_encoding.large_objects` or ``text_objects``.
    Parts go out create-only in batches of about :data:`STREAM_WINDOW` bytes
    and are dropped once stored, so a put holds one window of parts, not the
    whole value twice. Returns the entry and the container object (``parts``,
    or ``value`` when the compressed data fits one part), which the caller
    stores after its parts like any other object.
    """
    window: list[Put] = []
    pending = 0
    while True:
        try:
            d, part = next(stream)
        except StopIteration as done:
            ref, container, _parts = done.value
            break
        if trust and ctx.objects.known(pfx, d, ctx.trust_age):
            continue
        window.append(Put(keys.object_key_in(pfx, d), part))
        pending += len(part)
        if pending >= STREAM_WINDOW:
            yield from put_objects(ctx, pfx, window)
            window, pending = [], 0
    yield from put_objects(ctx, pfx, window)
    return ref, container


def put_objects(
    ctx: Context, pfx: str, puts: Sequence[Put], extra: Sequence[Put] = ()
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: PUT content-addressed objects create-only, in parallel, and remember them.

    ``exists`` is success, the key being the hash of the bytes; the object is
    then re-PUT in overwrite mode with the same bytes, which renews its
    ``LastModified`` so a pending sweep mark no longer applies to it (§6.9).
    Written objects are remembered decoded, so reading them back costs no
    request. ``extra`` requests (run markers) go in the same batch.
    """
    created = yield from run_batch(*puts, *extra)
    # An old object we did not write may be marked by a prune (§6.9): renew it.
    yield from run_batch(
        *(
            Put(p.key, p.data, PutMode.OVERWRITE)
            for p, ok in zip(puts, created[: len(puts)], strict=True)
            if not ok
        )
    )
    for put_op in puts:
        d = bytes.fromhex(put_op.key.rsplit("/", 1)[1])
        obj = codec.decode_object(put_op.data, put_op.key)
        if isinstance(obj, PartObj):
            ctx.objects.add_known(pfx, [d])
        else:
            ctx.objects.add(pfx, d, obj)


def store_objects(
    ctx: Context,
    pfx: str,
    encoded: Sequence[Encoded],
    extra: Sequence[Put] = (),
    *,
    trust: bool = True,
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: PUT create-only the objects not known to be stored, in parallel.

    The walk starts at each entry and does not descend below an object known
    to be stored (confirmed within the trust age; with ``trust=False`` nothing
    is): a stored container implies its children are (write order). Parts
    streamed by :func:`stream_large` are not among an :class:`Encoded`'s
    children: they were stored before their container, in this attempt.
    """
    bodies: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    stack: list[bytes] = []
    for enc in encoded:
        bodies.update(enc.objects)
        children.update(enc.children)
        if isinstance(enc.entry, Ref):
            stack.append(enc.entry.digest)
        elif isinstance(enc.entry, InlineList):
            stack.extend(d for _, d in child_refs(enc.entry.obj))
    seen: set[bytes] = set()
    puts: list[Put] = []
    while stack:
        d = stack.pop()
        if d in seen:
            continue
        seen.add(d)
        if trust and ctx.objects.known(pfx, d, ctx.trust_age):
            continue
        puts.append(Put(keys.object_key_in(pfx, d), bodies[d]))
        stack.extend(children.get(d, ()))
    yield from put_objects(ctx, pfx, puts, extra)


def recall_parent(
    ctx: Context, pfx: str, scope: Scope, parent_id: str, *, trust: bool = True
) -> Generator[Batch, list[Any] | None, CheckpointEntries | None]:
    """Sub-plan: a parent's entries from memory, else from its manifest (§6.1.2.1).

    Memory is used only when confirmed within the trust age (and ``trust``).
    Reading the manifest (version 2, else version 1) also teaches the object
    memory which list objects, sealed subtrees and tail elements exist, so a
    growing list rewrites only its list object and what is new.
    """
    ns = scope.checkpoint_ns
    if trust:
        for key in (
            keys.manifest_key(scope.thread_id, ns, parent_id),
            keys.v1_manifest_key(scope.thread_id, ns, parent_id),
        ):
            remembered = ctx.entries.get(key, ctx.trust_age)
            if remembered is not None:
                return remembered
    found = yield from read_checkpoint_manifest(scope.thread_id, ns, parent_id)
    if found is None:
        return None
    mkey, manifest = found
    got = yield from fetch_objects(ctx, pfx, entry_refs([manifest.checkpoint]), mkey)
    checkpoint = materialize(ctx.serde, manifest.checkpoint, got, pfx)
    for e in manifest.channels.values():
        if isinstance(e, InlineList):
            # Sealed subtrees and tail elements exist: the manifest was written after them.
            ctx.objects.add_known(pfx, [c for _, c in child_refs(e.obj)])
    lists = [(e.tag, e.digest) for e in manifest.channels.values() if isinstance(e, Ref)]
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
    entries = CheckpointEntries(dict(checkpoint.get("channel_versions", {})), manifest.channels)
    ctx.entries.put(mkey, entries)
    return entries


def _fit_manifest(fields: dict[str, Any], encoded: list[Encoded]) -> bytes:
    """Encode a manifest, moving its largest inline entries out past the budget."""
    data = codec.encode_manifest(**fields)
    if len(data) <= codec.MANIFEST_BUDGET:
        return data
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
            *codec.payload_bytes(entry.payload, name), inline_max=-1
        )
        encoded.append(enc)
        holder[name] = enc.entry
        fields = {**fields, "channels": channels}
        data = codec.encode_manifest(**fields)
        if len(data) <= codec.MANIFEST_BUDGET:
            return data
    return data


def _run_marker_id(thread_id: str, run_id: str) -> str:
    return f"{thread_id}\0{run_id}"


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
    bare = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    md = get_checkpoint_metadata(config, metadata)
    run_id = md.get("run_id")
    marker = _run_marker_id(scope.thread_id, run_id) if isinstance(run_id, str) else None

    for attempt in range(PUT_ATTEMPTS):
        # First attempt trusts memory; a retry re-confirms everything (§6.1 step 3).
        trust = attempt == 0
        started = ctx.clock()
        parent: CheckpointEntries | None = None
        if parent_id is not None and any(c not in new_versions for c in versions):
            parent = yield from recall_parent(ctx, pfx, scope, parent_id, trust=trust)

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
                enc = yield from encode_value(ctx, pfx, values[name], trust=trust)
                channels[name] = enc.entry
                encoded.append(enc)

        cp_enc = value_encoding.encode_serialized(*ctx.serde.dumps_typed(bare))
        md_enc = value_encoding.encode_serialized(*ctx.serde.dumps_typed(md))
        encoded += [cp_enc, md_enc]
        manifest = _fit_manifest(
            {
                "thread_id": scope.thread_id,
                "checkpoint_ns": scope.checkpoint_ns,
                "checkpoint_id": cid,
                "parent_checkpoint_id": parent_id,
                "checkpoint": cp_enc.entry,
                "metadata": md_enc.entry,
                "channels": channels,
            },
            encoded,
        )

        markers: list[Put] = []
        if marker is not None and marker not in ctx.marked_runs:
            markers = [Put(k, b"") for k in keys.run_markers(scope.thread_id, cast(str, run_id))]
        yield from store_objects(ctx, pfx, encoded, markers, trust=trust)
        if marker is not None:
            ctx.marked_runs.add(marker)
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
    kept = manifest if len(manifest) <= REMEMBERED_MANIFEST_MAX else None
    ctx.entries.put(mkey, CheckpointEntries(versions, channels, kept))
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
    # Taken in call order, before any request: a later special write wins
    # even when its request completes first, or comes later in one call; of
    # regular writes held by several objects (a group and a single write of
    # one slot, from calls of different shapes) the earliest call's is in force.
    seqs = [ctx.next_seq() for _ in writes]
    for attempt in range(PUT_ATTEMPTS):
        trust = attempt == 0
        started = ctx.clock()
        encoded: list[Encoded] = []
        write_puts: list[Put] = []
        group_rows: list[tuple[int, str, Entry]] = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            enc = yield from encode_value(ctx, pfx, value, trust=trust, written_once=True)
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
            # Create-only: the first regular write wins; special writes get a new
            # key per call and the greatest sequence is in force (nothing is
            # overwritten).
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
        yield from store_objects(ctx, pfx, encoded, trust=trust)
        if ctx.clock() - started <= ctx.trust_age:
            break
    else:
        raise _put_too_slow(f"put_writes of task {task_id!r} in thread {scope.thread_id!r}", ctx)
    yield from run_batch(*write_puts)
