"""The viewer's views: pure plans over the store, returned as JSON-ready dicts.

Every listing is one page of keys: the threads page lists at most ``limit``
thread prefixes by skip scan and one key page per thread, the thread page one
page of manifest keys and those manifests, so the requests a page makes do
not grow with the number of threads or checkpoints. Nothing here writes.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from objstore_saver import plans
from objstore_saver.errors import CorruptObjectError, ObjstoreSaverError
from objstore_saver.format import codec, keys
from objstore_saver.ops._common import SubPlan
from objstore_saver.ops.checkpoint_reading import manifest_context, resolve_entries
from objstore_saver.ops.views import READ_AHEAD
from objstore_saver.plans.requests import Get, ListKeys, run_batch, run_one
from objstore_saver.verify import verify as verify_plan
from objstore_saver.viewer.reading import manifest_page

#: Keys of one thread listed for its row on the threads page (one LIST page).
ROW_LISTING = 1000


class NotFoundError(ObjstoreSaverError):
    """The thread, checkpoint or object asked for is not in the store (HTTP 404)."""


class BadRequestError(ObjstoreSaverError):
    """A parameter of the request is invalid (HTTP 400); the message names it."""


def _search_prefix(search: str) -> str:
    # Readable tokens are "_" + percent-encoding, which encodes a prefix of a
    # thread id as a prefix of its token; hashed ids are found only unsearched.
    return keys.THREADS if not search else keys.THREADS + "_" + quote(search, safe="")


def _row(pfx: str, page: Any) -> dict[str, Any] | None:
    if not page.truncated and all(keys.is_tombstone_key(o.key) for o in page.objects):
        return None  # a deleted thread holds only its tombstones (spec §4.11)
    listed = [o.key for o in page.objects if o.key[len(pfx) :].startswith("checkpoints/")]
    manifests = plans.checkpoint_manifests(listed)
    last = max((o.last_modified for o in page.objects), default=None)
    tid = keys.untoken(pfx[len(keys.THREADS) : -1])
    return {
        "thread_id": tid,
        "prefix": pfx,
        "checkpoints": len(manifests),
        "checkpoints_at_least": bool(page.truncated),
        "objects": len(page.objects),
        "bytes": sum(o.size for o in page.objects),
        "bytes_at_least": bool(page.truncated),
        "last_update": None if last is None else last.isoformat(),
    }


def threads_page_plan(search: str, after: str | None, limit: int) -> SubPlan:
    """Plan: one page of threads whose id starts with ``search``, in key order.

    ``after`` is the previous page's ``next`` (a thread prefix). Counts come from
    one LIST page of each thread (so may be lower bounds: ``checkpoints_at_least``).
    A deleted thread has no row: a page may hold fewer than ``limit``.
    """
    base = _search_prefix(search)
    start = None if after is None else after[:-1] + "0"
    if start is not None and not after.startswith(base):  # type: ignore[union-attr]
        raise BadRequestError(f"cursor {after!r} is not a thread prefix of this search")
    prefixes: list[str] = []
    while len(prefixes) <= limit:
        page = yield from run_one(ListKeys(base, start, limit=1))
        if not page.objects:
            break
        pfx, _ = keys.split_thread_key(page.objects[0].key)
        prefixes.append(pfx)
        start = pfx[:-1] + "0"  # "0" follows "/": skip the rest of this thread
    more = len(prefixes) > limit
    prefixes = prefixes[:limit]
    listings = yield from run_batch(*(ListKeys(p, None, ROW_LISTING) for p in prefixes))
    rows = [r for p, page in zip(prefixes, listings, strict=True) if (r := _row(p, page))]
    return {
        "search": search,
        "threads": rows,
        "next": prefixes[-1] if more and prefixes else None,
    }


def _manifest_row(key: str, size: int, body: bytes | None, pfx: str) -> SubPlan:
    if body is None:
        return None
    try:
        m = codec.decode_manifest(body, key)
        ctx = manifest_context(m, key)  # its own embedded objects cost no request
        md = (yield from resolve_entries(pfx, {"m": m.metadata}, key, ctx=ctx))["m"]
    except CorruptObjectError as exc:
        return {"key": key, "error": {"key": exc.key, "reason": exc.reason}}
    md = md if isinstance(md, dict) else {}
    return {
        "key": key,
        "checkpoint_id": m.checkpoint_id,
        "checkpoint_ns": m.checkpoint_ns,
        "parent_checkpoint_id": m.parent_checkpoint_id,
        "step": md.get("step"),
        "source": md.get("source"),
        "writes": md.get("writes"),
        "channels": len(m.channels),
        "manifest_bytes": size,
        "parents": md.get("parents") if isinstance(md.get("parents"), dict) else {},
    }


def _parent_step(node: dict[str, Any]) -> tuple[str, Any] | None:
    """The checkpoint whose task ran a subgraph checkpoint: (namespace, id), or None.

    ``a:id|b:id`` nests ``b`` in ``a``; LangGraph's metadata ``parents`` holds the
    checkpoint id current in each enclosing namespace.
    """
    ns = node.get("checkpoint_ns") or ""
    if not ns:
        return None
    parent_ns = ns.rsplit("|", 1)[0] if "|" in ns else ""
    parent_id = (node.get("parents") or {}).get(parent_ns)
    return None if parent_id is None else (parent_ns, parent_id)


def tree_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nest a page of checkpoints: by parent link within a namespace, subgraphs under their step.

    Returns the roots (parent not on the page) with ``children`` and ``subgraphs``
    (docs/viewer.md, "JSON API").
    """
    by_id = {
        (r.get("checkpoint_ns"), r.get("checkpoint_id")): dict(r, children=[], subgraphs=[])
        for r in rows
    }
    roots = []
    for (ns, _), node in sorted(by_id.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
        if node.get("error"):
            roots.append(node)
            continue
        parent = by_id.get((ns, node.get("parent_checkpoint_id")))
        if parent is not None:
            parent["children"].append(node)
            continue
        step = _parent_step(node)
        owner = by_id.get(step) if step is not None else None
        if owner is not None:
            owner["subgraphs"].append(node)
        else:
            roots.append(node)
    return roots


def thread_page_plan(thread_id: str, after: str | None, limit: int) -> SubPlan:
    """Plan: one page of a thread's checkpoints (manifest keys in order) and their tree.

    Within a namespace manifest keys run newest first; namespaces follow each
    other by token. ``after`` is the ``next`` cursor (a manifest key).
    """
    pfx = keys.thread_prefix(thread_id)
    prefix = pfx + "checkpoints/"
    if after is not None and not after.startswith(prefix):
        raise BadRequestError(f"cursor {after!r} is not a manifest key of thread {thread_id!r}")
    infos, cursor = yield from manifest_page(prefix, after, limit)
    if not infos and after is None:
        raise NotFoundError(f"thread {thread_id!r} has no checkpoint")
    rows: list[dict[str, Any]] = []
    for start in range(0, len(infos), READ_AHEAD):
        group = infos[start : start + READ_AHEAD]
        bodies = yield from run_batch(*(Get(o.key) for o in group))
        for info, body in zip(group, bodies, strict=True):
            row = yield from _manifest_row(info.key, info.size, body, pfx)
            if row is not None:
                rows.append(row)
    tree = tree_of(rows)
    return {
        "thread_id": thread_id,
        "checkpoints": rows,
        "tree": tree,
        "forks": _forks(tree),
        "next": cursor,
    }


def _forks(nodes: list[dict[str, Any]]) -> int:
    """Checkpoints with more than one child in these trees."""
    return sum((len(n["children"]) > 1) + _forks(n["children"] + n["subgraphs"]) for n in nodes)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def diff_of(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Channels added/removed/changed, messages added/removed, metadata keys changed."""
    broken = {
        name.removeprefix("channel:")
        for r in (old, new)
        for name in r.get("errors", {})
        if name.startswith("channel:")
    }
    ov = {k: v for k, v in old["channel_values"].items() if k not in broken}
    nv = {k: v for k, v in new["channel_values"].items() if k not in broken}
    changed = sorted(k for k in ov.keys() & nv.keys() if _canon(ov[k]) != _canon(nv[k]))
    om, nm = ov.get("messages"), nv.get("messages")
    messages = None
    if isinstance(om, list) or isinstance(nm, list):
        olds = [_canon(m) for m in om or []] if isinstance(om, list) else []
        news = [_canon(m) for m in nm or []] if isinstance(nm, list) else []
        messages = {
            "added": [m for m, c in zip(nm or [], news, strict=False) if c not in olds],
            "removed": [m for m, c in zip(om or [], olds, strict=False) if c not in news],
        }
    omd, nmd = old.get("metadata") or {}, new.get("metadata") or {}
    omd = omd if isinstance(omd, dict) else {}
    nmd = nmd if isinstance(nmd, dict) else {}
    return {
        "from": old["checkpoint_id"],
        "to": new["checkpoint_id"],
        "errors": {**old.get("errors", {}), **new.get("errors", {})},
        "channels_added": sorted(nv.keys() - ov.keys()),
        "channels_removed": sorted(ov.keys() - nv.keys()),
        "channels_changed": changed,
        "messages": messages,
        "metadata_changed": {
            k: {"from": omd.get(k), "to": nmd.get(k)}
            for k in sorted(omd.keys() | nmd.keys())
            if _canon(omd.get(k)) != _canon(nmd.get(k))
        },
    }


def thread_storage_plan(thread_id: str) -> SubPlan:
    """Plan: objects and bytes of one thread by kind, and a verify of it."""
    pfx = keys.thread_prefix(thread_id)
    listing = yield from plans.list_thread(pfx)
    kinds = {
        "manifests": listing.manifests,
        "writes": listing.writes,
        "objects": listing.objects,
        "run-markers": listing.runs,
        "marks": listing.marks,
    }
    if not any(kinds.values()):
        raise NotFoundError(f"thread {thread_id!r} has no object")
    report = yield from verify_plan([thread_id], read_data=True)
    return {
        "thread_id": thread_id,
        "by_kind": {
            k: {"objects": len(v), "bytes": sum(o.size for o in v)} for k, v in kinds.items()
        },
        "verify": report.to_dict(),
    }
