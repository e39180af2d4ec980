"""Values from fetched objects: entries decoded into what LangGraph stored (spec §4).

Pure functions; the objects are fetched by :mod:`objstore_saver.plans.reading`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, keys, split_values
from objstore_saver.format.codec import (
    ChunkObj,
    Entry,
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
    for digest, count in obj.sealed:
        _expand(serde, digest, count, got, pfx, out)
    for g in obj.segments:
        _expand(serde, g.digest, g.count, got, pfx, out)
    _extend_items(serde, obj.tail, got, pfx, out)
    return out


def _extend_items(
    serde: SerializerProtocol,
    items: Iterable[Entry],
    got: Mapping[bytes, StoredObject],
    pfx: str,
    out: list[Any],
) -> None:
    """Append the values of list elements, in order.

    With LangGraph's own serializer, a run of inline MessagePack elements is
    one MessagePack array: its elements' bytes behind an array header are
    decoded by one ``loads_typed`` call, to the values the elements decode to
    one by one (a long conversation's messages are read at every turn).
    """
    if type(serde) is not JsonPlusSerializer:
        out.extend(materialize(serde, item, got, pfx) for item in items)
        return
    run: list[bytes] = []
    for item in items:
        if isinstance(item, Inline) and item.payload.type == "msgpack":
            run.append(codec.payload_bytes(item.payload, pfx)[1])
            continue
        if run:
            _decode_run(serde, run, pfx, out)
            run = []
        out.append(materialize(serde, item, got, pfx))
    if run:
        _decode_run(serde, run, pfx, out)


#: Bytes decoded after a run's elements: MessagePack ignores bytes after a
#: value, so an element holding more or less than one value would shift the
#: run silently; the shifted run does not end with this value.
_RUN_END = b"\xc4\x0cobjstore-run"


def _decode_run(serde: SerializerProtocol, run: list[bytes], key: str, out: list[Any]) -> None:
    """Decode MessagePack elements' bytes as one array; each must be exactly one value."""
    n = len(run) + 1
    if n < 16:
        head = bytes((0x90 | n,))
    elif n < 1 << 16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    values = serde.loads_typed(("msgpack", head + b"".join(run) + _RUN_END))
    if not isinstance(values, list) or len(values) != n or values[-1] != _RUN_END[2:]:
        raise CorruptObjectError(key, f"{n - 1} list elements are not one MessagePack value each")
    values.pop()
    out.extend(values)


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
        pieces = codec.stream_payload(obj.encoding, obj.size, frames, key)
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
    """Append the elements of a sealed subtree (a chunk, a node of subtrees, a segment)."""
    obj = got[digest]
    if isinstance(obj, NodeObj):
        if sum(n for _, n in obj.subtrees) != count:
            raise CorruptObjectError(
                keys.object_key_in(pfx, digest), f"node does not hold the {count} elements expected"
            )
        for child, n in obj.subtrees:
            _expand(serde, child, n, got, pfx, out)
        return
    assert isinstance(obj, ChunkObj | SegmentObj)
    if len(obj.items) != count:
        kind = "chunk" if isinstance(obj, ChunkObj) else "segment"
        raise CorruptObjectError(
            keys.object_key_in(pfx, digest),
            f"{kind} holds {len(obj.items)} elements, its parent says {count}",
        )
    _extend_items(serde, obj.items, got, pfx, out)


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
