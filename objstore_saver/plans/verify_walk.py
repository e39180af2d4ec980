"""The reference walk of one thread's ``verify`` (spec §6.11)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from objstore_saver.errors import CorruptObjectError, UnsupportedFormatError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Entry, Manifest, SegmentRef
from objstore_saver.format.keys import manifest_beside
from objstore_saver.plans.reading import decode_checked_manifest, embedded_name
from objstore_saver.plans.requests import Batch, Unopened
from objstore_saver.plans.threads import ThreadListing, digest_of_key
from objstore_saver.plans.verify_objects import (
    Body,
    Facts,
    facts_of,
    fetch,
    located_outside,
    opened,
    split_refs,
)
from objstore_saver.plans.verify_report import Problem, VerifyReport

T = TypeVar("T")

#: A located object to find: (manifest said to embed it, digest, kind, referrer).
Located = tuple[str, bytes, str, str]


@dataclass
class ThreadWalk:
    """What the walk of one thread has learnt so far."""

    pfx: str
    report: VerifyReport
    listing: ThreadListing
    #: Referrer of each digest referenced at ``objects/<H>``, and the kind the
    #: reference expects.
    wanted: dict[bytes, tuple[str, str]] = field(default_factory=dict)
    #: Lists inline in manifests and writes (format version 2): their subtrees'
    #: and segments' counts are checked like a list object's.
    inline_lists: list[tuple[str, list[tuple[bytes, int]]]] = field(default_factory=list)
    segment_refs: list[tuple[str, SegmentRef]] = field(default_factory=list)
    #: What indexes locate (manifest, digest): read alone when that manifest
    #: does not embed it (spec §4.4).
    soft: set[tuple[str, bytes]] = field(default_factory=set)
    #: Indexes whose references were added to ``segment_refs``, by namespace.
    expanded: set[tuple[str, bytes]] = field(default_factory=set)
    #: Located values: (manifest said to embed it, digest, referrer).
    values: list[tuple[str, bytes, str]] = field(default_factory=list)
    facts: dict[bytes, Facts] = field(default_factory=dict)
    #: What each manifest read embeds (hashed here), by manifest key.
    embeds: dict[str, set[bytes]] = field(default_factory=dict)
    #: Manifests present but unreadable (already reported: not resolved in).
    unreadable: set[str] = field(default_factory=set)
    #: Size of each object read at ``objects/<H>`` (0 when absent or unopened).
    sizes: dict[bytes, int] = field(default_factory=dict)
    #: Referenced at ``objects/<H>``, not there.
    absent: set[bytes] = field(default_factory=set)
    reached: set[bytes] = field(default_factory=set)
    #: Manifests read after the listing.
    fetched_late: set[str] = field(default_factory=set)

    def problem(self, key: str, kind: str, detail: str) -> None:
        self.report.problems.append(Problem(key, kind, detail))

    def decoded(self, key: str, decode: Callable[..., T], body: Body, *args: Any) -> T | None:
        """``decode`` of a body read (and ``args``), or None once its error is reported."""
        try:
            return decode(opened(body), *args)
        except (CorruptObjectError, UnsupportedFormatError) as exc:
            self.problem(key, "unreadable", str(exc))
            return None


def want(w: ThreadWalk, refs: Iterable[tuple[str, bytes]], referrer: str) -> None:
    """References read at ``objects/<H>``, as (tag, digest), that ``referrer`` holds."""
    for tag, digest in refs:
        w.wanted.setdefault(digest, (codec.KIND_OF_TAG[tag], referrer))


def locate(w: ThreadWalk, found: Iterable[tuple[bytes, str]], holder: str, referrer: str) -> None:
    """Values ``referrer`` locates, in the namespace of the manifest ``holder``."""
    for digest, at in found:
        if keys.is_manifest_v2_key(holder):
            w.values.append((manifest_beside(holder, at), digest, referrer))
        else:
            w.problem(referrer, "unreadable", located_outside(digest, at, holder))


def note(w: ThreadWalk, entries: Iterable[Entry], referrer: str) -> None:
    """The references of a manifest's or a write's entries, by where each is read."""
    refs = split_refs(entries)
    want(w, refs.alone, referrer)
    if refs.sealed:
        w.inline_lists.append((referrer, refs.sealed))
    w.segment_refs.extend((referrer, g) for g in refs.segments)
    locate(w, refs.values, referrer, referrer)


def take_embedded(w: ThreadWalk, key: str, m: Manifest, counted: bool = True) -> None:
    """The objects the manifest at ``key`` embeds: hashed, decoded, their facts kept."""
    held: set[bytes] = set()
    for body in m.embedded:
        digest = codec.digest_of(body)
        held.add(digest)
        if counted:
            w.report.embedded_objects += 1
            w.report.embedded_bytes += len(body)
        obj = w.decoded(key, codec.decode_object, body, embedded_name(key, digest))
        if obj is not None:
            w.facts[digest] = facts_of(obj)
    w.embeds[key] = held


def absorb(w: ThreadWalk, pairs: list[tuple[str, Body]]) -> None:
    """Objects read at ``objects/<H>``: counted, hashed, decoded, their facts kept."""
    report = w.report
    for key, body in pairs:
        if body is None:
            continue
        digest = digest_of_key(key)
        report.objects += 1
        if isinstance(body, Unopened):  # an encrypted store's: altered or moved
            w.sizes[digest] = 0
            w.problem(key, "digest", str(body.error))
            continue
        report.bytes += len(body)
        w.sizes[digest] = len(body)
        try:
            codec.check_digest(body, digest, key)
        except CorruptObjectError as exc:
            w.problem(key, "digest", str(exc))
            continue
        obj = w.decoded(key, codec.decode_object, body, key)
        if obj is not None:
            w.facts[digest] = facts_of(obj)


def resolve(
    w: ThreadWalk, located: Iterable[Located]
) -> Generator[Batch, list[Any] | None, dict[bytes, str]]:
    """Sub-plan: find located objects, in a manifest read, else alone; digest → its manifest.

    Those found alone (prune stored them before deleting their manifest) are ``wanted``.
    """
    located = list(located)
    found, fallback = _embedded_or_alone(w, located)
    late = sorted({d for _, d in fallback if d not in w.sizes and d not in w.absent})
    pairs = yield from fetch([keys.object_key_in(w.pfx, d) for d in late])
    w.absent.update(d for d, (_, body) in zip(late, pairs, strict=True) if body is None)
    absorb(w, pairs)
    yield from _read_late_manifests(w, {loc for loc, d in fallback if d not in w.sizes})
    for (loc, d), (kind, referrer) in fallback.items():
        if d in w.sizes and d not in w.absent:
            w.wanted.setdefault(d, (kind, referrer))
            w.reached.add(d)
        elif d in w.embeds.get(loc, ()):
            found.setdefault(d, loc)
        else:
            alone = keys.object_key_in(w.pfx, d)
            w.problem(
                alone,
                "missing",
                f"{referrer!r} locates it in {loc!r}; neither that manifest nor {alone!r} holds it",
            )
    _check_found(w, found, {d: kind for _, d, kind, _ in located})
    return found


def _embedded_or_alone(
    w: ThreadWalk, located: list[Located]
) -> tuple[dict[bytes, str], dict[tuple[str, bytes], tuple[str, str]]]:
    """Located objects found in a manifest read (digest → it), and those to look for alone.

    Only a value, or what an index locates, is stored alone while its manifest
    is there: any other one the manifest does not embed is reported here.
    """
    found: dict[bytes, str] = {}
    fallback: dict[tuple[str, bytes], tuple[str, str]] = {}  # → (kind, referrer)
    for loc, d, kind, referrer in located:
        if loc in w.unreadable or (loc, d) in fallback:
            continue
        if d in w.embeds.get(loc, ()):
            found.setdefault(d, loc)
        elif loc not in w.embeds or kind == "value" or (loc, d) in w.soft:
            fallback[(loc, d)] = (kind, referrer)
        else:
            fallback[(loc, d)] = ("", referrer)  # reported once, here
            w.problem(
                loc, "missing", f"does not embed object {d.hex()} that {referrer!r} locates there"
            )
    return found, {p: v for p, v in fallback.items() if v[0]}


def _read_late_manifests(
    w: ThreadWalk, locations: set[str]
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: read once the manifests in ``locations`` written after the listing."""
    listed = {o.key for o in w.listing.manifests}
    gone = sorted(locations - listed - w.embeds.keys() - w.fetched_late)
    w.fetched_late.update(gone)
    for key, body in (yield from fetch(gone)):
        try:
            m = None if body is None else decode_checked_manifest(opened(body), key)
        except (CorruptObjectError, UnsupportedFormatError):
            continue
        if m is not None and keys.thread_prefix(m.thread_id) == w.pfx:
            take_embedded(w, key, m, counted=False)


def _check_found(w: ThreadWalk, found: dict[bytes, str], kinds: dict[bytes, str]) -> None:
    """Embedded objects found: reached, of the kind expected, their children wanted."""
    for d, loc in found.items():
        w.reached.add(d)
        f = w.facts.get(d)
        if f is None:
            continue  # does not decode: reported with its manifest
        if f.kind != kinds[d]:
            w.problem(
                loc, "wrong-kind", f"embedded object {d.hex()} is a {f.kind}, not a {kinds[d]}"
            )
        want(w, f.children, embedded_name(loc, d))


def follow(w: ThreadWalk) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: walk from the wanted references to every object they reach (those not listed
    are fetched: a concurrent put may have written them)."""
    frontier = list(w.wanted)
    while frontier:
        late = [d for d in frontier if d not in w.sizes]
        fetched = yield from fetch([keys.object_key_in(w.pfx, d) for d in late])
        for (key, body), digest in zip(fetched, late, strict=True):
            if body is None:
                w.sizes[digest] = 0
                w.absent.add(digest)
                w.problem(key, "missing", f"referenced by {w.wanted[digest][1]!r}")
        absorb(w, fetched)
        w.reached.update(frontier)
        nxt: list[bytes] = []
        for digest in frontier:
            for tag, child in w.facts[digest].children if digest in w.facts else ():
                if child not in w.reached and child not in w.wanted:
                    w.wanted[child] = (codec.KIND_OF_TAG[tag], keys.object_key_in(w.pfx, digest))
                    nxt.append(child)
        frontier = nxt


#: The kind a list's reference reaches (spec §4.4).
LIST_KIND = {True: "index", False: "segment"}


def index_refs(
    w: ThreadWalk, refs: Iterable[tuple[str, SegmentRef]]
) -> list[tuple[str, SegmentRef]]:
    """The references held by the indexes among ``refs`` (read or embedded), once per namespace."""
    out: list[tuple[str, SegmentRef]] = []
    for referrer, g in refs:
        f = w.facts.get(g.digest)
        folder = referrer.rpartition("/")[0]
        if not g.index or f is None or f.kind != "index" or (folder, g.digest) in w.expanded:
            continue
        w.expanded.add((folder, g.digest))
        for r in f.indexed:
            if r.at is not None and not keys.is_manifest_v2_key(referrer):
                w.problem(referrer, "unreadable", located_outside(r.digest, r.at, referrer))
                continue
            loc = None if r.at is None else manifest_beside(referrer, r.at)
            if loc is not None:
                w.soft.add((loc, r.digest))
            out.append((referrer, SegmentRef(r.digest, r.count, loc, r.index)))
    return out
