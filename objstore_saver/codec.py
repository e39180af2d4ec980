"""Object encodings (spec §4): payloads, entries and the objects that hold them.

Pure functions and plain data; no I/O. Encoding a value yields an entry plus
the content-addressed objects it needs; decoding checks every rule of §4.6 and
raises an error naming the key.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from importlib import resources
from itertools import chain
from typing import Any, Literal, Protocol

import msgpack
import zstandard

from objstore_saver.errors import CorruptObjectError, UnsupportedFormatError

FORMAT_VERSION = 1
#: Serialized values up to this size are inline (in the manifest, write or chunk).
INLINE_MAX = 1024
#: List elements up to this size are inline in their chunk.
ELEMENT_INLINE_MAX = 128
#: Data stored in an object is compressed above this size when that helps.
COMPRESS_MIN = 128
#: Largest payload data of one ``value`` object; larger data is split into parts.
PART_SIZE = 256 * 1024
#: Elements per sealed chunk; fewer wait in the list object's tail.
CHUNK_LEN = 8
#: Subtrees per node: F full subtrees of one size are sealed under a node.
NODE_FANOUT = 4
#: Lists whose elements average less than this are stored as one value.
LIST_MIN_MEAN_ELEMENT = 256
#: A manifest larger than this moves its largest inline entries to objects.
MANIFEST_BUDGET = 1024 * 1024
ZSTD_LEVEL = 3

RAW = "raw"
ZSTD = "zstd"
#: zstd with the raw-content dictionary D1 (spec §4.0).
ZD1 = "zd1"
ENCODINGS = frozenset({RAW, ZSTD, ZD1})
#: SHA-256 of ``zdict/d1.bin``: the dictionary is part of the format, frozen.
D1_SHA256 = "386e967d8d7c7fb69980de4a817ff6bb46214474daefa42c07b8653602f59ce1"


def _load_d1() -> zstandard.ZstdCompressionDict:
    data = resources.files("objstore_saver").joinpath("zdict/d1.bin").read_bytes()
    if hashlib.sha256(data).hexdigest() != D1_SHA256:
        raise RuntimeError(
            "objstore_saver/zdict/d1.bin does not match its SHA-256 in codec.D1_SHA256: "
            "the installed package is damaged; reinstall objstore-saver"
        )
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


_D1 = _load_d1()

# zstd (de)compressor objects are not thread-safe: one of each per thread.
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    comp = getattr(_local, "compressor", None)
    if comp is None:
        comp = _local.compressor = zstandard.ZstdCompressor(
            level=ZSTD_LEVEL, dict_data=_D1, write_content_size=True, write_dict_id=False
        )
    return comp


def _decompressor(encoding: str) -> zstandard.ZstdDecompressor:
    name = f"decompressor_{encoding}"
    dec = getattr(_local, name, None)
    if dec is None:
        dec = zstandard.ZstdDecompressor(dict_data=_D1 if encoding == ZD1 else None)
        setattr(_local, name, dec)
    return dec


@dataclass(frozen=True, slots=True)
class Payload:
    """Serializer type, byte encoding and data of one serialized value."""

    type: str
    encoding: str
    data: bytes

    def to_msgpack(self) -> list[Any]:
        return [self.type, self.encoding, self.data]


@dataclass(frozen=True, slots=True)
class Inline:
    """Entry holding its value inline."""

    payload: Payload


@dataclass(frozen=True, slots=True)
class Ref:
    """Entry pointing at a content-addressed object: ``b`` value, ``p`` parts, ``l`` list."""

    tag: Literal["b", "p", "l"]
    digest: bytes


Entry = Inline | Ref


@dataclass(frozen=True, slots=True)
class Manifest:
    """Decoded manifest (spec §4.1)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: Entry
    metadata: Entry
    channels: dict[str, Entry]


@dataclass(frozen=True, slots=True)
class ValueObj:
    payload: Payload


@dataclass(frozen=True, slots=True)
class PartsObj:
    type: str
    encoding: str
    size: int
    parts: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class PartObj:
    data: bytes


@dataclass(frozen=True, slots=True)
class ListObj:
    count: int
    #: Sealed subtrees (chunks or nodes) in order, as (digest, element count).
    sealed: tuple[tuple[bytes, int], ...]
    #: Elements after the sealed ones (fewer than ``CHUNK_LEN``).
    tail: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class NodeObj:
    #: Full subtrees of one size, as (digest, element count).
    subtrees: tuple[tuple[bytes, int], ...]


@dataclass(frozen=True, slots=True)
class ChunkObj:
    items: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class WriteObj:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Entry
    seq: int = 0
    """Order of special (negative index) writes: the greatest one is in force."""
    group: tuple[int, ...] = ()
    """Indexes of the regular writes stored by the same call (empty: not recorded); §4.7."""


StoredObject = ValueObj | PartsObj | PartObj | ListObj | NodeObj | ChunkObj


@dataclass(slots=True)
class Encoded:
    """An entry and the content-addressed objects (digest → bytes) it needs.

    ``children`` maps each container object (list, chunk, parts) to the
    digests it references, so a writer can skip whole subtrees it knows.
    """

    entry: Entry
    objects: dict[bytes, bytes] = field(default_factory=dict)
    children: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)


def digest_of(data: bytes) -> bytes:
    """The content address of an object's bytes (spec §4.5)."""
    return hashlib.sha256(data).digest()


def _pack(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def make_payload(type_: str, data: bytes) -> Payload:
    """Build a payload of an object, compressing its data when that helps."""
    if len(data) > COMPRESS_MIN:
        packed = _compressor().compress(data)
        if len(packed) < len(data):
            return Payload(type_, ZD1, packed)
    return Payload(type_, RAW, data)


def payload_bytes(payload: Payload, key: str) -> tuple[str, bytes]:
    """Return ``(type, serialized bytes)`` of a payload, decompressing it."""
    if payload.encoding == RAW:
        return payload.type, payload.data
    if payload.encoding in (ZSTD, ZD1):
        try:
            return payload.type, _decompressor(payload.encoding).decompress(payload.data)
        except zstandard.ZstdError as exc:
            raise CorruptObjectError(key, f"zstd data does not decompress: {exc}") from exc
    raise CorruptObjectError(key, f"unknown payload encoding {payload.encoding!r}")


# --- encoding -------------------------------------------------------------


def entry_to_msgpack(entry: Entry) -> list[Any]:
    if isinstance(entry, Inline):
        return ["i", *entry.payload.to_msgpack()]
    return [entry.tag, entry.digest]


def _compressed_pieces(data: bytes) -> Iterator[bytes]:
    """``data`` as one zstd frame (content size in its header), in ``PART_SIZE`` pieces.

    A compressor of its own: the caller may suspend between pieces (a plan
    waiting for its PUTs) while another encoding uses the thread's compressor.
    """
    compressor = zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, dict_data=_D1, write_content_size=True, write_dict_id=False
    )
    chunker = compressor.chunker(size=len(data), chunk_size=PART_SIZE)
    # finish() may only be called once compress()'s output is consumed.
    yield from (piece for piece in chunker.compress(data) if piece)
    yield from (piece for piece in chunker.finish() if piece)


def _value_object(payload: Payload) -> tuple[bytes, bytes]:
    body = _pack({"f": FORMAT_VERSION, "k": "value", "p": payload.to_msgpack()})
    return digest_of(body), body


#: What :func:`large_objects` returns: the entry, and the container object
#: (digest, body) with the digests of the parts it lists.
LargeResult = tuple[Ref, tuple[bytes, bytes], tuple[bytes, ...]]


def large_objects(type_: str, data: bytes) -> Generator[tuple[bytes, bytes], None, LargeResult]:
    """Encode data larger than ``PART_SIZE``, yielding part objects as they are made.

    The data is compressed into one zstd frame written in ``PART_SIZE``
    pieces as the compressor produces them, and each piece is packed as a
    ``part`` object and yielded at once (digest, body), so neither the whole
    frame nor all the parts need to be held: a caller can store each part
    and drop it. A frame of one piece is a ``value`` object and yields nothing.
    Incompressible data is still framed (zstd adds a few bytes per block).

    Returns:
        The entry (``b`` or ``p``), the container object (the value, or the
        ``parts`` object listing the parts) and the parts' digests.
    """
    pieces = _compressed_pieces(data)
    first = next(pieces)
    second = next(pieces, None)
    if second is None:
        d, body = _value_object(Payload(type_, ZD1, first))
        return Ref("b", d), (d, body), ()
    hashes: list[bytes] = []
    size = 0
    for piece in chain((first, second), pieces):
        part = _pack({"f": FORMAT_VERSION, "k": "part", "d": piece})
        d = digest_of(part)
        hashes.append(d)
        size += len(piece)
        yield d, part
    body = _pack({"f": FORMAT_VERSION, "k": "parts", "t": type_, "e": ZD1, "n": size, "p": hashes})
    d = digest_of(body)
    return Ref("p", d), (d, body), tuple(hashes)


def _store_data(
    type_: str,
    serialized: bytes,
    out: dict[bytes, bytes],
    children: dict[bytes, tuple[bytes, ...]],
) -> Ref:
    """Store serialized bytes as a value object, or as parts when large (spec §4.2, §4.3)."""
    if len(serialized) <= PART_SIZE:
        d, body = _value_object(make_payload(type_, serialized))
        out[d] = body
        return Ref("b", d)
    stream = large_objects(type_, serialized)
    while True:
        try:
            d, part = next(stream)
        except StopIteration as done:
            ref, (d, body), hashes = done.value
            out[d] = body
            if hashes:
                children[d] = hashes
            return ref
        out[d] = part


def encode_serialized(type_: str, serialized: bytes, *, inline_max: int = INLINE_MAX) -> Encoded:
    """Entry for already serialized bytes: inline when small, else an object."""
    if len(serialized) <= inline_max:
        return Encoded(Inline(make_payload(type_, serialized)))
    enc = Encoded(Inline(Payload(type_, RAW, b"")))
    enc.entry = _store_data(type_, serialized, enc.objects, enc.children)
    return enc


@dataclass(frozen=True, slots=True)
class EncodedElement:
    """One list element as encoded: its entry and the objects behind it."""

    item: list[Any]
    digest: bytes | None
    objects: dict[bytes, bytes]
    children: dict[bytes, tuple[bytes, ...]]


class ElementCache(Protocol):
    """Where :func:`encode_list` keeps elements it encoded, by serialized bytes."""

    def get(self, key: tuple[str, bytes]) -> EncodedElement | None: ...

    def put(self, key: tuple[str, bytes], value: EncodedElement) -> None: ...


def encode_element(type_: str, data: bytes) -> EncodedElement:
    """Encode one list element: inline when its payload is small, else a value or parts."""
    if len(data) <= PART_SIZE:
        payload = make_payload(type_, data)
        if len(payload.data) <= ELEMENT_INLINE_MAX:
            return EncodedElement(["i", *payload.to_msgpack()], None, {}, {})
    objects: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    ref = _store_data(type_, data, objects, children)
    return EncodedElement(entry_to_msgpack(ref), ref.digest, objects, children)


def encode_list(elements: list[tuple[str, bytes]], cache: ElementCache | None = None) -> Encoded:
    """Entry for a list given its serialized elements (spec §4.4).

    The layout depends only on the element sequence: full chunks of
    ``CHUNK_LEN`` elements, grouped into nodes of ``NODE_FANOUT`` equal
    subtrees like the digits of the chunk count in base ``NODE_FANOUT``, and a
    tail of the remaining elements inside the list object. An appended element
    therefore leaves every sealed object's hash unchanged. With a ``cache``,
    an element encoded before is not compressed and hashed again.
    """
    enc = Encoded(Inline(Payload("", RAW, b"")))
    out, children = enc.objects, enc.children
    items: list[list[Any]] = []
    refs: list[bytes | None] = []
    for type_, data in elements:
        element = cache.get((type_, data)) if cache is not None else None
        if element is None:
            element = encode_element(type_, data)
            if cache is not None:
                cache.put((type_, data), element)
        items.append(element.item)
        refs.append(element.digest)
        out.update(element.objects)
        children.update(element.children)
    full = len(items) // CHUNK_LEN
    chunks: list[tuple[bytes, int]] = []
    for start in range(0, full * CHUNK_LEN, CHUNK_LEN):
        body = _pack({"f": FORMAT_VERSION, "k": "chunk", "x": items[start : start + CHUNK_LEN]})
        d = digest_of(body)
        out[d] = body
        children[d] = tuple(r for r in refs[start : start + CHUNK_LEN] if r is not None)
        chunks.append((d, CHUNK_LEN))
    sealed: list[tuple[bytes, int]] = []
    pos = 0
    span = 1
    while span * NODE_FANOUT <= full:
        span *= NODE_FANOUT
    while pos < full:
        while full - pos < span:
            span //= NODE_FANOUT
        sealed.append(_subtree(chunks[pos : pos + span], out, children))
        pos += span
    tail_start = full * CHUNK_LEN
    body = _pack(
        {
            "f": FORMAT_VERSION,
            "k": "list",
            "n": len(items),
            "c": [[d, n] for d, n in sealed],
            "x": items[tail_start:],
        }
    )
    d = digest_of(body)
    out[d] = body
    children[d] = tuple(c for c, _ in sealed) + tuple(r for r in refs[tail_start:] if r)
    enc.entry = Ref("l", d)
    return enc


def _subtree(
    chunks: list[tuple[bytes, int]],
    out: dict[bytes, bytes],
    children: dict[bytes, tuple[bytes, ...]],
) -> tuple[bytes, int]:
    """Seal ``NODE_FANOUT ** k`` full chunks under nested nodes; return (digest, count)."""
    if len(chunks) == 1:
        return chunks[0]
    step = len(chunks) // NODE_FANOUT
    subtrees = [_subtree(chunks[i : i + step], out, children) for i in range(0, len(chunks), step)]
    body = _pack({"f": FORMAT_VERSION, "k": "node", "c": [[d, n] for d, n in subtrees]})
    d = digest_of(body)
    out[d] = body
    children[d] = tuple(c for c, _ in subtrees)
    return d, sum(n for _, n in subtrees)


def use_list_encoding(elements: list[tuple[str, bytes]]) -> bool:
    """Whether a list value is stored element by element (spec §4.4)."""
    if not elements:
        return False
    total = sum(len(data) for _, data in elements)
    return total > INLINE_MAX and total / len(elements) >= LIST_MIN_MEAN_ELEMENT


def encode_manifest(
    *,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str | None,
    checkpoint: Entry,
    metadata: Entry,
    channels: dict[str, Entry],
) -> bytes:
    """Bytes of a manifest (spec §4.1). Channels are written in sorted order."""
    return _pack(
        {
            "f": FORMAT_VERSION,
            "k": "manifest",
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent_checkpoint_id,
            "checkpoint": entry_to_msgpack(checkpoint),
            "metadata": entry_to_msgpack(metadata),
            "channels": {k: entry_to_msgpack(channels[k]) for k in sorted(channels)},
        }
    )


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
        "f": FORMAT_VERSION,
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
    return _pack(fields)


def encode_mark(digests: list[bytes]) -> bytes:
    """Bytes of a sweep mark (spec §4.9): candidate object digests of one prune run."""
    return _pack({"f": FORMAT_VERSION, "k": "mark", "d": digests})


def decode_mark(data: bytes, key: str) -> list[bytes]:
    """Decode a sweep mark into its digests."""
    obj = unpack_object(data, key, "mark")
    return [_digest(d, key) for d in _field(obj, "d", list, key)]


def replace_thread_id(manifest_bytes: bytes, key: str, thread_id: str) -> bytes:
    """Re-encode a manifest for another thread (copy_thread)."""
    raw = unpack_object(manifest_bytes, key, "manifest")
    raw["thread_id"] = thread_id
    return _pack(raw)


# --- decoding -------------------------------------------------------------


def unpack_object(data: bytes, key: str, *kinds: str) -> dict[str, Any]:
    """Unpack an object's MessagePack map, checking its format version and kind."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as exc:
        raise CorruptObjectError(key, f"not a MessagePack object ({exc})") from exc
    if not isinstance(obj, dict):
        raise CorruptObjectError(key, "not a MessagePack map")
    version = obj.get("f")
    if version != FORMAT_VERSION:
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise UnsupportedFormatError(key, version)
        raise CorruptObjectError(key, f"format version {version!r} is not valid")
    kind = obj.get("k")
    if kinds and kind not in kinds:
        raise CorruptObjectError(key, f"expected a {' or '.join(kinds)} object, found {kind!r}")
    return obj


def _field(obj: dict[str, Any], name: str, types: type | tuple[type, ...], key: str) -> Any:
    value = obj.get(name)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise CorruptObjectError(key, f"field {name!r} is missing or has the wrong type")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _digest(value: Any, key: str) -> bytes:
    if not isinstance(value, bytes) or len(value) != 32:
        raise CorruptObjectError(key, "a reference is not a 32-byte SHA-256 digest")
    return value


def _payload(raw: Any, key: str) -> Payload:
    if (
        not isinstance(raw, list)
        or len(raw) != 3
        or not isinstance(raw[0], str)
        or not isinstance(raw[1], str)
        or not isinstance(raw[2], bytes)
    ):
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
        if tag in ("b", "p", "l") and len(raw) == 2:
            return Ref(tag, _digest(raw[1], key))
    raise CorruptObjectError(key, f"invalid entry {raw!r:.80}")


def decode_manifest(data: bytes, key: str) -> Manifest:
    """Decode and check a manifest."""
    obj = unpack_object(data, key, "manifest")
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
    )


def _write_group(raw: object, key: str) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in raw
    ):
        raise CorruptObjectError(key, f"write group must be a list of indexes, got {raw!r}")
    return tuple(raw)


def decode_write(data: bytes, key: str) -> WriteObj:
    """Decode and check a pending write."""
    obj = unpack_object(data, key, "write")
    return WriteObj(
        task_id=_field(obj, "task_id", str, key),
        task_path=_field(obj, "task_path", str, key),
        idx=_field(obj, "idx", int, key),
        channel=_field(obj, "channel", str, key),
        value=decode_entry(obj.get("v"), key),
        seq=_field(obj, "seq", int, key),
        group=_write_group(obj.get("g", []), key),
    )


_KINDS_BY_TAG: dict[str | None, tuple[str, ...]] = {
    "b": ("value",),
    "p": ("parts",),
    "l": ("list",),
    "c": ("chunk", "node"),
    "d": ("part",),
    None: ("value", "parts", "list", "node", "chunk", "part"),
}


def decode_object(data: bytes, key: str, tag: str | None = None) -> StoredObject:
    """Decode a content-addressed object reached through an entry tagged ``tag``.

    ``tag`` is ``b`` (value), ``p`` (parts), ``l`` (list), ``c`` (chunk),
    ``c`` (chunk or node), ``d`` (part, a data slice), or None to accept any.
    """
    kinds = _KINDS_BY_TAG[tag]
    obj = unpack_object(data, key, *kinds)
    kind = obj["k"]
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
        sealed = _subtree_refs(_field(obj, "c", list, key), key)
        tail = tuple(decode_entry(e, key) for e in _field(obj, "x", list, key))
        count = _field(obj, "n", int, key)
        if sum(c for _, c in sealed) + len(tail) != count:
            raise CorruptObjectError(key, "element count differs from its subtrees and tail")
        return ListObj(count, sealed, tail)
    if kind == "node":
        subtrees = _subtree_refs(_field(obj, "c", list, key), key)
        if len(subtrees) != NODE_FANOUT or len({c for _, c in subtrees}) != 1:
            raise CorruptObjectError(key, f"a node holds {NODE_FANOUT} subtrees of one size")
        return NodeObj(subtrees)
    items = tuple(decode_entry(e, key) for e in _field(obj, "x", list, key))
    if len(items) != CHUNK_LEN:
        raise CorruptObjectError(key, f"a chunk holds {len(items)} elements, not {CHUNK_LEN}")
    return ChunkObj(items)


def _subtree_refs(raw: list[Any], key: str) -> tuple[tuple[bytes, int], ...]:
    out = []
    for item in raw:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[1], int)
            or item[1] < CHUNK_LEN
            or item[1] % CHUNK_LEN
        ):
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
        return 56 * len(obj.sealed) + tail + 64
    if isinstance(obj, NodeObj):
        return 56 * len(obj.subtrees) + 64
    return sum(len(i.payload.data) + 64 if isinstance(i, Inline) else 48 for i in obj.items) + 64
