"""``verify`` of the long-term store's objects (spec §8.4.8): items, index records,
snapshots and clear markers decode, sit at their keys, and agree.

A pure plan filling the checkpoints' ``VerifyReport``; here, not in ``plans/``,
because the long-term store sits above the plans.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

from objstore_saver.errors import CorruptObjectError, UnsupportedFormatError
from objstore_saver.format import store_keys
from objstore_saver.longterm.plans import (
    NamespaceIndex,
    group_index,
    list_infos,
    op_letter,
    record_name,
)
from objstore_saver.longterm.records import (
    PUT,
    Record,
    Snapshot,
    decode_clear,
    decode_item,
    decode_record,
    decode_snapshot,
)
from objstore_saver.plans.requests import Batch, Unopened
from objstore_saver.plans.verify_objects import fetch, opened
from objstore_saver.plans.verify_report import Problem, VerifyReport

T = TypeVar("T")


def _decoded(
    key: str, body: bytes | Unopened, decode: Callable[[bytes, str], T], report: VerifyReport
) -> T | None:
    try:
        return decode(opened(body), key)
    except (CorruptObjectError, UnsupportedFormatError) as exc:
        report.problems.append(Problem(key, "unreadable", str(exc)))
        return None


def _check_snapshot_name(key: str, snap: Snapshot, report: VerifyReport) -> None:
    """A snapshot's name carries its count of items without a TTL (spec §8.3)."""
    permanent = sum(1 for r in snap.records if r.op == PUT and r.ttl is None)
    try:
        named = store_keys.snapshot_permanent(record_name(key))
    except ValueError:
        named = None
    if named != permanent:
        report.problems.append(
            Problem(key, "shape", f"holds {permanent} items without a TTL, its name says {named}")
        )


def _check_index(
    group: NamespaceIndex, report: VerifyReport
) -> Generator[Batch, list[Any] | None, None]:
    """Decode every segment of one namespace's index and build its state (§8.3)."""
    snaps: dict[str, Snapshot] = {}
    for key, body in (yield from fetch([o.key for o in group.snapshots])):
        snap = None if body is None else _decoded(key, body, decode_snapshot, report)
        if snap is not None and store_keys.namespace_path(snap.ns) != group.path:
            report.problems.append(Problem(key, "unreadable", f"snapshot of {snap.ns!r}"))
        elif snap is not None:
            snaps[key] = snap
            _check_snapshot_name(key, snap, report)
    newest = max(snaps) if snaps else None
    if newest is not None:
        group.covered = snaps[newest].covered
        for rec in snaps[newest].records:
            group.fold(rec)
    for key, body in (yield from fetch([o.key for o in group.records])):
        rec = None if body is None else _decoded(key, body, decode_record, report)
        if rec is None:
            continue
        name = store_keys.record_name(rec.v, rec.key, op_letter(rec))
        if key != store_keys.index_prefix(rec.ns) + "r/" + name:
            report.problems.append(
                Problem(key, "unreadable", f"holds record {rec.v} of {rec.key!r} in {rec.ns!r}")
            )
        elif record_name(key) not in group.covered:
            group.fold(rec)
    for key, body in (yield from fetch([o.key for o in group.clears])):
        clear = None if body is None else _decoded(key, body, decode_clear, report)
        if clear is not None and key != store_keys.clears_prefix(clear[0]) + clear[1]:
            report.problems.append(
                Problem(key, "unreadable", f"holds the clear {clear[1]} of {clear[0]!r}")
            )


def verify_store(report: VerifyReport, now_us: int) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: spec §8 objects. Every item, record and snapshot decodes; each item
    agrees with the newest record of its key in its namespace's index, and each
    live put of an index has its item object. Expired leftovers are counted."""
    infos = yield from list_infos(store_keys.ROOT)
    items = [i for i in infos if store_keys.classify(i.key)[1] == "items"]
    item_keys = {i.key for i in items}
    groups = group_index(infos)
    for i in infos:
        if i.key not in item_keys and store_keys.parse_index_key(i.key) is None:
            report.problems.append(Problem(i.key, "unknown-key", "not a key the format defines"))
    report.store_index_objects += sum(
        len(g.records) + len(g.snapshots) + len(g.clears) for g in groups.values()
    )
    state: dict[str, Record] = {}  # item key -> newest record of its key
    for group in groups.values():
        # What a namespace delete ended and did not remove yet (it stopped part-way).
        report.store_unswept += len(group.ended)
        yield from _check_index(group, report)
        report.store_namespaces += 1
        state.update({store_keys.item_key(r.ns, r.key): r for r in group.state.values()})
    for key, body in (yield from fetch([i.key for i in items])):
        newest = state.pop(key, None)  # an unreadable item is not also missing
        item = None if body is None else _decoded(key, body, decode_item, report)
        if item is None:
            continue
        report.store_items += 1
        if key != store_keys.item_key(item.ns, item.key):
            report.problems.append(
                Problem(key, "unreadable", f"holds item {item.key!r} of {item.ns!r}")
            )
            continue
        group = groups.get(store_keys.classify(key)[0])
        if group is not None and item.v < group.cleared:
            report.store_unswept += 1  # of a life a namespace delete ended (§8.4.9)
            continue
        expired = not item.live(now_us)
        if newest == item or (expired and (newest is None or newest.v > item.v)):
            # an expired item, or the expired leftover of a crashed delete: sweep's
            report.store_unswept += expired
            continue
        said = "nothing" if newest is None else f"{newest.op} at version {newest.v}"
        report.problems.append(
            Problem(key, "disagrees", f"item at version {item.v}; its index holds {said}")
        )
    for key, rec in state.items():
        if rec.op != PUT:
            continue
        if not rec.live(now_us):
            report.store_unswept += 1
            continue
        report.problems.append(
            Problem(key, "missing", f"its index holds a live put at version {rec.v}")
        )
