"""Byte encodings of payload data (spec §4.0): raw, zstd, and zstd with the D1 dictionary.

zstd (de)compressors are not thread-safe: they are lent from shared free lists.
"""

from __future__ import annotations

import collections
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from typing import Generic, TypeVar

import zstandard

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format.bounded_fifo import BoundedFifo

ZSTD_LEVEL = 3

RAW = "raw"
ZSTD = "zstd"
#: zstd with the raw-content dictionary D1 (spec §4.0).
ZD1 = "zd1"
ENCODINGS = frozenset({RAW, ZSTD, ZD1})
#: SHA-256 of ``zdict/d1.bin``: the dictionary is part of the format, frozen.
D1_SHA256 = "386e967d8d7c7fb69980de4a817ff6bb46214474daefa42c07b8653602f59ce1"


def _load_d1() -> zstandard.ZstdCompressionDict:
    data = resources.files("objstore_saver.format").joinpath("zdict/d1.bin").read_bytes()
    if hashlib.sha256(data).hexdigest() != D1_SHA256:
        raise RuntimeError(
            "objstore_saver/format/zdict/d1.bin does not match its SHA-256 in "
            "compression.D1_SHA256: the installed package is damaged; reinstall objstore-saver"
        )
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


D1 = _load_d1()

T = TypeVar("T")


class Reused(Generic[T]):
    """Objects made once and lent to any thread, one user at a time (not per thread: LangGraph
    starts new threads for each invocation's writes; docs/profile.md, "8 OS threads").

    ``deque.pop`` and ``append`` are atomic: no lock (a racing return may keep one extra).
    """

    __slots__ = ("_free", "_keep", "_make")

    def __init__(self, make: Callable[[], T], keep: int = 16) -> None:
        self._make = make
        self._keep = keep
        self._free: collections.deque[T] = collections.deque()

    def take(self) -> T:
        """A free object, or a new one; hand it back with :meth:`give` once done."""
        try:
            return self._free.pop()
        except IndexError:
            return self._make()

    def give(self, obj: T) -> None:
        """Return an object taken with :meth:`take`, no longer in use."""
        if len(self._free) < self._keep:
            self._free.append(obj)


def new_compressor() -> zstandard.ZstdCompressor:
    """A D1 compressor of the format's level, writing the content size (one per user)."""
    return zstandard.ZstdCompressor(
        level=ZSTD_LEVEL, dict_data=D1, write_content_size=True, write_dict_id=False
    )


def new_decompressor(encoding: str) -> zstandard.ZstdDecompressor:
    """A decompressor of ``ZSTD`` or ``ZD1`` data (one per user)."""
    return zstandard.ZstdDecompressor(dict_data=D1 if encoding == ZD1 else None)


#: One-shot D1 compressors (a streaming user, which may be suspended, makes its own).
COMPRESSORS: Reused[zstandard.ZstdCompressor] = Reused(new_compressor)
#: One-shot decompressors by encoding (streaming users make their own).
DECOMPRESSORS: dict[str, Reused[zstandard.ZstdDecompressor]] = {
    encoding: Reused(functools.partial(new_decompressor, encoding)) for encoding in (ZSTD, ZD1)
}


def compressed(data: bytes) -> tuple[str, bytes]:
    """``(encoding, data)``: D1-compressed when that is smaller, else raw."""
    comp = COMPRESSORS.take()
    packed = comp.compress(data)
    # Handed back only after a success: an object whose call failed is dropped.
    COMPRESSORS.give(comp)
    if len(packed) < len(data):
        return ZD1, packed
    return RAW, data


#: Decompressed small payloads by (encoding, data): a conversation's messages are
#: decoded from the same payloads at every turn, and a lookup costs less than a frame.
_DECOMPRESSED: BoundedFifo[tuple[str, bytes], bytes] = BoundedFifo(8 * 1024 * 1024)
#: Largest decompressed payload kept in that cache.
DECOMPRESSED_KEPT_MAX = 64 * 1024


def decompressed(encoding: str, data: bytes, key: str) -> bytes:
    """The bytes ``data`` stands for in ``encoding`` (CorruptObjectError naming ``key``)."""
    if encoding == RAW:
        return data
    lender = DECOMPRESSORS.get(encoding)
    if lender is None:
        raise CorruptObjectError(key, f"unknown payload encoding {encoding!r}")
    memo = (encoding, data)
    known = _DECOMPRESSED.get(memo)
    if known is not None:
        return known
    dec = lender.take()
    try:
        out = dec.decompress(data)
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(key, f"zstd data does not decompress: {exc}") from exc
    lender.give(dec)
    if len(out) <= DECOMPRESSED_KEPT_MAX:
        _DECOMPRESSED.put(memo, out, len(out) + len(data) + 100)
    return out


def stream_decompressed(
    encoding: str, size: int, data: Iterable[bytes], key: str
) -> Iterator[bytes]:
    """Decoded bytes of data given in slices (parts), checked to hold ``size`` bytes and a
    complete zstd frame, without joining them."""
    if encoding not in ENCODINGS:
        raise CorruptObjectError(key, f"unknown payload encoding {encoding!r}")
    # A decompressor of its own: the caller may be suspended between two slices.
    dobj = new_decompressor(encoding).decompressobj() if encoding != RAW else None
    total = 0
    try:
        for piece in data:
            total += len(piece)
            yield piece if dobj is None else dobj.decompress(piece)
    except zstandard.ZstdError as exc:
        raise CorruptObjectError(key, f"zstd data does not decompress: {exc}") from exc
    if total != size:
        raise CorruptObjectError(key, f"parts hold {total} bytes, expected {size}")
    if dobj is not None and not dobj.eof:
        raise CorruptObjectError(key, "zstd frame is truncated")
