"""The tombstones of a deleted thread, swept once their window has passed (spec §4.11).

A tombstone hides the late writes of the epochs it ends. Once a thread holds
nothing but tombstones, all older than the window (longer than any run
lives), prune deletes them: the thread id is then as if never used. A
conversation that begins on the id while they go is not lost: prune lists
the thread again after the delete and, if anything but a tombstone appeared,
stores the same tombstones again (create-only), so the new conversation's
epoch, which one of them began, is ended only by a later delete; and that
delete numbers its epoch by its clock (spec §6.6), above any epoch begun
before the window.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

from objstore_saver.format import codec, keys
from objstore_saver.plans.requests import Batch, Put, run_batch
from objstore_saver.plans.threads import ThreadListing, delete_keys, list_thread_keys
from objstore_saver.storage.base import PutMode

#: How long a deleted thread's tombstones are kept by default: far longer than
#: any run that could still write to the deleted epoch.
TOMBSTONE_WINDOW = timedelta(days=30)


def _written(listing: ThreadListing) -> bool:
    """Whether a listed thread holds anything but tombstones."""
    return bool(
        listing.manifests
        or listing.superseded
        or listing.writes
        or listing.objects
        or listing.runs
        or listing.marks
        or listing.unknown
    )


def sweep_tombstones(
    thread_id: str, listing: ThreadListing, window: timedelta, now: datetime, dry_run: bool
) -> Generator[Batch, list[Any] | None, tuple[int, int]]:
    """Sub-plan: delete a deleted thread's tombstones once the newest is ``window`` old.

    Returns (tombstones swept, tombstones stored again because the thread was
    written meanwhile). Nothing happens to a thread that holds anything else.
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
    # Written meanwhile: the tombstones go back, so no epoch they ended revives.
    yield from run_batch(*(_restored(thread_id, key) for key in swept))
    return 0, len(swept)


def _restored(thread_id: str, key: str) -> Put:
    epoch = keys.tombstone_epoch_of(key)
    assert epoch is not None  # listed as a tombstone
    return Put(key, codec.encode_tombstone(thread_id=thread_id, epoch=epoch), PutMode.CREATE)
