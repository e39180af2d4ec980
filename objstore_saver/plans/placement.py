"""Where a put's content objects go (spec §6.1 step 2): in its manifest, an earlier one, or alone.

A version-2 manifest embeds what its put makes that is new and small: list
segments and ``value`` objects (channel values, list elements). Each reference
names where its object is, so a later manifest that carries it needs no
request. The parent's references are the only source of earlier locations:
the parent is stored, and prune stores what a manifest embeds alone before
deleting it, so any location taken from the parent is readable.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from objstore_saver.caches.facts import CheckpointEntries
from objstore_saver.format.codec import Encoded, Entry, InlineList, ListObj, Ref, SegmentObj
from objstore_saver.plans.context import Context
from objstore_saver.plans.reading import fetch_objects
from objstore_saver.plans.requests import Batch


@dataclass
class Placement:
    """The locations one put (checkpoint ``cid``, manifest ``mkey``) gives its value objects.

    Earlier locations come from ``parent`` and its lists' ``segments``.
    """

    ctx: Context
    pfx: str
    cid: str
    mkey: str
    parent: CheckpointEntries | None
    segments: dict[bytes, SegmentObj] = field(default_factory=dict)
    embedded_values: set[bytes] = field(default_factory=set)
    """Value objects this put's manifest embeds."""
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
            for g in e.obj.segments:
                seg = self.segments.get(g.digest)
                if seg is not None:
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
        """Locate the new segments of ``channels`` (in place); what the manifest embeds, and
        what earlier manifests hold (nothing to PUT for either).

        A new segment keeps the parent's location; one known stored alone
        stays there; any other is embedded (digest → bytes, then the values
        :meth:`locate` placed here): a seal or a merge costs no request (§6.1 step 3).
        """
        bodies: dict[bytes, bytes] = {}
        for enc in encoded:
            bodies.update(enc.objects)
        embedded: dict[bytes, bytes] = {}
        located: set[bytes] = set()
        parent_locs: dict[bytes, str | None] | None = None
        known = self.ctx.objects.known
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
                    if g.digest in parent_locs:
                        g = replace(g, loc=parent_locs[g.digest])
                        located.add(g.digest)
                    elif not known(self.pfx, g.digest, self.ctx.trust_age):
                        embedded[g.digest] = bodies[g.digest]
                        g = replace(g, loc=self.mkey)
                placed.append(g)
            if new:
                channels[name] = InlineList(replace(e.obj, segments=tuple(placed)))
        for d in sorted(self.embedded_values):
            embedded[d] = bodies[d]
        # Only locate() gives this put's entries a location: none, none earlier.
        if self._where is not None:
            for d, at in self._where.items():
                if at is not None and at != self.cid:
                    located.add(d)
        return embedded, located

    def _parent_segment_locations(self) -> dict[bytes, str | None]:
        """Segment digest → location (a manifest key, None: alone) in the parent's lists."""
        entries = self.parent.entries.values() if self.parent is not None else ()
        return {
            g.digest: g.loc for e in entries if isinstance(e, InlineList) for g in e.obj.segments
        }


def recall_segments(
    ctx: Context, pfx: str, mkey: str, parent: CheckpointEntries | None
) -> Generator[Batch, list[Any] | None, dict[bytes, SegmentObj]]:
    """Sub-plan: the parent's list segments, from the object memory, else read.

    A segment's element references carry their locations; a put re-encoding
    the list needs them to make the same segments again. Values are not read.
    """
    held: dict[bytes, SegmentObj] = {}
    if parent is None:
        return held
    refs: list[tuple[str, bytes]] = []
    located: dict[bytes, str] = {}
    for e in parent.entries.values():
        if isinstance(e, InlineList):
            for g in e.obj.segments:
                seg = ctx.objects.get(pfx, g.digest)
                if isinstance(seg, SegmentObj):
                    held[g.digest] = seg
                    continue
                refs.append(("g", g.digest))
                if g.loc is not None:
                    located[g.digest] = g.loc
    if refs:
        folders = {d: mkey for _, d in refs}
        got = yield from fetch_objects(
            ctx, pfx, refs, mkey, reached=set(), located=located, folders=folders
        )
        held.update((d, obj) for d, obj in got.items() if isinstance(obj, SegmentObj))
    return held


def unembed(entries: Iterable[tuple[dict[str, Any], str]], mkey: str, cid: str) -> None:
    """Rewrite (holder, name) entries in place: what ``mkey`` (checkpoint ``cid``) embeds, alone.

    A segment's element located at ``cid`` keeps its location in the
    segment's bytes: a reader that does not find it there reads it alone.
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
