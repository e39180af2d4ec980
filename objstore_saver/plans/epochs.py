"""A thread's lifecycle (spec §4.11): which epoch a checkpoint belongs to, and which are ended."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from objstore_saver.format import keys
from objstore_saver.format.codec import Manifest
from objstore_saver.format.keys import Scope
from objstore_saver.plans.context import Context
from objstore_saver.plans.reading import read_checkpoint_manifest, read_manifests
from objstore_saver.plans.requests import Batch, ListKeys
from objstore_saver.storage.base import ListPage, ObjectInfo

#: A manifest stored this long before a tombstone was written before it, whatever the
#: skew of the store's clocks: of an ended epoch, passed over without a GET (spec §6.2).
TOMBSTONE_CLOCK_MARGIN = timedelta(seconds=2)


@dataclass(frozen=True)
class Ended:
    """What a namespace's tombstones say (spec §4.11): the epoch in force, and since when."""

    epoch: int = 0
    """Manifests of a lower epoch are not returned."""
    since: datetime | None = None
    """``LastModified`` of the newest tombstone listed, if any."""

    def at_least(self, epoch: int) -> Ended:
        return self if epoch <= self.epoch else Ended(epoch, self.since)

    def written_before(self, info: ObjectInfo) -> bool:
        """Whether a listed manifest was stored before the tombstone: of an ended epoch."""
        return self.since is not None and info.last_modified + TOMBSTONE_CLOCK_MARGIN < self.since

    def live(self, manifest: Manifest) -> bool:
        """Whether a manifest belongs to the epoch in force (or a later one)."""
        return manifest.epoch >= self.epoch


def tombstones_in(infos: list[ObjectInfo], ended: Ended) -> Ended:
    """``ended`` raised by the tombstones among listed keys, of any namespaces."""
    for info in infos:
        epoch = keys.tombstone_epoch_of(info.key)
        if epoch is not None and epoch > ended.epoch:
            ended = Ended(epoch, info.last_modified)
    return ended


def lineage_epoch(
    ctx: Context, scope: Scope, parent_id: str | None
) -> Generator[Batch, list[Any] | None, tuple[int, ListKeys | None]]:
    """Sub-plan: the epoch a new checkpoint belongs to (spec §6.1 step 1): its parent's, else
    the thread's, with the LIST that confirms a mere belief (the caller sends it)."""
    thread_id, ns = scope.thread_id, scope.checkpoint_ns
    if parent_id is not None:
        known = ctx.epochs.of_checkpoint(thread_id, ns, parent_id)
        if known is not None:
            return known, None
        found = yield from read_checkpoint_manifest(thread_id, ns, parent_id)
        if found is not None:
            ctx.epochs.saw_checkpoint(thread_id, ns, parent_id, found[1].epoch)
            return found[1].epoch, None
    known = ctx.epochs.of_thread(thread_id, ctx.trust_age)
    if known is not None:
        return known, None
    believed = ctx.epochs.of_thread(thread_id) or 0
    return believed, ListKeys(keys.tombstones_prefix(thread_id, ""), limit=1)


def listed_epoch(ctx: Context, thread_id: str, page: ListPage) -> int:
    """The thread's epoch a LIST of its root namespace's tombstones shows (spec §3.4)."""
    epoch = tombstones_in(page.objects, Ended()).epoch
    ctx.saw_epoch(thread_id, epoch)
    return epoch


def ended_manifests(
    listing_manifests: list[ObjectInfo],
    tombstones: list[ObjectInfo],
    read: dict[str, Manifest] | None = None,
) -> Generator[Batch, list[Any] | None, set[str]]:
    """Sub-plan: the listed manifests of a thread that belong to ended epochs (spec §4.11).

    One read as absent (gone, or sealed with a destroyed key) counts ended;
    ``read`` receives the live manifests read on the way.
    """
    ended = tombstones_in(tombstones, Ended())
    if ended.epoch == 0:
        return set()
    dead = {o.key for o in listing_manifests if ended.written_before(o)}
    later = [o.key for o in listing_manifests if o.key not in dead]
    got = yield from read_manifests(later)
    dead.update(k for k in later if k not in got or not ended.live(got[k]))
    if read is not None:
        read.update((k, m) for k, m in got.items() if ended.live(m))
    return dead
