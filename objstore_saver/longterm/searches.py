"""The long-term store's reads of its index (spec §8.4.4, §8.4.5): live items and namespaces
under a prefix, and on a replica the items a ``get`` asks for.

On a replica (``StoreContext.replica_lag``, docs/replication.md) a namespace
whose key object has not arrived, while its index objects have within the
lag, reads as not replicated yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from objstore_saver.crypto.names import STORE_SCOPE, scope_of_key_object, scope_path, split_scope
from objstore_saver.errors import ThreadKeyMissingError
from objstore_saver.format import store_keys
from objstore_saver.longterm.plans import (
    NamespaceIndex,
    StoreContext,
    list_infos,
    read_indexes,
    record_name,
)
from objstore_saver.longterm.records import Record
from objstore_saver.plans.requests import Plan


def read_arrived_indexes(
    ctx: StoreContext,
    prefix: str,
    what: str,
    skip: Callable[[NamespaceIndex], bool] | None = None,
) -> Plan[dict[str, NamespaceIndex]]:
    """Sub-plan: :func:`~objstore_saver.longterm.plans.read_indexes`, leaving out on a
    replica the namespaces whose key is missing and whose index objects arrived within
    the lag; older, the missing key raises as on any store."""
    arriving: set[str] = set()

    def skipped(group: NamespaceIndex) -> bool:
        return group.path in arriving or (skip is not None and skip(group))

    while True:
        try:
            groups = yield from read_indexes(prefix, what, skipped)
        except ThreadKeyMissingError as exc:
            path = _arriving_path(ctx, exc)
            if path is None or path in arriving:
                raise
            assert ctx.replica_lag is not None
            since = ctx.wall() - ctx.replica_lag
            infos = yield from list_infos(store_keys.INDEX + path + "/x/")
            if not any(o.last_modified.timestamp() > since for o in infos):
                raise
            arriving.add(path)
            continue
        return {p: g for p, g in groups.items() if p not in arriving}


def _arriving_path(ctx: StoreContext, exc: ThreadKeyMissingError) -> str | None:
    """The namespace path whose key ``exc`` misses, when the store is a replica."""
    scope = scope_of_key_object(exc.key)
    if ctx.replica_lag is None or scope is None or not scope.startswith(STORE_SCOPE):
        return None
    return scope_path(split_scope(scope)[0])


def search_candidates(
    ctx: StoreContext, namespace_prefix: tuple[str, ...], now_us: int
) -> Plan[list[Record]]:
    """§8.4.4 steps 1-4 without the filter: live items under a prefix, in result order."""
    groups = yield from read_arrived_indexes(
        ctx, store_keys.listing_prefix(namespace_prefix), f"namespace prefix {namespace_prefix!r}"
    )
    n = len(namespace_prefix)
    by_ns: dict[tuple[str, ...], list[Record]] = {}
    for group in groups.values():
        ns = group.ns()
        if ns is None or ns[:n] != tuple(namespace_prefix):
            continue
        by_ns.setdefault(ns, []).extend(group.live(now_us))
    return [rec for ns in sorted(by_ns) for rec in sorted(by_ns[ns], key=lambda r: r.cv)]


def surely_live(group: NamespaceIndex) -> bool:
    """§8.4.5 step 2 from the listing alone: a live item without TTL is certain (a readable
    path whose newest record of some key is a put without TTL, or whose snapshot holds
    more items without TTL than there are keys with a later record)."""
    if store_keys.path_labels(group.path) is None:
        return False
    newest = group.newest_snapshot
    base = store_keys.name_version(record_name(newest.key)) if newest else ""
    permanent = store_keys.snapshot_permanent(record_name(newest.key)) if newest else 0
    latest: dict[str, str] = {}
    for info in sorted(group.records, key=lambda i: record_name(i.key)):
        name = record_name(info.key)
        if store_keys.name_version(name) > base:
            latest[store_keys.record_hash(name)] = store_keys.record_op(name)
    if store_keys.PERMANENT in latest.values():
        return True
    return permanent > len(latest)


def live_namespaces(
    ctx: StoreContext, prefix: tuple[str, ...], now_us: int
) -> Plan[list[tuple[str, ...]]]:
    """§8.4.5 steps 1-2: the namespaces under ``prefix`` that hold a live item."""
    groups = yield from read_arrived_indexes(
        ctx, store_keys.listing_prefix(prefix), f"namespace prefix {prefix!r}", skip=surely_live
    )
    found = set()
    for group in groups.values():
        if surely_live(group):
            labels = store_keys.path_labels(group.path)
            assert labels is not None
            found.add(labels)
            continue
        ns = group.ns()
        if ns is not None and group.live(now_us):
            found.add(ns)
    return sorted(ns for ns in found if ns[: len(prefix)] == tuple(prefix))


def indexed_items(
    ctx: StoreContext, wanted: Sequence[tuple[tuple[str, ...], str]], now_us: int
) -> Plan[list[Record | None]]:
    """§8.4.2 on a replica: each item as its namespace's index holds it, None if not live.

    The item object holds whichever region's copy landed last (spec §6.16); the
    index the newer, so ``get`` agrees with ``search`` in both regions.
    """
    states: dict[tuple[str, ...], dict[str, Record]] = {}
    for ns in dict.fromkeys(ns for ns, _ in wanted):
        groups = yield from read_arrived_indexes(
            ctx, store_keys.index_prefix(ns), f"namespace {ns!r}"
        )
        group = groups.get(store_keys.namespace_path(ns))
        states[ns] = {} if group is None else group.state
    found = [states[ns].get(key) for ns, key in wanted]
    return [rec if rec is not None and rec.live(now_us) else None for rec in found]
