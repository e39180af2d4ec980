"""Plans that find checkpoints: the latest lookup, get by id and listing (spec §6.2-6.4)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from objstore_saver.errors import MissingObjectError, ThreadKeyMissingError
from objstore_saver.format import keys
from objstore_saver.format.codec import Manifest
from objstore_saver.format.keys import Scope, scope_of
from objstore_saver.plans.context import LIST_READ_AHEAD, Context, Step
from objstore_saver.plans.epochs import Ended, tombstones_in
from objstore_saver.plans.reading import (
    checkpoint_manifests,
    decode_checked_manifest,
    read_metadata,
    read_tuples,
    values_from_memory,
)
from objstore_saver.plans.requests import (
    Batch,
    Emit,
    Get,
    ListKeys,
    list_all,
    list_infos,
    run_batch,
    run_batch_while,
    run_one,
)
from objstore_saver.storage.base import ListPage, ObjectInfo

#: Keys the latest lookup lists: the newest checkpoint's manifests and writes
#: come first (spec §6.2); more writes than fit are listed on.
LATEST_LIST_KEYS = 20

T = TypeVar("T")


def latest_id(scope: Scope) -> Generator[Batch, list[Any] | None, str | None]:
    """Sub-plan: id of the newest live checkpoint of a namespace (spec §6.2), one LIST.

    After a tombstone, listed manifests are read until one of the current epoch.
    """
    page = yield from run_one(_newest_manifest(scope))
    head, _ = yield from _head_of(scope, page, Ended())
    while head is not None:
        if head.ended.epoch == 0:
            return head.checkpoint_id
        body = yield from run_one(Get(head.manifest_key))
        if body is not None and head.ended.live(decode_checked_manifest(body, head.manifest_key)):
            return head.checkpoint_id
        head = yield from _head_after(scope, head)
    return None


def _newest_manifest(scope: Scope) -> ListKeys:
    return ListKeys(
        keys.manifests_prefix(scope.thread_id, scope.checkpoint_ns), limit=LATEST_LIST_KEYS
    )


@dataclass(frozen=True)
class _Head:
    """The newest checkpoint as the latest lookup's LIST shows it."""

    checkpoint_id: str
    manifest_key: str
    write_keys: list[str]
    """Its version-2 pending writes (a version-1 head has more under ``writes/``)."""
    ended: Ended
    """The namespace's tombstones, as the listing showed them."""
    last_key: str
    """Its last listed key: a listing for an older head starts after it."""
    written: datetime
    """Its manifest's ``LastModified`` in the listing."""


def _head_of(
    scope: Scope, page: ListPage, ended: Ended
) -> Generator[Batch, list[Any] | None, tuple[_Head | None, Ended]]:
    """Sub-plan: the newest checkpoint with a manifest in a listing of a namespace (spec §3).

    Writes without a manifest (a put still running) make no checkpoint, nor
    does a manifest stored well before a tombstone. The caller checks its epoch.
    """
    ns_pfx = keys.manifests_prefix(scope.thread_id, scope.checkpoint_ns)
    ended = tombstones_in(page.objects, ended)
    carried: list[ObjectInfo] = []
    while True:
        groups: dict[str, list[ObjectInfo]] = {}
        for o in [*carried, *page.objects]:
            rest = o.key[len(ns_pfx) :]
            if not rest.startswith(keys.TOMBSTONE_MARK):
                groups.setdefault(keys.reversed_id_of(rest), []).append(o)
        last = list(groups)[-1] if groups else None
        for seg, group in groups.items():
            if seg == last and page.truncated:
                break  # its keys may go on past this page
            group_keys = [o.key for o in group]
            manifests = checkpoint_manifests(group_keys)
            manifest = next((o for o in group if manifests and o.key == manifests[0]), None)
            if manifest is not None and not ended.written_before(manifest):
                writes = [
                    k for k in group_keys if k.startswith(ns_pfx + seg + keys.V2_WRITES_SUFFIX)
                ]
                cid, at = keys.unreverse_id(seg), manifest.last_modified
                head = _Head(cid, manifest.key, writes, ended, group_keys[-1], at)
                return head, ended
        else:
            if not page.truncated or not page.objects:
                return None, ended
            last = None
        carried = groups[last] if last is not None else []
        page = yield from run_one(ListKeys(ns_pfx, page.objects[-1].key, limit=LATEST_LIST_KEYS))


def _head_after(scope: Scope, head: _Head) -> Generator[Batch, list[Any] | None, _Head | None]:
    """Sub-plan: the next older head, after ``head`` turned out to be of an ended epoch."""
    ns_pfx = keys.manifests_prefix(scope.thread_id, scope.checkpoint_ns)
    page = yield from run_one(ListKeys(ns_pfx, head.last_key, limit=LATEST_LIST_KEYS))
    found, _ = yield from _head_of(scope, page, head.ended)
    return found


def get_tuple(ctx: Context, config: RunnableConfig) -> Step:
    """Plan: spec §6.2 (latest) and §6.3 (by id)."""
    scope = scope_of(config)
    cid = scope.checkpoint_id
    floor = ctx.epochs.of_thread(scope.thread_id) or 0
    if cid is None:
        guessed, ended = yield from _guessed_latest(ctx, scope, floor)
        # The root namespace holds a tombstone of every delete: its listing
        # tells the thread's epoch as of now (spec §4.11).
        ctx.saw_epoch(scope.thread_id, ended.epoch, confirmed=scope.checkpoint_ns == "")
        if guessed is None or isinstance(guessed, CheckpointTuple):
            return guessed
        head: _Head | None = guessed
        while head is not None:
            # None also when still arriving on this replica (spec §6.16).
            read = _read_head(ctx, head, head.ended.at_least(floor))
            found = yield from _unless_arriving(ctx, head.written, read)
            if isinstance(found, CheckpointTuple):
                ctx.heads.saw(scope.thread_id, scope.checkpoint_ns, head.checkpoint_id)
                return found
            # Of an ended epoch, or gone since it was listed: the next older one.
            head = yield from _head_after(scope, head)
        return None
    found = yield from find_checkpoint(scope.thread_id, scope.checkpoint_ns, cid, floor)
    if found is None:
        return None
    ctx.epochs.saw_checkpoint(scope.thread_id, scope.checkpoint_ns, cid, found.manifest.epoch)
    manifest = (found.manifest_key, found.manifest)
    read = read_tuples(ctx, [manifest], [config], [found.write_keys])
    tuples = yield from _unless_arriving(ctx, found.written, read)
    # None: not all here yet on this replica, as if not replicated (spec §6.16).
    return None if tuples is None else tuples[0]


def _unless_arriving(
    ctx: Context, written: datetime | None, plan: Generator[Batch, list[Any] | None, T]
) -> Generator[Batch, list[Any] | None, T | None]:
    """Sub-plan: ``plan``'s result, or None when what it reads is not in the bucket and may
    still be arriving: on a replica, within its lag of ``written``, when the checkpoint's
    manifest was stored (None: just now) (spec §6.16)."""
    try:
        return (yield from plan)
    except (MissingObjectError, ThreadKeyMissingError):
        lag = ctx.replica_lag
        if lag is None or (written is not None and ctx.wall_clock() - written.timestamp() > lag):
            raise
        return None


@dataclass(frozen=True)
class FoundCheckpoint:
    """A checkpoint read by id: its manifest (key, bytes, decoded) and its writes' keys."""

    manifest_key: str
    body: bytes
    manifest: Manifest
    write_keys: list[str]
    """Of both versions' places for a version-1 checkpoint (spec §4.7)."""
    written: datetime | None = None
    """Its manifest's ``LastModified`` in the listing (None: not listed yet)."""


def find_checkpoint(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, floor: int = 0
) -> Generator[Batch, list[Any] | None, FoundCheckpoint | None]:
    """Sub-plan: spec §6.3 step 1, a checkpoint's manifest and writes (None: no checkpoint,
    or one of an ended epoch or below ``floor``)."""
    ckey = keys.checkpoint_key(thread_id, checkpoint_ns, checkpoint_id)
    mkey = keys.manifest_key(thread_id, checkpoint_ns, checkpoint_id)
    body, page, tombs = yield from run_batch(
        Get(mkey),
        ListKeys(ckey),
        ListKeys(keys.tombstones_prefix(thread_id, checkpoint_ns), limit=1),
    )
    ended = tombstones_in(tombs.objects, Ended()).at_least(floor)
    infos = yield from list_infos(ckey, page=page)
    listed = [o.key for o in infos]
    writes = [k for k in listed if k.startswith(ckey + keys.V2_WRITES_SUFFIX)]
    if body is None:
        mkey = keys.v1_manifest_key(thread_id, checkpoint_ns, checkpoint_id)
        if mkey not in listed:
            return None
        body = yield from run_one(Get(mkey))
        if body is None:
            return None
    manifest = decode_checked_manifest(body, mkey)
    if not ended.live(manifest):
        return None
    if manifest.version == 1:
        old = keys.writes_prefix(thread_id, checkpoint_ns, checkpoint_id)
        writes = (yield from list_all(old)) + writes
    written = next((o.last_modified for o in infos if o.key == mkey), None)
    return FoundCheckpoint(mkey, body, manifest, writes, written)


def _read_head(
    ctx: Context, head: _Head, ended: Ended
) -> Generator[Batch, list[Any] | None, CheckpointTuple | None]:
    """Sub-plan: the tuple of a listed head (None: gone, or of an ended epoch), one round."""
    bodies = yield from run_batch(Get(head.manifest_key), *(Get(k) for k in head.write_keys))
    body = bodies[0]
    if body is None:
        return None  # deleted since it was listed
    manifest = decode_checked_manifest(body, head.manifest_key)
    m = manifest
    ctx.epochs.saw_checkpoint(m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.epoch)
    if not ended.live(manifest):
        return None
    fetched = dict(zip(head.write_keys, bodies[1:], strict=True))
    write_keys = None if manifest.version == 1 else [head.write_keys]
    tuples = yield from read_tuples(
        ctx, [(head.manifest_key, manifest)], None, write_keys, write_bodies=fetched
    )
    return tuples[0]


def _guessed_latest(
    ctx: Context, scope: Scope, floor: int
) -> Generator[Batch, list[Any] | None, tuple[CheckpointTuple | _Head | None, Ended]]:
    """Sub-plan: the latest lookup, decoding the remembered newest manifest while the LIST is
    in flight (spec §6.2): the tuple if the guess was right, else the head as listed."""
    guess = ctx.heads.get(scope.thread_id, scope.checkpoint_ns)
    remembered = None
    mkey = ""
    if guess is not None:
        mkey = keys.manifest_key(scope.thread_id, scope.checkpoint_ns, guess)
        remembered = ctx.entries.get(mkey)
    if remembered is None or remembered.manifest is None:
        page = yield from run_one(_newest_manifest(scope))
        return (yield from _head_of(scope, page, Ended().at_least(floor)))
    manifest = remembered.manifest

    def decoded() -> tuple[tuple[dict[str, Any], Any] | None, Exception | None]:
        # A checkpoint that is no longer the newest need not decode: its error
        # is raised only if the LIST shows the guess right.
        try:
            return values_from_memory(ctx, manifest, mkey), None
        except Exception as exc:  # noqa: BLE001  # raised below when it matters
            return None, exc

    (page,), (values, error) = yield from run_batch_while(decoded, _newest_manifest(scope))
    head, ended = yield from _head_of(scope, page, Ended().at_least(floor))
    if (
        head is None
        or head.checkpoint_id != guess
        or head.manifest_key != mkey
        or not ended.live(manifest)
    ):
        return head, ended
    if error is not None:
        raise error
    read = read_tuples(ctx, [(mkey, manifest)], [None], [head.write_keys], [values])
    tuples = yield from _unless_arriving(ctx, head.written, read)
    if tuples is None:
        return head, ended  # a listed write is still arriving: read as any head
    return tuples[0], ended


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
        tombstones: list[str] = []
        if only_id is not None and ns_given is not None:
            listed, tombs = yield from run_batch(
                ListKeys(prefix + keys.reverse_id(only_id)),
                ListKeys(prefix + keys.TOMBSTONE_MARK, limit=1),
            )
            tombstones = [o.key for o in tombs.objects]
            infos = yield from list_infos(prefix + keys.reverse_id(only_id), page=listed)
        else:
            if start_after is not None:
                tombs = yield from run_one(ListKeys(prefix + keys.TOMBSTONE_MARK, limit=1))
                tombstones = [o.key for o in tombs.objects]
            infos = yield from list_infos(prefix, start_after)
        listed = [o.key for o in infos]
        # Of every namespace listed (a whole thread's listing holds them all):
        # a manifest of an epoch a tombstone ended is not returned (spec §6.4).
        thread_id = keys.untoken(keys.split_thread_key(prefix)[0][len(keys.THREADS) : -1])
        known = ctx.epochs.of_thread(thread_id) if thread_id is not None else None
        current = max(
            [known or 0]
            + [e for k in tombstones + listed if (e := keys.tombstone_epoch_of(k)) is not None]
        )
        candidates = []
        for k in checkpoint_manifests(listed):
            cid = keys.checkpoint_id_of_manifest_key(k)
            if (before_id is not None and cid >= before_id) or (only_id and cid != only_id):
                continue
            candidates.append(k)
        # On a replica one checkpoint at a time: one still arriving is passed over alone.
        ahead = LIST_READ_AHEAD if ctx.replica_lag is None else 1
        written = {o.key: o.last_modified for o in infos} if ctx.replica_lag is not None else {}
        for start in range(0, len(candidates), ahead):
            group = candidates[start : start + ahead]
            read = _listed_tuples(ctx, group, current, filter, remaining)
            tuples = yield from _unless_arriving(ctx, written.get(group[0]), read)
            if tuples is None:
                continue  # still arriving on this replica (spec §6.16)
            for tup in tuples:
                yield Emit(tup)
            if remaining is not None:
                remaining -= len(tuples)
                if remaining == 0:
                    return None
    return None


def _listed_tuples(
    ctx: Context,
    group: list[str],
    current: int,
    filter: dict[str, Any] | None,
    remaining: int | None,
) -> Generator[Batch, list[Any] | None, list[CheckpointTuple]]:
    """Sub-plan: up to ``remaining`` tuples of listed manifests of the epoch in force,
    matching ``filter``."""
    bodies = yield from run_batch(*(Get(k) for k in group))
    matched: list[tuple[str, Manifest]] = []
    for k, body in zip(group, bodies, strict=True):
        if body is None:
            continue  # deleted since it was listed (or never existed for only_id)
        m = decode_checked_manifest(body, k)
        ctx.epochs.saw_checkpoint(m.thread_id, m.checkpoint_ns, m.checkpoint_id, m.epoch)
        if m.epoch < current:
            continue  # a late write of an ended epoch (spec §4.11)
        if filter:
            md = yield from read_metadata(ctx, m, k)
            if not all(md.get(fk) == fv for fk, fv in filter.items()):
                continue
        matched.append((k, m))
        if remaining is not None and len(matched) == remaining:
            break
    return (yield from read_tuples(ctx, matched))
