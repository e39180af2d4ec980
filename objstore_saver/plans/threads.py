"""Plans over whole threads: delete, copy and delete by run (spec §6.6-6.8)."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from objstore_saver.errors import (
    CheckpointConflictError,
    CorruptObjectError,
    InvalidIdentifierError,
    MissingObjectError,
)
from objstore_saver.format import codec, keys
from objstore_saver.format.codec import Manifest
from objstore_saver.plans.context import LIST_READ_AHEAD, Context, Step
from objstore_saver.plans.epochs import ended_manifests
from objstore_saver.plans.reading import (
    checkpoint_manifests,
    decode_checked_manifest,
    list_write_keys,
    read_metadata,
)
from objstore_saver.plans.requests import (
    Batch,
    Delete,
    Get,
    Put,
    Shred,
    list_all,
    list_infos,
    run_batch,
    run_one,
)
from objstore_saver.plans.writing import embedded_in, store_embedded
from objstore_saver.storage.base import MAX_DELETE_BATCH, ObjectInfo


@dataclass
class ThreadListing:
    """Keys of one thread, by kind (spec §3); ``unknown`` holds keys the format does not define."""

    pfx: str
    manifests: list[ObjectInfo] = field(default_factory=list)
    writes: list[ObjectInfo] = field(default_factory=list)
    objects: list[ObjectInfo] = field(default_factory=list)
    runs: list[ObjectInfo] = field(default_factory=list)
    marks: list[ObjectInfo] = field(default_factory=list)
    unknown: list[ObjectInfo] = field(default_factory=list)
    superseded: list[ObjectInfo] = field(default_factory=list)
    """Version-1 manifests of checkpoints that also have a version-2 one."""
    tombstones: list[ObjectInfo] = field(default_factory=list)
    """Tombstones of every namespace (spec §4.11), each namespace's newest first."""
    parsed: dict[str, keys.CheckpointKeyParts] = field(
        default_factory=dict, repr=False, compare=False
    )
    """What :meth:`add` parsed of each key under ``checkpoints/``."""

    @property
    def epoch(self) -> int:
        """The thread's epoch as its tombstones show it: the greatest begun, 0 if none."""
        return max(((keys.tombstone_epoch_of(o.key) or 0) for o in self.tombstones), default=0)

    def written_after(self, since: datetime) -> bool:
        """Whether a manifest, a write or a content object was stored after ``since``."""
        return any(
            o.last_modified > since
            for infos in (self.manifests, self.writes, self.objects)
            for o in infos
        )

    @property
    def namespaces(self) -> list[str]:
        """Tokens of the namespaces that hold a manifest, a write or a tombstone, in key order."""
        found: dict[str, None] = {}
        for o in self.tombstones + self.manifests + self.superseded + self.writes:
            _, rest = keys.split_thread_key(o.key)
            area, _, tail = rest.partition("/")
            if area == "checkpoints":
                found[tail.partition("/")[0]] = None
        return sorted(found)

    @property
    def run_index_keys(self) -> list[str]:
        return [f"{keys.RUNS}{o.key.rsplit('/', 1)[1]}/{self.token}" for o in self.runs]

    @property
    def token(self) -> str:
        """The thread's key token (``threads/<token>/``)."""
        return self.pfx[len(keys.THREADS) : -1]

    def add(self, info: ObjectInfo) -> None:
        """File one key of this thread, in listing order, under its kind (a version-2 manifest
        supersedes the version-1 one listed right before it)."""
        kind = info.key[len(self.pfx) :].split("/", 1)[0]
        if kind == "checkpoints":
            try:
                parts = keys.parse_checkpoint_key(info.key)
            except ValueError:
                self.unknown.append(info)
                return
            self.parsed[info.key] = parts
            if parts.kind == "write":
                self.writes.append(info)
            elif parts.kind == "tombstone":
                self.tombstones.append(info)
            elif (
                parts.version == 2
                and self.manifests
                and self.manifests[-1].key + keys.V2_MANIFEST_SUFFIX == info.key
            ):
                self.superseded.append(self.manifests.pop())
                self.manifests.append(info)
            else:
                self.manifests.append(info)
            return
        {
            "writes": self.writes,
            "objects": self.objects,
            "runs": self.runs,
            "marks": self.marks,
        }.get(kind, self.unknown).append(info)

    def key_parts(self, key: str) -> keys.CheckpointKeyParts:
        """A manifest, pending-write or tombstone key's parts, parsed once when the listing
        filed it (ValueError for another key)."""
        parts = self.parsed.get(key)
        return keys.parse_checkpoint_key(key) if parts is None else parts

    def every(self) -> list[ObjectInfo]:
        """Every key of the thread, of every kind."""
        return (
            self.superseded
            + self.manifests
            + self.writes
            + self.objects
            + self.runs
            + self.marks
            + self.tombstones
            + self.unknown
        )


def hex_name(key: str, length: int) -> bool:
    """Whether a key's last part is ``length`` lowercase hex digits (64: an address)."""
    name = key.rsplit("/", 1)[1]
    return len(name) == length and not name.strip("0123456789abcdef")


def digest_of_key(key: str) -> bytes:
    return bytes.fromhex(key.rsplit("/", 1)[1])


def list_thread_keys(pfx: str) -> Generator[Batch, list[Any] | None, ThreadListing]:
    """Sub-plan: every key of a thread, sorted by kind, the unknown ones included."""
    listing = ThreadListing(pfx)
    for info in (yield from list_infos(pfx)):
        listing.add(info)
    return listing


def list_thread(pfx: str) -> Generator[Batch, list[Any] | None, ThreadListing]:
    """Sub-plan: every key of a thread, sorted by kind; an unknown key is a CorruptObjectError."""
    listing = yield from list_thread_keys(pfx)
    if listing.unknown:
        raise CorruptObjectError(listing.unknown[0].key, "unknown key under a thread prefix")
    return listing


def thread_id_of(listing: ThreadListing) -> Generator[Batch, list[Any] | None, str | None]:
    """Sub-plan: the thread id of a listed thread from its token, else (a hashed token, spec §3)
    from a manifest; None for one that holds no manifest."""
    tid = keys.untoken(listing.token)
    if tid is not None or not listing.manifests:
        return tid
    key = listing.manifests[0].key
    body = yield from run_one(Get(key))
    return None if body is None else codec.decode_manifest(body, key).thread_id


def batched_deletes(keys_: Sequence[str]) -> list[Delete]:
    """DeleteObjects requests of at most 1,000 keys each, in the keys' order."""
    return [
        Delete(tuple(keys_[start : start + MAX_DELETE_BATCH]))
        for start in range(0, len(keys_), MAX_DELETE_BATCH)
    ]


def delete_keys(keys_: Sequence[str]) -> Generator[Batch, list[Any] | None, None]:
    """Sub-plan: delete ``keys_`` in order, 1,000 a request, one request after the other."""
    for op in batched_deletes(keys_):
        yield from run_one(op)


def oldest_first(manifests: Iterable[ObjectInfo]) -> list[str]:
    # Within a namespace keys run newest first; reverse so the head goes last.
    return [o.key for o in reversed(list(manifests))]


def delete_thread(ctx: Context, thread_id: str) -> Step:
    """Plan: spec §6.6. An unknown key is left for an operator, then a CorruptObjectError."""
    pfx = keys.thread_prefix(thread_id)
    listing = yield from list_thread_keys(pfx)
    yield from delete_listing(ctx, thread_id, listing)
    if listing.unknown:
        raise CorruptObjectError(
            listing.unknown[0].key,
            f"unknown key under a thread prefix: thread {thread_id!r} is deleted, "
            f"{len(listing.unknown)} such key(s) left in place",
        )


ROOT_NAMESPACE = keys.token("checkpoint_ns", "")


def end_epoch(ctx: Context, thread_id: str, listing: ThreadListing) -> Step:
    """Sub-plan: tombstone every listed namespace of a thread (create-only), a new epoch (§6.6).

    At least the seconds since :data:`keys.EPOCH_ORIGIN`: a conversation begun
    while a prune swept the thread's old tombstones is still ended.
    """
    seen = max(listing.epoch, ctx.epochs.of_thread(thread_id) or 0)
    epoch = max(seen + 1, keys.epoch_floor(ctx.wall_clock()))
    body = codec.encode_tombstone(thread_id=thread_id, epoch=epoch)
    namespaces = sorted({ROOT_NAMESPACE, *listing.namespaces})
    yield from run_batch(
        *(Put(keys.tombstone_key_in(listing.pfx, ns, epoch), body) for ns in namespaces)
    )
    ctx.saw_epoch(thread_id, epoch)
    return epoch


def delete_listing(ctx: Context, thread_id: str, listing: ThreadListing) -> Step:
    """Sub-plan: delete a listed thread (spec §6.6): tombstone, key, then sweep.

    Once the tombstone is stored no reader returns anything listed: a delete
    that stops part-way has deleted the thread. Unknown keys are left in place.
    """
    pfx = listing.pfx
    # Forget before deleting: if a delete fails after removing some keys, the
    # memories must not vouch for them (a put would then skip writing them).
    ctx.objects.forget_thread(pfx)
    ctx.entries.forget_prefix(pfx)
    ctx.heads.forget_thread(thread_id)
    ctx.marked_runs.discard_where(lambda m: m.startswith(thread_id + "\0"))
    epoch = yield from end_epoch(ctx, thread_id, listing)
    # The key goes next: then no copy of the thread's objects (a backup, a replica,
    # a noncurrent version) can be read, whether or not the sweep completes.
    shredded = yield from run_one(Shred(pfx, epoch))
    yield from delete_keys([o.key for o in listing.superseded] + oldest_first(listing.manifests))
    # No manifest is left: what they referenced goes in one round of requests,
    # with the tombstones this one supersedes.
    older = [o.key for o in listing.tombstones if (keys.tombstone_epoch_of(o.key) or 0) < epoch]
    yield from run_batch(
        *batched_deletes([o.key for o in listing.writes]),
        *batched_deletes([o.key for o in listing.objects]),
        *batched_deletes([o.key for o in listing.marks]),
        *batched_deletes(older),
    )
    if shredded and listing.objects:
        # Listed by the destroyed key's names, they are listed again by their sealed
        # names, which no key in force opens (spec §4.11).
        again = yield from list_infos(pfx + "objects/")
        sealed = [o.key for o in again if hex_name(o.key, keys.SEALED_NAME_LEN)]
        yield from run_batch(*batched_deletes(sealed))
    yield from delete_keys([o.key for o in listing.runs] + listing.run_index_keys)
    # Again at the end: a key a rekey or a late writer wrote back meanwhile is not
    # left behind. The new epoch's key is never touched.
    yield from run_one(Shred(pfx, epoch))


def copy_thread(ctx: Context, source_thread_id: str, target_thread_id: str) -> Step:
    """Plan: spec §6.7."""
    src = keys.thread_prefix(source_thread_id)
    dst = keys.thread_prefix(target_thread_id)
    listing = yield from list_thread(src)
    # The checkpoints of ended epochs (spec §4.11) stay behind, with their
    # writes: the copy has no tombstone that would hide them.
    ended = yield from ended_manifests(listing.manifests, listing.tombstones)
    gone = {listing.key_parts(k).checkpoint for k in ended}
    writes = [o for o in listing.writes if listing.key_parts(o.key).checkpoint not in gone]
    # A name that is not an address was sealed by an ended epoch's key: unreadable.
    objects = [o for o in listing.objects if len(o.key.rsplit("/", 1)[1]) == 64]
    # Objects before writes before manifests: whatever a copied key reaches is
    # already in place when it appears.
    for group_keys in (objects, writes):
        plain = [o.key for o in group_keys]
        for start in range(0, len(plain), LIST_READ_AHEAD * 2):
            group = plain[start : start + LIST_READ_AHEAD * 2]
            bodies = yield from run_batch(*(Get(k) for k in group))
            puts = []
            for k, body in zip(group, bodies, strict=True):
                if body is None:
                    raise MissingObjectError(k, f"the listing of thread {source_thread_id!r}")
                puts.append(Put(dst + k[len(src) :], body))
            yield from run_batch(*puts)
    run_ids = [r for o in listing.runs if (r := keys.untoken(o.key.rsplit("/", 1)[1])) is not None]
    yield from run_batch(
        *(Put(k, b"") for r in run_ids for k in keys.run_markers(target_thread_id, r))
    )
    for k in oldest_first(o for o in listing.manifests if o.key not in ended):
        body = yield from run_one(Get(k))
        if body is None:
            continue  # deleted since it was listed
        m = decode_checked_manifest(body, k)
        new_key = dst + k[len(src) :]  # the same version's key in the target thread
        new_body = codec.replace_thread_id(body, k, target_thread_id)
        created = yield from run_one(Put(new_key, new_body))
        if not created:
            stored = yield from run_one(Get(new_key))
            if stored != new_body:
                raise CheckpointConflictError(
                    target_thread_id, m.checkpoint_ns, m.checkpoint_id, new_key
                )


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> Step:
    """Plan: spec §6.8 (what a deleted manifest embeds is stored alone first)."""
    for run_id in run_ids:
        if not isinstance(run_id, str):
            raise InvalidIdentifierError(f"run_id must be a string, got {run_id!r}")
        suffix = "\0" + run_id
        ctx.marked_runs.discard_where(lambda m, suffix=suffix: m.endswith(suffix))
        index = yield from list_all(keys.run_prefix(run_id))
        for index_key in index:
            thread_tok = index_key.rsplit("/", 1)[1]
            pfx = f"{keys.THREADS}{thread_tok}/"
            manifest_keys = checkpoint_manifests((yield from list_all(pfx + "checkpoints/")))
            doomed: list[tuple[str, Manifest]] = []
            for start in range(0, len(manifest_keys), LIST_READ_AHEAD):
                group = manifest_keys[start : start + LIST_READ_AHEAD]
                bodies = yield from run_batch(*(Get(k) for k in group))
                for k, body in zip(group, bodies, strict=True):
                    if body is None:
                        continue
                    m = decode_checked_manifest(body, k)
                    md = yield from read_metadata(ctx, m, k)
                    if md.get("run_id") == run_id:
                        doomed.append((k, m))
            yield from store_embedded(ctx, pfx, embedded_in(m for _, m in doomed))
            doomed_keys = [k for k, _ in doomed]
            ctx.entries.forget(doomed_keys)  # before deleting, as in delete_thread
            yield from delete_keys(list(reversed(doomed_keys)))
            listed_writes = yield from list_write_keys(doomed)
            yield from delete_keys([k for ks in listed_writes for k in ks])
            marker = f"{pfx}runs/{keys.token('run_id', run_id)}"
            yield from delete_keys([marker, index_key])
