"""A long-term store namespace's delete: a clear (spec §8.4.9). Pure planners only.

The clear marker is stored before anything is removed, so every reader and
writer, whose index LIST shows it, leaves what it ended alone at once; the
item and index deletes after it only reclaim space, and a run stopped
anywhere is completed by the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from objstore_saver.format import store_keys
from objstore_saver.longterm.plans import (
    NamespaceIndex,
    StoreContext,
    after_clear,
    group_index,
    list_infos,
    record_name,
    write_record,
)
from objstore_saver.longterm.records import decode_record, encode_clear
from objstore_saver.plans.requests import Get, Plan, Put, Shred, run_batch, run_one
from objstore_saver.plans.threads import batched_deletes
from objstore_saver.storage.base import ObjectInfo, PutMode, StorageError


@dataclass
class Cleared:
    """What a namespace delete did (or, as a dry run, would do)."""

    namespace: tuple[str, ...]
    #: The clear's version (``None`` in a dry run).
    clear: str | None = None
    items: int = 0
    index_objects: int = 0
    #: Puts and deletes concurrent with the clear, written again after it (step 4).
    rewritten: list[str] = field(default_factory=list)
    #: The namespace's keys were shredded (encryption on).
    shredded: bool = False


def _index(namespace: tuple[str, ...]) -> Plan[NamespaceIndex]:
    path = store_keys.namespace_path(namespace)
    infos = yield from list_infos(store_keys.index_prefix(namespace))
    return group_index(infos).get(path, NamespaceIndex(path))


def delete_all(found: list[str]) -> Plan[None]:
    """DELETE ``found``, 1,000 keys a request, the requests in one concurrent round."""
    yield from run_batch(*batched_deletes(found))


def _all_index(group: NamespaceIndex) -> list[ObjectInfo]:
    return [*group.records, *group.snapshots, *group.clears, *group.ended]


def survey(namespace: tuple[str, ...]) -> Plan[Cleared]:
    """A dry run: what a clear of ``namespace`` would delete (two LISTs, nothing written)."""
    group = yield from _index(namespace)
    items = yield from list_infos(store_keys.items_prefix(namespace))
    # Everything listed in the index ends with the clear, older markers included.
    return Cleared(tuple(namespace), items=len(items), index_objects=len(_all_index(group)))


def clear_namespace(ctx: StoreContext, namespace: tuple[str, ...]) -> Plan[Cleared]:
    """§8.4.9: delete every item and index object of ``namespace``, shredding its keys.

    Raises:
        StorageError: the clear marker's version was taken (a clock gone
            backwards together with a random collision); names the marker.
    """
    ns = tuple(namespace)
    path = store_keys.namespace_path(ns)
    # 1-2. A version above everything listed; the marker, create-only.
    group = yield from _index(ns)
    top = max((store_keys.name_version(record_name(i.key)) for i in _all_index(group)), default="")
    clear = ctx.versions.next(above=max(top, ctx.clears.get(path, "")))
    marker = store_keys.clears_prefix(ns) + clear
    if not (yield from run_one(Put(marker, encode_clear(ns, clear), PutMode.CREATE))):
        raise StorageError(f"clear marker {marker!r} already exists (version reused)")
    ctx.saw_clear(path, clear)
    done = Cleared(ns, clear)
    # 3. The items.
    items = yield from list_infos(store_keys.items_prefix(ns))
    yield from delete_all([i.key for i in items])
    done.items = len(items)
    # 4. Writes concurrent with this clear, written again in its epoch.
    group = yield from _index(ns)
    newest: dict[str, str] = {}
    for info in group.records:
        h = store_keys.record_hash(record_name(info.key))
        newest[h] = max(newest.get(h, ""), info.key)
    rewritten: set[str] = set()
    got = yield from run_batch(*(Get(k) for k in newest.values()))
    for data, key in zip(got, newest.values(), strict=True):
        if data is None:
            continue  # a later write of that key replaced it, and was written after the marker
        rec = decode_record(data, key)
        yield from write_record(ctx, after_clear(ctx, rec, clear))
        rewritten.add(store_keys.record_hash(record_name(key)))
        done.rewritten.append(rec.key)
    # The records the rewrites replaced go with what the clear ended (step 6).
    replaced = [
        i.key for i in group.records if store_keys.record_hash(record_name(i.key)) in rewritten
    ]
    # 5. The keys of the ended epochs (a store that does not encrypt sends nothing).
    shredded = yield from run_one(Shred(store_keys.index_prefix(ns), store_keys.clear_epoch(clear)))
    done.shredded = bool(shredded)
    # 6. Everything the clear ended, as step 4 listed it (what lands below the
    # clear later is ended too, and goes with a compaction or store-sweep).
    yield from delete_all([*replaced, *(i.key for i in group.ended)])
    done.index_objects = len(group.ended)
    return done
