"""The long-term store's namespace delete as an operator job: ``store_delete`` (spec §8.4.9,
docs/store.md, "Deleting a namespace").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from objstore_saver.driver import Driver
from objstore_saver.errors import ObjstoreSaverError
from objstore_saver.format import store_keys
from objstore_saver.longterm import clear, plans
from objstore_saver.longterm.records import (
    decode_clear,
    decode_item,
    decode_record,
    decode_snapshot,
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
)
from objstore_saver.ops.fanout import blocking, each, for_each
from objstore_saver.ops.longterm import _labels, store_objects
from objstore_saver.plans.requests import Get, run_one
from objstore_saver.storage.base import ObjectInfo

#: Namespaces deleted at once.
DELETE_CONCURRENCY = 8


class EmptyPrefixError(JobError, ValueError):
    """``store_delete`` was given no label: it would delete the whole store."""


#: How each kind of store object names its namespace.
_LABELS_OF: dict[str, Callable[[bytes, str], tuple[str, ...]]] = {
    "clear markers": lambda data, key: decode_clear(data, key)[0],
    "items": lambda data, key: decode_item(data, key).ns,
    "index records": lambda data, key: decode_record(data, key).ns,
    "snapshots": lambda data, key: decode_snapshot(data, key).ns,
}


def _found(prefix: tuple[str, ...]) -> SubPlan:
    """Sub-plan: the objects of each namespace path under the prefix's listing that holds
    an item or an index object other than a clear marker."""
    by_path: dict[str, list[ObjectInfo]] = {}
    for info in (yield from store_objects(prefix)):
        path = store_keys.classify(info.key)[0]
        if path:
            by_path.setdefault(path, []).append(info)
    return {
        path: infos
        for path, infos in by_path.items()
        if any(store_keys.classify(i.key)[1] != "clear markers" for i in infos)
    }


async def _hashed_labels(driver: Driver, infos: list[ObjectInfo]) -> tuple[str, ...] | str:
    """The labels of a hashed namespace path from the first of its objects that opens, else
    why none did: clear markers (never sealed) first, then the newest (an older one may
    be sealed with a key a delete destroyed)."""
    keys = sorted((i.key for i in infos), reverse=True)
    keys.sort(key=lambda k: store_keys.classify(k)[1] != "clear markers")
    why = "none of its objects names its labels"
    for key in keys:
        decode = _LABELS_OF.get(store_keys.classify(key)[1])
        if decode is None:
            continue
        try:
            data = await driver.arun(run_one(Get(key)))
            if data is not None:
                return decode(data, key)
        except ObjstoreSaverError as exc:
            why = f"{key}: {exc}"
    return why


def _may_be_under(path: str, prefix: tuple[str, ...]) -> bool:
    """Whether a path that names no labels may be of a namespace under ``prefix``: its
    tokens agree with the prefix's as far as both go (hashed segments ``~~…`` left out)."""
    have = [s for s in path.split("/") if not s.startswith("~~")]
    wanted = [s for s in store_keys.namespace_path(prefix).split("/") if not s.startswith("~~")]
    n = min(len(have), len(wanted))
    return have[:n] == wanted[:n]


async def astore_delete(
    prefix: Sequence[str],
    *,
    apply: bool = False,
    config: OpsConfig | None = None,
    clock: Callable[[], float] = time.time,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Delete a namespace and every namespace below it (spec §8.4.9); a dry run (LISTs
    only) unless ``apply``.

    Each namespace holding an item or an index object is deleted as
    ``delete_namespace`` deletes it (docs/store.md, "Deleting a namespace"); one
    holding only clear markers is left out, so a second run finds nothing, and a run
    stopped anywhere is completed by the next. ``clock``: the clears' versions.

    Returns:
        ``{"store", "prefix", "apply", "cancelled", "namespaces": [{namespace,
        items, index_objects, rewritten, shredded, clear, action}], "totals":
        {"namespaces", "items", "index_objects"}}``, namespaces sorted.
        ``action`` is ``would delete`` or ``deleted``, or ``unreadable`` for
        a hashed namespace path (labels over 400 characters) none of whose
        objects opens to tell its labels (``namespace`` is then the path,
        ``detail`` says why; it is not deleted). ``rewritten`` names the keys
        other processes wrote during the delete, written again after it.

    Raises:
        EmptyPrefixError: ``prefix`` is empty (a ``JobError`` and a ``ValueError``).
        JobError: a label is not a string.
    """
    ns = _labels("namespace prefix", prefix)
    if not ns:
        raise EmptyPrefixError(
            f"namespace prefix {list(ns)!r} is empty: it would delete the whole store; "
            "give at least one label"
        )
    ctx = plans.StoreContext(clock=clock)
    rows: list[dict[str, Any]] = []
    async with aopen_store(config) as (store, driver):
        found = await driver.arun(_found(ns))
        targets: list[tuple[str, ...]] = []
        for path in sorted(found):
            labels = store_keys.path_labels(path)
            if labels is None and _may_be_under(path, ns):
                got = await _hashed_labels(driver, found[path])
                if isinstance(got, str):
                    rows.append(_row(path, clear.Cleared(()), "unreadable") | {"detail": got})
                    continue
                labels = got
            if labels is not None and labels[: len(ns)] == ns:
                targets.append(labels)

        async def one(target: tuple[str, ...]) -> clear.Cleared:
            if apply:
                return await driver.arun(clear.clear_namespace(ctx, target))
            return await driver.arun(clear.survey(target))

        def done(target: tuple[str, ...], got: clear.Cleared) -> None:
            rows.append(_row(list(target), got, "deleted" if apply else "would delete"))

        run = await for_each(
            each(sorted(set(targets))),
            one,
            done,
            concurrency=DELETE_CONCURRENCY,
            name=repr,
            progress=progress,
            should_cancel=should_cancel if apply else None,
        )
    rows.sort(key=lambda r: (isinstance(r["namespace"], str), r["namespace"]))
    gone = [r for r in rows if r["action"] != "unreadable"]
    return {
        "store": store.location,
        "prefix": list(ns),
        "apply": apply,
        "cancelled": run.cancelled,
        "namespaces": rows,
        "totals": {
            "namespaces": len(gone),
            "items": sum(r["items"] for r in gone),
            "index_objects": sum(r["index_objects"] for r in gone),
        },
    }


def _row(namespace: list[str] | str, got: clear.Cleared, action: str) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "items": got.items,
        "index_objects": got.index_objects,
        "rewritten": list(got.rewritten),
        "shredded": got.shredded,
        "clear": got.clear,
        "action": action,
    }


store_delete = blocking(astore_delete)
