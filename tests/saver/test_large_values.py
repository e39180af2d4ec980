"""Large values are streamed: their parts are stored as the compressor makes them.

Spec §4.3: a value whose data exceeds one part is one zstd frame cut into
parts, and a put stores the parts in windows of about 2 MiB before their
``parts`` object, holding neither the whole frame nor all its parts at once.
Memory is counted with tracemalloc (bytes, not time).
"""

from __future__ import annotations

import asyncio
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from faultkit import config
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import LocalStore, MeteredStore, ObjectStoreSaver
from objstore_saver.format import codec

MIB = 1024 * 1024


def _checkpoint(value: Any) -> tuple[dict, dict]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": 1}
    return cp, {"v": 1}


def _compressible(nbytes: int, seed: int = 1) -> bytes:
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    out = bytearray()
    while len(out) < nbytes:
        out += rng.choice(words) + b" "
    return bytes(out[:nbytes])


def _decoded(store: MeteredStore, key: str) -> object:
    """A content object decoded, or None for a manifest."""
    if "/objects/" not in key:
        return None
    return codec.decode_object(store.inner.get(key), key)


@pytest.mark.parametrize("kind", ["compressible", "incompressible"])
def test_a_20_mib_put_holds_one_window_of_parts(tmp_path: Path, kind: str) -> None:
    # A bytes value reaches the codec unserialized (LangGraph's serializer
    # passes bytes through), so the traced peak is the saver's own.
    size = 20 * MIB
    value = _compressible(size) if kind == "compressible" else random.Random(2).randbytes(size)
    store = MeteredStore(LocalStore(tmp_path / "store", fsync=False), log=True)
    with ObjectStoreSaver(store) as saver:
        cp, versions = _checkpoint(value)
        tracemalloc.start()
        try:
            saver.put(config("big"), cp, {"step": 0}, versions)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # Before streaming the put held the frame's bound (1x) and every part (1x).
        assert peak < 0.5 * size, f"{kind}: traced peak {peak / size:.2f}x the value"
        with ObjectStoreSaver(store.inner) as fresh:
            got = fresh.get_tuple(config("big"))
        assert got is not None and got.checkpoint["channel_values"]["v"] == value


def test_parts_are_stored_before_their_parts_object_and_manifest(tmp_path: Path) -> None:
    store = MeteredStore(LocalStore(tmp_path / "store", fsync=False), log=True)
    value = random.Random(3).randbytes(5 * MIB)
    with ObjectStoreSaver(store) as saver:
        cp, versions = _checkpoint(value)
        saver.put(config("t"), cp, {"step": 0}, versions)
    puts = [e for e in store.log if e.op == "put"]
    kinds = [_decoded(store, e.key) for e in puts]
    part_positions = [i for i, o in enumerate(kinds) if isinstance(o, codec.PartObj)]
    container = next(i for i, o in enumerate(kinds) if isinstance(o, codec.PartsObj))
    assert len(part_positions) == 21  # 5 MiB of random bytes: 20 full parts and a short one
    assert max(part_positions) < container < len(puts) - 1  # the manifest comes last
    assert puts[-1].key.startswith("threads/_t/checkpoints/")
    assert all(e.nbytes <= codec.PART_SIZE + 64 for e in puts)


def test_a_large_element_of_a_list_streams_and_round_trips_async(tmp_path: Path) -> None:
    store = MeteredStore(LocalStore(tmp_path / "store", fsync=False), log=True)
    big = _compressible(3 * MIB, seed=4).decode()
    messages = [f"message {i} " + "x" * 300 for i in range(10)]
    messages.insert(5, big)

    async def go() -> Any:
        async with ObjectStoreSaver(store) as saver:
            cp, versions = _checkpoint(messages)
            stored = await saver.aput(config("l"), cp, {"step": 0}, versions)
            return await saver.aget_tuple(stored)

    got = asyncio.run(go())
    assert got is not None and got.checkpoint["channel_values"]["v"] == messages
    # The element is a parts object: its compressed frame spans several parts.
    kinds = [type(_decoded(store, e.key)) for e in store.log if e.op == "put"]
    assert kinds.count(codec.PartsObj) == 1 and kinds.count(codec.PartObj) >= 2


def test_a_stored_value_is_not_written_again(tmp_path: Path) -> None:
    store = MeteredStore(LocalStore(tmp_path / "store", fsync=False))
    value = random.Random(5).randbytes(3 * MIB)
    with ObjectStoreSaver(store) as saver:
        cp, versions = _checkpoint(value)
        first = saver.put(config("d"), cp, {"step": 0}, versions)
        written = store.snapshot().objects_put
        cp2, _ = _checkpoint(value)
        saver.put(first, cp2, {"step": 1}, {"v": 2})
    # Same bytes, same parts: only the second manifest is new (parts known in memory).
    assert store.snapshot().objects_put == written + 1
