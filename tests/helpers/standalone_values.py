"""Checkpoints whose data stands alone at ``threads/<T>/objects/<H>``, or is embedded, to damage.

In format version 2 a value of 1-256 KiB serialized is embedded in the
manifest of the put that makes it (spec §4.1, §6.1 step 3); what still
stands alone is the parts of data over 256 KiB compressed (§4.3), what a
manifest that would pass 1 MiB moves out (§4.1) and a pending write's value
over 1 KiB compressed (§6.5 step 2). Each builder here puts one such case
and checks that the saver stored it that way, so a test built on it cannot
quietly damage nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import msgpack
from faultkit import all_keys, put_values
from langgraph.checkpoint.base import empty_checkpoint
from payloads import incompressible_text

from objstore_saver import ObjectStoreSaver
from objstore_saver.format import codec, keys as k
from objstore_saver.format.codec import MANIFEST_BUDGET, PART_SIZE, PartsObj, Ref
from objstore_saver.storage import ObjectStore, PutMode

#: A value object's data at most (an embedded or alone ``value``); larger data is parts.
VALUE_MAX = PART_SIZE
#: Bytes of each value of :func:`values_past_the_budget`: a value object each.
ALONE_VALUE_SIZE = 250_000
#: How many of them carry a manifest past 1 MiB, so that each stands alone.
ALONE_VALUES = MANIFEST_BUDGET // ALONE_VALUE_SIZE + 1


def values_past_the_budget(seed: int, n: int = ALONE_VALUES) -> dict[str, bytes]:
    """``n`` channels of incompressible bytes, each under 256 KiB, together over 1 MiB.

    Embedded, they would carry the manifest past 1 MiB, so the put stores each
    alone as a ``value`` object (spec §4.1).
    """
    return {f"c{i}": random.Random(seed * 100 + i).randbytes(ALONE_VALUE_SIZE) for i in range(n)}


def parts_value(seed: int) -> bytes:
    """Incompressible bytes over 256 KiB: a ``parts`` object and two parts (spec §4.3)."""
    return random.Random(seed).randbytes(VALUE_MAX + 40_000)


def write_value_alone(seed: int) -> str:
    """A pending write's value over 16 KiB compressed: a ``value`` object alone (§6.5 step 2)."""
    return incompressible_text(30_000, seed)


def manifest_key_of(config: dict[str, Any]) -> str:
    c = config["configurable"]
    return k.manifest_key(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])


def manifest_of(store: ObjectStore, config: dict[str, Any]) -> codec.Manifest:
    key = manifest_key_of(config)
    data = store.get(key)
    assert data is not None, key
    return codec.decode_manifest(data, key)


@dataclass(frozen=True)
class Alone:
    """A stored checkpoint and one object of its data that stands alone."""

    config: dict[str, Any]
    """The checkpoint to read."""
    key: str
    """The object's key, ``threads/<T>/objects/<H>``."""
    referrers: tuple[str, ...]
    """What an error for it missing may name as referring to it: the manifest for a
    channel's value or parts, the ``parts`` object for a part, the checkpoint's
    manifest or the write for a write's value."""


def _object_key(thread: str, digest: bytes) -> str:
    return k.object_key_in(k.thread_prefix(thread), digest)


def put_value_alone(saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int) -> Alone:
    """A checkpoint whose channel ``c0`` is a ``value`` object alone (a manifest past 1 MiB)."""
    config = put_values(saver, thread, values_past_the_budget(seed))
    manifest = manifest_of(store, config)
    assert not manifest.embedded
    entry = manifest.channels["c0"]
    assert isinstance(entry, Ref) and entry.tag == "b" and entry.at is None, entry
    key = _object_key(thread, entry.digest)
    assert isinstance(codec.decode_object(store.get(key), key, "b"), codec.ValueObj)
    return Alone(config, key, (manifest_key_of(config),))


def put_parts_alone(saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int) -> Alone:
    """A checkpoint whose channel ``v`` is data over 256 KiB: its ``parts`` object."""
    config = put_values(saver, thread, {"v": parts_value(seed)})
    entry = manifest_of(store, config).channels["v"]
    assert isinstance(entry, Ref) and entry.tag == "p", entry
    return Alone(config, _object_key(thread, entry.digest), (manifest_key_of(config),))


def put_part_alone(saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int) -> Alone:
    """As :func:`put_parts_alone`, the object being the first part the ``parts`` object lists."""
    parts = put_parts_alone(saver, store, thread, seed)
    index = codec.decode_object(store.get(parts.key), parts.key, "p")
    assert isinstance(index, PartsObj) and len(index.parts) == 2, index
    return Alone(parts.config, _object_key(thread, index.parts[0]), (parts.key,))


def put_write_value_alone(
    saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int
) -> Alone:
    """A checkpoint with one pending write, whose value is the thread's only object."""
    config = put_values(saver, thread, {"v": seed})
    saver.put_writes(config, [("w", write_value_alone(seed))], "task")
    (key,) = all_keys(store, k.objects_prefix(thread))
    c = config["configurable"]
    (write,) = all_keys(
        store, k.checkpoint_writes_prefix(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
    )
    return Alone(config, key, (manifest_key_of(config), write))


#: kind -> builder of a checkpoint with one object of that kind alone.
ALONE_KINDS = {
    "value alone": put_value_alone,
    "parts": put_parts_alone,
    "part": put_part_alone,
    "write's value": put_write_value_alone,
}


@dataclass(frozen=True)
class Embedded:
    """A stored checkpoint that reads a value embedded in a manifest."""

    config: dict[str, Any]
    """The checkpoint to read."""
    holder: str
    """The key of the manifest that embeds the value."""
    digest: bytes
    """The value object's address."""
    key: str
    """Where a reader looks for it when ``holder`` does not embed it: ``objects/<H>``."""
    referenced_by: str
    """The key of the manifest read, whose entry locates the value."""

    @property
    def address(self) -> str:
        """``<manifest key>#<hex>``, as ``embedded_values`` helpers take it."""
        return f"{self.holder}#{self.digest.hex()}"


def _value(seed: int) -> str:
    # Over 1 KiB serialized, far under 256 KiB: embedded (spec §4.1).
    return f"value {seed} " + "z" * 5000


def put_embedded(saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int) -> Embedded:
    """A checkpoint whose channel ``v`` is embedded in its own manifest, and nothing alone."""
    config = put_values(saver, thread, {"v": _value(seed)})
    manifest = manifest_of(store, config)
    entry = manifest.channels["v"]
    cid = config["configurable"]["checkpoint_id"]
    assert isinstance(entry, Ref) and entry.tag == "b" and entry.at == cid, entry
    assert entry.digest in codec.embedded_objects(manifest)
    assert all_keys(store, k.objects_prefix(thread)) == []
    mkey = manifest_key_of(config)
    return Embedded(config, mkey, entry.digest, _object_key(thread, entry.digest), mkey)


def put_located(saver: ObjectStoreSaver, store: ObjectStore, thread: str, seed: int) -> Embedded:
    """A child checkpoint that carries its parent's embedded ``v``: located in the parent."""
    parent = put_embedded(saver, store, thread, seed)
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": _value(seed), "n": 1}
    cp["channel_versions"] = {"v": 1, "n": 1}
    child = saver.put(parent.config, cp, {"step": 1}, {"n": 1})  # v is carried
    manifest = manifest_of(store, child)
    assert manifest.channels["v"] == Ref(
        "b", parent.digest, parent.config["configurable"]["checkpoint_id"]
    )
    assert not manifest.embedded
    return Embedded(child, parent.holder, parent.digest, parent.key, manifest_key_of(child))


def rewrite_embedded(store: ObjectStore, holder: str, digest: bytes, body: bytes | None) -> None:
    """Replace the object ``holder`` embeds at ``digest`` by ``body`` (None: drop it).

    The manifest is packed again: it still decodes, but no longer embeds an
    object of that address.
    """
    raw = msgpack.unpackb(store.get(holder))
    bodies = raw["e"]
    (i,) = [n for n, b in enumerate(bodies) if codec.digest_of(b) == digest]
    if body is None:
        del bodies[i]
    else:
        bodies[i] = body
    store.put(holder, msgpack.packb(raw), PutMode.OVERWRITE)


def embedded_body(store: ObjectStore, holder: str, digest: bytes) -> bytes:
    """The bytes of the object ``holder`` embeds at ``digest``."""
    return codec.embedded_objects(codec.decode_manifest(store.get(holder), holder))[digest]
