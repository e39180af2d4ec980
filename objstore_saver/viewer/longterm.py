"""The viewer's reads of the long-term store (spec §8; docs/viewer.md, "The long-term
store"): pure plans, no writes. Items come from the index state (spec §8.3), which holds
every item's value, so listing a namespace never GETs an item object.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from objstore_saver.format import store_keys
from objstore_saver.longterm import plans
from objstore_saver.longterm.records import PUT, decode_snapshot
from objstore_saver.ops._common import SubPlan
from objstore_saver.ops.longterm import get_plan, iso, item_rows
from objstore_saver.plans.requests import Get, run_one

#: Characters of a value shown as its preview in item lists.
PREVIEW = 160
#: Largest JSON text of an item value sent by the item view (the rest is cut).
MAX_VALUE = 100_000


class StoreLookupError(LookupError):
    """A namespace or item asked for is not in the long-term store."""


def preview(value: Any) -> str:
    """The start of a value's JSON text (raw text: pages escape it)."""
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= PREVIEW else s[:PREVIEW] + "…"


def namespaces_plan(prefix: tuple[str, ...], after: str | None, limit: int, now_us: int) -> SubPlan:
    """Plan: one page of the namespaces under ``prefix``, with live and expired item counts.

    One listing of the index; only the ``limit`` paths of the page (after the
    ``next`` cursor ``after``) have their index read. A namespace holding no item
    is left out, so a page may hold fewer than ``limit`` rows.
    """
    infos = yield from plans.list_infos(store_keys.listing_prefix(prefix))
    groups = plans.group_index(infos)
    n = len(prefix)

    def may_match(path: str) -> bool:
        labels = store_keys.path_labels(path)
        # a hashed path (long namespace) tells its labels only once read
        return labels is None or labels[:n] == prefix

    paths = [p for p in sorted(groups) if may_match(p) and (after is None or p > after)]
    page = set(paths[:limit])
    more = len(paths) > limit
    read = yield from plans.read_indexes(
        store_keys.listing_prefix(prefix),
        f"namespace prefix {prefix!r}",
        skip=lambda g: g.path not in page,
        infos=infos,
    )
    rows = []
    for path in sorted(page):
        group = read.get(path)
        if group is None:
            continue  # its segments went away between the two listings
        ns = group.ns()
        if ns is None or ns[:n] != prefix:
            continue
        puts = [r for r in group.state.values() if r.op == PUT]
        live = sum(r.live(now_us) for r in puts)
        if puts:
            rows.append(
                {"namespace": list(ns), "items": live, "expired": len(puts) - live, "path": path}
            )
    return {
        "prefix": list(prefix),
        "namespaces": rows,
        "next": max(page) if more and page else None,
    }


def namespace_plan(namespace: tuple[str, ...], offset: int, limit: int, now_us: int) -> SubPlan:
    """Plan: one page of a namespace's items, by key, from its index (no item GET);
    StoreLookupError when it holds no item."""
    groups = yield from plans.read_indexes(
        store_keys.index_prefix(namespace), f"namespace {namespace!r}"
    )
    infos = yield from plans.list_infos(store_keys.items_prefix(namespace))
    sizes = {i.key: i.size for i in infos}
    state = {k: r for g in groups.values() for k, r in g.state.items() if r.ns == namespace}
    rows = item_rows(namespace, state, sizes, now_us)
    if not rows:
        raise StoreLookupError(f"namespace {namespace!r} holds no item")
    live = sum(not row["expired"] for row in rows)
    items = [
        {**{k: v for k, v in row.items() if k != "record"}, "preview": preview(row["record"].value)}
        for row in rows[offset : offset + limit]
    ]
    return {
        "namespace": list(namespace),
        "items": items,
        "live": live,
        "expired": len(rows) - live,
        "total": len(rows),
        "offset": offset,
        "next_offset": offset + limit if offset + limit < len(rows) else None,
    }


def _membership(namespace: Sequence[str], key: str) -> SubPlan:
    """Sub-plan: the index records of ``key`` (by name, LIST only) and whether the newest
    snapshot holds the key and covers each record."""
    groups = plans.group_index((yield from plans.list_infos(store_keys.index_prefix(namespace))))
    h = store_keys.key_hash(key)
    records: list[dict[str, Any]] = []
    snapshot = None
    for group in groups.values():
        newest = group.newest_snapshot
        covered: frozenset[str] = frozenset()
        if newest is not None:
            data = yield from run_one(Get(newest.key))
            if data is not None:
                snap = decode_snapshot(data, newest.key)
                covered = snap.covered
                held = [r for r in snap.records if r.key == key]
                snapshot = {
                    "key": newest.key,
                    "holds_key": bool(held),
                    "version": held[0].v if held else None,
                }
        for info in sorted(group.records, key=lambda i: i.key):
            name = plans.record_name(info.key)
            if store_keys.record_hash(name) != h:
                continue  # another key's record (hashes of 16 hex digits may collide: names only)
            records.append(
                {
                    "key": info.key,
                    "version": store_keys.name_version(name),
                    "op": store_keys.record_op(name),
                    "covered_by_snapshot": name in covered,
                }
            )
    return records, snapshot


def item_plan(namespace: tuple[str, ...], key: str, now_us: int) -> SubPlan:
    """Plan: one item decoded (one GET of its object), and its index records and snapshot.

    StoreLookupError: no item object; CorruptObjectError: it does not decode.
    """
    obj_key, rec, data = yield from get_plan(namespace, key)
    if rec is None:
        raise StoreLookupError(f"no item {key!r} in namespace {namespace!r}")
    records, snapshot = yield from _membership(namespace, key)
    text = json.dumps(rec.value, ensure_ascii=False, sort_keys=True)
    value: Any = rec.value
    if len(text) > MAX_VALUE:
        value = {"truncated": True, "json_chars": len(text), "start": text[:MAX_VALUE]}
    return {
        "namespace": list(rec.ns),
        "key": rec.key,
        "object": obj_key,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "value": value,
        "version": rec.v,
        "created_at": iso(rec.ca),
        "updated_at": iso(rec.ua),
        "ttl_minutes": rec.ttl,
        "expires_at": iso(rec.ea),
        "expired": not rec.live(now_us),
        # spec §8.2: dims float32 little-endian; the numbers themselves are not shown
        "vectors": [
            {"field": p, "dims": len(b) // 4, "bytes": len(b)} for p, b in sorted(rec.vec.items())
        ],
        "index_records": records,
        "snapshot": snapshot,
    }
