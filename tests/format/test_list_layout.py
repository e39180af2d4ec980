"""The list layout of spec §4.4: a function of the elements, stable under append."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
from repo_root import ROOT

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, compression, list_encoding
from objstore_saver.format.codec import CHUNK_LEN, ListObj, Ref


def _elements(n: int) -> list[tuple[str, bytes]]:
    # Alternate small (inline) and incompressible large (referenced) elements.
    return [
        ("msgpack", b"e%d-" % i if i % 3 else random.Random(i).randbytes(200)) for i in range(n)
    ]


def _list(enc: codec.Encoded) -> ListObj:
    # The list's root is inline in the manifest (format version 2); round-trip it.
    assert isinstance(enc.entry, codec.InlineList)
    packed = msgpack.packb(codec.entry_to_msgpack(enc.entry), use_bin_type=True)
    entry = codec.decode_entry(msgpack.unpackb(packed, raw=False), "a manifest")
    assert isinstance(entry, codec.InlineList) and entry == enc.entry
    return entry.obj


def _flatten(enc: codec.Encoded, lst: ListObj) -> list[codec.Entry]:
    out: list[codec.Entry] = []
    for g in lst.segments:
        obj = codec.decode_object(enc.objects[g.digest], "segment", "g")
        assert isinstance(obj, codec.SegmentObj) and len(obj.items) == g.count
        out.extend(obj.items)
    return out + list(lst.tail)


def _payloads(enc: codec.Encoded, entries: list[codec.Entry]) -> list[bytes]:
    out = []
    for e in entries:
        if isinstance(e, Ref):
            value = codec.decode_object(enc.objects[e.digest], "value", "b")
            out.append(codec.payload_bytes(value.payload, "value")[1])
        else:
            out.append(codec.payload_bytes(e.payload, "inline")[1])
    return out


@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 32, 33, 100, 127, 128, 129, 600])
def test_layout_holds_every_element_in_order(n: int) -> None:
    elements = _elements(n)
    enc = list_encoding.encode_list(elements)
    lst = _list(enc)
    assert lst.count == n
    assert len(lst.tail) == n % CHUNK_LEN
    assert lst.sealed == ()  # version 1's chunks and nodes are read, never written
    assert _payloads(enc, _flatten(enc, lst)) == [data for _, data in elements]


def _expected_counts(n: int) -> list[int]:
    """Segments of n small elements: full 64-element segments, then binary digits."""
    chunks = n // CHUNK_LEN
    top = codec.SEGMENT_FULL_LEN // CHUNK_LEN
    expected = [codec.SEGMENT_FULL_LEN] * (chunks // top)
    chunks %= top
    for k in reversed(range(3)):
        expected += [CHUNK_LEN * 2**k] * (chunks // 2**k)
        chunks %= 2**k
    return expected


@pytest.mark.parametrize("n", [*range(0, 700, 7), 2047, 2048, 2056, 4100, 5000])
def test_segments_merge_by_twos_up_to_the_full_size(n: int) -> None:
    if n == 0:
        return
    lst = _list(list_encoding.encode_list(_elements(n)))
    counts = [g.count for g in lst.segments]
    assert counts == _expected_counts(n)
    # The full ones come first; at most 3 are open (32, 16 and 8 elements).
    full = list_encoding.full_segments(counts)
    assert counts[:full] == [codec.SEGMENT_FULL_LEN] * full
    assert len(counts) - full <= 3


def test_segments_stop_merging_past_the_byte_limit_and_are_then_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Incompressible 128-byte elements stay inline (about 142 bytes an entry).
    # A 64-element segment packs to 9 KB, far below 128 KiB; with a limit of
    # 4,000 bytes two 16-element segments (4.5 KB) do not merge.
    monkeypatch.setattr(codec, "SEGMENT_MAX_BYTES", 4000)
    elements = [("bytes", random.Random(i).randbytes(128)) for i in range(1024 + 24)]
    enc = list_encoding.encode_list(elements)
    lst = _list(enc)
    counts = [g.count for g in lst.segments]
    assert counts == [16] * 65 + [8]
    assert all(isinstance(e, codec.Inline) for e in _flatten(enc, lst))
    assert max(len(b) for b in enc.objects.values()) <= 4000
    # A segment whose merge was refused never merges: it is full; the last
    # two may still grow (the 16 with the 16 the next 8 make).
    assert list_encoding.full_segments(counts) == 64
    assert list_encoding.full_segments([16, 8, 8]) == 2  # an 8 refused: full, and so the 16
    assert list_encoding.full_segments([32, 16, 8]) == 0
    assert list_encoding.full_segments([64, 32, 16, 8]) == 1


def test_a_long_list_never_makes_a_segment_over_the_full_size() -> None:
    # Seed-chat-sized messages (about 110 bytes an entry), as a thread of 3,000
    # turns holds: the largest segment, what one turn's merge writes, stays
    # at 64 elements (7 KB) however long the list grows.
    rng = random.Random(5)
    elements = [("bytes", rng.randbytes(96)) for _ in range(6000)]
    enc = list_encoding.encode_list(elements)
    lst = _list(enc)
    assert max(g.count for g in lst.segments) == codec.SEGMENT_FULL_LEN
    assert max(len(b) for b in enc.objects.values()) < 8 * 1024


def test_appending_keeps_every_segment_and_writes_only_what_is_new() -> None:
    elements = _elements(300)
    before = list_encoding.encode_list(elements[:1])
    for n in range(2, 301):
        after = list_encoding.encode_list(elements[:n])
        old, new = _list(before), _list(after)
        # Every segment is kept, or merged with its neighbour into one: a seal
        # merges the last segment of each size it completes (a binary carry).
        kept = [g for g in old.segments if g in new.segments]
        assert new.segments[: len(kept)] == tuple(kept), n
        cascades = [sum(CHUNK_LEN * 2**k for k in range(m)) for m in range(9)]
        assert sum(g.count for g in old.segments) - sum(g.count for g in kept) in cascades, n
        added = set(after.objects) - set(before.objects)
        # the element (if referenced), and on a seal one segment: the sealed
        # run, or what it merged into (the list's root is inline)
        referenced = 1 if (n - 1) % 3 == 0 else 0
        assert len(added) == referenced + (1 if n % CHUNK_LEN == 0 else 0), n
        before = after


def _list_object(count: int = 20) -> dict[str, Any]:
    """A version-1 ``list`` object (still read): two chunks and a tail."""
    tail = [["i", "msgpack", "raw", b"%d" % i] for i in range(count - 2 * CHUNK_LEN)]
    return {"f": 1, "k": "list", "n": count, "c": [[b"\0" * 32, 8], [b"\1" * 32, 8]], "x": tail}


def _indexed(enc: codec.Encoded, mkey: str | None = None) -> tuple[ListObj, dict[bytes, bytes]]:
    """The list as a writer stores it: its full segments under a root index (all at ``mkey``)."""
    lst = _list(enc)
    made: dict[bytes, bytes] = {}

    def place(digest: bytes, body: bytes, children: tuple[bytes, ...]) -> str | None:
        made[digest] = body
        return mkey

    located = [codec.SegmentRef(g.digest, g.count, mkey) for g in lst.segments]
    full = list_encoding.full_segments([g.count for g in located])
    if not full:
        return lst, made
    root = list_encoding.root_index(located[:full], place)
    return ListObj(lst.count, (), lst.tail, (root, *located[full:])), made


def test_list_root_stays_small_at_2000_elements() -> None:
    enc = list_encoding.encode_list([("msgpack", b"x" * 300 + b"%d" % i) for i in range(2000)])
    # 250 runs of 8: 31 full segments of 64 and one of 16.
    assert [g.count for g in _list(enc).segments] == [64] * 31 + [16]
    from objstore_saver.format import keys

    mkey = keys.manifest_key("t", "", "1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8")
    lst, made = _indexed(enc, mkey)
    assert [(g.count, g.index) for g in lst.segments] == [(1984, True), (16, False)]
    packed = codec.entry_to_msgpack(codec.InlineList(lst), mkey)
    assert len(msgpack.packb(packed, use_bin_type=True)) < 200
    assert packed[2][0][2:] == ["", "i"]  # the root index, embedded here
    # One full index of 16 segments, and the root: it and 15 segments.
    root = codec.decode_object(made[lst.segments[0].digest], "root", "n")
    assert isinstance(root, codec.IndexObj)
    assert [(r.count, r.index) for r in root.refs] == [(1024, True)] + [(64, False)] * 15
    full = codec.decode_object(made[root.refs[0].digest], "full", "n")
    assert isinstance(full, codec.IndexObj) and len(full.refs) == codec.INDEX_FANOUT
    # In an index a location is the checkpoint id (the list's namespace resolves it).
    assert {r.at for r in full.refs} == {keys.checkpoint_id_of_manifest_key(mkey)}


@pytest.mark.parametrize("segments", [1, 15, 16, 17, 255, 256, 257, 4096 + 16 * 3 + 5])
def test_the_root_index_holds_the_base_16_digits_of_the_full_segments(segments: int) -> None:
    refs = [codec.SegmentRef(bytes([i % 256, i // 256]) * 16, 64) for i in range(segments)]
    made: dict[bytes, codec.IndexObj] = {}

    def place(digest: bytes, body: bytes, children: tuple[bytes, ...]) -> str | None:
        obj = codec.decode_object(body, "index", "n")
        assert isinstance(obj, codec.IndexObj) and len(obj.refs) == len(children)
        made[digest] = obj
        return None

    root = list_encoding.root_index(refs, place)
    assert root.index and root.count == 64 * segments
    digits, n = [], segments
    while n:
        digits.append(n % 16)
        n //= 16
    top = made[root.digest]
    # Highest level first: the digit of each level, in references of that level.
    levels = [16**k * 64 for k in reversed(range(len(digits)))]
    expected = [c for c, d in zip(levels, reversed(digits), strict=True) for _ in range(d)]
    assert [r.count for r in top.refs] == expected
    assert all(len(o.refs) == 16 for d, o in made.items() if d != root.digest)
    # Flattened, the indexes give back every segment in order.

    def flat(obj: codec.IndexObj) -> list[bytes]:
        return [d for r in obj.refs for d in (flat(made[r.digest]) if r.index else [r.digest])]

    assert flat(top) == [g.digest for g in refs]


def test_appending_keeps_every_full_index() -> None:
    # Full indexes are a function of the full segments before them: a list
    # grown by one segment keeps them, and its root changes.
    refs = [codec.SegmentRef(bytes([i % 256, i // 256]) * 16, 64) for i in range(300)]
    seen: set[bytes] = set()
    made: dict[bytes, bytes] = {}

    def place(digest: bytes, body: bytes, children: tuple[bytes, ...]) -> str | None:
        made[digest] = body
        return None

    for n in range(1, 300):
        made.clear()
        root = list_encoding.root_index(refs[:n], place)
        full = set(made) - {root.digest}
        assert seen <= full, n
        seen = full
        assert len(made[root.digest]) < 16 * 3 * 40


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda o: o.update(n=o["n"] + 1), "element count"),
        (lambda o: o["c"].__setitem__(0, [o["c"][0][0], 12]), "full count"),
        (lambda o: o["c"].__setitem__(0, [b"short", 8]), "SHA-256"),
        (lambda o: o.pop("x"), "'x'"),
        (lambda o: o["c"].__setitem__(0, [o["c"][0][0], 8, None]), "segment reference"),
    ],
)
def test_malformed_list_objects_raise_naming_the_key(
    mutate: Callable[[dict[str, Any]], object], reason: str
) -> None:
    raw = _list_object()
    mutate(raw)
    with pytest.raises(CorruptObjectError, match=reason) as info:
        codec.decode_object(msgpack.packb(raw, use_bin_type=True), "threads/_t/objects/ab", "l")
    assert info.value.key == "threads/_t/objects/ab"


@pytest.mark.parametrize(
    ("segment", "reason"),
    [
        ([b"\0" * 32, 12, None], "segment reference"),
        ([b"\0" * 32, 8 * 2**9, None], "segment reference"),
        ([b"\0" * 32, 32, None], "element count"),
        ([b"short", 8, None], "SHA-256"),
        ([b"\0" * 32, 8, "x" * 200], "not a checkpoint id"),
        ([b"\0" * 32, 8, b"\0" * 15], "not a checkpoint id"),
        ([b"\0" * 32, 8, 7], "not a checkpoint id"),
    ],
)
def test_malformed_inline_lists_raise_naming_the_manifest(segment: list[Any], reason: str) -> None:
    mkey = "threads/_t/checkpoints/_/r~.2"
    tail = [["i", "msgpack", "raw", b"1"]]
    with pytest.raises(CorruptObjectError, match=reason) as info:
        codec.decode_entry(["L", 9, [segment], tail], mkey)
    assert info.value.key == mkey


def test_segment_locations_are_relative_to_the_manifest_that_holds_them() -> None:
    from objstore_saver.format import keys

    def manifest(thread: str, checkpoint_id: str) -> str:
        return keys.manifest_key(thread, "", checkpoint_id)

    uuid_id = "1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"
    mkey = manifest("t", "own")
    locs = [mkey, manifest("t", "older"), manifest("t", uuid_id)]
    segs = tuple(codec.SegmentRef(bytes([i]) * 32, 8, loc) for i, loc in enumerate(locs))
    tail = (codec.Inline(codec.Payload("t", "raw", b"")),)
    entry = codec.InlineList(ListObj(25, (), tail, segs))
    raw = codec.entry_to_msgpack(entry, mkey)
    # Own manifest "", another by its checkpoint id; a UUID's id as its 16 bytes.
    assert [s[2] for s in raw[2]] == ["", "older", bytes.fromhex(uuid_id.replace("-", ""))]
    assert codec.decode_entry(raw, mkey) == entry
    # Copied to another thread, the same bytes locate the copies there.
    moved = codec.decode_entry(raw, manifest("u", "own"))
    assert isinstance(moved, codec.InlineList)
    assert [g.loc for g in moved.obj.segments] == [
        manifest("u", i) for i in ("own", "older", uuid_id)
    ]
    with pytest.raises(ValueError, match="not a manifest beside"):
        codec.entry_to_msgpack(entry, manifest("u", "own"))


def test_a_list_element_that_is_a_list_root_is_corrupt() -> None:
    # A list's fields ("L") belong to a manifest or write entry, never to an element.
    nested = ["L", 1, [], [["i", "msgpack", "raw", b"1"]]]
    chunk = {
        "f": 1,
        "k": "chunk",
        "x": [["i", "msgpack", "raw", b"1"]] * (CHUNK_LEN - 1) + [nested],
    }
    with pytest.raises(CorruptObjectError, match="inline list entry"):
        codec.decode_object(msgpack.packb(chunk, use_bin_type=True), "k", "c")
    with pytest.raises(CorruptObjectError, match="inline list entry"):
        codec.decode_entry(["L", 1, [], [nested]], "m")


def test_short_chunk_and_uneven_node_are_corrupt() -> None:
    chunk = {"f": 1, "k": "chunk", "x": [["i", "msgpack", "raw", b"1"]] * (CHUNK_LEN - 1)}
    with pytest.raises(CorruptObjectError, match="chunk holds 7"):
        codec.decode_object(msgpack.packb(chunk, use_bin_type=True), "k", "c")
    node = {"f": 1, "k": "node", "c": [[b"\0" * 32, 8], [b"\1" * 32, 32], [b"\2" * 32, 8]]}
    with pytest.raises(CorruptObjectError, match="node holds"):
        codec.decode_object(msgpack.packb(node, use_bin_type=True), "k", "c")


def test_payloads_use_dictionary_d1_and_old_zstd_frames_still_read() -> None:
    import zstandard
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    type_, data = JsonPlusSerializer().dumps_typed(AIMessage("a reply " * 40, id="run-1"))
    payload = codec.make_payload(type_, data)
    assert payload.encoding == compression.ZD1
    plain = zstandard.ZstdCompressor(level=compression.ZSTD_LEVEL).compress(data)
    assert len(payload.data) < len(plain) - 60  # the framing is in the dictionary
    assert codec.payload_bytes(payload, "k") == (type_, data)
    old = codec.Payload(type_, compression.ZSTD, plain)
    assert codec.payload_bytes(old, "k") == (type_, data)
    # D1 is not optional: a zd1 frame does not decode without it.
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(payload.data)
    bad = codec.Payload(type_, compression.ZD1, plain[:-3] + b"xyz")
    with pytest.raises(CorruptObjectError, match="does not decompress"):
        codec.payload_bytes(bad, "threads/_t/objects/00")


def test_dictionary_file_matches_the_spec() -> None:
    import hashlib
    from importlib import resources

    data = resources.files("objstore_saver.format").joinpath("zdict/d1.bin").read_bytes()
    assert hashlib.sha256(data).hexdigest() == compression.D1_SHA256
    spec = (ROOT / "docs" / "spec.md").read_text()
    assert compression.D1_SHA256 in spec


def test_element_memory_encodes_only_new_elements(monkeypatch: pytest.MonkeyPatch) -> None:
    from objstore_saver.caches.facts import ElementCache

    calls: list[bytes] = []
    real = list_encoding.encode_element

    def counting(type_: str, data: bytes, epoch: int = 0) -> list_encoding.EncodedElement:
        calls.append(data)
        return real(type_, data, epoch)

    monkeypatch.setattr(list_encoding, "encode_element", counting)
    cache = ElementCache()
    elements = [("msgpack", b"m%d" % i * 100) for i in range(40)]
    first = list_encoding.encode_list(elements[:39], cache)
    assert len(calls) == 39
    calls.clear()
    second = list_encoding.encode_list(elements, cache)
    assert calls == [elements[39][1]]
    # Same bytes as without a cache: the cache never changes the layout.
    assert second.objects == list_encoding.encode_list(elements).objects
    assert set(first.objects) <= set(second.objects)


def test_element_memory_is_bounded_by_bytes() -> None:
    from objstore_saver.caches.facts import ElementCache

    cache = ElementCache(max_bytes=64 * 1024)
    for i in range(500):
        data = b"%d" % i * 200
        cache.put(("msgpack", data), list_encoding.encode_element("msgpack", data))
    assert cache.held_bytes <= 64 * 1024
    assert cache.get(("msgpack", b"499" * 200)) is not None
    assert cache.get(("msgpack", b"0" * 200)) is None


def test_sealed_memory_packs_only_new_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    from objstore_saver.caches.facts import ElementCache

    packed: list[str] = []
    real = codec.pack_object

    def counting(obj: dict[str, Any]) -> bytes:
        packed.append(obj["k"])
        return real(obj)

    cache = ElementCache()
    # 16 runs of 8 merge into two full segments; 8 more elements seal a new one.
    n = CHUNK_LEN * 16
    elements = _elements(n + CHUNK_LEN)
    list_encoding.encode_list(elements[:n], cache, cache.sealed)
    monkeypatch.setattr(codec, "pack_object", counting)
    # The same elements serialized again (new bytes objects, equal content).
    again = [(t, bytes(bytearray(d))) for t, d in elements]
    grown = list_encoding.encode_list(again, cache, cache.sealed)
    # Only the new segment and its new referenced elements (the list's root
    # is inline in the manifest); the 64-element segments are remembered.
    new_values = sum(1 for i in range(n, n + CHUNK_LEN) if i % 3 == 0)
    assert sorted(packed) == ["segment"] + ["value"] * new_values
    monkeypatch.undo()
    # Byte for byte what an encoding without any memory gives (spec §4.4 layout).
    fresh = list_encoding.encode_list(elements)
    assert grown.entry == fresh.entry
    assert grown.objects == fresh.objects
    assert grown.children == fresh.children


def test_sealed_memory_follows_the_elements_not_their_positions() -> None:
    from objstore_saver.caches.facts import ElementCache

    cache = ElementCache()
    elements = _elements(CHUNK_LEN * 6)
    list_encoding.encode_list(elements, cache, cache.sealed)
    # An element changed in place (a message edited): the segments holding it
    # are new; the result equals a fresh encoding.
    edited = list(elements)
    edited[3] = ("msgpack", b"edited")
    got = list_encoding.encode_list(edited, cache, cache.sealed)
    fresh = list_encoding.encode_list(edited)
    assert got.entry == fresh.entry and got.objects == fresh.objects
    assert got.entry != list_encoding.encode_list(elements).entry


def test_sealed_memory_is_bounded_by_bytes() -> None:
    from objstore_saver.caches.facts import SealedCache

    cache = SealedCache(max_bytes=64 * 1024)
    for i in range(300):
        elements = [("msgpack", b"%d-%d" % (i, j) * 40) for j in range(CHUNK_LEN)]
        list_encoding.encode_list(elements, None, cache)
    assert cache.held_bytes <= 64 * 1024
    last = ("g", *[("msgpack", b"299-%d" % j * 40) for j in range(CHUNK_LEN)])
    first = ("g", *[("msgpack", b"0-%d" % j * 40) for j in range(CHUNK_LEN)])
    assert cache.get(last) is not None
    assert cache.get(first) is None


def test_remembered_chunks_still_carry_their_elements_to_the_store(tmp_path: Path) -> None:
    """With no object known stored, a put walks into remembered chunks: their values go too."""
    from langgraph.checkpoint.base import empty_checkpoint

    from objstore_saver import ObjectStoreSaver
    from objstore_saver.storage import LocalStore

    def grown(n: int) -> list[bytes]:
        # Incompressible 400-byte elements: each is a value object of its own.
        return [random.Random(i).randbytes(400) for i in range(n)]

    cfg: dict[str, Any] = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    # object_cache_bytes=0: nothing is remembered as stored, every put re-walks its list.
    with ObjectStoreSaver(LocalStore(tmp_path / "a"), object_cache_bytes=0) as writer:
        for n in (CHUNK_LEN * 5, CHUNK_LEN * 5 + 1):
            cp = empty_checkpoint()
            cp["channel_values"] = {"items": grown(n)}
            cp["channel_versions"] = {"items": n}
            writer.put(cfg, cp, {}, {"items": n})
    # The second put's objects alone (a fresh store) must hold the whole list.
    with ObjectStoreSaver(LocalStore(tmp_path / "b"), object_cache_bytes=0) as other:
        other._ctx.elements.sealed = writer._ctx.elements.sealed
        other._ctx.elements._fifo = writer._ctx.elements._fifo
        cp = empty_checkpoint()
        cp["channel_values"] = {"items": grown(CHUNK_LEN * 5 + 2)}
        cp["channel_versions"] = {"items": 1}
        other.put(cfg, cp, {}, {"items": 1})
        assert other.verify(read_data=True).ok
    with ObjectStoreSaver(LocalStore(tmp_path / "b")) as reader:
        got = reader.get_tuple(cfg)
    assert got is not None
    assert got.checkpoint["channel_values"]["items"] == grown(CHUNK_LEN * 5 + 2)
