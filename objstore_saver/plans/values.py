"""Values from fetched objects: entries decoded into what LangGraph stored (spec §4).

Pure functions; the objects are fetched by :mod:`objstore_saver.plans.reading`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from langgraph.checkpoint.base import SerializerProtocol

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, compression, keys, split_values
from objstore_saver.format.codec import (
    ChunkObj,
    Entry,
    IndexObj,
    Inline,
    InlineList,
    ListObj,
    Manifest,
    NodeObj,
    PartObj,
    PartsObj,
    Ref,
    SegmentObj,
    SplitObj,
    StoredObject,
    ValueObj,
)


def materialize(
    serde: SerializerProtocol, entry: Entry, got: Mapping[bytes, StoredObject], pfx: str
) -> Any:
    """Deserialize the value of an entry from fetched objects."""
    if isinstance(entry, Inline):
        return serde.loads_typed(codec.payload_bytes(entry.payload, pfx))
    if isinstance(entry, InlineList):
        return _expand_list(serde, entry.obj, got, pfx)
    key = keys.object_key_in(pfx, entry.digest)
    obj = got[entry.digest]
    if entry.tag == "l":
        assert isinstance(obj, ListObj)
        return _expand_list(serde, obj, got, pfx)
    if isinstance(obj, SplitObj):
        value = materialize(serde, obj.value, got, pfx)
        for path, ref in obj.holes:
            text = split_values.decode_text(_text_pieces(ref, got, pfx), key)
            split_values.fill(value, path, text, key)
        return value
    if isinstance(obj, ValueObj):
        return serde.loads_typed(codec.payload_bytes(obj.payload, key))
    assert isinstance(obj, PartsObj)
    data = b"".join(cast(PartObj, got[d]).data for d in obj.parts)
    if len(data) != obj.size:
        raise CorruptObjectError(key, f"parts hold {len(data)} bytes, expected {obj.size}")
    return serde.loads_typed(codec.payload_bytes(codec.Payload(obj.type, obj.encoding, data), key))


def _expand_list(
    serde: SerializerProtocol, obj: ListObj, got: Mapping[bytes, StoredObject], pfx: str
) -> list[Any]:
    """The elements of a list (an object, or inline in a manifest), in order."""
    out: list[Any] = []
    for digest, count in [*obj.sealed, *((g.digest, g.count) for g in obj.segments)]:
        _expand(serde, digest, count, got, pfx, out)
    out.extend(materialize(serde, item, got, pfx) for item in obj.tail)
    return out


def _text_pieces(ref: Ref, got: Mapping[bytes, StoredObject], pfx: str) -> Iterator[bytes]:
    """The UTF-8 bytes of a split value's text (§4.4a), decompressed part by part."""
    key = keys.object_key_in(pfx, ref.digest)
    obj = got[ref.digest]
    pieces: Iterable[bytes]
    if isinstance(obj, ValueObj):
        type_, data = codec.payload_bytes(obj.payload, key)
        pieces = (data,)
    else:
        assert isinstance(obj, PartsObj)
        type_ = obj.type
        frames = (cast(PartObj, got[d]).data for d in obj.parts)
        pieces = compression.stream_decompressed(obj.encoding, obj.size, frames, key)
    if type_ != split_values.TEXT_TYPE:
        raise CorruptObjectError(key, f"a message text has type {type_!r}, not 'utf8'")
    yield from pieces


def _expand(
    serde: SerializerProtocol,
    digest: bytes,
    count: int,
    got: Mapping[bytes, StoredObject],
    pfx: str,
    out: list[Any],
) -> None:
    """Append the elements of a sealed subtree (a chunk, a node, a segment, an index)."""
    obj = got[digest]
    if isinstance(obj, IndexObj | NodeObj):
        subs = obj.subtrees
        if sum(n for _, n in subs) != count:
            kind = "index" if isinstance(obj, IndexObj) else "node"
            raise CorruptObjectError(
                keys.object_key_in(pfx, digest),
                f"{kind} does not hold the {count} elements its reference says",
            )
        for child, n in subs:
            _expand(serde, child, n, got, pfx, out)
        return
    assert isinstance(obj, ChunkObj | SegmentObj)
    if len(obj.items) != count:
        kind = "chunk" if isinstance(obj, ChunkObj) else "segment"
        raise CorruptObjectError(
            keys.object_key_in(pfx, digest),
            f"{kind} holds {len(obj.items)} elements, its parent says {count}",
        )
    out.extend(materialize(serde, item, got, pfx) for item in obj.items)


def manifest_values(
    serde: SerializerProtocol, m: Manifest, got: Mapping[bytes, StoredObject], pfx: str
) -> tuple[dict[str, Any], Any]:
    """The checkpoint (with its id and channel values) and metadata of a manifest."""
    checkpoint = materialize(serde, m.checkpoint, got, pfx)
    checkpoint["id"] = m.checkpoint_id
    metadata = materialize(serde, m.metadata, got, pfx)
    checkpoint["channel_values"] = {
        name: materialize(serde, e, got, pfx) for name, e in m.channels.items()
    }
    return checkpoint, metadata
