"""Pure planners of the long-term store (spec §8.4).

Each planner is a generator that yields request batches and receives their
results; it never touches storage, so the blocking and the asyncio drivers run
the very same code. Clock readings come from the :class:`StoreContext`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import store_keys
from objstore_saver.longterm.records import (
    DEL,
    PUT,
    Record,
    decode_item,
    decode_record,
    decode_snapshot,
    encode_item,
    encode_record_and_item,
    encode_snapshot,
    to_micros,
    ttl_micros,
)
from objstore_saver.plans.requests import (
    Delete,
    Get,
    ListKeys,
    Plan,
    Put,
    list_infos,
    run_batch,
    run_one,
)
from objstore_saver.storage.base import ListPage, ObjectInfo, PutMode, StorageError

#: Records beyond the newest snapshot before a writer compacts (N of §8.4).
COMPACT_AFTER = 32
#: Attempts of an index read whose segments vanish under it.
READ_ATTEMPTS = 3
#: Namespaces whose newest clear a context remembers (the least recently used go).
CLEARS_KEPT = 10_000


@dataclass
class StoreContext:
    """Clock, versions and index parameters shared by the planners.

    ``grace`` and ``retention`` are G and R of §8.4.6 (seconds), ``compact_after`` N of
    §8.4; ``wall`` is compared with the store's ``LastModified``.
    """

    clock: Callable[[], float] = time.time
    grace: float = 60.0
    retention: float = 3600.0
    compact_after: int = COMPACT_AFTER
    wall: Callable[[], float] = time.time
    #: On a replica, seconds an object may arrive after the rest (else None).
    replica_lag: float | None = None
    versions: store_keys.Versions = field(init=False)
    #: Per namespace path, the newest clear (§8.4.9) this context has listed
    #: (``""``: listed, none). A path it never listed is absent.
    clears: OrderedDict[str, str] = field(init=False, default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.versions = store_keys.Versions(self.clock)

    def now(self) -> int:
        """The clock in microseconds."""
        return to_micros(self.clock())

    def saw_clear(self, path: str, clear: str) -> None:
        """Remember that the namespace ``path`` was listed with ``clear`` as its newest clear."""
        if clear >= self.clears.get(path, ""):
            self.clears[path] = clear
        self.clears.move_to_end(path)
        while len(self.clears) > CLEARS_KEPT:
            self.clears.popitem(last=False)

    def next_version(self, path: str) -> str:
        """A new version for a write to ``path``: above the newest clear known there."""
        return self.versions.next(above=self.clears.get(path, ""))


@dataclass
class NamespaceIndex:
    """What one LIST and the reads of §8.3 tell about a namespace.

    ``snapshots`` and ``records`` hold what the newest clear left in force;
    ``ended`` what it ended (older records, snapshots and clear markers).
    """

    path: str
    snapshots: list[ObjectInfo] = field(default_factory=list)
    records: list[ObjectInfo] = field(default_factory=list)
    covered: frozenset[str] = frozenset()
    state: dict[str, Record] = field(default_factory=dict)
    clears: list[ObjectInfo] = field(default_factory=list)
    ended: list[ObjectInfo] = field(default_factory=list)

    @property
    def cleared(self) -> str:
        """The newest clear's version, ``""`` if none is listed."""
        return max((record_name(i.key) for i in self.clears), default="")

    def settle(self) -> None:
        """Move what the newest clear ended (spec §8.3) from the lists to ``ended``."""
        c = self.cleared
        if not c:
            return
        self.ended += [i for i in self.clears if record_name(i.key) < c]
        self.ended += [i for i in self.records if store_keys.name_version(record_name(i.key)) < c]
        self.ended += [i for i in self.snapshots if not _of_clear(record_name(i.key), c)]
        self.clears = [i for i in self.clears if record_name(i.key) >= c]
        self.records = [i for i in self.records if store_keys.name_version(record_name(i.key)) >= c]
        self.snapshots = [i for i in self.snapshots if _of_clear(record_name(i.key), c)]

    def fold(self, rec: Record) -> None:
        """Fold a record read into the state, unless the newest clear ended it."""
        if rec.v >= self.cleared:
            fold(self.state, rec)

    @property
    def newest_snapshot(self) -> ObjectInfo | None:
        return max(self.snapshots, key=lambda o: o.key) if self.snapshots else None

    def ns(self) -> tuple[str, ...] | None:
        """The namespace labels, from any record read."""
        for rec in self.state.values():
            return rec.ns
        return None

    def live(self, now_us: int) -> list[Record]:
        """Live items in creation order."""
        return sorted((r for r in self.state.values() if r.live(now_us)), key=lambda r: r.cv)


def record_name(key: str) -> str:
    return key.rsplit("/", 1)[1]


def _of_clear(snapshot: str, clear: str) -> bool:
    """A snapshot built after ``clear`` and above it (none ended it)."""
    return (
        store_keys.snapshot_clear(snapshot) == clear and store_keys.name_version(snapshot) >= clear
    )


def group_index(infos: Sequence[ObjectInfo]) -> dict[str, NamespaceIndex]:
    """Index keys grouped by namespace path; other keys are ignored."""
    groups: dict[str, NamespaceIndex] = {}
    for info in infos:
        parsed = store_keys.parse_index_key(info.key)
        if parsed is None:
            continue
        group = groups.setdefault(parsed.path, NamespaceIndex(parsed.path))
        kinds = {"s": group.snapshots, "r": group.records, "c": group.clears}
        kinds[parsed.kind].append(info)
    for group in groups.values():
        group.settle()
    return groups


def fold(state: dict[str, Record], rec: Record) -> None:
    """Keep per key the record with the greatest version (spec §8.3)."""
    old = state.get(rec.key)
    if old is None or rec.v > old.v:
        state[rec.key] = rec


def read_indexes(
    prefix: str,
    what: str,
    skip: Callable[[NamespaceIndex], bool] | None = None,
    infos: Sequence[ObjectInfo] | None = None,
) -> Plan[dict[str, NamespaceIndex]]:
    """Sub-plan: LIST ``prefix`` and build the state of every namespace under it (§8.3).

    Two concurrent rounds after the LIST: newest snapshots, then the records they
    do not cover. A segment deleted after the LIST restarts the read (StorageError
    naming ``what`` after the last attempt). Groups ``skip`` picks are returned
    unread. ``infos``, a listing of ``prefix`` the caller has, saves the first LIST.
    """
    for attempt in range(READ_ATTEMPTS):
        if attempt == 0 and infos is not None:
            listed = group_index(infos)
        else:
            listed = group_index((yield from list_infos(prefix)))
        if (yield from _fill([g for g in listed.values() if skip is None or not skip(g)])):
            return listed
    raise StorageError(f"index segments of {what} kept vanishing while read; try again")


def _fill(groups: Sequence[NamespaceIndex]) -> Plan[bool]:
    """Fold into each listed group its newest snapshot, then the records that snapshot does
    not cover (one concurrent round each); False when a segment vanished since listed."""
    snaps = [(g, g.newest_snapshot) for g in groups if g.snapshots]
    got = yield from run_batch(*(Get(info.key) for _, info in snaps if info is not None))
    if any(data is None for data in got):
        return False
    for (group, info), data in zip(snaps, got, strict=True):
        assert info is not None
        snap = decode_snapshot(data, info.key)
        group.covered = snap.covered
        for rec in snap.records:
            group.fold(rec)
    wanted = [(g, i) for g in groups for i in g.records if record_name(i.key) not in g.covered]
    got = yield from run_batch(*(Get(info.key) for _, info in wanted))
    if any(data is None for data in got):
        return False
    for (group, info), data in zip(wanted, got, strict=True):
        group.fold(decode_record(data, info.key))
    return True


def get_items(
    wanted: Sequence[tuple[tuple[str, ...], str]], now_us: int
) -> Plan[list[Record | None]]:
    """§8.4.2 step 1 for several items: one GET each, all in one concurrent batch.

    Returns, in the order asked, each live item or None when absent or expired.
    """
    got = yield from run_batch(*(Get(store_keys.item_key(ns, key)) for ns, key in wanted))
    return [_live_item(data, ns, key, now_us) for (ns, key), data in zip(wanted, got, strict=True)]


def _live_item(
    data: bytes | None, namespace: tuple[str, ...], key: str, now_us: int
) -> Record | None:
    if data is None:
        return None
    obj_key = store_keys.item_key(namespace, key)
    rec = decode_item(data, obj_key)
    if rec.ns != tuple(namespace) or rec.key != key:
        raise CorruptObjectError(obj_key, f"holds item {rec.key!r} of namespace {rec.ns!r}")
    return rec if rec.live(now_us) else None


def _saw_clears(ctx: StoreContext, namespace: tuple[str, ...], page: ListPage) -> Plan[None]:
    """Remember the newest clear of a namespace from the first page of its clear markers."""
    infos = yield from list_infos(store_keys.clears_prefix(namespace), page=page)
    ctx.saw_clear(
        store_keys.namespace_path(namespace), max((record_name(i.key) for i in infos), default="")
    )


def put_item(
    ctx: StoreContext,
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    *,
    ttl: float | None,
    vectors: dict[str, bytes],
) -> Plan[Record]:
    """§8.4.1: a put that keeps ``created_at`` of a live item."""
    now = ctx.now()
    path = store_keys.namespace_path(namespace)
    if path in ctx.clears:
        old = (yield from get_items([(namespace, key)], now))[0]
    else:
        # First write of the namespace here: its clears come in the GET's round trip.
        got = yield from run_batch(
            Get(store_keys.item_key(namespace, key)), ListKeys(store_keys.clears_prefix(namespace))
        )
        old = _live_item(got[0], namespace, key, now)
        yield from _saw_clears(ctx, namespace, got[1])
    version = ctx.next_version(path)
    rec = Record(
        ns=tuple(namespace),
        key=key,
        v=version,
        op=PUT,
        value=value,
        ca=old.ca if old else now,
        ua=now,
        cv=old.cv if old else version,
        ttl=ttl,
        ea=None if ttl is None else now + ttl_micros(ttl),
        vec=vectors,
    )
    yield from write_record(ctx, rec)
    return rec


def refresh_item(ctx: StoreContext, rec: Record) -> Plan[Record]:
    """§8.4.2 step 2: write the same item again with its TTL counted from now."""
    fresh = rec.refreshed(ctx.next_version(store_keys.namespace_path(rec.ns)), ctx.now())
    yield from write_record(ctx, fresh)
    return fresh


def delete_item(ctx: StoreContext, namespace: tuple[str, ...], key: str) -> Plan[None]:
    """§8.4.3: a tombstone record, then the item object goes.

    No GET first: after a put interrupted between its record and its item, the
    index holds an item the item object does not, and only a tombstone hides it.
    """
    now = ctx.now()
    version = ctx.next_version(store_keys.namespace_path(namespace))
    rec = Record(tuple(namespace), key, version, DEL, None, now, now, version)
    yield from write_record(ctx, rec)


def write_record(ctx: StoreContext, rec: Record) -> Plan[None]:
    """Put steps 2-7 (or delete steps 1-2) for a record whose fields are final."""
    ns = rec.ns
    path = store_keys.namespace_path(ns)
    if path not in ctx.clears:  # the namespace's clear markers, unless its index was listed
        page = yield from run_one(ListKeys(store_keys.clears_prefix(ns)))
        yield from _saw_clears(ctx, ns, page)
    known = ctx.clears.get(path, "")
    if rec.v < known:
        rec = after_clear(ctx, rec, known)  # versioned before this context listed the clear
    name = store_keys.record_name(rec.v, rec.key, op_letter(rec))
    rec_key = store_keys.index_prefix(ns) + "r/" + name
    record, item = encode_record_and_item(rec)
    stored = yield from run_one(Put(rec_key, record, PutMode.CREATE))
    if not stored:
        raise StorageError(f"index record {rec_key!r} already exists (version reused)")
    yield from run_one(_item_op(rec, item))
    infos = yield from list_infos(store_keys.index_prefix(ns))
    group = group_index(infos).get(path, NamespaceIndex(path))
    ctx.saw_clear(path, group.cleared)
    if group.cleared > known:
        # Step 7: a namespace delete came between; this write belongs after it.
        yield from write_record(ctx, after_clear(ctx, rec, group.cleared))
        yield from run_one(Delete((rec_key,)))
        return
    yield from _repair(rec, name, group.records)
    if _needs_compaction(ctx, group):
        yield from compact(ctx, ns, group)


def after_clear(ctx: StoreContext, rec: Record, clear: str) -> Record:
    """The same write with a version above ``clear``; an item created before it begins anew."""
    version = ctx.versions.next(above=clear)
    if rec.cv < clear:
        return replace(rec, v=version, cv=version, ca=rec.ua)
    return replace(rec, v=version)


def op_letter(rec: Record) -> str:
    """The ``<o>`` of a record's name (spec §8.1): delete, put without or with a TTL."""
    if rec.op == DEL:
        return store_keys.DELETED
    return store_keys.PERMANENT if rec.ttl is None else store_keys.EXPIRING


def _repair(rec: Record, name: str, infos: Sequence[ObjectInfo]) -> Plan[None]:
    """Put step 5: make the item object hold the newest record of its key."""
    h = store_keys.key_hash(rec.key)
    newer = [
        i.key
        for i in infos
        if store_keys.record_hash(record_name(i.key)) == h and record_name(i.key) > name
    ]
    if not newer:
        return
    newest_key = max(newer)
    data = yield from run_one(Get(newest_key))
    if data is None:
        return
    other = decode_record(data, newest_key)
    if other.key != rec.key or other.v <= rec.v:
        return
    yield from run_one(_item_op(rec, encode_item(other) if other.op == PUT else None))


def _item_op(rec: Record, item: bytes | None) -> Put | Delete:
    """The request that leaves ``item`` in the item object of ``rec``'s key (None: no item)."""
    obj_key = store_keys.item_key(rec.ns, rec.key)
    return Delete((obj_key,)) if item is None else Put(obj_key, item, PutMode.OVERWRITE)


def _needs_compaction(ctx: StoreContext, group: NamespaceIndex) -> bool:
    newest = group.newest_snapshot
    after = [
        i for i in group.records if newest is None or record_name(i.key) > record_name(newest.key)
    ]
    return len(after) > ctx.compact_after


def compact(ctx: StoreContext, ns: tuple[str, ...], group: NamespaceIndex) -> Plan[str | None]:
    """§8.4.6: fold a namespace's index into a new snapshot; return its key (None: gave up)."""
    newest = group.newest_snapshot
    if not (yield from _fill([group])):
        return None  # a concurrent compaction replaced a segment; nothing to do now
    horizon = int((ctx.clock() - ctx.retention) * 1e9)
    kept = [
        r
        for r in sorted(group.state.values(), key=lambda r: r.cv)
        if r.op == PUT or store_keys.version_nanos(r.v) >= horizon
    ]
    # Every listed record is now covered: the snapshot's, and those read above.
    new_cov = sorted(record_name(i.key) for i in group.records)
    permanent = sum(1 for r in kept if r.op == PUT and r.ttl is None)
    version = ctx.next_version(store_keys.namespace_path(ns))
    snap_key = (
        store_keys.index_prefix(ns)
        + "s/"
        + store_keys.snapshot_name(version, permanent, group.cleared)
    )
    yield from run_one(Put(snap_key, encode_snapshot(ns, new_cov, kept), PutMode.CREATE))
    yield from _collect(ctx, group, newest)
    return snap_key


def _collect(ctx: StoreContext, group: NamespaceIndex, newest: ObjectInfo | None) -> Plan[None]:
    """§8.4.6 step 5: delete what the newest snapshot older than G made redundant."""
    cutoff = ctx.wall() - ctx.grace
    ended = [i.key for i in group.ended if _older_than(i, cutoff)]
    ripe = [i for i in group.snapshots if _older_than(i, cutoff)]
    if not ripe:
        if ended:
            yield from run_one(Delete(tuple(ended)))
        return
    settled = max(ripe, key=lambda i: i.key)
    covered = group.covered
    if newest is None or settled.key != newest.key:
        data = yield from run_one(Get(settled.key))
        if data is None:
            return
        covered = decode_snapshot(data, settled.key).covered
    doomed = [i.key for i in group.records if record_name(i.key) in covered]
    doomed += [i.key for i in group.snapshots if i.key < settled.key]
    doomed += ended
    if doomed:
        yield from run_one(Delete(tuple(doomed)))


def _older_than(info: ObjectInfo, cutoff: float) -> bool:
    return info.last_modified < datetime.fromtimestamp(cutoff, tz=UTC)


@dataclass(frozen=True, slots=True)
class Expired:
    """An expired item found in an index."""

    namespace: tuple[str, ...]
    key: str
    version: str
    expires_at_us: int


def expired_items(namespace_prefix: tuple[str, ...], now_us: int) -> Plan[list[Expired]]:
    """§8.4.7: the expired items of every namespace under a prefix (reads the index only)."""
    groups = yield from read_indexes(
        store_keys.listing_prefix(namespace_prefix), f"namespace prefix {namespace_prefix!r}"
    )
    n = len(namespace_prefix)
    out = [
        Expired(r.ns, r.key, r.v, r.ea)
        for g in groups.values()
        for r in g.state.values()
        if r.op == PUT and r.ea is not None and r.ea <= now_us and r.ns[:n] == namespace_prefix
    ]
    return sorted(out, key=lambda e: (e.namespace, e.key))


def sweep_item(ctx: StoreContext, item: Expired) -> Plan[bool]:
    """§8.4.7: delete an expired item unless a put or refresh renewed it; True if deleted."""
    obj_key = store_keys.item_key(item.namespace, item.key)
    data = yield from run_one(Get(obj_key))
    if data is None:
        return False
    rec = decode_item(data, obj_key)
    now = ctx.now()
    if rec.v != item.version or rec.live(now):
        return False
    version = ctx.next_version(store_keys.namespace_path(rec.ns))
    gone = replace(rec, v=version, op=DEL, value=None, vec={}, ua=now)
    yield from write_record(ctx, gone)
    return True
