"""What verify learns of each content object, and how it reads them (spec §6.11).

Pure helpers of :mod:`objstore_saver.verify`: the facts kept of a decoded
object (kind, children, counts), the references of entries split by where
they are read, and the sub-plans that fetch keys in bounded batches.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from objstore_saver.format.codec import (
    ChunkObj,
    Entry,
    InlineList,
    ListObj,
    NodeObj,
    PartObj,
    PartsObj,
    SegmentObj,
    SegmentRef,
    SplitObj,
    StoredObject,
    ValueObj,
)
from objstore_saver.plans import child_refs, entry_refs
from objstore_saver.plans.requests import Batch, Get, run_batch

#: Objects fetched per batch: bounds the bytes held at once.
GET_BATCH = 64


@dataclass
class Facts:
    """What was learnt of one content-addressed object."""

    kind: str
    children: list[tuple[str, bytes]]
    #: Elements of a chunk or segment, or data bytes of a part (for shape checks).
    length: int = 0
    #: For lists: [(chunk, count)]; for parts indexes: (size, [part digests]).
    shape: Any = None


def facts_of(obj: StoredObject) -> Facts:
    """What verify keeps of a decoded object: its kind, children and counts."""
    children = child_refs(obj)
    if isinstance(obj, ValueObj):
        return Facts("value", children)
    if isinstance(obj, PartObj):
        return Facts("part", children, length=len(obj.data))
    if isinstance(obj, PartsObj):
        return Facts("parts", children, shape=obj.size)
    if isinstance(obj, ListObj):
        return Facts("list", children, shape=list(obj.sealed))
    if isinstance(obj, NodeObj):
        return Facts("node", children, shape=list(obj.subtrees))
    if isinstance(obj, SplitObj):
        return Facts("split", children)
    if isinstance(obj, SegmentObj):
        return Facts("segment", children, length=len(obj.items))
    assert isinstance(obj, ChunkObj)
    return Facts("chunk", children, length=len(obj.items))


def held_in(facts: dict[bytes, Facts], digest: bytes) -> int | None:
    """Elements under a chunk or node, as its own object says (None if unknown)."""
    f = facts.get(digest)
    if f is None:
        return None
    if f.kind == "chunk":
        return f.length
    if f.kind == "node":
        return sum(n for _, n in f.shape)
    return None


def fetch(
    keys_: Sequence[str],
) -> Generator[Batch, list[Any] | None, list[tuple[str, bytes | None]]]:
    """Sub-plan: ``(key, body or None)`` of each key, ``GET_BATCH`` GETs a round."""
    out: list[tuple[str, bytes | None]] = []
    for start in range(0, len(keys_), GET_BATCH):
        part = keys_[start : start + GET_BATCH]
        bodies = yield from run_batch(*(Get(k) for k in part))
        out.extend(zip(part, bodies, strict=True))
    return out


def fetch_groups(
    *groups: Sequence[str],
) -> Generator[Batch, list[Any] | None, list[list[tuple[str, bytes | None]]]]:
    """Sub-plan: the bodies of several groups of keys; in one round when they fit a batch.

    A small thread (most) is read in one round of requests; a larger one group
    after group, ``GET_BATCH`` at a time, which bounds the bytes held at once.
    """
    if sum(len(g) for g in groups) <= GET_BATCH:
        every = [k for g in groups for k in g]
        bodies = yield from run_batch(*(Get(k) for k in every))
        pairs = list(zip(every, bodies, strict=True))
        out, start = [], 0
        for g in groups:
            out.append(pairs[start : start + len(g)])
            start += len(g)
        return out
    out = []
    for g in groups:
        out.append((yield from fetch(g)))
    return out


def split_refs(
    entries: Iterable[Entry],
) -> tuple[list[tuple[str, bytes]], list[tuple[bytes, int]], list[SegmentRef]]:
    """References of entries: those to ``objects/<H>``, v1 subtrees of inline lists, segments.

    The first list holds every reference read at ``objects/<H>`` (segments
    that stand alone among them); located segments are only in the last.
    """
    entries = list(entries)
    lists = [e.obj for e in entries if isinstance(e, InlineList)]
    sealed = [s for o in lists for s in o.sealed]
    segments = [g for o in lists for g in o.segments]
    located = {g.digest for g in segments if g.loc is not None}
    alone = [(t, d) for t, d in entry_refs(entries) if not (t == "g" and d in located)]
    return alone, sealed, segments
