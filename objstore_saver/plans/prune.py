"""The retention plan: keep the newest checkpoints, mark and sweep the rest; sweep the
tombstones a window has outlived (spec §6.9, §4.11)."""

from __future__ import annotations

import bisect
import dataclasses
import os
import time
from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from objstore_saver.errors import MissingObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Manifest
from objstore_saver.plans.context import LIST_READ_AHEAD, Context, Step
from objstore_saver.plans.epochs import ended_manifests
from objstore_saver.plans.prune_rules import PruneStats, Rules, prune_report, prune_rules
from objstore_saver.plans.reading import (
    checkpoint_manifests,
    fetch_entries,
    read_checkpoint_manifest,
    read_manifests,
    read_metadata,
    read_writes,
)
from objstore_saver.plans.requests import (
    Batch,
    Get,
    ListKeys,
    Put,
    list_all,
    list_infos,
    run_batch,
    run_one,
)
from objstore_saver.plans.threads import (
    ThreadListing,
    delete_keys,
    delete_listing,
    digest_of_key,
    hex_name,
    list_thread,
    list_thread_keys,
    oldest_first,
)
from objstore_saver.plans.writing import embedded_in, store_embedded
from objstore_saver.storage.base import ObjectInfo


def _delta_channels(metadata: Mapping[str, Any]) -> set[str]:
    counters = metadata.get("counters_since_delta_snapshot") or {}
    return set(counters) if isinstance(counters, Mapping) else set()


def _reach(
    ctx: Context, pfx: str, manifests: Iterable[tuple[str, Manifest]], write_keys: Sequence[str]
) -> Generator[Batch, list[Any] | None, set[bytes]]:
    """Sub-plan: digests of every object the manifests and writes reach (structure only)."""
    reached: set[bytes] = set()
    for mkey, m in manifests:
        entries = [m.checkpoint, m.metadata, *m.channels.values()]
        yield from fetch_entries(ctx, pfx, entries, mkey, holders=[(mkey, m)], reached=reached)
    for start in range(0, len(write_keys), LIST_READ_AHEAD * 4):
        group = write_keys[start : start + LIST_READ_AHEAD * 4]
        writes = yield from read_writes(group)
        yield from fetch_entries(ctx, pfx, [w.value for w in writes], pfx, reached=reached)
    return reached


def _select_kept(
    ctx: Context,
    thread_id: str,
    listing: ThreadListing,
    keep_last: int,
    young_after: datetime | None,
    ended: Collection[str],
    known: Mapping[str, Manifest],
) -> Generator[Batch, list[Any] | None, dict[str, Manifest]]:
    """Sub-plan: the manifests a prune keeps (spec §6.9), never one of an ended epoch (§4.11)."""
    by_ns: dict[str, list[ObjectInfo]] = {}
    for info in listing.manifests:
        if info.key in ended:
            continue
        ns_tok, _ = keys.namespace_of_manifest_key(info.key)
        by_ns.setdefault(ns_tok, []).append(info)  # newest first within a namespace
    root_tok = keys.token("checkpoint_ns", "")
    roots = by_ns.get(root_tok, [])
    chosen = [o.key for o in roots[:keep_last]]

    def young(o: ObjectInfo) -> bool:  # the age rule: younger than older_than
        return young_after is not None and o.last_modified > young_after

    chosen += [o.key for o in roots[keep_last:] if young(o)]  # beyond keep_last, old ones only go
    root_ids = sorted(keys.checkpoint_id_of_manifest_key(o.key) for o in roots)
    kept_root_ids = {keys.checkpoint_id_of_manifest_key(k) for k in chosen}
    for ns_tok, infos in by_ns.items():
        if ns_tok == root_tok:
            continue
        newest_per_run: dict[str | None, str] = {}
        for info in infos:
            cid = keys.checkpoint_id_of_manifest_key(info.key)
            # The run it belongs to: the newest root checkpoint not newer than it
            # (checkpoint ids are time-ordered); older than every root: the oldest.
            owner: str | None = None
            if root_ids:
                owner = root_ids[max(bisect.bisect_right(root_ids, cid) - 1, 0)]
                if owner not in kept_root_ids:
                    continue
            newest_per_run.setdefault(owner, info.key)
        chosen += newest_per_run.values()
    picked = set(chosen)  # the age rule holds in every namespace, whatever the run
    chosen += [o.key for infos in by_ns.values() for o in infos if young(o) and o.key not in picked]

    kept = yield from read_manifests(chosen, known)
    # Keep the ancestors a DeltaChannel of a kept checkpoint replays, up to its seed.
    for key, m in list(kept.items()):
        pending = _delta_channels((yield from read_metadata(ctx, m, key))) - set(m.channels)
        cursor = m
        while pending and cursor.parent_checkpoint_id:
            ns, pid = cursor.checkpoint_ns, cursor.parent_checkpoint_id
            pkey = keys.manifest_key(thread_id, ns, pid)
            v1_key = keys.v1_manifest_key(thread_id, ns, pid)
            parent = kept.get(pkey) or kept.get(v1_key)
            if parent is None:
                found = yield from read_checkpoint_manifest(thread_id, ns, pid)
                if found is None:
                    break
                pkey, parent = found
                kept[pkey] = parent
            pending -= set(parent.channels)
            cursor = parent
    return kept


def _orphan_writes(
    pfx: str, listing: ThreadListing, old_before: datetime
) -> Generator[Batch, list[Any] | None, set[str]]:
    """Sub-plan: writes stored by ``old_before`` whose checkpoint has no manifest, in the
    listing or now (§6.9 step 2)."""
    listed = {listing.key_parts(o.key).checkpoint for o in listing.manifests}
    candidates = [
        o.key
        for o in listing.writes
        if listing.key_parts(o.key).checkpoint not in listed and o.last_modified <= old_before
    ]
    if not candidates:
        return set()
    fresh = checkpoint_manifests((yield from list_all(pfx + "checkpoints/")))
    present = {listing.key_parts(k).checkpoint for k in fresh}
    return {k for k in candidates if listing.key_parts(k).checkpoint not in present}


def _prune_thread(
    ctx: Context, thread_id: str, r: Rules, listing: ThreadListing | None = None
) -> Generator[Batch, list[Any] | None, PruneStats]:
    """Sub-plan: one thread of ``prune(strategy="keep_latest")``, spec §6.9 steps 1-5."""
    assert r.keep_last is not None
    stats = PruneStats(thread_id)
    pfx = keys.thread_prefix(thread_id)
    if listing is None:
        listing = yield from list_thread(pfx)
    lag = ctx.replica_lag
    if any(o.last_modified > r.now - r.sweep_delay for o in listing.marks):
        stats.left_alone = "deferred"
    elif lag is not None and listing.written_after(r.now - timedelta(seconds=lag)):
        stats.left_alone = "arriving"  # what is missing may arrive within the lag (§6.16)
    if stats.left_alone is not None:
        stats.deferred = True
        return stats
    young_after = None if r.older_than is None else r.now - r.older_than
    # Late writes of an ended epoch, and what a delete that stopped left: not kept.
    seen: dict[str, Manifest] = {}  # manifests the epoch check read: not read twice
    ended = yield from ended_manifests(listing.manifests, listing.tombstones, seen)
    kept = yield from _select_kept(ctx, thread_id, listing, r.keep_last, young_after, ended, seen)
    doomed = [o.key for o in listing.manifests if o.key not in kept]
    stats.checkpoints_kept = len(kept)
    stats.checkpoints_deleted = len(doomed)
    doomed_checkpoints = {listing.key_parts(k).checkpoint for k in doomed}
    doomed_writes = [
        o.key for o in listing.writes if listing.key_parts(o.key).checkpoint in doomed_checkpoints
    ]
    # A doomed checkpoint's version-1 manifest, where upgrade left one, goes with it.
    doomed_superseded = [
        o.key
        for o in listing.superseded
        if listing.key_parts(o.key).checkpoint in doomed_checkpoints
    ]
    # A checkpoint's writes may be stored before its manifest (also by up to a
    # replica's lag, spec §6.16): only a write older than the reuse window is an orphan.
    orphan_age = max(r.min_age, timedelta(seconds=ctx.reuse_window + (ctx.replica_lag or 0)))
    orphans = yield from _orphan_writes(pfx, listing, r.now - orphan_age)
    other_writes = [
        o.key
        for o in listing.writes
        if listing.key_parts(o.key).checkpoint not in doomed_checkpoints and o.key not in orphans
    ]
    stats.writes_deleted = len(doomed_writes)
    stats.orphan_writes_deleted = len(orphans)
    live = yield from _reach(ctx, pfx, kept.items(), other_writes)
    swept: set[bytes] = set()
    doomed_manifests: dict[str, Manifest] | None = None

    if listing.marks:
        # Step 3, the sweep, runs before this run deletes any manifest: what the
        # doomed checkpoints reach is still referenced, and only marked next.
        everything = set(live)
        doomed_manifests = yield from read_manifests(doomed, seen)
        everything |= yield from _reach(ctx, pfx, doomed_manifests.items(), doomed_writes)
        # Manifests and writes that appeared since the listing (after its objects).
        listed = {o.key for o in listing.manifests} | {o.key for o in listing.writes}
        fresh = yield from list_all(pfx + "checkpoints/")
        fresh_manifests = checkpoint_manifests(fresh)
        fresh_writes = [k for k in fresh if keys.parse_checkpoint_key(k).kind == "write"]
        fresh_writes += yield from list_all(pfx + "writes/")
        newer = yield from read_manifests([k for k in fresh_manifests if k not in listed])
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
        current = yield from list_infos(pfx + "objects/")
        victims = [
            o
            for o in current
            if hex_name(o.key, 64)
            and (d := digest_of_key(o.key)) in marked_at
            and d not in everything
            # Renewed (re-PUT by a writer) since it was marked: not a candidate.
            # Strictly older: LastModified has one-second resolution on S3.
            and o.last_modified < marked_at[d]
        ]
        swept = {digest_of_key(o.key) for o in victims}
        stats.objects_swept = len(victims)
        stats.bytes_swept = sum(o.size for o in victims)
        stats.marks_executed = len(listing.marks)
        if not r.dry_run:
            ctx.objects.forget(pfx, swept)  # before deleting, as in delete_thread
            yield from delete_keys([o.key for o in victims])
            yield from delete_keys([o.key for o in listing.marks])

    # Step 4: manifests before the writes and objects only they reach; what a
    # manifest embeds is stored alone before it goes (kept ones may locate it there).
    if doomed_manifests is None:  # a version-1 manifest embeds nothing: not read
        v2 = [k for k in doomed if listing.key_parts(k).version == 2]
        doomed_manifests = yield from read_manifests(v2, seen)
    # A manifest deleted since it was listed is left out: whatever deleted it
    # stored its objects first, or deleted the whole thread.
    extracted = embedded_in(doomed_manifests.values())
    stats.objects_extracted = len(extracted)
    if not r.dry_run:
        yield from store_embedded(ctx, pfx, extracted)
        ctx.entries.forget(doomed)  # before deleting, as in delete_thread
        yield from delete_keys(
            doomed_superseded + oldest_first(o for o in listing.manifests if o.key not in kept)
        )
        yield from delete_keys(doomed_writes + sorted(orphans))
    # Objects an ended epoch's destroyed key sealed: nothing can read them (spec §4.11).
    leftovers = [o for o in listing.objects if hex_name(o.key, keys.SEALED_NAME_LEN)]
    stats.objects_swept += len(leftovers)
    stats.bytes_swept += sum(o.size for o in leftovers)
    if leftovers and not r.dry_run:
        yield from delete_keys([o.key for o in leftovers])

    # Step 5: mark what no kept checkpoint reaches and is older than min_age.
    candidates = [
        o
        for o in listing.objects
        if hex_name(o.key, 64)
        and (d := digest_of_key(o.key)) not in live
        and d not in swept
        and o.last_modified <= r.now - r.min_age
    ]
    stats.objects_marked = len(candidates)
    stats.bytes_marked = sum(o.size for o in candidates)
    if candidates and not r.dry_run:
        key = keys.mark_key(thread_id, time.time_ns(), os.urandom(4).hex())
        yield from run_one(Put(key, codec.encode_mark([digest_of_key(o.key) for o in candidates])))
    return stats


def _delete_thread(
    ctx: Context, thread_id: str, listing: ThreadListing, dry_run: bool
) -> Generator[Batch, list[Any] | None, PruneStats]:
    """Sub-plan: ``delete_thread`` on a listing (spec §6.6 step 2), with its counts."""
    stats = PruneStats(
        thread_id,
        checkpoints_deleted=len(listing.manifests),
        writes_deleted=len(listing.writes),
        objects_swept=len(listing.objects),
        bytes_swept=sum(o.size for o in listing.objects),
    )
    if not dry_run:
        yield from delete_listing(ctx, thread_id, listing)
    return stats


def _still_idle(listing: ThreadListing, cutoff: datetime) -> bool:
    """Spec §6.9 "The idle rule" step 3: nothing a writer makes is newer than ``cutoff``."""
    touched = listing.manifests + listing.writes
    if not listing.manifests:
        touched += listing.objects + listing.runs
    # A thread that holds nothing (but marks) has nothing to act on: not idle.
    return bool(touched) and all(o.last_modified <= cutoff for o in touched)


def _newest_root(
    thread_id: str, listing: ThreadListing | None
) -> Generator[Batch, list[Any] | None, ObjectInfo | None]:
    """Sub-plan: the newest root checkpoint's key, from the listing, else one LIST of one key."""
    root = keys.manifests_prefix(thread_id, "")
    if listing is not None:
        return next((o for o in listing.manifests if o.key.startswith(root)), None)
    page = yield from run_one(ListKeys(root, limit=1))
    return page.objects[0] if page.objects else None


def _retain_thread(
    ctx: Context, thread_id: str, r: Rules, listing: ThreadListing | None = None
) -> Generator[Batch, list[Any] | None, PruneStats]:
    """Sub-plan: one thread of ``keep_latest`` with the idle and age rules (spec §6.9)."""
    newest_at: str | None = None
    if r.idle_for is not None:
        cutoff = r.now - r.idle_for
        # Step 1: the newest root checkpoint's LastModified decides, no read.
        newest = yield from _newest_root(thread_id, listing)
        newest_at = None if newest is None else newest.last_modified.isoformat()
        if newest is None or newest.last_modified <= cutoff:
            if listing is None:
                listing = yield from list_thread(keys.thread_prefix(thread_id))
            if _still_idle(listing, cutoff):
                if r.idle_action == "delete":
                    stats = yield from _delete_thread(ctx, thread_id, listing, r.dry_run)
                else:
                    idle = dataclasses.replace(r, keep_last=1, older_than=None)
                    stats = yield from _prune_thread(ctx, thread_id, idle, listing)
                stats.idle = True
                stats.newest_root_at = newest_at
                return stats
    if r.keep_last is None:  # the idle rule alone: an active thread is left alone
        return PruneStats(thread_id, newest_root_at=newest_at, left_alone="not_idle")
    stats = yield from _prune_thread(ctx, thread_id, r, listing)
    stats.newest_root_at = newest_at
    return stats


def prune_thread(
    ctx: Context, thread_id: str, strategy: str, rules: Rules, listing: ThreadListing | None = None
) -> Generator[Batch, list[Any] | None, dict[str, Any]]:
    """Sub-plan: one thread of a prune (``rules`` from :func:`prune_rules`); its report row."""
    if strategy in ("delete", "delete_all"):
        if listing is None:
            listing = yield from list_thread(keys.thread_prefix(thread_id))
        stats = yield from _delete_thread(ctx, thread_id, listing, rules.dry_run)
    else:
        stats = yield from _retain_thread(ctx, thread_id, rules, listing)
        quiet = not (stats.checkpoints_kept or stats.checkpoints_deleted or stats.deferred)
        if quiet and (listing is not None or stats.left_alone is None):
            # Nothing live: a deleted thread's tombstones may be due (spec §4.11).
            if listing is None:
                listing = yield from list_thread_keys(keys.thread_prefix(thread_id))
            swept, restored = yield from sweep_tombstones(
                thread_id, listing, rules.tombstone_window, rules.now, rules.dry_run
            )
            stats.tombstones_swept, stats.tombstones_restored = swept, restored
    return stats.to_dict()


def prune(
    ctx: Context, thread_ids: Sequence[str], strategy: str = "keep_latest", **options: Any
) -> Step:
    """Plan: spec §6.9 with the rules of :func:`prune_rules`; a JSON-serializable report."""
    rules = prune_rules(ctx, strategy, **options)
    for thread_id in thread_ids:
        keys.thread_prefix(thread_id)  # rejects a bad id before anything is deleted
    threads: list[dict[str, Any]] = []
    for thread_id in thread_ids:
        threads.append((yield from prune_thread(ctx, thread_id, strategy, rules)))
    return prune_report(strategy, rules, threads)


def _written(listing: ThreadListing) -> bool:
    """Whether a listed thread holds anything but tombstones."""
    return len(listing.every()) > len(listing.tombstones)


def sweep_tombstones(
    thread_id: str, listing: ThreadListing, window: timedelta, now: datetime, dry_run: bool
) -> Generator[Batch, list[Any] | None, tuple[int, int]]:
    """Sub-plan: delete a deleted thread's tombstones once the newest is ``window`` old (§4.11).

    If anything but a tombstone appeared meanwhile, they are stored again
    (create-only), so no epoch they ended revives. Returns (swept, stored again).
    """
    if not listing.tombstones or _written(listing):
        return 0, 0
    if now - max(o.last_modified for o in listing.tombstones) < window:
        return 0, 0
    swept = [o.key for o in listing.tombstones]
    if dry_run:
        return len(swept), 0
    yield from delete_keys(swept)
    if not _written((yield from list_thread_keys(listing.pfx))):
        return len(swept), 0
    yield from run_batch(*(_restored(thread_id, key) for key in swept))
    return 0, len(swept)


def _restored(thread_id: str, key: str) -> Put:
    epoch = keys.tombstone_epoch_of(key)
    assert epoch is not None  # listed as a tombstone
    return Put(key, codec.encode_tombstone(thread_id=thread_id, epoch=epoch))  # create-only
