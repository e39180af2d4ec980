"""Encoding of list values element by element (spec §4.4): segments, indexes, the inline list.

The layout is a function of the elements and where they are, so sealed segments
and full indexes keep their hashes as a list grows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack

from objstore_saver.format import codec, keys, value_encoding


@dataclass(frozen=True, slots=True)
class EncodedElement:
    """One list element as encoded: its entry and the objects behind it."""

    item: list[Any]
    digest: bytes | None
    objects: dict[bytes, bytes]
    children: dict[bytes, tuple[bytes, ...]]
    size: int = field(init=False)  # the entry's packed bytes (what the merge rule weighs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", len(msgpack.packb(self.item, use_bin_type=True)))


#: What an encoded element is a function of: ``(type, serialized bytes)`` and any epoch.
ElementKey = tuple[Any, ...]


def element_key(pair: tuple[str, bytes], epoch: int) -> ElementKey:
    """The cache key of a serialized element encoded for the thread's ``epoch``."""
    return pair if not epoch else (*pair, epoch)


class ElementCache(Protocol):
    """Where :func:`encode_list` keeps elements it encoded, by serialized bytes."""

    def get(self, key: ElementKey) -> EncodedElement | None: ...

    def put(self, key: ElementKey, value: EncodedElement) -> None: ...


@dataclass(frozen=True, slots=True)
class SealedObject:
    """A segment as encoded: its address, bytes, entries (``items``, for a merge to copy,
    ``size`` their packed bytes), and its elements' objects and their references."""

    digest: bytes
    body: bytes
    children: tuple[bytes, ...]
    element_objects: dict[bytes, bytes] = field(default_factory=dict)
    element_children: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)
    items: tuple[list[Any], ...] = ()
    size: int = 0


#: What a segment is a function of: ``("g", *element keys)`` for a seal,
#: ``("m", *digests)`` for a merge (of the segments those digests fix).
SealedKey = tuple[object, ...]


class SealedCache(Protocol):
    """Where :func:`encode_list` keeps the segments it sealed or merged, by what they hold."""

    def get(self, key: SealedKey) -> SealedObject | None: ...

    def put(self, key: SealedKey, value: SealedObject) -> None: ...


def encode_element(type_: str, data: bytes, epoch: int = 0) -> EncodedElement:
    """Encode one list element: inline when its payload is small, else a value or parts."""
    if len(data) <= codec.PART_SIZE:
        payload = codec.make_payload(type_, data)
        if len(payload.data) <= codec.ELEMENT_INLINE_MAX:
            return EncodedElement(["i", *payload.to_msgpack()], None, {}, {})
    objects: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    ref = value_encoding.store_data(type_, data, objects, children, epoch)
    return EncodedElement(codec.entry_to_msgpack(ref), ref.digest, objects, children)


def _segment(
    members: list[SealedObject], key: SealedKey, sealed_cache: SealedCache | None, epoch: int
) -> SealedObject:
    """One segment holding the entries of ``members`` (elements, or segments merged)."""
    segment = sealed_cache.get(key) if sealed_cache is not None else None
    if segment is not None:
        return segment
    items = tuple(i for m in members for i in m.items)
    fields = {"f": codec.CHECKPOINT_FORMAT_VERSION, "k": "segment", "x": items}
    body = codec.pack_content(fields, epoch)
    segment = SealedObject(
        codec.digest_of(body),
        body,
        tuple(d for m in members for d in m.children),
        {d: b for m in members for d, b in m.element_objects.items()},
        {d: c for m in members for d, c in m.element_children.items()},
        items,
        sum(m.size for m in members),
    )
    if sealed_cache is not None:
        sealed_cache.put(key, segment)
    return segment


def _mergeable(run: list[SealedObject]) -> bool:
    """Whether the last ``SEGMENT_MERGE`` segments merge (spec §4.4, rule 2)."""
    if len(run) < codec.SEGMENT_MERGE:
        return False
    last = run[-codec.SEGMENT_MERGE :]
    count = len(last[0].items)
    return (
        all(len(s.items) == count for s in last)
        and count * codec.SEGMENT_MERGE <= codec.SEGMENT_FULL_LEN
        and sum(s.size for s in last) <= codec.SEGMENT_MAX_BYTES
    )


#: Where a list element's value object is: the checkpoint id of the manifest
#: that embeds it, or None when it stands alone (``objects/<H>``); spec §4.4.
Locator = Callable[[bytes], "str | None"]


def _located(element: EncodedElement, locate: Locator | None) -> list[Any]:
    """The element's entry as a segment holds it: a value's reference with its location."""
    if locate is None or element.digest is None or element.item[0] != "b":
        return element.item
    at = locate(element.digest)
    if at is None:
        return element.item
    return ["b", element.digest, keys.stored_at(at, None)]


def encode_list(
    elements: list[tuple[str, bytes]],
    cache: ElementCache | None = None,
    sealed_cache: SealedCache | None = None,
    locate: Locator | None = None,
    epoch: int = 0,
) -> codec.Encoded:
    """Entry for a list given its serialized elements (spec §4.4, format version 2).

    Segments are returned unlocated, all in the list's ``segments``: the writer
    decides which it embeds, then puts the full ones under a root index. With
    ``locate``, a ``value`` element's reference names the manifest that embeds it.
    """
    out: dict[bytes, bytes] = {}
    # What the caches hold is a function of the element and the epoch.
    salt: tuple[object, ...] = () if not epoch else ("@e", epoch)
    children: dict[bytes, tuple[bytes, ...]] = {}

    def encoded(pair: tuple[str, bytes]) -> EncodedElement:
        cache_key = element_key(pair, epoch)
        element = cache.get(cache_key) if cache is not None else None
        if element is None:
            element = encode_element(*pair, epoch)
            if cache is not None:
                cache.put(cache_key, element)
        return element

    def one(element: EncodedElement, item: list[Any]) -> SealedObject:
        size = element.size if item is element.item else len(msgpack.packb(item, use_bin_type=True))
        return SealedObject(
            b"",
            b"",
            (element.digest,) if element.digest is not None else (),
            element.objects,
            element.children,
            (item,),
            size,
        )

    full = len(elements) // codec.CHUNK_LEN * codec.CHUNK_LEN
    run: list[SealedObject] = []  # the segments, oldest first
    for start in range(0, full, codec.CHUNK_LEN):
        group = elements[start : start + codec.CHUNK_LEN]
        key: SealedKey = ("g", *group, *salt)
        sealed = sealed_cache.get(key) if sealed_cache is not None else None
        if sealed is None or (locate is not None and sealed.children):
            # A segment is a function of its elements and of where their values are.
            found = [encoded(pair) for pair in group]
            items = [_located(e, locate) for e in found]
            where = tuple(i[2] for i in items if len(i) == 3)
            if where:
                key = (*key, "@", where)
                sealed = sealed_cache.get(key) if sealed_cache is not None else None
            if sealed is None:
                members = [one(e, i) for e, i in zip(found, items, strict=True)]
                sealed = _segment(members, key, sealed_cache, epoch)
        run.append(sealed)
        while _mergeable(run):
            members = run[-codec.SEGMENT_MERGE :]
            del run[-codec.SEGMENT_MERGE :]
            merged: SealedKey = ("m", *(s.digest for s in members))
            run.append(_segment(members, merged, sealed_cache, epoch))
    for segment in run:
        out[segment.digest] = segment.body
        children[segment.digest] = segment.children
        out.update(segment.element_objects)
        children.update(segment.element_children)
    tail = [encoded(pair) for pair in elements[full:]]
    for element in tail:
        out.update(element.objects)
        children.update(element.children)
    items = tuple(_tail_entry(e, locate) for e in tail)
    segments = tuple(codec.SegmentRef(s.digest, len(s.items)) for s in run)
    root = codec.ListObj(len(elements), (), items, segments)
    return codec.Encoded(codec.InlineList(root), out, children)


def _tail_entry(element: EncodedElement, locate: Locator | None) -> codec.Entry:
    """A tail element's entry, located like a segment's (spec §4.4)."""
    entry = codec.decode_entry(element.item, "a new list")
    if locate is not None and isinstance(entry, codec.Ref) and entry.tag == "b":
        at = locate(entry.digest)
        if at is not None:
            return codec.Ref("b", entry.digest, at)
    return entry


def full_segments(counts: Sequence[int]) -> int:
    """How many of a list's first segments (element counts, oldest first) are full: no later
    seal can merge them (spec §4.4)."""
    full = 0
    for i, count in enumerate(counts):
        if count >= codec.SEGMENT_FULL_LEN or (i + 1 < len(counts) and counts[i + 1] >= count):
            full = i + 1
    return full


#: Where an index goes (spec §4.4): ``place(digest, body, children)`` gives
#: the manifest key that embeds it, or None when it stands alone.
Place = Callable[[bytes, bytes, tuple[bytes, ...]], "str | None"]


def index_body(refs: Sequence[codec.SegmentRef], epoch: int = 0) -> bytes:
    """Bytes of an index holding ``refs`` (located by manifest key), oldest first (spec §4.4)."""
    held = [[g.digest, g.count, keys.index_loc(g.loc), *codec.INDEX_TAG[g.index]] for g in refs]
    fields = {"f": codec.CHECKPOINT_FORMAT_VERSION, "k": "index", "c": held}
    return codec.pack_content(fields, epoch)


def root_index(full: Sequence[codec.SegmentRef], place: Place, epoch: int = 0) -> codec.SegmentRef:
    """The reference of the root index over a list's full segments, each index made located
    by ``place``, the root last (spec §4.4)."""

    def made(refs: Sequence[codec.SegmentRef]) -> codec.SegmentRef:
        body = index_body(refs, epoch)
        digest = codec.digest_of(body)
        where = place(digest, body, tuple(g.digest for g in refs))
        return codec.SegmentRef(digest, sum(g.count for g in refs), where, True)

    fan = codec.INDEX_FANOUT
    level, left = list(full), []
    while len(level) >= fan:
        cut = len(level) // fan * fan
        left = level[cut:] + left
        level = [made(level[i : i + fan]) for i in range(0, cut, fan)]
    return made(level + left)


def use_list_encoding(elements: list[tuple[str, bytes]]) -> bool:
    """Whether a list value is stored element by element (spec §4.4)."""
    if not elements:
        return False
    total = sum([len(data) for _, data in elements])
    return total > codec.INLINE_MAX and total / len(elements) >= codec.LIST_MIN_MEAN_ELEMENT
