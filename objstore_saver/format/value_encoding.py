"""Encoding of one serialized value (spec §4.2, §4.3): inline, a value object, or parts.

Data larger than a part is one zstd frame cut into parts as the compressor emits them.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from itertools import chain

from objstore_saver.format import codec, compression, split_values


def _compressed_pieces(size: int, data: Iterable[bytes]) -> Iterator[bytes]:
    """``data`` (``size`` bytes) as one zstd frame in ``codec.PART_SIZE`` pieces, by a compressor
    of its own: the caller may suspend between pieces for as long as it likes."""
    compressor = compression.new_compressor()
    chunker = compressor.chunker(size=size, chunk_size=codec.PART_SIZE)
    for piece in data:
        yield from (out for out in chunker.compress(piece) if out)
    # finish() may only be called once compress()'s output is consumed.
    yield from (out for out in chunker.finish() if out)


def _value_object(payload: codec.Payload, epoch: int) -> tuple[bytes, bytes]:
    fields = {"f": codec.FORMAT_VERSION, "k": "value", "p": payload.to_msgpack()}
    body = codec.pack_content(fields, epoch)
    return codec.digest_of(body), body


def _store_value(payload: codec.Payload, out: dict[bytes, bytes], epoch: int) -> codec.Ref:
    d, body = _value_object(payload, epoch)
    out[d] = body
    return codec.Ref("b", d)


def inline_written(
    payload: codec.Payload, limit: int = codec.WRITE_INLINE_MAX
) -> codec.Encoded | None:
    """A pending write's value inline, if its compressed payload is at most ``limit`` (spec
    §6.5 step 2: a write's entry is stored once, never carried into another object)."""
    if len(payload.data) > limit:
        return None
    return codec.Encoded(codec.Inline(payload))


#: The entry, the container object (digest, body), and the digests of its parts.
LargeResult = tuple[codec.Ref, tuple[bytes, bytes], tuple[bytes, ...]]


def large_objects(
    type_: str, data: bytes, epoch: int = 0
) -> Generator[tuple[bytes, bytes], None, LargeResult]:
    """Encode data larger than ``codec.PART_SIZE``, yielding (digest, body) of parts as made
    (a frame of one piece is a ``value`` object and yields nothing)."""
    return (yield from frame_objects(type_, _compressed_pieces(len(data), (data,)), epoch))


def text_objects(text: str, epoch: int = 0) -> Generator[tuple[bytes, bytes], None, LargeResult]:
    """Like :func:`large_objects` for a message text's UTF-8 (spec §4.4a), made piece by piece."""
    size = split_values.text_size(text)
    pieces = _compressed_pieces(size, split_values.text_pieces(text))
    return (yield from frame_objects(split_values.TEXT_TYPE, pieces, epoch))


def frame_objects(
    type_: str, pieces: Iterator[bytes], epoch: int = 0
) -> Generator[tuple[bytes, bytes], None, LargeResult]:
    """Pack the pieces of one zstd frame as parts (or one value), yielding parts as made."""
    first = next(pieces)
    second = next(pieces, None)
    if second is None:
        d, body = _value_object(codec.Payload(type_, compression.ZD1, first), epoch)
        return codec.Ref("b", d), (d, body), ()
    hashes: list[bytes] = []
    size = 0
    for piece in chain((first, second), pieces):
        part = codec.pack_content({"f": codec.FORMAT_VERSION, "k": "part", "d": piece}, epoch)
        d = codec.digest_of(part)
        hashes.append(d)
        size += len(piece)
        yield d, part
    body = codec.pack_content(
        {
            "f": codec.FORMAT_VERSION,
            "k": "parts",
            "t": type_,
            "e": compression.ZD1,
            "n": size,
            "p": hashes,
        },
        epoch,
    )
    d = codec.digest_of(body)
    return codec.Ref("p", d), (d, body), tuple(hashes)


def store_data(
    type_: str,
    serialized: bytes,
    out: dict[bytes, bytes],
    children: dict[bytes, tuple[bytes, ...]],
    epoch: int = 0,
) -> codec.Ref:
    """Store serialized bytes as a value object, or as parts when large (spec §4.2, §4.3)."""
    if len(serialized) <= codec.PART_SIZE:
        return _store_value(codec.make_payload(type_, serialized), out, epoch)
    stream = large_objects(type_, serialized, epoch)
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


def encode_serialized(
    type_: str,
    serialized: bytes,
    *,
    inline_max: int = codec.INLINE_MAX,
    written_once: bool = False,
    written_max: int = codec.WRITE_INLINE_MAX,
    epoch: int = 0,
) -> codec.Encoded:
    """Entry for serialized bytes: inline when at most ``inline_max`` long, else an object;
    ``written_once`` (a pending write's value): also inline by :func:`inline_written`."""
    if len(serialized) <= inline_max:
        return codec.Encoded(codec.Inline(codec.make_payload(type_, serialized)))
    objects: dict[bytes, bytes] = {}
    if written_once and len(serialized) <= codec.PART_SIZE:
        payload = codec.make_payload(type_, serialized)
        return inline_written(payload, written_max) or codec.Encoded(
            _store_value(payload, objects, epoch), objects
        )
    children: dict[bytes, tuple[bytes, ...]] = {}
    ref = store_data(type_, serialized, objects, children, epoch)
    return codec.Encoded(ref, objects, children)
