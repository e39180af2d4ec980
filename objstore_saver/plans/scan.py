"""Finding every thread of a store: one ordered listing, or key ranges side by side (§6.12).

A cut is ``threads/<c>`` for one character ``c`` of the key alphabet, which
holds no ``/``: every key of a thread sorts on the same side of it, so a
thread is never split between two ranges and is emitted once, whole.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
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
    """Thread keys after ``after``, up to the cut ``end`` (None: the last)."""

    after: str | None
    end: str | None
    current: ThreadListing | None = None
    filing: bool = True
    done: bool = False


def _file(
    rng: _Range, page: ListPage, ready: list[ThreadListing], owns: Callable[[str], bool] | None
) -> None:
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
            # Another worker's thread goes out with no keys: counted, then skipped
            # by the fan-out, without filing (parsing) keys no one here reads.
            rng.filing = owns is None or owns(pfx)
        if rng.filing:
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

    Each is emitted as a :class:`ThreadListing` once the flat listing of
    ``threads/`` has moved past it. Returns the number of LISTs.
    """
    return (yield from _list_ranges([_Range(start_after, None)], page_size, None))


def _list_ranges(
    active: list[_Range],
    page_size: int,
    owns: Callable[[str], bool] | None,
    *,
    once: bool = False,
) -> Generator[Batch | Emit, list[Any] | None, int]:
    """Sub-plan: the ranges side by side, a page of each a round (``once``: one round); LISTs."""
    lists = 0
    while active:
        pages = yield from run_batch(
            *(ListKeys(keys.THREADS, rng.after, page_size) for rng in active)
        )
        lists += len(active)
        ready: list[ThreadListing] = []
        for rng, page in zip(active, pages, strict=True):
            _file(rng, page, ready, owns)
        for listing in ready:
            yield Emit(listing)
        active = [] if once else [rng for rng in active if not rng.done]
    return lists


def scan_threads_ranged(
    page_size: int = MAX_LIST_PAGE,
    max_ranges: int = DEFAULT_MAX_RANGES,
    owns: Callable[[str], bool] | None = None,
) -> Generator[Batch | Emit, list[Any] | None, int]:
    """Plan: every thread of the store, each emitted once as a :class:`ThreadListing`.

    After the first page, one-key LISTs find the first characters in use;
    those start up to ``max_ranges`` ranges, listed side by side (threads in
    no particular order across ranges). Returns the number of LISTs. A thread
    whose prefix ``owns`` refuses is emitted with no keys.
    """
    head = _Range(None, None)
    lists = yield from _list_ranges([head], page_size, owns, once=True)
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
    return lists + (yield from _list_ranges(ranges, page_size, owns))
