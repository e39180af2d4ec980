"""Encoding of list values element by element (spec §4.4): chunks, nodes, list object.

Pure functions; no I/O. The layout is a function of the element sequence
alone, so sealed chunks and nodes keep their hashes as a list grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from objstore_saver import codec, value_encoding


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
    if len(data) <= codec.PART_SIZE:
        payload = codec.make_payload(type_, data)
        if len(payload.data) <= codec.ELEMENT_INLINE_MAX:
            return EncodedElement(["i", *payload.to_msgpack()], None, {}, {})
    objects: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}
    ref = value_encoding.store_data(type_, data, objects, children)
    return EncodedElement(codec.entry_to_msgpack(ref), ref.digest, objects, children)


def encode_list(
    elements: list[tuple[str, bytes]], cache: ElementCache | None = None
) -> codec.Encoded:
    """Entry for a list given its serialized elements (spec §4.4).

    The layout depends only on the element sequence: full chunks of
    ``codec.CHUNK_LEN`` elements, grouped into nodes of ``codec.NODE_FANOUT`` equal
    subtrees like the digits of the chunk count in base ``codec.NODE_FANOUT``, and a
    tail of the remaining elements inside the list object. An appended element
    therefore leaves every sealed object's hash unchanged. With a ``cache``,
    an element encoded before is not compressed and hashed again.
    """
    enc = codec.Encoded(codec.Inline(codec.Payload("", codec.RAW, b"")))
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
    full = len(items) // codec.CHUNK_LEN
    chunks: list[tuple[bytes, int]] = []
    for start in range(0, full * codec.CHUNK_LEN, codec.CHUNK_LEN):
        body = codec.pack_object(
            {"f": codec.FORMAT_VERSION, "k": "chunk", "x": items[start : start + codec.CHUNK_LEN]}
        )
        d = codec.digest_of(body)
        out[d] = body
        children[d] = tuple(r for r in refs[start : start + codec.CHUNK_LEN] if r is not None)
        chunks.append((d, codec.CHUNK_LEN))
    sealed: list[tuple[bytes, int]] = []
    pos = 0
    span = 1
    while span * codec.NODE_FANOUT <= full:
        span *= codec.NODE_FANOUT
    while pos < full:
        while full - pos < span:
            span //= codec.NODE_FANOUT
        sealed.append(_subtree(chunks[pos : pos + span], out, children))
        pos += span
    tail_start = full * codec.CHUNK_LEN
    body = codec.pack_object(
        {
            "f": codec.FORMAT_VERSION,
            "k": "list",
            "n": len(items),
            "c": [[d, n] for d, n in sealed],
            "x": items[tail_start:],
        }
    )
    d = codec.digest_of(body)
    out[d] = body
    children[d] = tuple(c for c, _ in sealed) + tuple(r for r in refs[tail_start:] if r)
    enc.entry = codec.Ref("l", d)
    return enc


def _subtree(
    chunks: list[tuple[bytes, int]],
    out: dict[bytes, bytes],
    children: dict[bytes, tuple[bytes, ...]],
) -> tuple[bytes, int]:
    """Seal ``codec.NODE_FANOUT ** k`` full chunks under nested nodes; return (digest, count)."""
    if len(chunks) == 1:
        return chunks[0]
    step = len(chunks) // codec.NODE_FANOUT
    subtrees = [_subtree(chunks[i : i + step], out, children) for i in range(0, len(chunks), step)]
    body = codec.pack_object(
        {"f": codec.FORMAT_VERSION, "k": "node", "c": [[d, n] for d, n in subtrees]}
    )
    d = codec.digest_of(body)
    out[d] = body
    children[d] = tuple(c for c, _ in subtrees)
    return d, sum(n for _, n in subtrees)


def use_list_encoding(elements: list[tuple[str, bytes]]) -> bool:
    """Whether a list value is stored element by element (spec §4.4)."""
    if not elements:
        return False
    total = sum(len(data) for _, data in elements)
    return total > codec.INLINE_MAX and total / len(elements) >= codec.LIST_MIN_MEAN_ELEMENT
