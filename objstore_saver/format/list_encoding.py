"""Encoding of list values element by element (spec §4.4): chunks, nodes, list object.

Pure functions; no I/O. The layout is a function of the element sequence
alone, so sealed chunks and nodes keep their hashes as a list grows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from objstore_saver.format import codec, value_encoding


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


@dataclass(frozen=True, slots=True)
class SealedObject:
    """A chunk or node as encoded: its address, bytes and the objects it references."""

    digest: bytes
    body: bytes
    children: tuple[bytes, ...]
    element_objects: dict[bytes, bytes] = field(default_factory=dict)
    """A chunk's referenced elements' objects (values), by digest."""
    element_children: dict[bytes, tuple[bytes, ...]] = field(default_factory=dict)
    """What those objects reference in turn."""


#: What a sealed object is a function of: ``("c", *element keys)`` for a chunk
#: (each key is ``(type, serialized bytes)``), ``("n", *subtree digests)`` for a node.
SealedKey = tuple[object, ...]


class SealedCache(Protocol):
    """Where :func:`encode_list` keeps the chunks and nodes it sealed, by what they hold."""

    def get(self, key: SealedKey) -> SealedObject | None: ...

    def put(self, key: SealedKey, value: SealedObject) -> None: ...


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
    elements: list[tuple[str, bytes]],
    cache: ElementCache | None = None,
    sealed_cache: SealedCache | None = None,
) -> codec.Encoded:
    """Entry for a list given its serialized elements (spec §4.4).

    The layout depends only on the element sequence: full chunks of
    ``codec.CHUNK_LEN`` elements, grouped into nodes of ``codec.NODE_FANOUT`` equal
    subtrees like the digits of the chunk count in base ``codec.NODE_FANOUT``, and a
    tail of the remaining elements inside the list object. An appended element
    therefore leaves every sealed object's hash unchanged. With a ``cache``,
    an element encoded before is not compressed and hashed again; with a
    ``sealed_cache``, a chunk or node sealed before (the same elements, the
    same subtrees) is not packed and hashed again: its bytes are a function of
    what it holds, so they are the same.
    """
    out: dict[bytes, bytes] = {}
    children: dict[bytes, tuple[bytes, ...]] = {}

    def encoded(pair: tuple[str, bytes]) -> EncodedElement:
        """One element, through the cache; the objects behind it join the output."""
        element = cache.get(pair) if cache is not None else None
        if element is None:
            element = encode_element(*pair)
            if cache is not None:
                cache.put(pair, element)
        out.update(element.objects)
        children.update(element.children)
        return element

    full = len(elements) // codec.CHUNK_LEN
    chunks: list[tuple[bytes, int]] = []
    for start in range(0, full * codec.CHUNK_LEN, codec.CHUNK_LEN):
        group = elements[start : start + codec.CHUNK_LEN]
        key: SealedKey = ("c", *group)
        chunk = sealed_cache.get(key) if sealed_cache is not None else None
        if chunk is None:
            members = [encoded(pair) for pair in group]
            body = codec.pack_object(
                {"f": codec.FORMAT_VERSION, "k": "chunk", "x": [m.item for m in members]}
            )
            chunk = SealedObject(
                codec.digest_of(body),
                body,
                tuple(m.digest for m in members if m.digest is not None),
                {d: b for m in members for d, b in m.objects.items()},
                {d: c for m in members for d, c in m.children.items()},
            )
            if sealed_cache is not None:
                sealed_cache.put(key, chunk)
        else:
            # Its elements are not looked up one by one: the chunk holds what they add.
            out.update(chunk.element_objects)
            children.update(chunk.element_children)
        out[chunk.digest] = chunk.body
        children[chunk.digest] = chunk.children
        chunks.append((chunk.digest, codec.CHUNK_LEN))
    tail = [encoded(pair) for pair in elements[full * codec.CHUNK_LEN :]]
    sealed: list[tuple[bytes, int]] = []
    pos = 0
    span = 1
    while span * codec.NODE_FANOUT <= full:
        span *= codec.NODE_FANOUT
    while pos < full:
        while full - pos < span:
            span //= codec.NODE_FANOUT
        sealed.append(_subtree(chunks[pos : pos + span], out, children, sealed_cache))
        pos += span
    # The list's root (its subtrees and tail) is the entry itself, inline in
    # the manifest (format version 2): growing the list writes no list object.
    fields = [[d, n] for d, n in sealed], [m.item for m in tail]
    root = codec.decode_entry(["L", len(elements), *fields], "a new list")
    return codec.Encoded(root, out, children)


def _subtree(
    chunks: list[tuple[bytes, int]],
    out: dict[bytes, bytes],
    children: dict[bytes, tuple[bytes, ...]],
    sealed_cache: SealedCache | None,
) -> tuple[bytes, int]:
    """Seal ``codec.NODE_FANOUT ** k`` full chunks under nested nodes; return (digest, count)."""
    if len(chunks) == 1:
        return chunks[0]
    step = len(chunks) // codec.NODE_FANOUT
    subtrees = [
        _subtree(chunks[i : i + step], out, children, sealed_cache)
        for i in range(0, len(chunks), step)
    ]
    key: SealedKey = ("n", *(d for d, _ in subtrees))
    node = sealed_cache.get(key) if sealed_cache is not None else None
    if node is None:
        body = codec.pack_object(
            {"f": codec.FORMAT_VERSION, "k": "node", "c": [[d, n] for d, n in subtrees]}
        )
        node = SealedObject(codec.digest_of(body), body, tuple(c for c, _ in subtrees))
        if sealed_cache is not None:
            sealed_cache.put(key, node)
    out[node.digest] = node.body
    children[node.digest] = node.children
    return node.digest, sum(n for _, n in subtrees)


def use_list_encoding(elements: list[tuple[str, bytes]]) -> bool:
    """Whether a list value is stored element by element (spec §4.4)."""
    if not elements:
        return False
    total = sum([len(data) for _, data in elements])
    return total > codec.INLINE_MAX and total / len(elements) >= codec.LIST_MIN_MEAN_ELEMENT
