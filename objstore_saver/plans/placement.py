"""Where a put's content objects go (spec §6.1 step 2): in its manifest, an earlier one, or alone.

Earlier locations come only from the parent's references: the parent is
stored, and prune stores what a manifest embeds alone before deleting it, so
any location taken from the parent is readable.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from objstore_saver.caches.facts import CheckpointEntries
from objstore_saver.format import keys, list_encoding
from objstore_saver.format.codec import (
    Encoded,
    Entry,
    IndexObj,
    InlineList,
    ListObj,
    Ref,
    SegmentObj,
    SegmentRef,
)
from objstore_saver.plans.context import Context
from objstore_saver.plans.reading import LIST_TAG, fetch_objects
from objstore_saver.plans.requests import Batch

#: A list's segments and indexes as read, by digest.
ListObjects = dict[bytes, SegmentObj | IndexObj]


def flat_segments(
    refs: Iterable[SegmentRef], objects: ListObjects, folder: str
) -> Iterator[SegmentRef]:
    """A list's references, each index preceded by what it holds (resolved beside the
    manifest ``folder``, spec §4.4) when it is in ``objects``."""
    for g in refs:
        index = objects.get(g.digest) if g.index else None
        if isinstance(index, IndexObj):
            inner = [
                SegmentRef(r.digest, r.count, _beside(folder, r.at), r.index) for r in index.refs
            ]
            yield from flat_segments(inner, objects, folder)
        yield g


def _beside(folder: str, at: str | None) -> str | None:
    return None if at is None else keys.manifest_beside(folder, at)


@dataclass
class Placement:
    """The locations one put (checkpoint ``cid``, manifest ``mkey``) gives its value objects."""

    ctx: Context
    pfx: str
    cid: str
    mkey: str
    parent: CheckpointEntries | None
    segments: ListObjects = field(default_factory=dict)
    epoch: int = 0
    embedded_values: set[bytes] = field(default_factory=set)
    """Value objects this put's manifest embeds."""
    indexes: Encoded | None = None
    """The indexes :meth:`settle` made, new ones (to store if not embedded) referenced."""
    _where: dict[bytes, str | None] | None = None

    def where(self) -> dict[bytes, str | None]:
        """Value digest → location (checkpoint id, None: alone) in the parent's references."""
        if self._where is None:
            self._where = {}
            if self.parent is not None:
                for e in self.parent.entries.values():
                    self._learn(e)
        return self._where

    def _learn(self, e: Entry) -> None:
        assert self._where is not None
        if isinstance(e, Ref):
            if e.tag == "b":
                self._where.setdefault(e.digest, e.at)
        elif isinstance(e, InlineList):
            for g in flat_segments(e.obj.segments, self.segments, self.mkey):
                seg = self.segments.get(g.digest)
                if isinstance(seg, SegmentObj):
                    for item in seg.items:
                        self._learn(item)
            for item in e.obj.tail:
                self._learn(item)

    def locate(self, digest: bytes) -> str | None:
        """Where a value object is: where the parent has it, alone if known so, else here."""
        where = self.where()
        if digest in where:
            return where[digest]
        if self.ctx.objects.known(self.pfx, digest, self.ctx.belief_age):
            return None
        self.embedded_values.add(digest)
        where[digest] = self.cid
        return self.cid

    def place(self, entry: Entry) -> Entry:
        """A channel's (or the checkpoint's, the metadata's) entry, its value located."""
        if isinstance(entry, Ref) and entry.tag == "b":
            return Ref("b", entry.digest, self.locate(entry.digest))
        return entry

    def settle(
        self, channels: dict[str, Entry], encoded: Sequence[Encoded]
    ) -> tuple[dict[bytes, bytes], set[bytes]]:
        """Locate the new segments of ``channels`` (in place), full ones under a root index
        (spec §4.4); returns what the manifest embeds and what earlier manifests hold."""
        bodies: dict[bytes, bytes] = {}
        for enc in encoded:
            bodies.update(enc.objects)
        embedded: dict[bytes, bytes] = {}
        located: set[bytes] = set()
        parent_locs: dict[bytes, str | None] | None = None
        for name, e in channels.items():
            if not isinstance(e, InlineList):
                continue
            placed = []
            new = False
            for g in e.obj.segments:
                if g.loc is None and g.digest in bodies:
                    new = True
                    if parent_locs is None:
                        parent_locs = self._parent_segment_locations()
                    where = self._put(g.digest, bodies[g.digest], parent_locs, embedded, located)
                    g = replace(g, loc=where)
                placed.append(g)
            if new:
                placed = self._indexed(placed, parent_locs or {}, embedded, located)
                channels[name] = InlineList(replace(e.obj, segments=tuple(placed)))
        for d in sorted(self.embedded_values):
            embedded[d] = bodies[d]
        # Only locate() gives this put's entries a location: none, none earlier.
        if self._where is not None:
            for d, at in self._where.items():
                if at is not None and at != self.cid:
                    located.add(d)
        return embedded, located

    def _put(
        self,
        digest: bytes,
        body: bytes,
        parent_locs: dict[bytes, str | None],
        embedded: dict[bytes, bytes],
        located: set[bytes],
    ) -> str | None:
        """Where a new segment or index goes: the parent's location, alone if known, else here."""
        if digest in parent_locs:
            located.add(digest)
            return parent_locs[digest]
        if self.ctx.objects.known(self.pfx, digest, self.ctx.trust_age):
            return None
        embedded[digest] = body
        return self.mkey

    def _indexed(
        self,
        placed: list[SegmentRef],
        parent_locs: dict[bytes, str | None],
        embedded: dict[bytes, bytes],
        located: set[bytes],
    ) -> list[SegmentRef]:
        """A list's located segments, the full ones replaced by their root index (spec §4.4)."""
        full = list_encoding.full_segments([g.count for g in placed])
        if not full:
            return placed
        if self.indexes is None:
            self.indexes = Encoded(InlineList(ListObj(0, (), (), ())))
        made = self.indexes

        def place(digest: bytes, body: bytes, children: tuple[bytes, ...]) -> str | None:
            made.objects[digest] = body
            made.children[digest] = children
            return self._put(digest, body, parent_locs, embedded, located)

        root = list_encoding.root_index(placed[:full], place, self.epoch)
        new = [SegmentRef(d, 0, None, True) for d in made.objects]
        made.entry = InlineList(ListObj(0, (), (), tuple(new)))
        return [root, *placed[full:]]

    def _parent_segment_locations(self) -> dict[bytes, str | None]:
        """Segment and index digest → location (None: alone) in the parent's lists."""
        entries = self.parent.entries.values() if self.parent is not None else ()
        return {
            g.digest: g.loc
            for e in entries
            if isinstance(e, InlineList)
            for g in flat_segments(e.obj.segments, self.segments, self.mkey)
        }


def recall_segments(
    ctx: Context, pfx: str, mkey: str, parent: CheckpointEntries | None
) -> Generator[Batch, list[Any] | None, ListObjects]:
    """Sub-plan: the parent's list segments and indexes (not values), from memory, else read.

    A put re-encoding a list needs them to make the same segments again.
    """
    held: ListObjects = {}
    if parent is None:
        return held
    refs: list[tuple[str, bytes]] = []
    located: dict[bytes, str] = {}
    tops: list[SegmentRef] = []
    for e in parent.entries.values():
        if isinstance(e, InlineList):
            tops += e.obj.segments
    stack = list(tops)
    missing = False
    while stack:
        g = stack.pop()
        obj = ctx.objects.get(pfx, g.digest)
        if isinstance(obj, SegmentObj | IndexObj):
            held[g.digest] = obj
            if isinstance(obj, IndexObj):
                stack += [SegmentRef(r.digest, r.count, None, r.index) for r in obj.refs]
            continue
        missing = True
    if missing:
        for g in tops:
            refs.append((LIST_TAG[g.index], g.digest))
            if g.loc is not None:
                located[g.digest] = g.loc
        folders = {d: mkey for _, d in refs}
        got = yield from fetch_objects(
            ctx, pfx, refs, mkey, reached=set(), located=located, folders=folders
        )
        held.update((d, obj) for d, obj in got.items() if isinstance(obj, SegmentObj | IndexObj))
    return held


def unembed(entries: Iterable[tuple[dict[str, Any], str]], mkey: str, cid: str) -> None:
    """Rewrite (holder, name) entries in place: what ``mkey`` (checkpoint ``cid``) embeds, alone.

    A segment's element keeps its location: a reader not finding it there reads it alone.
    """
    for holder, name in entries:
        e = holder[name]
        if isinstance(e, Ref) and e.at == cid:
            holder[name] = Ref(e.tag, e.digest)
        elif isinstance(e, InlineList):
            holder[name] = InlineList(_unembedded_list(e.obj, mkey, cid))


def _unembedded_list(o: ListObj, mkey: str, cid: str) -> ListObj:
    segments = tuple(replace(g, loc=None) if g.loc == mkey else g for g in o.segments)
    tail = tuple(Ref(e.tag, e.digest) if isinstance(e, Ref) and e.at == cid else e for e in o.tail)
    return replace(o, segments=segments, tail=tail)
