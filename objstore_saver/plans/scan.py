"""Finding every thread of a store: one ordered listing, or key ranges side by side (§6.12).

A flat listing of ``threads/`` reads one page of 1,000 keys per round trip:
one page after the other, it finds about 125 small threads per round trip
however many requests the job could have in flight. Once a bucket holds more
than a page, :func:`scan_threads_ranged` cuts the rest of the key space into
ranges by the first character of the thread token and lists the ranges side by
side, one page of each per round trip.

Why the cuts are safe: a cut is ``threads/<c>`` for one character ``c`` of the
key alphabet, which holds no ``/``. Every key of a thread starts with
``threads/<token>/``, so all of them sort on the same side of a cut: a thread
is never split between two ranges, and each thread is emitted once, whole.
Ids that share their first character (``user-...``) land in one range and are
listed one page after the other, as by the flat listing.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import keys
from objstore_saver.plans.requests import Batch, Emit, ListKeys, run_batch
from objstore_saver.plans.threads import ThreadListing
from objstore_saver.storage.base import MAX_LIST_PAGE, ListPage

#: The characters a key may hold other than ``/``, in byte order (the order S3 lists in).
TOKEN_CHARS = "".join(sorted("%-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~"))
#: Ranges listed at once; more non-empty first characters are merged into fewer ranges.
DEFAULT_MAX_RANGES = 32


@dataclass
class _Range:
    """One range of thread keys: after ``after``, up to the cut ``end`` (None: the last)."""

    after: str | None
    end: str | None
    current: ThreadListing | None = None
    done: bool = False


def _file(rng: _Range, page: ListPage, ready: list[ThreadListing]) -> None:
    """Add a page's keys to the range; threads the range moved past go to ``ready``."""
    for info in page.objects:
        if rng.end is not None and info.key > rng.end:
            rng.done = True  # the next range's keys
            break
        try:
            pfx, _ = keys.split_thread_key(info.key)
        except ValueError:
            raise CorruptObjectError(info.key, "not a key the format defines") from None
        if rng.current is None or rng.current.pfx != pfx:
            if rng.current is not None:
                ready.append(rng.current)
            rng.current = ThreadListing(pfx)
        rng.current.add(info)
    if not page.truncated or not page.objects:
        rng.done = True
    elif not rng.done:
        rng.after = page.objects[-1].key
    if rng.done and rng.current is not None:
        ready.append(rng.current)
        rng.current = None


def _cuts(first: list[str], max_ranges: int) -> list[str]:
    """At most ``max_ranges - 1`` cuts among the non-empty first characters, evenly spread."""
    if len(first) < max_ranges:
        return first
    step = len(first) / (max_ranges - 1)
    return sorted({first[int(i * step)] for i in range(max_ranges - 1)})


def scan_threads(
    start_after: str | None = None, page_size: int = MAX_LIST_PAGE
) -> Generator[Batch | Emit, list[Any] | None, int]:
    """Plan: every thread after ``start_after`` (a key or thread prefix), in key order.

    One flat listing of ``threads/``: a thread is emitted, as a
    :class:`ThreadListing`, once the listing has moved past it; only the
    thread being listed is held. The order is what a resumable job's cursor
    needs. Returns the number of LISTs.
    """
    return (yield from _list_ranges([_Range(start_after, None)], page_size))


def _list_ranges(
    active: list[_Range], page_size: int, *, once: bool = False
) -> Generator[Batch | Emit, list[Any] | None, int]:
    """Sub-plan: list the ranges side by side, one page of each a round (``once``: one
    round); the LISTs sent."""
    lists = 0
    while active:
        pages = yield from run_batch(
            *(ListKeys(keys.THREADS, rng.after, page_size) for rng in active)
        )
        lists += len(active)
        ready: list[ThreadListing] = []
        for rng, page in zip(active, pages, strict=True):
            _file(rng, page, ready)
        for listing in ready:
            yield Emit(listing)
        active = [] if once else [rng for rng in active if not rng.done]
    return lists


def scan_threads_ranged(
    page_size: int = MAX_LIST_PAGE, max_ranges: int = DEFAULT_MAX_RANGES
) -> Generator[Batch | Emit, list[Any] | None, int]:
    """Plan: every thread of the store, each emitted once as a :class:`ThreadListing`.

    The first page is the flat listing's. If the store holds more, one round
    of one-key LISTs finds which first characters after the last listed
    thread's are in use; those start up to ``max_ranges`` ranges (1: the flat
    listing), listed side by side until each reaches the next one's cut.
    Threads come out in no particular order across ranges. Returns the
    number of LISTs.
    """
    head = _Range(None, None)
    lists = yield from _list_ranges([head], page_size, once=True)
    if head.done:
        return lists
    assert head.after is not None  # a truncated page holds keys
    later = [c for c in TOKEN_CHARS if c > head.after[len(keys.THREADS)]]
    ranges = [head]
    if max_ranges > 1 and later:
        probes = yield from run_batch(*(ListKeys(keys.THREADS, keys.THREADS + c, 1) for c in later))
        lists += len(later)
        first = sorted({page.objects[0].key[len(keys.THREADS)] for page in probes if page.objects})
        cuts = [keys.THREADS + c for c in _cuts(first, max_ranges)]
        ends = [*cuts, None]
        head.end = ends[0]
        # A range starts after its cut: ``threads/<c>`` sorts before every key
        # whose token starts with ``c`` and after every key of a smaller one.
        ranges += [_Range(cut, end) for cut, end in zip(cuts, ends[1:], strict=True)]
    return lists + (yield from _list_ranges(ranges, page_size))
