"""Operator jobs of the long-term store (spec §8): ``store_ls``, ``store_get``,
``store_du`` and ``store_sweep`` (docs/store.md, "Operating").

Namespaces are sequences of labels, never split. Item facts come from the index
(spec §8.3), sizes from LISTs of the item tree: no GET per item.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from objstore_saver.errors import ConfigurationError, CorruptObjectError, UnsupportedFormatError
from objstore_saver.format import store_keys
from objstore_saver.longterm import plans
from objstore_saver.longterm.clear import delete_all
from objstore_saver.longterm.records import (
    DEL,
    PUT,
    Record,
    decode_clear,
    decode_item,
    to_datetime,
    to_micros,
)
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    aopen_store,
    never_cancel,
    no_progress,
    open_store,
    tally,
)
from objstore_saver.ops.delete_coalescing import coalescing_driver
from objstore_saver.ops.fanout import (
    DEFAULT_CONCURRENCY,
    blocking,
    check_concurrency,
    each,
    for_each,
)
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.plans.prune_rules import TOMBSTONE_WINDOW
from objstore_saver.plans.requests import Get, ListKeys, run_batch, run_one
from objstore_saver.storage.base import ObjectInfo, sealing_layer

#: Items per page of ``store_ls`` unless told.
DEFAULT_PAGE = 100
#: Item objects outside the index read per batch by the sweep.
STRAY_BATCH = 64


def iso(micros: int | None) -> str | None:
    """Microseconds since the epoch as ISO 8601 UTC text (None stays None)."""
    return None if micros is None else to_datetime(micros).isoformat()


def _labels(what: str, namespace: Sequence[str]) -> tuple[str, ...]:
    out = tuple(namespace)
    for label in out:
        if not isinstance(label, str):
            raise JobError(f"{what} {out!r}: label {label!r} is not a string")
    return out


def _indexes(prefix: tuple[str, ...]) -> SubPlan:
    return plans.read_indexes(store_keys.listing_prefix(prefix), f"namespace prefix {prefix!r}")


def _states(
    prefix: tuple[str, ...], groups: dict[str, plans.NamespaceIndex]
) -> dict[tuple[str, ...], dict[str, Record]]:
    """The records by key of each namespace of ``groups`` under ``prefix``."""
    found = ((group.ns(), group.state) for group in groups.values())
    return {ns: state for ns, state in found if ns is not None and ns[: len(prefix)] == prefix}


def store_objects(prefix: tuple[str, ...]) -> SubPlan:
    """Sub-plan: every item and index object under the listing of ``prefix``."""
    items = yield from plans.list_infos(store_keys.listing_prefix(prefix, store_keys.ITEMS))
    index = yield from plans.list_infos(store_keys.listing_prefix(prefix, store_keys.INDEX))
    return items + index


def _item_sizes(prefix: tuple[str, ...]) -> SubPlan:
    infos = yield from plans.list_infos(store_keys.listing_prefix(prefix, store_keys.ITEMS))
    return {info.key: info.size for info in infos}


def item_rows(
    ns: tuple[str, ...], state: dict[str, Record], sizes: dict[str, int], now_us: int
) -> list[dict[str, Any]]:
    """The items of one namespace's index state as listing rows, ordered by key (with the
    record, for callers that show more; ``size`` None when the object is missing)."""
    records = sorted((r for r in state.values() if r.op == PUT), key=lambda r: r.key.encode())
    return [
        {
            "key": rec.key,
            "record": rec,
            "size": sizes.get(store_keys.item_key(ns, rec.key)),
            "created_at": iso(rec.ca),
            "updated_at": iso(rec.ua),
            "expires_at": iso(rec.ea),
            "expired": not rec.live(now_us),
        }
        for rec in records
    ]


def _ls_plan(prefix: tuple[str, ...], now_us: int) -> SubPlan:
    states = _states(prefix, (yield from _indexes(prefix)))
    sizes = yield from _item_sizes(prefix)
    rows: list[dict[str, Any]] = []
    namespaces: list[dict[str, Any]] = []
    for ns in sorted(states):
        items = item_rows(ns, states[ns], sizes, now_us)
        rows += [{"namespace": list(ns), **_public(row)} for row in items]
        if items:
            live = sum(not row["expired"] for row in items)
            namespaces.append({"namespace": list(ns), "items": live, "expired": len(items) - live})
    return namespaces, rows


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "record"}


def store_ls(
    prefix: Sequence[str] = (),
    *,
    limit: int = DEFAULT_PAGE,
    offset: int = 0,
    config: OpsConfig | None = None,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Namespaces and items under a namespace prefix (empty: all), one page of items.

    Items are ordered by namespace, then key; expired ones a sweep has not removed yet
    say ``expired: true``. Returns ``{"prefix", "namespaces": [{namespace, items,
    expired}], "items": [{namespace, key, size, created_at, updated_at, expires_at,
    expired}], "total", "offset", "next_offset"}`` (None on the last page).

    Raises:
        JobError: ``limit``/``offset`` out of range or a label is not a string.
    """
    ns = _labels("namespace prefix", prefix)
    if limit < 1 or offset < 0:
        raise JobError(f"limit must be at least 1 and offset at least 0, got {limit}, {offset}")
    with open_store(config) as (store, driver):
        namespaces, rows = driver.run(_ls_plan(ns, round(clock() * 1e6)))
        return {
            "store": store.location,
            "prefix": list(ns),
            "namespaces": namespaces,
            "items": rows[offset : offset + limit],
            "total": len(rows),
            "offset": offset,
            "next_offset": offset + limit if offset + limit < len(rows) else None,
        }


def get_plan(namespace: tuple[str, ...], key: str) -> SubPlan:
    """Sub-plan: ``(object key, record or None, bytes or b"")`` of an item, expired or not;
    ``CorruptObjectError`` when the object does not decode or holds another item."""
    obj_key = store_keys.item_key(namespace, key)
    data = yield from run_one(Get(obj_key))
    if data is None:
        return obj_key, None, b""
    rec = decode_item(data, obj_key)
    if rec.ns != namespace or rec.key != key:
        raise CorruptObjectError(obj_key, f"holds item {rec.key!r} of namespace {rec.ns!r}")
    return obj_key, rec, data


def store_get(
    namespace: Sequence[str],
    key: str,
    *,
    config: OpsConfig | None = None,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """One item, its value decoded to JSON (one GET, and a LIST for its stored size when
    the store is encrypted; no TTL refresh).

    An expired item a sweep has not removed yet is returned with
    ``expired: true`` (LangGraph's ``get`` no longer returns it).

    Raises:
        JobError: no such item (names namespace and key), or an empty namespace.
        CorruptObjectError: the item object does not decode (names the key).
    """
    ns = _labels("namespace", namespace)
    if not ns:
        raise JobError(f"namespace of key {key!r} is empty; give at least one label")
    with open_store(config) as (store, driver):
        obj_key, rec, data = driver.run(get_plan(ns, key))
        if rec is None:
            raise JobError(f"no item {key!r} in namespace {ns!r} of {store.location}")
        size: int | None = len(data)
        if sealing_layer(store) is not None:
            # What was read is the opened item: its stored size is the listing's.
            page = driver.run(run_one(ListKeys(obj_key, limit=1)))
            size = next((o.size for o in page.objects if o.key == obj_key), None)
        return {
            "store": store.location,
            "object": obj_key,
            "namespace": list(rec.ns),
            "key": rec.key,
            "value": rec.value,
            "size": size,
            "version": rec.v,
            "created_at": iso(rec.ca),
            "updated_at": iso(rec.ua),
            "ttl_minutes": rec.ttl,
            "expires_at": iso(rec.ea),
            "expired": not rec.live(round(clock() * 1e6)),
            "indexed_fields": sorted(rec.vec),
        }


KINDS = ("items", "index records", "snapshots", "clear markers", "other")


def store_du(prefix: Sequence[str] = (), *, config: OpsConfig | None = None) -> dict[str, Any]:
    """Objects and bytes of the long-term store, by kind (:data:`KINDS`) and by namespace
    (LIST only); a namespace whose path is hashed is shown by its path."""
    ns = _labels("namespace prefix", prefix)
    with open_store(config) as (store, driver):
        infos = driver.run(store_objects(ns))
    wanted = store_keys.namespace_path(ns) if ns else ""
    by_kind = {k: {"objects": 0, "bytes": 0} for k in KINDS}
    by_ns: dict[str, dict[str, Any]] = {}
    for info in infos:
        path, kind = store_keys.classify(info.key)
        # a listing prefix may reach a sibling (hashed path lead): keep ns's own tree
        if wanted and path and path != wanted and not path.startswith(wanted + "/"):
            continue
        tally(by_kind, kind, info.size)
        labels = store_keys.path_labels(path)  # None: hashed, shown by its path
        row = tally(by_ns, path, info.size, namespace=path if labels is None else list(labels))
        tally(row.setdefault("by_kind", {}), kind, info.size)
    return {
        "store": store.location,
        "prefix": list(ns),
        "total": {
            "objects": sum(v["objects"] for v in by_kind.values()),
            "bytes": sum(v["bytes"] for v in by_kind.values()),
        },
        "by_kind": by_kind,
        "by_namespace": [by_ns[p] for p in sorted(by_ns)],
    }


def _sweep_plan(prefix: tuple[str, ...], now: float, window: float, grace: float) -> SubPlan:
    """Sub-plan: (expired items, unreadable keys, what namespace deletes left) of a sweep."""
    groups = yield from _indexes(prefix)
    sizes = yield from _item_sizes(prefix)
    found, bad = yield from _sweep_candidates(prefix, _states(prefix, groups), sizes, now)
    left = yield from _clear_leftovers(prefix, groups, sizes, now, window, grace, bad)
    return found, bad, left


def _sweep_candidates(
    prefix: tuple[str, ...],
    states: dict[tuple[str, ...], dict[str, Record]],
    sizes: dict[str, int],
    now: float,
) -> SubPlan:
    """Sub-plan: (expired items, unreadable keys): those the index names, and item objects
    it does not hold as a put (a crash between a delete's record and DELETE), read."""
    now_us = to_micros(now)
    found: list[tuple[plans.Expired, Record | None]] = []
    kept: set[str] = set()
    for ns, state in states.items():
        for rec in state.values():
            if rec.op != PUT:
                continue
            kept.add(store_keys.item_key(ns, rec.key))
            if rec.ea is not None and rec.ea <= now_us:
                found.append((plans.Expired(ns, rec.key, rec.v, rec.ea), rec))
    strays = sorted(k for k in sizes if k not in kept)
    bodies: list[bytes | None] = []
    for start in range(0, len(strays), STRAY_BATCH):  # bounds the bytes held at once
        bodies += yield from run_batch(*(Get(k) for k in strays[start : start + STRAY_BATCH]))
    bad: list[dict[str, str]] = []
    n = len(prefix)
    for key, data in zip(strays, bodies, strict=True):
        if data is None:
            continue
        try:
            rec = decode_item(data, key)
        except (CorruptObjectError, UnsupportedFormatError) as exc:
            bad.append({"key": key, "detail": str(exc)})
            continue
        if rec.ns[:n] == prefix and rec.ea is not None and rec.ea <= now_us:
            found.append((plans.Expired(rec.ns, rec.key, rec.v, rec.ea), None))
    return sorted(found, key=lambda f: (f[0].namespace, f[0].key)), bad


def _clear_leftovers(
    prefix: tuple[str, ...],
    groups: dict[str, plans.NamespaceIndex],
    sizes: dict[str, int],
    now: float,
    window: float,
    grace: float,
    bad: list[dict[str, str]],
) -> SubPlan:
    """Sub-plan: ``[(path, labels, ended keys, marker keys, newest marker)]`` that namespace
    deletes (spec §8.4.9) left under ``prefix``.

    The index objects the newest clear ended once it is ``grace`` old; or the markers
    themselves once ``window`` old, when the namespace holds nothing else.
    """
    with_items = {store_keys.classify(k)[0] for k in sizes}
    out: list[tuple[str, list[str], list[str], list[str], ObjectInfo]] = []
    for path in sorted(groups):
        group = groups[path]
        if not group.clears:
            continue
        newest = max(group.clears, key=lambda i: i.key)
        age = now - newest.last_modified.timestamp()
        alone = not (group.records or group.snapshots or path in with_items)
        markers_only = all(store_keys.classify(i.key)[1] == "clear markers" for i in group.ended)
        if alone and markers_only and age >= window:
            ended, markers = [], sorted(i.key for i in [*group.ended, *group.clears])
        elif age >= grace and group.ended:
            ended, markers = sorted(i.key for i in group.ended), []
        else:
            continue
        labels = store_keys.path_labels(path) or group.ns()
        if labels is None:
            labels = yield from _marker_labels(newest.key, bad)
        if labels is not None and labels[: len(prefix)] == prefix:
            out.append((path, list(labels), ended, markers, newest))
    return out


def _marker_labels(key: str, bad: list[dict[str, str]]) -> SubPlan:
    """Sub-plan: the labels a clear marker names (never sealed); None if gone or unreadable."""
    data = yield from run_one(Get(key))
    if data is None:
        return None
    try:
        return decode_clear(data, key)[0]
    except (CorruptObjectError, UnsupportedFormatError) as exc:
        bad.append({"key": key, "detail": str(exc)})
        return None


def _sweep_one(ctx: plans.StoreContext, item: plans.Expired, rec: Record | None) -> SubPlan:
    """Sub-plan: sweep one item; True if this run deleted it. An index put whose item
    object is missing (a put crashed before it) gets its tombstone here."""
    if (yield from plans.sweep_item(ctx, item)):
        return True
    if rec is None:
        return False
    data = yield from run_one(Get(store_keys.item_key(item.namespace, item.key)))
    if data is not None:
        return False  # renewed by a put or a refresh since the index was read
    version = ctx.next_version(store_keys.namespace_path(item.namespace))
    gone = replace(rec, v=version, op=DEL, value=None, vec={}, ua=ctx.now())
    yield from plans.write_record(ctx, gone)
    return True


async def astore_sweep(
    prefix: Sequence[str] = (),
    *,
    apply: bool = False,
    config: OpsConfig | None = None,
    clock: Callable[[], float] = time.time,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    tombstone_window: float | None = None,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Delete expired items (spec §8.4.7) and what namespace deletes left (§8.4.9);
    a dry run unless ``apply`` (docs/store.md, "Operating").

    Each expired item is deleted as a delete is, only if still the version found and
    still expired, so a concurrent put or TTL refresh wins; so are expired item objects
    the index no longer holds as a put. A namespace's clear markers go once the newest
    is ``tombstone_window`` seconds old (default 30 days) and it holds nothing else;
    index objects a stopped delete ended go once its marker is a minute old. ``shard``
    owns namespaces by the hash of their path. Idempotent; a crashed run is completed
    by the next.

    Returns:
        ``{"items": [{namespace, key, expires_at, action}], "totals":
        {"expired", "deleted", "renewed"}, "unreadable", "apply", "cancelled",
        "clears": [{namespace, markers, ended, cleared_at, action}], "clear_totals":
        {"namespaces", "markers", "ended"}}``; ``action`` is ``would delete``,
        ``deleted`` or ``renewed`` (a put or refresh came first); ``cleared_at`` is
        the newest marker's time.

    Raises:
        ConfigurationError: a negative ``tombstone_window`` or bad ``concurrency``.
    """
    ns = _labels("namespace prefix", prefix)
    check_concurrency(concurrency)
    window = TOMBSTONE_WINDOW.total_seconds() if tombstone_window is None else tombstone_window
    if window < 0:
        raise ConfigurationError(f"--tombstone-window cannot be negative, got {window:g} s")
    ctx = plans.StoreContext(clock=clock)
    rows: list[dict[str, Any]] = []
    async with aopen_store(config) as (store, driver):
        found, bad, left = await driver.arun(_sweep_plan(ns, clock(), window, ctx.grace))
        left = [entry for entry in left if shard.owns(entry[0])]
        if apply:  # one DELETE round: a namespace whose markers go has no ended object
            await driver.arun(delete_all([k for e in left for k in (*e[2], *e[3])]))
        clears = [
            {
                "namespace": labels,
                "markers": len(markers),
                "ended": len(ended),
                "cleared_at": newest.last_modified.isoformat(),
                "action": "deleted" if apply else "would delete",
            }
            for _, labels, ended, markers, newest in left
        ]
        # The items in flight share DeleteObjects requests (each item's DELETE
        # still follows its record, as the sweep's plan orders them).
        async with coalescing_driver(store) as sweeper:

            async def one(pair: tuple[plans.Expired, Record | None]) -> dict[str, Any]:
                action = "would delete"
                if apply:
                    action = "deleted" if await sweeper.arun(_sweep_one(ctx, *pair)) else "renewed"
                item = pair[0]
                return {
                    "namespace": list(item.namespace),
                    "key": item.key,
                    "expires_at": iso(item.expires_at_us),
                    "action": action,
                }

            run = await for_each(
                each(found),
                one,
                lambda _pair, row: rows.append(row),
                concurrency=concurrency,
                owns=lambda pair: shard.owns(store_keys.namespace_path(pair[0].namespace)),
                name=lambda pair: f"{pair[0].namespace!r} {pair[0].key!r}",
                progress=progress,
                should_cancel=should_cancel if apply else None,
            )
    rows.sort(key=lambda r: (r["namespace"], r["key"]))
    return {
        "store": store.location,
        "prefix": list(ns),
        "apply": apply,
        "cancelled": run.cancelled,
        "shard": str(shard),
        "totals": {
            "expired": sum(shard.owns(store_keys.namespace_path(i.namespace)) for i, _ in found),
            "deleted": sum(r["action"] == "deleted" for r in rows),
            "renewed": sum(r["action"] == "renewed" for r in rows),
        },
        "unreadable": bad,
        "items": rows,
        "tombstone_window": window,
        "clears": clears,
        "clear_totals": {
            "namespaces": len(clears),
            "markers": sum(c["markers"] for c in clears),
            "ended": sum(c["ended"] for c in clears),
        },
        "run": run.to_dict(),
    }


store_sweep = blocking(astore_sweep)
