"""fsck for a store: every manifest parses, every reference resolves (spec §6.11).

The plan reads the store itself, never the saver's memories, so it reports
what is stored, not what this process believes. Objects embedded in manifests
(format version 2) are hashed and decoded, and each located list segment or
value is resolved where it is (docs/format-v2.md). Problems are collected, not
raised: one corrupt object does not hide the others. The long-term store's
objects are checked by :mod:`~objstore_saver.verify_store`; the report and its
problems are :mod:`~objstore_saver.verify_report`'s.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from objstore_saver.crypto.names import SEALED_NAME_LEN
from objstore_saver.errors import CorruptObjectError, UnsupportedFormatError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Entry, Manifest, SegmentRef
from objstore_saver.format.locations import manifest_beside
from objstore_saver.plans import decode_checked_manifest, embedded_name, thread_prefixes
from objstore_saver.plans.requests import Batch, KeyState, Unopened, run_one
from objstore_saver.plans.threads import ThreadListing, list_thread_keys
from objstore_saver.verify_facts import (
    Body,
    Facts,
    facts_of,
    fetch,
    fetch_groups,
    held_in,
    located_outside,
    opened,
    split_refs,
)
from objstore_saver.verify_report import Problem, VerifyReport
from objstore_saver.verify_store import verify_store


def verify_thread(
    pfx: str, report: VerifyReport, listing: ThreadListing | None = None
) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: check every key under one thread prefix, adding to ``report``.

    Objects embedded in manifests (format version 2) are hashed and decoded.
    A located segment or value is resolved in the manifest that embeds it,
    without reading that manifest again, or at ``objects/<H>`` when the
    manifest is gone (prune stored it there first) or, for a value, does not
    embed it (a manifest that would pass 1 MiB stores it alone). Only both
    missing is a problem.

    Args:
        pfx: The thread prefix.
        report: Where counts and problems go.
        listing: The thread's keys when the caller listed them already
            (:func:`~objstore_saver.plans.scan.scan_threads`); else listed here.
    """
    report.threads += 1
    if listing is None:
        listing = yield from list_thread_keys(pfx)
    has_key = yield from run_one(KeyState(pfx, listing.epoch))
    if has_key is False:
        _keyless(listing, report)
        return
    for info in listing.unknown:
        report.problems.append(Problem(info.key, "unknown-key", "not a key the format defines"))
    # referrer of each digest referenced at objects/<H>, and the kind the reference expects
    wanted: dict[bytes, tuple[str, str]] = {}

    def want(refs: Iterable[tuple[str, bytes]], referrer: str) -> None:
        for tag, digest in refs:
            wanted.setdefault(digest, (codec.KIND_OF_TAG[tag], referrer))

    # Lists inline in manifests and writes (format version 2): their subtrees'
    # and segments' counts are checked like a list object's.
    inline_lists: list[tuple[str, list[tuple[bytes, int]]]] = []
    segment_refs: list[tuple[str, SegmentRef]] = []
    # Located values: (manifest said to embed it, digest, referrer).
    values: list[tuple[str, bytes, str]] = []

    def locate(found: Iterable[tuple[bytes, str]], holder: str, referrer: str) -> None:
        """Values ``referrer`` locates, in the namespace of the manifest ``holder``."""
        for digest, at in found:
            if keys.is_manifest_v2_key(holder):
                values.append((manifest_beside(holder, at), digest, referrer))
            else:
                detail = located_outside(digest, at, holder)
                report.problems.append(Problem(referrer, "unreadable", detail))

    def note(entries: Iterable[Entry], referrer: str) -> None:
        refs = split_refs(entries)
        want(refs.alone, referrer)
        if refs.sealed:
            inline_lists.append((referrer, refs.sealed))
        segment_refs.extend((referrer, g) for g in refs.segments)
        locate(refs.values, referrer, referrer)

    object_keys = []
    for o in listing.objects:
        name = o.key.rsplit("/", 1)[1]
        if len(name) != 64 or name.strip("0123456789abcdef"):
            sealed = len(name) == SEALED_NAME_LEN and not name.strip("0123456789abcdef")
            if sealed and has_key and listing.epoch > 0:
                # Sealed by an ended epoch's destroyed key (spec §4.11).
                report.shredded_leftovers += 1
                continue
            detail = _SEALED_NAME if sealed else "not a SHA-256 object key"
            report.problems.append(Problem(o.key, "unknown-key", detail))
        else:
            object_keys.append(o.key)
    got_manifests, got_writes, got_objects = yield from fetch_groups(
        [o.key for o in listing.manifests], [o.key for o in listing.writes], object_keys
    )

    facts: dict[bytes, Facts] = {}
    # What each manifest read embeds (hashed here), by manifest key; and the
    # manifests present but unreadable (already reported: not resolved in).
    embeds: dict[str, set[bytes]] = {}
    unreadable: set[str] = set()

    def take_embedded(key: str, m: Manifest, counted: bool = True) -> None:
        held: set[bytes] = set()
        for body in m.embedded:
            digest = codec.digest_of(body)
            held.add(digest)
            if counted:
                report.embedded_objects += 1
                report.embedded_bytes += len(body)
            try:
                obj = codec.decode_object(body, embedded_name(key, digest))
            except (CorruptObjectError, UnsupportedFormatError) as exc:
                report.problems.append(Problem(key, "unreadable", str(exc)))
                continue
            facts[digest] = facts_of(obj)
        embeds[key] = held

    manifest_checkpoints: set[tuple[str, str, str]] = set()
    for key, body in got_manifests:
        if body is None:
            continue  # deleted since it was listed
        report.manifests += 1
        try:
            m = decode_checked_manifest(opened(body), key)
        except (CorruptObjectError, UnsupportedFormatError) as exc:
            report.problems.append(Problem(key, "unreadable", str(exc)))
            unreadable.add(key)
            continue
        if keys.thread_prefix(m.thread_id) != pfx:
            report.problems.append(
                Problem(key, "unreadable", f"manifest of thread {m.thread_id!r} in another thread")
            )
            unreadable.add(key)
            continue
        if m.epoch < listing.epoch:  # never read, nor what it references (§4.11)
            report.ended_manifests += 1
            continue
        manifest_checkpoints.add(keys.parse_checkpoint_key(key).checkpoint)
        take_embedded(key, m)
        note([m.checkpoint, m.metadata, *m.channels.values()], key)

    for key, body in got_writes:
        if body is None:
            continue
        report.writes += 1
        try:
            ws = codec.decode_writes(opened(body), key)
        except (CorruptObjectError, UnsupportedFormatError) as exc:
            report.problems.append(Problem(key, "unreadable", str(exc)))
            continue
        if keys.parse_checkpoint_key(key).checkpoint not in manifest_checkpoints:
            # Left by an interrupted delete or prune; never read (spec §6.6).
            report.orphan_writes += 1
            continue
        note([w.value for w in ws], key)

    sizes: dict[bytes, int] = {}
    absent: set[bytes] = set()  # referenced at objects/<H>, not there
    reached: set[bytes] = set()

    def absorb(pairs: list[tuple[str, Body]]) -> None:
        for key, body in pairs:
            if body is None:
                continue
            digest = bytes.fromhex(key.rsplit("/", 1)[1])
            report.objects += 1
            if isinstance(body, Unopened):  # an encrypted store's: altered or moved
                sizes[digest] = 0
                report.problems.append(Problem(key, "digest", str(body.error)))
                continue
            report.bytes += len(body)
            sizes[digest] = len(body)
            try:
                codec.check_digest(body, digest, key)
            except CorruptObjectError as exc:
                report.problems.append(Problem(key, "digest", str(exc)))
                continue
            try:
                obj = codec.decode_object(body, key)
            except (CorruptObjectError, UnsupportedFormatError) as exc:
                report.problems.append(Problem(key, "unreadable", str(exc)))
                continue
            facts[digest] = facts_of(obj)

    absorb(got_objects)
    fetched_late: set[str] = set()  # manifests read after the listing

    def resolve(
        located: Iterable[tuple[str, bytes, str, str]],
    ) -> Generator[Batch, list[Any] | None, dict[bytes, str]]:
        """Sub-plan: find located objects, given as (manifest, digest, kind, referrer).

        In the manifest that embeds them when it was read (no request), else
        alone at ``objects/<H>``, where prune stores them before it deletes
        their manifest (and a writer puts a value its manifest had no room
        for): those are added to ``wanted``. Returns digest → the manifest
        each was found in.
        """
        located = list(located)
        found: dict[bytes, str] = {}
        fallback: dict[tuple[str, bytes], tuple[str, str]] = {}  # → (kind, referrer)
        for loc, d, kind, referrer in located:
            if loc in unreadable or (loc, d) in fallback:
                continue
            if d in embeds.get(loc, ()):
                found.setdefault(d, loc)
            elif loc not in embeds or kind != "segment":
                fallback[(loc, d)] = (kind, referrer)
            else:
                fallback[(loc, d)] = ("", referrer)  # reported once, below
                report.problems.append(
                    Problem(
                        loc,
                        "missing",
                        f"does not embed object {d.hex()} that {referrer!r} locates there",
                    )
                )
        fallback = {p: v for p, v in fallback.items() if v[0]}
        late = sorted({d for _, d in fallback if d not in sizes and d not in absent})
        if late:
            pairs = yield from fetch([keys.object_key_in(pfx, d) for d in late])
            absent.update(d for d, (_, body) in zip(late, pairs, strict=True) if body is None)
            absorb(pairs)
        # Neither is there: the manifest may have been written after the listing.
        listed = {o.key for o in listing.manifests}
        gone = sorted(
            {loc for loc, d in fallback if d not in sizes} - listed - embeds.keys() - fetched_late
        )
        fetched_late.update(gone)
        for key, body in (yield from fetch(gone)) if gone else []:
            try:
                m = None if body is None else decode_checked_manifest(opened(body), key)
            except (CorruptObjectError, UnsupportedFormatError):
                continue
            if m is not None and keys.thread_prefix(m.thread_id) == pfx:
                take_embedded(key, m, counted=False)
        for (loc, d), (kind, referrer) in fallback.items():
            if d in sizes and d not in absent:
                wanted.setdefault(d, (kind, referrer))
                reached.add(d)
            elif d in embeds.get(loc, ()):
                found.setdefault(d, loc)
            else:
                report.problems.append(
                    Problem(
                        keys.object_key_in(pfx, d),
                        "missing",
                        f"{referrer!r} locates it in {loc!r}; neither that manifest nor "
                        f"{keys.object_key_in(pfx, d)!r} holds it",
                    )
                )
        kinds = {d: kind for loc, d, kind, _ in located}
        for d, loc in found.items():
            reached.add(d)
            f = facts.get(d)
            if f is None:
                continue  # does not decode: reported with its manifest
            if f.kind != kinds[d]:
                report.problems.append(
                    Problem(
                        loc,
                        "wrong-kind",
                        f"embedded object {d.hex()} is a {f.kind}, not a {kinds[d]}",
                    )
                )
            want(f.children, embedded_name(loc, d))
        return found

    found_in = yield from resolve(
        (g.loc, g.digest, "segment", referrer) for referrer, g in segment_refs if g.loc is not None
    )

    # Walk from the manifests and writes. Objects written after the listing (a
    # concurrent put) are fetched, not reported missing on the listing's word.
    frontier = list(wanted)
    while frontier:
        late = [d for d in frontier if d not in sizes]
        fetched = yield from fetch([keys.object_key_in(pfx, d) for d in late])
        for (key, body), digest in zip(fetched, late, strict=True):
            if body is None:
                sizes[digest] = 0
                absent.add(digest)
                report.problems.append(
                    Problem(key, "missing", f"referenced by {wanted[digest][1]!r}")
                )
        absorb(fetched)
        reached.update(frontier)
        nxt: list[bytes] = []
        for digest in frontier:
            for tag, child in facts[digest].children if digest in facts else ():
                if child not in reached and child not in wanted:
                    wanted[child] = (codec.KIND_OF_TAG[tag], keys.object_key_in(pfx, digest))
                    nxt.append(child)
        frontier = nxt

    # The values a segment locates, in the namespace of each list that refers to it.
    for referrer, g in dict.fromkeys(segment_refs):
        f = facts.get(g.digest)
        if f is not None and f.kind == "segment" and g.digest not in absent:
            where = found_in.get(g.digest)
            name = embedded_name(where, g.digest) if where else keys.object_key_in(pfx, g.digest)
            locate(f.located, referrer, name)
    yield from resolve((loc, d, "value", referrer) for loc, d, referrer in values)

    for digest, (expected, referrer) in wanted.items():
        f = facts.get(digest)
        if f is None or digest not in sizes:
            continue
        key = keys.object_key_in(pfx, digest)
        if f.kind != expected and not (expected == "subtree" and f.kind in ("chunk", "node")):
            report.problems.append(
                Problem(key, "wrong-kind", f"{referrer!r} expects a {expected}, found a {f.kind}")
            )
    for digest, f in facts.items():
        if digest not in sizes:
            continue  # embedded only: checked where it is referenced
        key = keys.object_key_in(pfx, digest)
        if f.kind in ("list", "node"):
            report.problems += _count_problems(facts, pfx, f.shape, f"{f.kind} {key!r}")
        elif f.kind == "parts":
            parts = [facts.get(d) for _, d in f.children]
            if all(p is not None and p.kind == "part" for p in parts):
                total = sum(p.length for p in parts if p is not None)
                if total != f.shape:
                    report.problems.append(
                        Problem(key, "shape", f"parts hold {total} bytes, index says {f.shape}")
                    )
    for referrer, sealed in inline_lists:
        report.problems += _count_problems(facts, pfx, sealed, f"the list in {referrer!r}")
    shown: set[tuple[bytes, int]] = set()
    for referrer, g in segment_refs:
        f = facts.get(g.digest)
        if f is None or f.kind != "segment" or f.length == g.count or (g.digest, g.count) in shown:
            continue
        shown.add((g.digest, g.count))
        where = found_in.get(g.digest)
        report.problems.append(
            Problem(
                where or keys.object_key_in(pfx, g.digest),
                "shape",
                f"segment {g.digest.hex()} holds {f.length} elements, "
                f"the list in {referrer!r} says {g.count}",
            )
        )
    for digest in sizes.keys() - reached:
        report.orphan_objects += 1
        report.orphan_bytes += sizes[digest]


_SEALED_NAME = (
    "the sealed name of an encrypted thread's object: open the store with the master key "
    "(OBJSTORE_SAVER_ENCRYPTION_KEY)"
)


def _keyless(listing: ThreadListing, report: VerifyReport) -> None:
    """An encrypted thread without the key of its epoch: leftovers of a delete, or a problem.

    After a delete the epoch it began has no key until its first write makes
    one, before any object of it: all left is of ended epochs (spec §4.11).
    """
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


def _count_problems(
    facts: dict[bytes, Facts], pfx: str, subtrees: Iterable[tuple[bytes, int]], holder: str
) -> list[Problem]:
    """Subtrees holding another element count than ``holder`` (a list or node) says."""
    out = []
    for sub, count in subtrees:
        held = held_in(facts, sub)
        if held is not None and held != count:
            out.append(
                Problem(
                    keys.object_key_in(pfx, sub),
                    "shape",
                    f"holds {held} elements, {holder} says {count}",
                )
            )
    return out


def verify(
    thread_ids: Sequence[str] | None = None, *, now_us: int | None = None
) -> Generator[Batch, list[Any] | None, VerifyReport]:
    """Plan: spec §6.11. Check the named threads, or every thread and the
    long-term store's objects (§8) in the store."""
    report = VerifyReport()
    if thread_ids is None:
        prefixes = yield from thread_prefixes()
    else:
        prefixes = [keys.thread_prefix(t) for t in thread_ids]
    for pfx in prefixes:
        yield from verify_thread(pfx, report)
    if thread_ids is None:
        yield from verify_store(report, round(time.time() * 1e6) if now_us is None else now_us)
    return report
