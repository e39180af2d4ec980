"""Object encodings (spec §4); decoding checks every rule of §4.6, naming the key at fault."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, TypeGuard

import msgpack

from objstore_saver.errors import (
    CorruptObjectError,
    EncryptedObjectError,
    UnsupportedFormatError,
)
from objstore_saver.format import compression, keys
from objstore_saver.format.compression import ENCODINGS, RAW
from objstore_saver.format.keys import absolute_loc, read_at, relative_loc, stored_at
from objstore_saver.format.model import (
    CHECKPOINT_FORMAT_VERSION as CHECKPOINT_FORMAT_VERSION,
    CHECKPOINT_VERSIONS as CHECKPOINT_VERSIONS,
    CHUNK_LEN as CHUNK_LEN,
    COMPRESS_MIN as COMPRESS_MIN,
    ELEMENT_INLINE_MAX as ELEMENT_INLINE_MAX,
    FORMAT_VERSION as FORMAT_VERSION,
    INDEX_FANOUT as INDEX_FANOUT,
    INLINE_MAX as INLINE_MAX,
    LIST_MIN_MEAN_ELEMENT as LIST_MIN_MEAN_ELEMENT,
    MANIFEST_BUDGET as MANIFEST_BUDGET,
    NODE_FANOUT as NODE_FANOUT,
    PART_SIZE as PART_SIZE,
    SEGMENT_FULL_LEN as SEGMENT_FULL_LEN,
    SEGMENT_MAX_BYTES as SEGMENT_MAX_BYTES,
    SEGMENT_MERGE as SEGMENT_MERGE,
    WRITE_INLINE_MAX as WRITE_INLINE_MAX,
    ChunkObj as ChunkObj,
    Encoded as Encoded,
    Entry as Entry,
    IndexObj as IndexObj,
    IndexRef as IndexRef,
    Inline as Inline,
    InlineList as InlineList,
    ListObj as ListObj,
    Manifest as Manifest,
    NodeObj as NodeObj,
    PartObj as PartObj,
    PartsObj as PartsObj,
    Payload as Payload,
    Ref as Ref,
    SegmentObj as SegmentObj,
    SegmentRef as SegmentRef,
    SplitObj as SplitObj,
    StoredObject as StoredObject,
    ValueObj as ValueObj,
    WriteObj as WriteObj,
    is_segment_count,
)


def digest_of(data: bytes) -> bytes:
    """The content address of an object's bytes (spec §4.5)."""
    return hashlib.sha256(data).digest()


def pack_object(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def make_payload(type_: str, data: bytes) -> Payload:
    """Build a payload of an object, compressing its data when that helps."""
    if len(data) > COMPRESS_MIN:
        encoding, data = compression.compressed(data)
        return Payload(type_, encoding, data)
    return Payload(type_, RAW, data)


def payload_bytes(payload: Payload, key: str) -> tuple[str, bytes]:
    """Return ``(type, serialized bytes)`` of a payload, decompressing it."""
    return payload.type, compression.decompressed(payload.encoding, payload.data, key)


def pack_content(fields: dict[str, Any], epoch: int) -> bytes:
    """Bytes of a content object of the thread's ``epoch`` (spec §4.5, §4.11): ``ep`` makes
    its address differ from the same value's in any other epoch."""
    if epoch:
        fields["ep"] = epoch
    return pack_object(fields)


def encode_split(
    value: Entry, holes: list[tuple[tuple[str | int, ...], Ref]], epoch: int = 0
) -> bytes:
    """Bytes of a split value object (spec §4.4a)."""
    return pack_content(
        {
            "f": FORMAT_VERSION,
            "k": "split",
            "v": entry_to_msgpack(value),
            "s": [[list(path), entry_to_msgpack(ref)] for path, ref in holes],
        },
        epoch,
    )


def entry_to_msgpack(
    entry: Entry, holder: str | None = None, holder_id: str | None = None
) -> list[Any]:
    """An entry as stored, located relative to the manifest ``holder`` (id ``holder_id``)."""
    if isinstance(entry, Inline):
        p = entry.payload
        return ["i", p.type, p.encoding, p.data]
    if isinstance(entry, InlineList):
        o = entry.obj
        sealed: list[list[Any]] = list(map(list, o.sealed))  # [digest, count] pairs
        for g in o.segments:
            sealed.append([g.digest, g.count, relative_loc(g.loc, holder), *INDEX_TAG[g.index]])
        tail = []
        for e in o.tail:
            tail.append(entry_to_msgpack(e, holder, holder_id))
        return ["L", o.count, sealed, tail]
    if entry.at is not None:
        return [entry.tag, entry.digest, stored_at(entry.at, holder_id)]
    return [entry.tag, entry.digest]


def embedded_objects(manifest: Manifest) -> dict[bytes, bytes]:
    """A manifest's embedded objects by address (each hashed here, never trusted)."""
    return {digest_of(body): body for body in manifest.embedded}


def encode_manifest(
    *,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str | None,
    checkpoint: Entry,
    metadata: Entry,
    channels: dict[str, Entry],
    embedded: Sequence[bytes] = (),
    epoch: int = 0,
) -> bytes:
    """Bytes of a manifest (spec §4.1), channels in sorted order, carrying ``embedded``."""
    own = keys.manifest_key(thread_id, checkpoint_ns, checkpoint_id)
    stored = {}
    for k in sorted(channels):
        stored[k] = entry_to_msgpack(channels[k], own, checkpoint_id)
    fields: dict[str, Any] = {
        "f": CHECKPOINT_FORMAT_VERSION,
        "k": "manifest",
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": parent_checkpoint_id,
        "checkpoint": entry_to_msgpack(checkpoint, own, checkpoint_id),
        "metadata": entry_to_msgpack(metadata, own, checkpoint_id),
        "channels": stored,
    }
    if embedded:
        fields["e"] = list(embedded)
    if epoch:
        fields["ep"] = epoch
    return pack_object(fields)


def encode_tombstone(*, thread_id: str, epoch: int) -> bytes:
    """Bytes of a tombstone (spec §4.11): the thread's epochs below ``epoch`` are ended."""
    return pack_object(
        {"f": CHECKPOINT_FORMAT_VERSION, "k": "tombstone", "thread_id": thread_id, "n": epoch}
    )


def _natural(n: object) -> TypeGuard[int]:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _epoch(raw: object, key: str, name: str) -> int:
    if not _natural(raw) or raw > keys.MAX_EPOCH:
        raise CorruptObjectError(key, f"field {name!r} is not an epoch (0..{keys.MAX_EPOCH})")
    return raw


def encode_write(
    *,
    task_id: str,
    task_path: str,
    idx: int,
    channel: str,
    value: Entry,
    seq: int = 0,
    group: tuple[int, ...] = (),
) -> bytes:
    """Bytes of a pending write (spec §4.7)."""
    fields: dict[str, Any] = {
        "f": CHECKPOINT_FORMAT_VERSION,
        "k": "write",
        "task_id": task_id,
        "task_path": task_path,
        "idx": idx,
        "seq": seq,
        "channel": channel,
        "v": entry_to_msgpack(value),
    }
    if group:
        fields["g"] = list(group)
    return pack_object(fields)


def encode_write_group(
    *, task_id: str, task_path: str, writes: Sequence[tuple[int, str, Entry]], seq: int
) -> bytes:
    """Bytes of a write group (spec §4.7): a call's regular writes, ``(idx, channel, entry)``."""
    return pack_object(
        {
            "f": CHECKPOINT_FORMAT_VERSION,
            "k": "writes",
            "task_id": task_id,
            "task_path": task_path,
            "seq": seq,
            "w": [[idx, channel, entry_to_msgpack(v)] for idx, channel, v in writes],
        }
    )


def encode_mark(digests: list[bytes]) -> bytes:
    """Bytes of a sweep mark (spec §4.9): candidate object digests of one prune run."""
    return pack_object({"f": FORMAT_VERSION, "k": "mark", "d": digests})


def decode_mark(data: bytes, key: str) -> list[bytes]:
    """Decode a sweep mark into its digests."""
    obj = unpack_object(data, key, "mark")
    return [_digest(d, key) for d in _field(obj, "d", list, key)]


def replace_thread_id(manifest_bytes: bytes, key: str, thread_id: str) -> bytes:
    """Re-encode a manifest for another thread (copy_thread)."""
    raw = unpack_object(manifest_bytes, key, "manifest", versions=CHECKPOINT_VERSIONS)
    raw["thread_id"] = thread_id
    return pack_object(raw)


def unpack_object(
    data: bytes,
    key: str,
    *kinds: str,
    versions: tuple[int, ...] = (FORMAT_VERSION,),
    sealed: bool = False,
) -> dict[str, Any]:
    """Unpack an object's MessagePack map, checking its format version and kind (a newer
    version is UnsupportedFormatError; a sealed object EncryptedObjectError unless ``sealed``)."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as exc:
        raise CorruptObjectError(key, f"not a MessagePack object ({exc})") from exc
    if not isinstance(obj, dict):
        raise CorruptObjectError(key, "not a MessagePack map")
    if obj.get("k") == "sealed" and not sealed:
        raise EncryptedObjectError(key)
    version = obj.get("f")
    if version not in versions or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool) and version > max(versions):
            raise UnsupportedFormatError(key, version)
        raise CorruptObjectError(key, f"format version {version!r} is not valid")
    kind = obj.get("k")
    if kinds and kind not in kinds:
        raise CorruptObjectError(key, f"expected a {' or '.join(kinds)} object, found {kind!r}")
    return obj


def _field(obj: dict[str, Any], name: str, types: type, key: str) -> Any:
    value = obj.get(name)
    if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
        raise CorruptObjectError(key, f"field {name!r} is missing or has the wrong type")
    return value


def _digest(value: Any, key: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != 32:
        raise CorruptObjectError(key, "a reference is not a 32-byte SHA-256 digest")
    return value


def _payload(raw: Any, key: str) -> Payload:
    ok = isinstance(raw, list) and len(raw) == 3 and isinstance(raw[2], bytes)
    if not (ok and isinstance(raw[0], str) and isinstance(raw[1], str)):
        raise CorruptObjectError(key, "a payload is not [type, encoding, data]")
    if raw[1] not in ENCODINGS:
        raise CorruptObjectError(key, f"unknown payload encoding {raw[1]!r}")
    return Payload(raw[0], raw[1], raw[2])


def decode_entry(raw: Any, key: str) -> Entry:
    """Decode an entry array (spec §4.0)."""
    if isinstance(raw, list) and raw:
        tag = raw[0]
        if tag == "i" and len(raw) == 4:
            return Inline(_payload(raw[1:], key))
        if tag in ("b", "p", "l", "s") and len(raw) == 2:
            return Ref(tag, _digest(raw[1], key))
        if tag == "b" and len(raw) == 3:
            return Ref(tag, _digest(raw[1], key), read_at(raw[2], key, key))
        if tag == "L" and len(raw) == 4 and isinstance(raw[2], list) and isinstance(raw[3], list):
            return InlineList(_list_fields(raw[1], raw[2], raw[3], key, holder=key))
    raise CorruptObjectError(key, f"invalid entry {raw!r:.80}")


def _element_entry(raw: Any, key: str) -> Entry:
    entry = decode_entry(raw, key)
    if isinstance(entry, InlineList):
        raise CorruptObjectError(key, "a list element is an inline list entry")
    return entry


def _list_fields(
    count: Any, sealed_raw: list[Any], tail_raw: list[Any], key: str, holder: str | None = None
) -> ListObj:
    """A list's fields (spec §4.4); ``holder`` resolves an inline list's segment locations."""
    if not _natural(count):
        raise CorruptObjectError(key, f"a list's element count {count!r:.40} is not a count")
    n_sealed = 0
    for raw in sealed_raw:
        if not (isinstance(raw, list) and len(raw) == 2):
            break
        n_sealed += 1
    sealed = _subtree_refs(sealed_raw[:n_sealed], key)
    if n_sealed < len(sealed_raw) and holder is None:
        raise CorruptObjectError(key, "a list object holds a segment reference")
    segments = tuple(_segment_ref(raw, key, holder or key) for raw in sealed_raw[n_sealed:])
    tail = tuple(_element_entry(e, key) for e in tail_raw)
    held = sum(c for _, c in sealed) + sum(g.count for g in segments) + len(tail)
    if held != count:
        raise CorruptObjectError(key, "element count differs from its subtrees and tail")
    return ListObj(count, sealed, tail, segments)


#: What follows ``[H, count, L]`` in a reference to an index, or to a segment (spec §4.4).
INDEX_TAG: dict[bool, tuple[str, ...]] = {True: ("i",), False: ()}


def _is_index_ref(raw: Any, key: str) -> bool:
    """Whether ``raw`` is ``[H, count, L, "i"]`` (an index) rather than ``[H, count, L]``."""
    if isinstance(raw, list) and len(raw) == 4 and raw[3] == "i":
        if not isinstance(raw[1], int) or raw[1] < CHUNK_LEN or raw[1] % CHUNK_LEN:
            raise CorruptObjectError(key, "an index reference's count is not a multiple of 8")
        return True
    if not isinstance(raw, list) or len(raw) != 3 or not is_segment_count(raw[1]):
        raise CorruptObjectError(key, "a segment reference is not [digest, full count, location]")
    return False


def _segment_ref(raw: Any, key: str, holder: str) -> SegmentRef:
    index = _is_index_ref(raw, key)
    return SegmentRef(_digest(raw[0], key), raw[1], absolute_loc(raw[2], holder, key), index)


def _index(obj: dict[str, Any], key: str) -> IndexObj:
    """An index's references (spec §4.4), located by checkpoint id, never ``""``."""
    refs = []
    for raw in _field(obj, "c", list, key):
        index = _is_index_ref(raw, key)
        at = None if raw[2] is None else keys.location_id(raw[2], key, "an index's")
        refs.append(IndexRef(_digest(raw[0], key), raw[1], at, index))
    if not refs:
        raise CorruptObjectError(key, "an index holds no reference")
    return IndexObj(tuple(refs))


def decode_manifest(data: bytes, key: str) -> Manifest:
    """Decode and check a manifest (format version 1 or 2)."""
    obj = unpack_object(data, key, "manifest", versions=CHECKPOINT_VERSIONS)
    channels = _field(obj, "channels", dict, key)
    parent = obj.get("parent_checkpoint_id")
    if parent is not None and not isinstance(parent, str):
        raise CorruptObjectError(key, "field 'parent_checkpoint_id' has the wrong type")
    return Manifest(
        thread_id=_field(obj, "thread_id", str, key),
        checkpoint_ns=_field(obj, "checkpoint_ns", str, key),
        checkpoint_id=_field(obj, "checkpoint_id", str, key),
        parent_checkpoint_id=parent,
        checkpoint=decode_entry(obj.get("checkpoint"), key),
        metadata=decode_entry(obj.get("metadata"), key),
        channels={str(k): decode_entry(v, key) for k, v in channels.items()},
        version=obj["f"],
        embedded=_embedded(obj.get("e", []), key),
        epoch=_epoch(obj.get("ep", 0), key, "ep"),
    )


def _embedded(raw: Any, key: str) -> tuple[bytes, ...]:
    if not isinstance(raw, list) or not all(isinstance(b, bytes) for b in raw):
        raise CorruptObjectError(key, "field 'e' is not an array of embedded objects")
    return tuple(raw)


def _write_group(raw: object, key: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(_natural(i) for i in raw):
        raise CorruptObjectError(key, f"write group must be a list of indexes, got {raw!r}")
    return tuple(raw)


def _write_from(obj: dict[str, Any], key: str) -> WriteObj:
    return WriteObj(
        task_id=_field(obj, "task_id", str, key),
        task_path=_field(obj, "task_path", str, key),
        idx=_field(obj, "idx", int, key),
        channel=_field(obj, "channel", str, key),
        value=decode_entry(obj.get("v"), key),
        seq=_field(obj, "seq", int, key),
        group=_write_group(obj.get("g", []), key),
    )


def decode_writes(data: bytes, key: str) -> list[WriteObj]:
    """Decode and check a pending write or a write group into its writes (spec §4.7)."""
    obj = unpack_object(data, key, "write", "writes", versions=CHECKPOINT_VERSIONS)
    if obj["k"] == "write":
        return [_write_from(obj, key)]
    task_id = _field(obj, "task_id", str, key)
    task_path = _field(obj, "task_path", str, key)
    seq = _field(obj, "seq", int, key)
    rows = _field(obj, "w", list, key)
    out: list[WriteObj] = []
    for row in rows:
        ok = isinstance(row, list) and len(row) == 3 and isinstance(row[1], str)
        if not (ok and _natural(row[0])):
            raise CorruptObjectError(key, f"write group row must be [idx, channel, v], got {row!r}")
        out.append(WriteObj(task_id, task_path, row[0], row[1], decode_entry(row[2], key), seq))
    idxs = [w.idx for w in out]
    if len(idxs) < 2 or idxs != sorted(set(idxs)):
        raise CorruptObjectError(key, f"write group indexes {idxs} are not ascending, distinct, 2+")
    if key.rpartition(".")[2] != keys.write_group_suffix(idxs):
        raise CorruptObjectError(key, f"write group indexes {idxs} do not match its key")
    return out


#: Object kind behind each reference tag (spec §4.0); ``c`` is a chunk or a node.
KIND_OF_TAG = {
    "b": "value",
    "p": "parts",
    "l": "list",
    "c": "subtree",
    "d": "part",
    "s": "split",
    "g": "segment",
    "n": "index",
}

_KINDS_BY_TAG: dict[str | None, tuple[str, ...]] = {
    tag: ("chunk", "node") if tag == "c" else (kind,) for tag, kind in KIND_OF_TAG.items()
}
_KINDS_BY_TAG[None] = (
    *("value", "parts", "list", "node", "chunk", "part", "split", "segment", "index"),
)


def decode_object(data: bytes, key: str, tag: str | None = None) -> StoredObject:
    """Decode a content-addressed object reached through an entry tagged ``tag`` (None: any)."""
    kinds = _KINDS_BY_TAG[tag]
    obj = unpack_object(data, key, *kinds, versions=CHECKPOINT_VERSIONS)
    kind = obj["k"]
    if (obj["f"] == 2) != (kind in ("segment", "index")):
        raise CorruptObjectError(key, f"a {kind} object of format version {obj['f']}")
    if kind == "index":
        return _index(obj, key)
    if kind == "segment":
        return SegmentObj(tuple(_element_entry(e, key) for e in _field(obj, "x", list, key)))
    if kind == "value":
        return ValueObj(_payload(obj.get("p"), key))
    if kind == "part":
        return PartObj(_field(obj, "d", bytes, key))
    if kind == "parts":
        encoding = _field(obj, "e", str, key)
        if encoding not in ENCODINGS:
            raise CorruptObjectError(key, f"unknown payload encoding {encoding!r}")
        return PartsObj(
            type=_field(obj, "t", str, key),
            encoding=encoding,
            size=_field(obj, "n", int, key),
            parts=tuple(_digest(d, key) for d in _field(obj, "p", list, key)),
        )
    if kind == "list":
        count = _field(obj, "n", int, key)
        return _list_fields(count, _field(obj, "c", list, key), _field(obj, "x", list, key), key)
    if kind == "split":
        return _split(obj, key)
    if kind == "node":
        subtrees = _subtree_refs(_field(obj, "c", list, key), key)
        if len(subtrees) != NODE_FANOUT or len({c for _, c in subtrees}) != 1:
            raise CorruptObjectError(key, f"a node holds {NODE_FANOUT} subtrees of one size")
        return NodeObj(subtrees)
    items = tuple(_element_entry(e, key) for e in _field(obj, "x", list, key))
    if len(items) != CHUNK_LEN:
        raise CorruptObjectError(key, f"a chunk holds {len(items)} elements, not {CHUNK_LEN}")
    return ChunkObj(items)


def _split(obj: dict[str, Any], key: str) -> SplitObj:
    value = decode_entry(obj.get("v"), key)
    if isinstance(value, Ref) and value.tag not in ("b", "p"):
        raise CorruptObjectError(key, f"a split value's value is a {value.tag!r} entry")
    holes = []
    for hole in _field(obj, "s", list, key):
        if not isinstance(hole, list) or len(hole) != 2 or not isinstance(hole[0], list):
            raise CorruptObjectError(key, "a split value's hole is not [path, reference]")
        path = tuple(hole[0])
        if not all(type(step) in (str, int) for step in path):
            raise CorruptObjectError(key, f"a split value's path {hole[0]!r} is not keys/indexes")
        ref = decode_entry(hole[1], key)
        if not isinstance(ref, Ref) or ref.tag not in ("b", "p"):
            raise CorruptObjectError(key, "a split value's text is not a b or p reference")
        holes.append((path, ref))
    return SplitObj(value, tuple(holes))


def _subtree_refs(raw: list[Any], key: str) -> tuple[tuple[bytes, int], ...]:
    out = []
    for item in raw:
        count = item[1] if isinstance(item, list) and len(item) == 2 else None
        if not isinstance(count, int) or count < CHUNK_LEN or count % CHUNK_LEN:
            raise CorruptObjectError(key, "a subtree reference is not [digest, full count]")
        out.append((_digest(item[0], key), item[1]))
    return tuple(out)


def check_digest(data: bytes, digest: bytes, key: str) -> None:
    """Raise unless ``data`` hashes to ``digest`` (the object's own address)."""
    if digest_of(data) != digest:
        raise CorruptObjectError(key, "content does not match its SHA-256 address")


def object_size(obj: StoredObject) -> int:
    """Approximate memory held by a decoded object, for cache accounting."""
    if isinstance(obj, ValueObj):
        return len(obj.payload.data) + 64
    if isinstance(obj, PartObj):
        return len(obj.data) + 48
    if isinstance(obj, PartsObj):
        return 48 * len(obj.parts) + 64
    if isinstance(obj, ListObj):
        tail = sum(len(i.payload.data) + 64 if isinstance(i, Inline) else 48 for i in obj.tail)
        return 56 * len(obj.sealed) + 96 * len(obj.segments) + tail + 64
    if isinstance(obj, NodeObj):
        return 56 * len(obj.subtrees) + 64
    if isinstance(obj, IndexObj):
        return 96 * len(obj.refs) + 64
    if isinstance(obj, SplitObj):
        inline = obj.value.payload.data if isinstance(obj.value, Inline) else b""
        return len(inline) + 96 * len(obj.holes) + 128
    return sum(len(i.payload.data) + 64 if isinstance(i, Inline) else 48 for i in obj.items) + 64
