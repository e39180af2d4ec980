"""Pure plans of the spec's algorithms (§6).

Each plan is a generator: it yields :class:`~objstore_saver.store_requests.Batch` requests
and receives their results, or yields :class:`~objstore_saver.store_requests.Emit` items for
its caller. It never performs I/O, so the blocking and the asyncio saver run the
very same code through :class:`~objstore_saver.driver.Driver`.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import random
import threading
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    SerializerProtocol,
    get_checkpoint_metadata,
    writes_sort_key,
)

from objstore_saver import codec, keys
from objstore_saver.codec import (
    ChunkObj,
    Encoded,
    Entry,
    Inline,
    ListObj,
    Manifest,
    NodeObj,
    PartObj,
    PartsObj,
    Ref,
    StoredObject,
    ValueObj,
    WriteObj,
)
from objstore_saver.errors import (
    CheckpointConflictError,
    CorruptObjectError,
    InvalidIdentifierError,
    MissingObjectError,
    ObjstoreSaverError,
)
from objstore_saver.memory import (
    BoundedSet,
    CheckpointEntries,
    ElementMemory,
    EntryMemory,
    ObjectMemory,
)
from objstore_saver.storage.base import MAX_DELETE_BATCH, ListPage, ObjectInfo, PutMode
from objstore_saver.store_requests import (
    Batch,
    Delete,
    Emit,
    Get,
    ListKeys,
    Put,
    list_all,
    run_batch,
    run_one,
)

Step = Generator[Batch | Emit, list[Any] | None, Any]

#: How many manifests a listing reads in parallel.
LIST_READ_AHEAD = 16
#: Default reuse window W (spec §6.9), seconds.
REUSE_WINDOW = 300.0
#: How many times a put restarts its object phase before giving up (spec §6.1).
PUT_ATTEMPTS = 3


@dataclass
class Context:
    """What plans share: the serializer, the saver's memories, a write sequence.

    ``reuse_window`` is W of spec §6.9: a fact about a stored object is trusted
    for W/2 after it was confirmed, and a put must reach its manifest within W/2
    of starting its object phase, so every object a new manifest relies on was
    confirmed at most W before the manifest is sent. ``clock`` measures it
    (monotonic seconds; tests inject a fake one).
    """

    serde: SerializerProtocol
    objects: ObjectMemory = field(default_factory=ObjectMemory)
    entries: EntryMemory = field(default_factory=EntryMemory)
    elements: ElementMemory = field(default_factory=ElementMemory)
    #: (thread, run) pairs whose run markers this process has written.
    marked_runs: BoundedSet = field(default_factory=BoundedSet)
    reuse_window: float = REUSE_WINDOW
    clock: Callable[[], float] = time.monotonic
    seqs: SeqSource = field(default_factory=lambda: SeqSource())

    def __post_init__(self) -> None:
        self.objects.clock = self.clock
        self.entries.clock = self.clock

    @property
    def trust_age(self) -> float:
        """How long a remembered fact is trusted, and how long a put may take: W/2."""
        return self.reuse_window / 2

    def next_seq(self) -> int:
        """A number greater than any this process gave before, near the clock in ns."""
        return self.seqs.next()

    def with_serde(self, serde: SerializerProtocol) -> Context:
        """The same memories and write sequence, with another serializer."""
        return dataclasses.replace(self, serde=serde)


class SeqSource:
    """Sequence numbers of special writes, shared by every context of a saver."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        """A number greater than any given before, at least the clock in ns."""
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


# --- identifiers --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """Thread, namespace and (optional) checkpoint id named by a config."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def scope_of(config: RunnableConfig, *, need_checkpoint_id: bool = False) -> Scope:
    """Read and check the identifiers of a config."""
    conf = config.get("configurable") or {}
    if "thread_id" not in conf:
        raise InvalidIdentifierError(
            "config['configurable']['thread_id'] is required by objstore-saver"
        )
    thread_id = conf["thread_id"]
    if not isinstance(thread_id, str):
        raise InvalidIdentifierError(
            f"thread_id must be a string, got {type(thread_id).__name__} {thread_id!r}"
        )
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise InvalidIdentifierError(f"checkpoint_ns must be a string, got {ns!r}")
    cid = conf.get("checkpoint_id") or None
    if cid is not None:
        keys.reverse_id(cid)
    if need_checkpoint_id and cid is None:
        raise InvalidIdentifierError(
            f"config of thread {thread_id!r} names no checkpoint_id; writes belong to a checkpoint"
        )
    return Scope(thread_id, ns, cid)


def checkpoint_config(thread_id: str, ns: str, cid: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def next_version(current: str | int | float | None) -> str | int:
    """Next channel version, keeping the thread's type (spec §5)."""
    if current is None:
        return 1
    if isinstance(current, int):
        return current + 1
    if isinstance(current, float):
        return int(current) + 1
    head = int(str(current).split(".")[0]) + 1
    return f"{head:032}.{random.random():016}"


# --- encoding values ------------------------------------------------------------


def encode_value(
    serde: SerializerProtocol, value: Any, cache: codec.ElementCache | None = None
) -> Encoded:
    """Entry and objects for one value (spec §4)."""
    if type(value) is list and value:
        elements = [serde.dumps_typed(e) for e in value]
        if codec.use_list_encoding(elements):
            return codec.encode_list(elements, cache)
    type_, data = serde.dumps_typed(value)
    return codec.encode_serialized(type_, data)


# --- reading --------------------------------------------------------------------


def _children(obj: StoredObject) -> list[tuple[str, bytes]]:
    if isinstance(obj, ListObj):
        return [("c", d) for d, _ in obj.sealed] + _entry_refs(obj.tail)
    if isinstance(obj, NodeObj):
        return [("c", d) for d, _ in obj.subtrees]
    if isinstance(obj, ChunkObj):
        return [(e.tag, e.digest) for e in obj.items if isinstance(e, Ref)]
    if isinstance(obj, PartsObj):
        return [("d", d) for d in obj.parts]
    return []


#: Tags of objects that only hold data: a reachability walk need not read them.
LEAF_TAGS = frozenset({"b", "d"})


def fetch_objects(
    ctx: Context,
    pfx: str,
    refs: Iterable[tuple[str, bytes]],
    referrer: str,
    *,
    reached: set[bytes] | None = None,
) -> Generator[Batch, list[Any] | None, dict[bytes, StoredObject]]:
    """Sub-plan: every object reachable from ``refs``, level by level.

    Objects in memory are not fetched. Fetched bytes are checked against their
    address and decoded; a missing object is an error naming who referenced it.
    When ``reached`` is given, only the structure is read (lists, chunks, parts
    indexes): leaf digests are added to ``reached`` without fetching them.
    """
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
        bodies = yield from run_batch(*(Get(keys.object_key_in(pfx, d)) for _, d in need))
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
            for tag, child in _children(obj):
                if child not in got and child not in level:
                    level[child] = tag
                    referrers.setdefault(child, keys.object_key_in(pfx, parent))
    ctx.objects.confirm(pfx, got, as_of)
    if reached is not None:
        ctx.objects.confirm(pfx, reached, as_of)
    return got


def effective_writes(writes: Iterable[WriteObj]) -> list[WriteObj]:
    """Writes in force, in ``writes_sort_key`` order (spec §6.5).

    A special write is stored once per call; the one with the greatest
    sequence replaces the others, as the last call does in ``InMemorySaver``.
    Regular writes of a call that are not all stored yet (a crash or a failed
    request in the middle of ``put_writes``) are not in force: LangGraph would
    take a task with some of its writes as done and lose the others.
    """
    latest: dict[tuple[str, int], WriteObj] = {}
    for w in writes:
        slot = (w.task_id, w.idx)
        if slot not in latest or w.seq > latest[slot].seq:
            latest[slot] = w
    complete = [w for w in latest.values() if all((w.task_id, i) in latest for i in w.group)]
    return sorted(complete, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))


def _entry_refs(entries: Iterable[Entry]) -> list[tuple[str, bytes]]:
    return [(e.tag, e.digest) for e in entries if isinstance(e, Ref)]


def materialize(
    serde: SerializerProtocol, entry: Entry, got: Mapping[bytes, StoredObject], pfx: str
) -> Any:
    """Deserialize the value of an entry from fetched objects."""
    if isinstance(entry, Inline):
        return serde.loads_typed(codec.payload_bytes(entry.payload, pfx))
    key = keys.object_key_in(pfx, entry.digest)
    obj = got[entry.digest]
    if entry.tag == "l":
        assert isinstance(obj, ListObj)
        out: list[Any] = []
        for digest, count in obj.sealed:
            _expand(serde, digest, count, got, pfx, out)
        out.extend(materialize(serde, item, got, pfx) for item in obj.tail)
        return out
    if isinstance(obj, ValueObj):
        return serde.loads_typed(codec.payload_bytes(obj.payload, key))
    assert isinstance(obj, PartsObj)
    data = b"".join(cast(PartObj, got[d]).data for d in obj.parts)
    if len(data) != obj.size:
        raise CorruptObjectError(key, f"parts hold {len(data)} bytes, expected {obj.size}")
    return serde.loads_typed(codec.payload_bytes(codec.Payload(obj.type, obj.encoding, data), key))


def _expand(
    serde: SerializerProtocol,
    digest: bytes,
    count: int,
    got: Mapping[bytes, StoredObject],
    pfx: str,
    out: list[Any],
) -> None:
    """Append the elements of a sealed subtree (a chunk, or a node of subtrees)."""
    obj = got[digest]
    if isinstance(obj, NodeObj):
        if sum(n for _, n in obj.subtrees) != count:
            raise CorruptObjectError(
                keys.object_key_in(pfx, digest), f"node does not hold the {count} elements expected"
            )
        for child, n in obj.subtrees:
            _expand(serde, child, n, got, pfx, out)
        return
    assert isinstance(obj, ChunkObj)
    if len(obj.items) != count:
        raise CorruptObjectError(
            keys.object_key_in(pfx, digest),
            f"chunk holds {len(obj.items)} elements, its parent says {count}",
        )
    out.extend(materialize(serde, item, got, pfx) for item in obj.items)


def decode_checked_manifest(data: bytes, key: str) -> Manifest:
    manifest = codec.decode_manifest(data, key)
    if keys.manifest_key(manifest.thread_id, manifest.checkpoint_ns, manifest.checkpoint_id) != key:
        raise CorruptObjectError(
            key,
            f"manifest of thread {manifest.thread_id!r}, namespace "
            f"{manifest.checkpoint_ns!r}, checkpoint {manifest.checkpoint_id!r} is "
            "stored under another checkpoint's key",
        )
    return manifest


def read_manifest(ctx: Context, key: str) -> Generator[Batch, list[Any] | None, Manifest | None]:
    """Sub-plan: GET and decode one manifest (None if absent)."""
    data = yield from run_one(Get(key))
    if data is None:
        return None
    return decode_checked_manifest(data, key)


def read_tuples(
    ctx: Context,
    manifests: Sequence[tuple[str, Manifest]],
    configs: Sequence[RunnableConfig | None] | None = None,
    write_pages: Sequence[ListPage] | None = None,
) -> Generator[Batch, list[Any] | None, list[CheckpointTuple]]:
    """Sub-plan: full tuples (values, metadata, pending writes) of manifests.

    ``write_pages`` are the first pages of the manifests' write listings when
    the caller already fetched them alongside the manifests.
    """
    if not manifests:
        return []
    prefixes = [
        keys.writes_prefix(m.thread_id, m.checkpoint_ns, m.checkpoint_id) for _, m in manifests
    ]
    if write_pages is None:
        write_pages = yield from run_batch(*(ListKeys(p) for p in prefixes))
    write_keys: list[list[str]] = []
    for prefix, page in zip(prefixes, write_pages, strict=True):
        found = [o.key for o in page.objects]
        if page.truncated:
            found += yield from list_all(prefix, found[-1])
        write_keys.append(found)
    flat = [k for ks in write_keys for k in ks]
    bodies = yield from run_batch(*(Get(k) for k in flat))
    writes_by_key: dict[str, WriteObj] = {}
    for k, body in zip(flat, bodies, strict=True):
        if body is None:
            raise MissingObjectError(k, "the listing of its checkpoint's writes")
        writes_by_key[k] = codec.decode_write(body, k)

    sorted_writes = [effective_writes(writes_by_key[k] for k in wkeys) for wkeys in write_keys]
    refs_by_pfx: dict[str, list[tuple[str, bytes]]] = {}
    for (_, m), writes in zip(manifests, sorted_writes, strict=True):
        entries = [m.checkpoint, m.metadata, *m.channels.values(), *(w.value for w in writes)]
        refs_by_pfx.setdefault(keys.thread_prefix(m.thread_id), []).extend(_entry_refs(entries))
    got: dict[bytes, StoredObject] = {}
    for pfx, refs in refs_by_pfx.items():
        got |= yield from fetch_objects(ctx, pfx, refs, manifests[0][0])

    out: list[CheckpointTuple] = []
    for i, ((mkey, m), writes) in enumerate(zip(manifests, sorted_writes, strict=True)):
        pfx = keys.thread_prefix(m.thread_id)
        checkpoint = materialize(ctx.serde, m.checkpoint, got, pfx)
        checkpoint["id"] = m.checkpoint_id
        metadata = materialize(ctx.serde, m.metadata, got, pfx)
        checkpoint["channel_values"] = {
            name: materialize(ctx.serde, e, got, pfx) for name, e in m.channels.items()
        }
        ctx.entries.put(
            mkey, CheckpointEntries(dict(checkpoint.get("channel_versions", {})), m.channels)
        )
        given = configs[i] if configs is not None else None
        out.append(
            CheckpointTuple(
                config=given or checkpoint_config(m.thread_id, m.checkpoint_ns, m.checkpoint_id),
                checkpoint=checkpoint,
                metadata=metadata,
                parent_config=(
                    checkpoint_config(m.thread_id, m.checkpoint_ns, m.parent_checkpoint_id)
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


def latest_id(scope: Scope) -> Generator[Batch, list[Any] | None, str | None]:
    """Sub-plan: id of the newest checkpoint of a namespace (spec §6.2), one LIST."""
    page = yield from run_one(
        ListKeys(keys.manifests_prefix(scope.thread_id, scope.checkpoint_ns), limit=1)
    )
    if not page.objects:
        return None
    return keys.unreverse_id(page.objects[0].key.rsplit("/", 1)[1])


def read_metadata(
    ctx: Context, m: Manifest, key: str
) -> Generator[Batch, list[Any] | None, dict[str, Any]]:
    """Sub-plan: a manifest's decoded metadata (no request when it is inline)."""
    pfx = keys.thread_prefix(m.thread_id)
    got = yield from fetch_objects(ctx, pfx, _entry_refs([m.metadata]), key)
    return materialize(ctx.serde, m.metadata, got, pfx)


def get_tuple(ctx: Context, config: RunnableConfig) -> Step:
    """Plan: spec §6.2 (latest) and §6.3 (by id)."""
    scope = scope_of(config)
    given: RunnableConfig | None = config
    cid = scope.checkpoint_id
    if cid is None:
        cid = yield from latest_id(scope)
        if cid is None:
            return None
        given = None
    mkey = keys.manifest_key(scope.thread_id, scope.checkpoint_ns, cid)
    body, writes_page = yield from run_batch(
        Get(mkey), ListKeys(keys.writes_prefix(scope.thread_id, scope.checkpoint_ns, cid))
    )
    if body is None:
        return None
    manifest = decode_checked_manifest(body, mkey)
    tuples = yield from read_tuples(ctx, [(mkey, manifest)], [given], [writes_page])
    return tuples[0]


def thread_prefixes() -> Generator[Batch, list[Any] | None, list[str]]:
    """Sub-plan: every thread prefix in the store, by skip scan (spec §6.4)."""
    found: list[str] = []
    after: str | None = None
    while True:
        page = yield from run_one(ListKeys(keys.THREADS, after, limit=1))
        if not page.objects:
            return found
        pfx, _ = keys.split_thread_key(page.objects[0].key)
        found.append(pfx)
        # "0" is the character after "/": skip every key of this thread.
        after = pfx[:-1] + "0"


def list_checkpoints(
    ctx: Context,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> Step:
    """Plan: spec §6.4. Emits matching CheckpointTuples newest first per namespace."""
    if limit is not None and limit <= 0:
        return None
    before_id = None
    if before is not None:
        before_id = (before.get("configurable") or {}).get("checkpoint_id")
    if config is not None:
        scope = scope_of(config)
        ns_given = (config.get("configurable") or {}).get("checkpoint_ns")
        prefixes = [keys.manifests_prefix(scope.thread_id, ns_given)]
        only_id = scope.checkpoint_id
    else:
        thread_pfxs = yield from thread_prefixes()
        prefixes = [p + "checkpoints/" for p in thread_pfxs]
        ns_given, only_id = None, None
    remaining = limit
    for prefix in prefixes:
        start_after = None
        if before_id and ns_given is not None:
            start_after = prefix + keys.reverse_id(before_id)
        if only_id is not None and ns_given is not None:
            manifest_keys = [prefix + keys.reverse_id(only_id)]
        else:
            manifest_keys = yield from list_all(prefix, start_after)
        candidates = []
        for k in manifest_keys:
            cid = keys.unreverse_id(k.rsplit("/", 1)[1])
            if (before_id is not None and cid >= before_id) or (only_id and cid != only_id):
                continue
            candidates.append(k)
        for start in range(0, len(candidates), LIST_READ_AHEAD):
            group = candidates[start : start + LIST_READ_AHEAD]
            bodies = yield from run_batch(*(Get(k) for k in group))
            matched: list[tuple[str, Manifest]] = []
            for k, body in zip(group, bodies, strict=True):
                if body is None:
                    continue  # deleted since it was listed (or never existed for only_id)
                m = decode_checked_manifest(body, k)
                if filter:
                    md = yield from read_metadata(ctx, m, k)
                    if not all(md.get(fk) == fv for fk, fv in filter.items()):
                        continue
                matched.append((k, m))
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        break
            tuples = yield from read_tuples(ctx, matched)
            for tup in tuples:
                yield Emit(tup)
            if remaining == 0:
                return None
    return None


# --- writing --------------------------------------------------------------------


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
    is): a stored container implies its children are (write order).
    ``exists`` is success, the key being the hash of the bytes; the object is
    then re-PUT in overwrite mode with the same bytes, which renews its
    ``LastModified`` so a pending sweep mark no longer applies to it (§6.9).
    Written objects are remembered decoded, so reading them back costs no request.
    """
    bodies: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    stack: list[bytes] = []
    for enc in encoded:
        bodies.update(enc.objects)
        children.update(enc.children)
        if isinstance(enc.entry, Ref):
            stack.append(enc.entry.digest)
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


def recall_parent(
    ctx: Context, pfx: str, mkey: str, *, trust: bool = True
) -> Generator[Batch, list[Any] | None, CheckpointEntries | None]:
    """Sub-plan: a parent's entries from memory, else from its manifest (§6.1.2.1).

    Memory is used only when confirmed within the trust age (and ``trust``).
    Reading the manifest also teaches the object memory which list objects,
    sealed subtrees and tail elements exist, so a growing list rewrites only
    its list object and what is new.
    """
    remembered = ctx.entries.get(mkey, ctx.trust_age) if trust else None
    if remembered is not None:
        return remembered
    manifest = yield from read_manifest(ctx, mkey)
    if manifest is None:
        return None
    got = yield from fetch_objects(ctx, pfx, _entry_refs([manifest.checkpoint]), mkey)
    checkpoint = materialize(ctx.serde, manifest.checkpoint, got, pfx)
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
            ctx.objects.add_known(pfx, [c for _, c in _children(obj)])
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
        enc = codec.encode_serialized(*codec.payload_bytes(entry.payload, name), inline_max=-1)
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
            parent = yield from recall_parent(
                ctx,
                pfx,
                keys.manifest_key(scope.thread_id, scope.checkpoint_ns, parent_id),
                trust=trust,
            )

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
                enc = encode_value(ctx.serde, values[name], ctx.elements)
                channels[name] = enc.entry
                encoded.append(enc)

        cp_enc = codec.encode_serialized(*ctx.serde.dumps_typed(bare))
        md_enc = codec.encode_serialized(*ctx.serde.dumps_typed(md))
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
    ctx.entries.put(mkey, CheckpointEntries(versions, channels))
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
    encoded: list[Encoded] = []
    write_puts: list[Put] = []
    # Readers keep the regular writes of this call hidden until all are stored.
    regular = tuple(i for i, (ch, _) in enumerate(writes) if WRITES_IDX_MAP.get(ch, i) >= 0)
    for i, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, i)
        # Taken in call order, before any request: a later special write wins
        # even when its request completes first, or comes later in one call.
        seq = ctx.next_seq() if idx < 0 else 0
        enc = encode_value(ctx.serde, value, ctx.elements)
        encoded.append(enc)
        body = codec.encode_write(
            task_id=task_id,
            task_path=task_path,
            idx=idx,
            channel=channel,
            value=enc.entry,
            seq=seq,
            group=regular if idx >= 0 and len(regular) > 1 else (),
        )
        key = keys.write_key(
            scope.thread_id, scope.checkpoint_ns, scope.checkpoint_id, task_id, idx, seq
        )
        # Create-only: the first regular write wins; special writes get a new key
        # per call and the greatest sequence is in force (nothing is overwritten).
        write_puts.append(Put(key, body))
    for attempt in range(PUT_ATTEMPTS):
        started = ctx.clock()
        yield from store_objects(ctx, pfx, encoded, trust=attempt == 0)
        if ctx.clock() - started <= ctx.trust_age:
            break
    else:
        raise _put_too_slow(f"put_writes of task {task_id!r} in thread {scope.thread_id!r}", ctx)
    yield from run_batch(*write_puts)


# --- deleting, copying, pruning ------------------------------------------------------


@dataclass
class ThreadListing:
    """Keys of one thread, by kind (spec §3)."""

    pfx: str
    manifests: list[ObjectInfo] = field(default_factory=list)
    writes: list[ObjectInfo] = field(default_factory=list)
    objects: list[ObjectInfo] = field(default_factory=list)
    runs: list[ObjectInfo] = field(default_factory=list)
    marks: list[ObjectInfo] = field(default_factory=list)

    @property
    def run_index_keys(self) -> list[str]:
        thread_tok = self.pfx[len(keys.THREADS) : -1]
        return [f"{keys.RUNS}{o.key.rsplit('/', 1)[1]}/{thread_tok}" for o in self.runs]


def list_thread(pfx: str) -> Generator[Batch, list[Any] | None, ThreadListing]:
    """Sub-plan: every key of a thread, sorted by kind."""
    listing = ThreadListing(pfx)
    after: str | None = None
    while True:
        page = yield from run_one(ListKeys(pfx, after))
        for info in page.objects:
            kind = info.key[len(pfx) :].split("/", 1)[0]
            bucket = {
                "checkpoints": listing.manifests,
                "writes": listing.writes,
                "objects": listing.objects,
                "runs": listing.runs,
                "marks": listing.marks,
            }.get(kind)
            if bucket is None:
                raise CorruptObjectError(info.key, "unknown key under a thread prefix")
            bucket.append(info)
        if not page.truncated or not page.objects:
            return listing
        after = page.objects[-1].key


def _delete(keys_: Sequence[str]) -> Generator[Batch, list[Any] | None, None]:
    for start in range(0, len(keys_), MAX_DELETE_BATCH):
        yield from run_one(Delete(tuple(keys_[start : start + MAX_DELETE_BATCH])))


def _oldest_first(manifests: Iterable[ObjectInfo]) -> list[str]:
    # Within a namespace keys run newest first; reverse so the head goes last.
    return [o.key for o in reversed(list(manifests))]


def delete_thread(ctx: Context, thread_id: str) -> Step:
    """Plan: spec §6.6."""
    pfx = keys.thread_prefix(thread_id)
    listing = yield from list_thread(pfx)
    yield from _delete_listing(ctx, thread_id, listing)


def _delete_listing(ctx: Context, thread_id: str, listing: ThreadListing) -> Step:
    pfx = listing.pfx
    # Forget before deleting: if a delete fails after removing some keys, the
    # memories must not vouch for them (a put would then skip writing them).
    ctx.objects.forget_thread(pfx)
    ctx.entries.forget_prefix(pfx)
    ctx.marked_runs.discard_where(lambda m: m.startswith(thread_id + "\0"))
    yield from _delete(_oldest_first(listing.manifests))
    yield from _delete([o.key for o in listing.writes])
    yield from _delete([o.key for o in listing.objects])
    yield from _delete([o.key for o in listing.marks])
    yield from _delete([o.key for o in listing.runs] + listing.run_index_keys)


def copy_thread(ctx: Context, source_thread_id: str, target_thread_id: str) -> Step:
    """Plan: spec §6.7."""
    src = keys.thread_prefix(source_thread_id)
    dst = keys.thread_prefix(target_thread_id)
    listing = yield from list_thread(src)
    # Objects before writes before manifests: whatever a copied key reaches is
    # already in place when it appears.
    for group_keys in (listing.objects, listing.writes):
        plain = [o.key for o in group_keys]
        for start in range(0, len(plain), LIST_READ_AHEAD * 2):
            group = plain[start : start + LIST_READ_AHEAD * 2]
            bodies = yield from run_batch(*(Get(k) for k in group))
            puts = []
            for k, body in zip(group, bodies, strict=True):
                if body is None:
                    raise MissingObjectError(k, f"the listing of thread {source_thread_id!r}")
                puts.append(Put(dst + k[len(src) :], body))
            yield from run_batch(*puts)
    run_ids = []
    for o in listing.runs:
        run_id = keys.untoken(o.key.rsplit("/", 1)[1])
        if run_id is not None:
            run_ids.append(run_id)
    yield from run_batch(
        *(Put(k, b"") for r in run_ids for k in keys.run_markers(target_thread_id, r))
    )
    for k in _oldest_first(listing.manifests):
        body = yield from run_one(Get(k))
        if body is None:
            continue  # deleted since it was listed
        m = decode_checked_manifest(body, k)
        new_key = keys.manifest_key(target_thread_id, m.checkpoint_ns, m.checkpoint_id)
        new_body = codec.replace_thread_id(body, k, target_thread_id)
        created = yield from run_one(Put(new_key, new_body))
        if not created:
            stored = yield from run_one(Get(new_key))
            if stored != new_body:
                raise CheckpointConflictError(
                    target_thread_id, m.checkpoint_ns, m.checkpoint_id, new_key
                )


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> Step:
    """Plan: spec §6.8."""
    for run_id in run_ids:
        if not isinstance(run_id, str):
            raise InvalidIdentifierError(f"run_id must be a string, got {run_id!r}")
        suffix = "\0" + run_id
        ctx.marked_runs.discard_where(lambda m, suffix=suffix: m.endswith(suffix))
        index = yield from list_all(keys.run_prefix(run_id))
        for index_key in index:
            thread_tok = index_key.rsplit("/", 1)[1]
            pfx = f"{keys.THREADS}{thread_tok}/"
            manifest_keys = yield from list_all(pfx + "checkpoints/")
            doomed: list[Manifest] = []
            doomed_keys: list[str] = []
            for start in range(0, len(manifest_keys), LIST_READ_AHEAD):
                group = manifest_keys[start : start + LIST_READ_AHEAD]
                bodies = yield from run_batch(*(Get(k) for k in group))
                for k, body in zip(group, bodies, strict=True):
                    if body is None:
                        continue
                    m = decode_checked_manifest(body, k)
                    md = yield from read_metadata(ctx, m, k)
                    if md.get("run_id") == run_id:
                        doomed.append(m)
                        doomed_keys.append(k)
            ctx.entries.forget(doomed_keys)  # before deleting, as in delete_thread
            yield from _delete(list(reversed(doomed_keys)))
            write_keys: list[str] = []
            for m in doomed:
                write_keys += yield from list_all(
                    keys.writes_prefix(m.thread_id, m.checkpoint_ns, m.checkpoint_id)
                )
            yield from _delete(write_keys)
            marker = f"{pfx}runs/{keys.token('run_id', run_id)}"
            yield from _delete([marker, index_key])


def _delta_channels(metadata: Mapping[str, Any]) -> set[str]:
    counters = metadata.get("counters_since_delta_snapshot") or {}
    return set(counters) if isinstance(counters, Mapping) else set()


@dataclass
class PruneStats:
    """What a prune did (or, in a dry run, would do) to one thread (spec §6.9)."""

    thread_id: str
    checkpoints_kept: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    objects_marked: int = 0
    bytes_marked: int = 0
    objects_swept: int = 0
    bytes_swept: int = 0
    marks_executed: int = 0
    deferred: bool = False
    """True when a mark younger than the sweep delay exists: the thread was left alone."""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _digest_of_key(key: str) -> bytes:
    return bytes.fromhex(key.rsplit("/", 1)[1])


def _writes_prefix_of_manifest_key(key: str) -> str:
    pfx, _ = keys.split_thread_key(key)
    ns_tok, seg = keys.namespace_of_manifest_key(key)
    return f"{pfx}writes/{ns_tok}/{keys.token('checkpoint_id', keys.unreverse_id(seg))}/"


def _list_infos(prefix: str) -> Generator[Batch, list[Any] | None, list[ObjectInfo]]:
    """Sub-plan: every listing entry under ``prefix`` (all pages)."""
    out: list[ObjectInfo] = []
    after: str | None = None
    while True:
        page = yield from run_one(ListKeys(prefix, after))
        out.extend(page.objects)
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def _read_manifests(
    ctx: Context, manifest_keys: Sequence[str]
) -> Generator[Batch, list[Any] | None, dict[str, Manifest]]:
    """Sub-plan: GET and decode manifests in parallel groups; absent ones are left out."""
    out: dict[str, Manifest] = {}
    for start in range(0, len(manifest_keys), LIST_READ_AHEAD * 4):
        group = manifest_keys[start : start + LIST_READ_AHEAD * 4]
        bodies = yield from run_batch(*(Get(k) for k in group))
        for k, body in zip(group, bodies, strict=True):
            if body is not None:
                out[k] = decode_checked_manifest(body, k)
    return out


def _reach(
    ctx: Context, pfx: str, manifests: Iterable[tuple[str, Manifest]], write_keys: Sequence[str]
) -> Generator[Batch, list[Any] | None, set[bytes]]:
    """Sub-plan: digests of every object the manifests and writes reach (structure only)."""
    reached: set[bytes] = set()
    for mkey, m in manifests:
        refs = _entry_refs([m.checkpoint, m.metadata, *m.channels.values()])
        yield from fetch_objects(ctx, pfx, refs, mkey, reached=reached)
    for start in range(0, len(write_keys), LIST_READ_AHEAD * 4):
        group = write_keys[start : start + LIST_READ_AHEAD * 4]
        bodies = yield from run_batch(*(Get(k) for k in group))
        refs = []
        for k, body in zip(group, bodies, strict=True):
            if body is not None:  # deleted with its checkpoint since the listing
                refs += _entry_refs([codec.decode_write(body, k).value])
        yield from fetch_objects(ctx, pfx, refs, pfx, reached=reached)
    return reached


def _select_kept(
    ctx: Context, thread_id: str, listing: ThreadListing, keep_last: int
) -> Generator[Batch, list[Any] | None, dict[str, Manifest]]:
    """Sub-plan: the manifests a prune keeps (spec §6.9 "Which checkpoints are kept")."""
    by_ns: dict[str, list[ObjectInfo]] = {}
    for info in listing.manifests:
        ns_tok, _ = keys.namespace_of_manifest_key(info.key)
        by_ns.setdefault(ns_tok, []).append(info)  # newest first within a namespace
    root_tok = keys.token("checkpoint_ns", "")
    roots = by_ns.get(root_tok, [])
    chosen = [o.key for o in roots[:keep_last]]
    root_ids = sorted(keys.unreverse_id(o.key.rsplit("/", 1)[1]) for o in roots)
    kept_root_ids = {keys.unreverse_id(k.rsplit("/", 1)[1]) for k in chosen}
    for ns_tok, infos in by_ns.items():
        if ns_tok == root_tok:
            continue
        newest_per_run: dict[str | None, str] = {}
        for info in infos:
            cid = keys.unreverse_id(info.key.rsplit("/", 1)[1])
            # The run it belongs to: the newest root checkpoint not newer than it
            # (checkpoint ids are time-ordered); older than every root: the oldest.
            owner: str | None = None
            if root_ids:
                owner = root_ids[max(bisect.bisect_right(root_ids, cid) - 1, 0)]
                if owner not in kept_root_ids:
                    continue
            newest_per_run.setdefault(owner, info.key)
        chosen += newest_per_run.values()

    kept = yield from _read_manifests(ctx, chosen)
    # Keep the ancestors a DeltaChannel of a kept checkpoint replays, up to its seed.
    for key, m in list(kept.items()):
        pending = _delta_channels((yield from read_metadata(ctx, m, key))) - set(m.channels)
        cursor = m
        while pending and cursor.parent_checkpoint_id:
            pkey = keys.manifest_key(thread_id, cursor.checkpoint_ns, cursor.parent_checkpoint_id)
            parent = kept.get(pkey)
            if parent is None:
                parent = yield from read_manifest(ctx, pkey)
                if parent is None:
                    break
                kept[pkey] = parent
            pending -= set(parent.channels)
            cursor = parent
    return kept


def _prune_thread(
    ctx: Context,
    thread_id: str,
    *,
    keep_last: int,
    min_age: timedelta,
    sweep_delay: timedelta,
    dry_run: bool,
    now: datetime,
) -> Generator[Batch, list[Any] | None, PruneStats]:
    """Sub-plan: one thread of ``prune(strategy="keep_latest")``, spec §6.9 steps 1-6."""
    stats = PruneStats(thread_id)
    pfx = keys.thread_prefix(thread_id)
    listing = yield from list_thread(pfx)
    if any(o.last_modified > now - sweep_delay for o in listing.marks):
        stats.deferred = True
        return stats
    kept = yield from _select_kept(ctx, thread_id, listing, keep_last)
    doomed = [o.key for o in listing.manifests if o.key not in kept]
    stats.checkpoints_kept = len(kept)
    stats.checkpoints_deleted = len(doomed)
    doomed_writes_pfx = {_writes_prefix_of_manifest_key(k) for k in doomed}
    doomed_writes = [
        o.key for o in listing.writes if o.key[: o.key.rindex("/") + 1] in doomed_writes_pfx
    ]
    other_writes = [
        o.key for o in listing.writes if o.key[: o.key.rindex("/") + 1] not in doomed_writes_pfx
    ]
    stats.writes_deleted = len(doomed_writes)
    live = yield from _reach(ctx, pfx, kept.items(), other_writes)
    swept: set[bytes] = set()

    if listing.marks:
        # Step 3, the sweep, runs before this run deletes any manifest: what the
        # doomed checkpoints reach is still referenced, and only marked next.
        everything = set(live)
        doomed_manifests = yield from _read_manifests(ctx, doomed)
        everything |= yield from _reach(ctx, pfx, doomed_manifests.items(), doomed_writes)
        # Manifests and writes that appeared since the listing (after its objects).
        listed = {o.key for o in listing.manifests} | {o.key for o in listing.writes}
        fresh_manifests = yield from list_all(pfx + "checkpoints/")
        fresh_writes = yield from list_all(pfx + "writes/")
        newer = yield from _read_manifests(ctx, [k for k in fresh_manifests if k not in listed])
        newer_reach = yield from _reach(
            ctx, pfx, newer.items(), [k for k in fresh_writes if k not in listed]
        )
        everything |= newer_reach
        live |= newer_reach
        bodies = yield from run_batch(*(Get(o.key) for o in listing.marks))
        marked_at: dict[bytes, datetime] = {}
        for info, body in zip(listing.marks, bodies, strict=True):
            if body is None:
                raise MissingObjectError(info.key, f"the listing of thread {thread_id!r}")
            for d in codec.decode_mark(body, info.key):
                if d not in marked_at or marked_at[d] > info.last_modified:
                    marked_at[d] = info.last_modified
        # LastModified as late as possible, just before the delete: a writer
        # that renewed a marked object before this LIST is seen (§6.9 step 3).
        current = yield from _list_infos(pfx + "objects/")
        victims = [
            o
            for o in current
            if (d := _digest_of_key(o.key)) in marked_at
            and d not in everything
            # Renewed (re-PUT by a writer) since it was marked: not a candidate.
            # Strictly older: LastModified has one-second resolution on S3.
            and o.last_modified < marked_at[d]
        ]
        swept = {_digest_of_key(o.key) for o in victims}
        stats.objects_swept = len(victims)
        stats.bytes_swept = sum(o.size for o in victims)
        stats.marks_executed = len(listing.marks)
        if not dry_run:
            ctx.objects.forget(pfx, swept)  # before deleting, as in delete_thread
            yield from _delete([o.key for o in victims])
            yield from _delete([o.key for o in listing.marks])

    # Step 4: manifests before the writes and objects only they reach.
    if not dry_run:
        ctx.entries.forget(doomed)  # before deleting, as in delete_thread
        yield from _delete(_oldest_first(o for o in listing.manifests if o.key not in kept))
        yield from _delete(doomed_writes)

    # Step 5: mark what no kept checkpoint reaches and is older than min_age.
    candidates = [
        o
        for o in listing.objects
        if (d := _digest_of_key(o.key)) not in live
        and d not in swept
        and o.last_modified <= now - min_age
    ]
    stats.objects_marked = len(candidates)
    stats.bytes_marked = sum(o.size for o in candidates)
    if candidates and not dry_run:
        key = keys.mark_key(thread_id, time.time_ns(), os.urandom(4).hex())
        yield from run_one(Put(key, codec.encode_mark([_digest_of_key(o.key) for o in candidates])))
    return stats


PRUNE_STRATEGIES = ("keep_latest", "delete")


def prune(
    ctx: Context,
    thread_ids: Sequence[str],
    strategy: str = "keep_latest",
    *,
    keep_last: int = 1,
    min_age: timedelta = timedelta(seconds=60),
    sweep_delay: timedelta = timedelta(hours=1),
    dry_run: bool = False,
    now: datetime | None = None,
) -> Step:
    """Plan: spec §6.9. Returns a JSON-serializable report."""
    if strategy not in PRUNE_STRATEGIES:
        raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(f"keep_last must be an integer of at least 1, got {keep_last!r}")
    if min_age < timedelta(0):
        raise ValueError(f"min_age must not be negative, got {min_age.total_seconds()} s")
    if sweep_delay.total_seconds() < ctx.reuse_window:
        raise ValueError(
            f"sweep delay {sweep_delay.total_seconds():g} s is shorter than the reuse window "
            f"{ctx.reuse_window:g} s: a concurrent put could lose an object (spec §6.9)"
        )
    for thread_id in thread_ids:
        keys.thread_prefix(thread_id)  # rejects a bad id before anything is deleted
    at = now or datetime.now(UTC)
    threads: list[dict[str, Any]] = []
    for thread_id in thread_ids:
        if strategy == "delete":
            pfx = keys.thread_prefix(thread_id)
            listing = yield from list_thread(pfx)
            stats = PruneStats(
                thread_id,
                checkpoints_deleted=len(listing.manifests),
                writes_deleted=len(listing.writes),
                objects_swept=len(listing.objects),
                bytes_swept=sum(o.size for o in listing.objects),
            )
            if not dry_run:
                yield from _delete_listing(ctx, thread_id, listing)
        else:
            stats = yield from _prune_thread(
                ctx,
                thread_id,
                keep_last=keep_last,
                min_age=min_age,
                sweep_delay=sweep_delay,
                dry_run=dry_run,
                now=at,
            )
        threads.append(stats.to_dict())
    totals = {
        name: sum(t[name] for t in threads)
        for name in (
            "checkpoints_kept",
            "checkpoints_deleted",
            "writes_deleted",
            "objects_marked",
            "bytes_marked",
            "objects_swept",
            "bytes_swept",
            "marks_executed",
        )
    }
    return {
        "strategy": strategy,
        "dry_run": dry_run,
        "keep_last": keep_last,
        "min_age_seconds": min_age.total_seconds(),
        "sweep_delay_seconds": sweep_delay.total_seconds(),
        "threads_deferred": [t["thread_id"] for t in threads if t["deferred"]],
        **totals,
        "threads": threads,
    }


def delta_channel_history(ctx: Context, config: RunnableConfig, channels: Sequence[str]) -> Step:
    """Plan: spec §6.10, with the return contract of LangGraph's default walk."""
    if not channels:
        return {}
    scope = scope_of(config)
    cid = scope.checkpoint_id
    if cid is None:
        cid = yield from latest_id(scope)
        if cid is None:
            return {c: {"writes": []} for c in channels}
    pfx = keys.thread_prefix(scope.thread_id)
    target = yield from read_manifest(
        ctx, keys.manifest_key(scope.thread_id, scope.checkpoint_ns, cid)
    )
    collected: dict[str, list[PendingWrite]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    cursor_id = target.parent_checkpoint_id if target is not None else None
    while cursor_id is not None and remaining:
        mkey = keys.manifest_key(scope.thread_id, scope.checkpoint_ns, cursor_id)
        m = yield from read_manifest(ctx, mkey)
        if m is None:
            break
        wkeys = yield from list_all(
            keys.writes_prefix(m.thread_id, m.checkpoint_ns, m.checkpoint_id)
        )
        bodies = yield from run_batch(*(Get(k) for k in wkeys))
        writes = effective_writes(
            codec.decode_write(b, k) for k, b in zip(wkeys, bodies, strict=True) if b is not None
        )
        wanted = [w for w in writes if w.channel in remaining]
        seeded = [c for c in remaining if c in m.channels]
        got = yield from fetch_objects(
            ctx,
            pfx,
            _entry_refs([w.value for w in wanted] + [m.channels[c] for c in seeded]),
            mkey,
        )
        for w in reversed(wanted):
            collected[w.channel].append(
                (w.task_id, w.channel, materialize(ctx.serde, w.value, got, pfx))
            )
        for c in seeded:
            seeds[c] = materialize(ctx.serde, m.channels[c], got, pfx)
            remaining.discard(c)
        cursor_id = m.parent_checkpoint_id
    result: dict[str, DeltaChannelHistory] = {}
    for c in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[c]))}
        if c in seeds:
            entry["seed"] = seeds[c]
        result[c] = entry
    return result
