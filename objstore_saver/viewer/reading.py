"""The viewer's reads that go beyond the CLI's (pure plans): a page of a thread's manifests,
and the referrers of an object within its thread.
"""

from __future__ import annotations

from typing import Any

from objstore_saver import plans
from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import InlineList, Ref
from objstore_saver.ops._common import SubPlan
from objstore_saver.ops.checkpoint_reading import error_of
from objstore_saver.ops.object_views import embedded_address
from objstore_saver.ops.views import READ_AHEAD
from objstore_saver.plans.requests import Get, ListKeys, run_batch, run_one

#: Manifests of the thread scanned per referrers request (the page links to the next ones).
REFERRER_MANIFESTS = 50


#: Keys listed per manifest wanted on a page: a checkpoint's pending writes
#: are listed with it (spec §3), so a page of keys holds fewer checkpoints.
KEYS_PER_MANIFEST = 4


def manifest_page(prefix: str, after: str | None, limit: int) -> SubPlan:
    """Sub-plan: up to ``limit`` manifests listed under ``prefix`` after ``after``, and the
    next page's cursor (the last key consumed; None: the listing ended)."""
    chosen: list[Any] = []
    seen: list[Any] = []
    cursor = after
    while len(chosen) < limit:
        page = yield from run_one(ListKeys(prefix, cursor, min(1000, limit * KEYS_PER_MANIFEST)))
        seen += page.objects
        names = set(plans.checkpoint_manifests(o.key for o in seen))
        chosen = [o for o in seen if o.key in names]
        if not page.truncated or not page.objects:
            if len(chosen) <= limit:
                return chosen, None
            break
        cursor = page.objects[-1].key
    if len(chosen) > limit:
        # The next page starts after the keys of the last checkpoint shown.
        first_left = seen.index(chosen[limit])
        seen, chosen = seen[:first_left], chosen[:limit]
    return chosen, seen[-1].key if seen else None


def referrers_plan(key: str, after: str | None, limit: int) -> SubPlan:
    """Plan: which manifests, and which objects they reference, refer to object ``key``.

    Scans one page of ``limit`` manifests of the thread from ``after``, the list
    and parts objects they point at (once each) and the objects they embed
    (named ``<manifest key>#<hex>``, as ``key`` may be); deeper objects of a
    list's tree are not read (docs/viewer.md). ValueError: ``key`` is neither an
    object key nor an embedded object's address, or ``after`` is not a manifest
    key of its thread.
    """
    where = embedded_address(key)
    pfx, rest = keys.split_thread_key(key if where is None else where[0])
    digest_hex = rest.rsplit("/", 1)[-1] if where is None else where[1].hex()
    if where is None and (not rest.startswith("objects/") or len(digest_hex) != 64):
        raise ValueError(f"key {key!r} is not an object key: only objects have referrers")
    digest = bytes.fromhex(digest_hex)
    prefix = pfx + "checkpoints/"
    if after is not None and not after.startswith(prefix):
        raise ValueError(f"cursor {after!r} is not a manifest key of the thread of {key!r}")
    infos, cursor = yield from manifest_page(prefix, after, limit)
    manifests: list[dict[str, str]] = []
    containers: dict[bytes, str] = {}
    problems: list[dict[str, str]] = []
    objects: list[dict[str, str]] = []
    embedded = 0

    def scan(body: bytes, name: str, tag: str | None, check: bytes | None, **where: str) -> None:
        """Note the object ``name`` if it references the object; ``check``: its own digest."""
        try:
            if check is not None:
                codec.check_digest(body, check, name)
            obj = codec.decode_object(body, name, tag)
        except CorruptObjectError as exc:
            problems.append(error_of(exc))
            return
        if any(child == digest for _, child in plans.child_refs(obj)):
            kind = type(obj).__name__.removesuffix("Obj").lower()  # list, segment, parts...
            objects.append({"key": name, "kind": kind, **where})

    for start in range(0, len(infos), READ_AHEAD):
        group = infos[start : start + READ_AHEAD]
        bodies = yield from run_batch(*(Get(o.key) for o in group))
        for info, body in zip(group, bodies, strict=True):
            if body is None:
                continue  # pruned since the listing
            try:
                m = codec.decode_manifest(body, info.key)
            except CorruptObjectError as exc:
                problems.append(error_of(exc))
                continue
            for d, held in codec.embedded_objects(m).items():
                embedded += 1
                scan(held, f"{info.key}#{d.hex()}", None, None, embedded_in=info.key)
            named = {"checkpoint": m.checkpoint, "metadata": m.metadata, **m.channels}
            for name, e in named.items():
                # An inline list refers to its subtrees and tail elements itself.
                refs = plans.child_refs(e.obj) if isinstance(e, InlineList) else []
                for tag, child in [(e.tag, e.digest)] if isinstance(e, Ref) else refs:
                    if child == digest:
                        manifests.append({"key": info.key, "entry": name})
                    elif tag in ("l", "p", "s"):
                        containers.setdefault(child, tag)
    order = sorted(containers)
    okeys = [keys.object_key_in(pfx, d) for d in order]
    bodies = yield from run_batch(*(Get(k) for k in okeys))
    for d, k, body in zip(order, okeys, bodies, strict=True):
        if body is not None:
            scan(body, k, containers[d], d)
    return {
        "key": key,
        "manifests": manifests,
        "objects": objects,
        "scanned_manifests": len(infos),
        "scanned_objects": len(okeys),
        "scanned_embedded": embedded,
        "problems": problems,
        "next": cursor,
    }
