"""fsck of the checkpoint threads: every manifest parses, every reference resolves (§6.11).

It reads the store, never the saver's memories, and collects problems rather
than raising them: one corrupt object does not hide the others.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from datetime import datetime
from typing import Any

from objstore_saver.format import codec, keys
from objstore_saver.plans.lookup import thread_prefixes
from objstore_saver.plans.reading import decode_checked_manifest, embedded_name
from objstore_saver.plans.requests import Batch, KeyState, run_one
from objstore_saver.plans.threads import ThreadListing, digest_of_key, hex_name, list_thread_keys
from objstore_saver.plans.verify_objects import Body, fetch_groups, held_in
from objstore_saver.plans.verify_report import Problem, VerifyReport
from objstore_saver.plans.verify_walk import (
    LIST_KIND,
    ThreadWalk,
    absorb,
    follow,
    index_refs,
    locate,
    note,
    resolve,
    take_embedded,
)
from objstore_saver.storage.base import ObjectInfo


def verify_threads(
    thread_ids: Sequence[str] | None, report: VerifyReport, arriving_since: datetime | None
) -> Generator[Batch, list[Any] | None, VerifyReport]:
    """Plan: spec §6.11 for checkpoints, of the named threads (None: all); the report."""
    if thread_ids is None:
        prefixes = yield from thread_prefixes()
    else:
        prefixes = [keys.thread_prefix(t) for t in thread_ids]
    for pfx in prefixes:
        yield from verify_thread(pfx, report, arriving_since=arriving_since)
    return report


def verify_thread(
    pfx: str,
    report: VerifyReport,
    listing: ThreadListing | None = None,
    arriving_since: datetime | None = None,
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: check every key under one thread prefix, adding to ``report``.

    ``arriving_since``: on a replica, now minus its lag: in a thread with a key
    stored after it, what is missing counts as ``arriving`` (spec §6.16).
    """
    report.threads += 1
    if listing is None:
        listing = yield from list_thread_keys(pfx)
    before = len(report.problems)
    yield from _verify_listed(pfx, report, listing)
    if arriving_since is not None and listing.written_after(arriving_since):
        mine = report.problems[before:]
        kept = [p for p in mine if p.kind != "missing"]
        report.arriving += len(mine) - len(kept)
        report.problems[before:] = kept


def _verify_listed(
    pfx: str, report: VerifyReport, listing: ThreadListing
) -> Generator[Batch, list[Any] | None, None]:
    has_key = yield from run_one(KeyState(pfx, listing.epoch))
    if has_key is False:
        _keyless(listing, report)
        return
    for info in listing.unknown:
        report.problems.append(Problem(info.key, "unknown-key", "not a key the format defines"))
    w = ThreadWalk(pfx, report, listing)
    object_keys = _objects_to_read(w, _object_infos(w, has_key))
    got_manifests, got_writes, got_objects = yield from fetch_groups(
        [o.key for o in listing.manifests], [o.key for o in listing.writes], object_keys
    )
    checkpoints = _read_manifests(w, got_manifests)
    _read_writes(w, got_writes, checkpoints)
    absorb(w, got_objects)
    found_in: dict[bytes, str] = {}
    refs = list(w.segment_refs)
    while True:
        # Lists' segments and indexes, then what those indexes hold, level by level.
        located = [(g.loc, g.digest, LIST_KIND[g.index], r) for r, g in refs if g.loc is not None]
        found_in |= yield from resolve(w, located)
        # Walk from the manifests and writes (and the indexes' references).
        yield from follow(w)
        refs = index_refs(w, refs)
        if not refs:
            break
        w.segment_refs += refs
    _locate_segment_values(w, found_in)
    yield from resolve(w, ((loc, d, "value", referrer) for loc, d, referrer in w.values))
    _check_kinds(w)
    _check_shapes(w)
    _check_segment_counts(w, found_in)
    if report.orphan_objects is not None and report.orphan_bytes is not None:
        for digest in w.sizes.keys() - w.reached:  # every object read: the walk is whole
            report.orphan_objects += 1
            report.orphan_bytes += w.sizes[digest]


_SEALED_NAME = (
    "the sealed name of an encrypted thread's object: open the store with the master key "
    "(OBJSTORE_SAVER_ENCRYPTION_KEY)"
)


#: Listed sizes no content object has: none is empty, none exceeds 2 MiB (spec §4.5),
#: sealed (the envelope adds less than this margin) or not.
_MAX_LISTED = 2 * 1024 * 1024 + 4096


def _objects_to_read(w: ThreadWalk, infos: list[ObjectInfo]) -> list[str]:
    """The keys of the listed content objects this depth reads; the others count as present."""
    depth = w.report.depth
    out = []
    for o in infos:
        if depth.reads(o.key):
            out.append(o.key)
            continue
        w.report.objects_not_read += 1
        w.sizes[digest_of_key(o.key)] = o.size
        if not 0 < o.size <= _MAX_LISTED:
            w.problem(o.key, "shape", f"listed at {o.size} bytes: every object is 1 byte to 2 MiB")
    return out


def _object_infos(w: ThreadWalk, has_key: bool | None) -> list[ObjectInfo]:
    """The listed ``objects/<H>`` of content objects; the others are counted or reported."""
    out = []
    for o in w.listing.objects:
        if not hex_name(o.key, 64):
            sealed = hex_name(o.key, keys.SEALED_NAME_LEN)
            if sealed and has_key and w.listing.epoch > 0:
                # Sealed by an ended epoch's destroyed key (spec §4.11).
                w.report.shredded_leftovers += 1
                continue
            detail = _SEALED_NAME if sealed else "not a SHA-256 object key"
            w.problem(o.key, "unknown-key", detail)
        else:
            out.append(o)
    return out


def _read_manifests(w: ThreadWalk, got: list[tuple[str, Body]]) -> set[tuple[str, str, str]]:
    """Decode the manifests read and note their references; their checkpoints (from keys)."""
    report = w.report
    checkpoints: set[tuple[str, str, str]] = set()
    for key, body in got:
        if body is None:
            continue  # deleted since it was listed
        report.manifests += 1
        m = w.decoded(key, decode_checked_manifest, body, key)
        if m is not None and keys.thread_prefix(m.thread_id) != w.pfx:
            w.problem(key, "unreadable", f"manifest of thread {m.thread_id!r} in another thread")
            m = None
        if m is None:
            w.unreadable.add(key)
            continue
        if m.epoch < w.listing.epoch:  # never read, nor what it references (§4.11)
            report.ended_manifests += 1
            continue
        checkpoints.add(w.listing.key_parts(key).checkpoint)
        take_embedded(w, key, m)
        note(w, [m.checkpoint, m.metadata, *m.channels.values()], key)
    return checkpoints


def _read_writes(
    w: ThreadWalk, got: list[tuple[str, Body]], checkpoints: set[tuple[str, str, str]]
) -> None:
    """Decode the writes read and note the references of those a manifest has."""
    for key, body in got:
        if body is None:
            continue
        w.report.writes += 1
        ws = w.decoded(key, codec.decode_writes, body, key)
        if ws is None:
            continue
        if w.listing.key_parts(key).checkpoint not in checkpoints:
            # Left by an interrupted delete or prune; never read (spec §6.6).
            w.report.orphan_writes += 1
            continue
        note(w, [write.value for write in ws], key)


def _locate_segment_values(w: ThreadWalk, found_in: dict[bytes, str]) -> None:
    """The values a segment locates, in the namespace of each list that refers to it."""
    for referrer, g in dict.fromkeys(w.segment_refs):
        f = w.facts.get(g.digest)
        if f is not None and f.kind == "segment" and g.digest not in w.absent:
            where = found_in.get(g.digest)
            name = embedded_name(where, g.digest) if where else keys.object_key_in(w.pfx, g.digest)
            locate(w, f.located, referrer, name)


def _check_kinds(w: ThreadWalk) -> None:
    """Each object read at ``objects/<H>`` is of the kind its reference expects."""
    for digest, (expected, referrer) in w.wanted.items():
        f = w.facts.get(digest)
        if f is None or digest not in w.sizes:
            continue
        key = keys.object_key_in(w.pfx, digest)
        if f.kind != expected and not (expected == "subtree" and f.kind in ("chunk", "node")):
            w.problem(key, "wrong-kind", f"{referrer!r} expects a {expected}, found a {f.kind}")


def _check_shapes(w: ThreadWalk) -> None:
    """Lists, nodes and inline lists hold the counts they say; parts the size their index says."""
    for digest, f in w.facts.items():
        if digest not in w.sizes:
            continue  # embedded only: checked where it is referenced
        key = keys.object_key_in(w.pfx, digest)
        if f.kind in ("list", "node"):
            _check_counts(w, f.shape, f"{f.kind} {key!r}")
        elif f.kind == "parts":
            parts = [w.facts.get(d) for _, d in f.children]
            if all(p is not None and p.kind == "part" for p in parts):
                total = sum(p.length for p in parts if p is not None)
                if total != f.shape:
                    w.problem(key, "shape", f"parts hold {total} bytes, index says {f.shape}")
    for referrer, sealed in w.inline_lists:
        _check_counts(w, sealed, f"the list in {referrer!r}")


def _check_segment_counts(w: ThreadWalk, found_in: dict[bytes, str]) -> None:
    """Each segment (index) holds the element count every list referring to it says (once each)."""
    shown: set[tuple[bytes, int]] = set()
    for referrer, g in w.segment_refs:
        f = w.facts.get(g.digest)
        kind = LIST_KIND[g.index]
        if f is None or f.kind != kind or f.length == g.count or (g.digest, g.count) in shown:
            continue
        shown.add((g.digest, g.count))
        where = found_in.get(g.digest)
        w.problem(
            where or keys.object_key_in(w.pfx, g.digest),
            "shape",
            f"{kind} {g.digest.hex()} holds {f.length} elements, "
            f"the list in {referrer!r} says {g.count}",
        )


def _keyless(listing: ThreadListing, report: VerifyReport) -> None:
    """An encrypted thread without the key of its epoch: leftovers of a delete (a new epoch
    has no key until its first write), or a problem (spec §4.11)."""
    if listing.epoch > 0 or not listing.manifests:
        report.shredded_leftovers += (
            len(listing.manifests) + len(listing.writes) + len(listing.objects) + len(listing.marks)
        )
        return
    report.problems.append(
        Problem(
            listing.manifests[0].key,
            "unreadable",
            f"the key object of thread {listing.token!r} is missing: its "
            f"{len(listing.manifests)} checkpoints cannot be read",
        )
    )


def _check_counts(w: ThreadWalk, subtrees: Iterable[tuple[bytes, int]], holder: str) -> None:
    """Subtrees holding another element count than ``holder`` (a list or node) says."""
    for sub, count in subtrees:
        held = held_in(w.facts, sub)
        if held is not None and held != count:
            key = keys.object_key_in(w.pfx, sub)
            w.problem(key, "shape", f"holds {held} elements, {holder} says {count}")
