"""What verify learns of each content object, and how it reads keys (spec §6.11)."""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from objstore_saver.format.codec import (
    ChunkObj,
    Entry,
    IndexObj,
    IndexRef,
    InlineList,
    ListObj,
    NodeObj,
    PartObj,
    PartsObj,
    Ref,
    SegmentObj,
    SegmentRef,
    SplitObj,
    StoredObject,
    ValueObj,
)
from objstore_saver.plans.reading import LIST_TAG, child_refs
from objstore_saver.plans.requests import Batch, Get, Unopened, run_batch

#: Objects fetched per batch: bounds the bytes held at once.
GET_BATCH = 64


@dataclass
class Facts:
    """What was learnt of one content-addressed object."""

    kind: str
    #: References read at ``objects/<H>``, as (tag, digest).
    children: list[tuple[str, bytes]]
    #: Elements of a chunk or segment, or data bytes of a part (for shape checks).
    length: int = 0
    #: For lists: [(chunk, count)]; for parts indexes: (size, [part digests]).
    shape: Any = None
    #: A segment's located values, as (digest, checkpoint id): resolved in the
    #: namespace of each manifest whose list refers to the segment (spec §4.0).
    located: list[tuple[bytes, str]] = field(default_factory=list)
    #: An index's references (spec §4.4): located ones resolve like a
    #: segment's values; its ``length`` is the sum of their counts.
    indexed: list[IndexRef] = field(default_factory=list)


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
        refs = [e for e in obj.items if isinstance(e, Ref)]
        return Facts(
            "segment",
            [(e.tag, e.digest) for e in refs if e.at is None],
            length=len(obj.items),
            located=[(e.digest, e.at) for e in refs if e.at is not None],
        )
    if isinstance(obj, IndexObj):
        return Facts(
            "index",
            [c for c, r in zip(children, obj.refs, strict=True) if r.at is None],
            length=sum(r.count for r in obj.refs),
            indexed=list(obj.refs),
        )
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


#: A body verify read: bytes, None (absent), or what an encrypted store could not open.
Body = bytes | Unopened | None


def opened(body: bytes | Unopened) -> bytes:
    """The bytes of a body read; raises the store's error where a decode's are handled."""
    if isinstance(body, Unopened):
        raise body.error
    return body


def fetch(keys_: Sequence[str]) -> Generator[Batch, list[Any] | None, list[tuple[str, Body]]]:
    """Sub-plan: ``(key, body)`` of each key, ``GET_BATCH`` GETs a round."""
    out: list[tuple[str, Body]] = []
    for start in range(0, len(keys_), GET_BATCH):
        part = keys_[start : start + GET_BATCH]
        bodies = yield from run_batch(*(Get(k, unopened_as_result=True) for k in part))
        out.extend(zip(part, bodies, strict=True))
    return out


def fetch_groups(
    *groups: Sequence[str],
) -> Generator[Batch, list[Any] | None, list[list[tuple[str, Body]]]]:
    """Sub-plan: the bodies of several groups of keys; in one round when they fit a batch,
    else group after group, ``GET_BATCH`` at a time."""
    if sum(len(g) for g in groups) <= GET_BATCH:
        pairs = iter((yield from fetch([k for g in groups for k in g])))
        return [list(itertools.islice(pairs, len(g))) for g in groups]
    out = []
    for g in groups:
        out.append((yield from fetch(g)))
    return out


@dataclass
class EntryRefs:
    """The references of some entries (a manifest's or a write's), by where they are read."""

    #: Every reference read at ``objects/<H>``, as (tag, digest): values and
    #: segments that stand alone, v1 subtrees, parts, lists, splits.
    alone: list[tuple[str, bytes]]
    #: Version 1 subtrees of inline lists, as (digest, element count).
    sealed: list[tuple[bytes, int]]
    #: Every segment of the inline lists, located or not.
    segments: list[SegmentRef]
    #: Located values (in the entries and in inline lists' tails), as
    #: (digest, checkpoint id of the manifest said to embed it).
    values: list[tuple[bytes, str]]


def split_refs(entries: Iterable[Entry]) -> EntryRefs:
    """References of one manifest's or write's entries, split by where each is read.

    A segment located anywhere in ``entries`` is not read at ``objects/<H>``
    (readers resolve it by digest); an unlocated value reference is (spec §4.0).
    """
    entries = list(entries)
    lists = [e.obj for e in entries if isinstance(e, InlineList)]
    segments = [g for o in lists for g in o.segments]
    located = {g.digest for g in segments if g.loc is not None}
    out = EntryRefs([], [s for o in lists for s in o.sealed], segments, [])
    for e in entries:
        items: Iterable[Entry] = (e,)
        if isinstance(e, InlineList):
            out.alone += [("c", d) for d, _ in e.obj.sealed]
            out.alone += [
                (LIST_TAG[g.index], g.digest) for g in e.obj.segments if g.digest not in located
            ]
            items = e.obj.tail
        for item in items:
            if isinstance(item, Ref) and item.at is not None:
                out.values.append((item.digest, item.at))
            elif isinstance(item, Ref):
                out.alone.append((item.tag, item.digest))
    return out


def located_outside(digest: bytes, at: str, holder: str) -> str:
    """Why a value located in checkpoint ``at`` cannot be resolved: ``holder`` is no version-2
    manifest, in whose namespace locations resolve (spec §4.0)."""
    return (
        f"locates value {digest.hex()} in checkpoint {at!r}, but is read through "
        f"{holder!r}, not a version-2 manifest"
    )
