"""Decompressed payloads are remembered by content (codec.payload_bytes).

A conversation's messages are decoded from the same stored payloads at every
turn; the second decode of one payload must not decompress it again, and a
payload that does not decompress must still fail, every time.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import zstandard

from objstore_saver.errors import CorruptObjectError
from objstore_saver.format import codec, compression
from objstore_saver.format.bounded_fifo import BoundedFifo


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    class Counted:
        """A lender that logs every decompressor taken (one per decompression)."""

        def __init__(self, encoding: str, inner: compression.Reused[Any]) -> None:
            self.encoding, self.inner = encoding, inner

        def take(self) -> Any:
            calls.append(self.encoding)
            return self.inner.take()

        def give(self, obj: Any) -> None:
            self.inner.give(obj)

    monkeypatch.setattr(
        compression,
        "DECOMPRESSORS",
        {e: Counted(e, lender) for e, lender in compression.DECOMPRESSORS.items()},
    )
    # An empty cache: nothing from other tests of the process.
    monkeypatch.setattr(
        compression, "_DECOMPRESSED", BoundedFifo(compression._DECOMPRESSED.max_bytes)
    )
    return calls


def test_a_payload_is_decompressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    data = b"answer " + b"a" * 800 + random.Random(1).randbytes(20)
    payload = codec.make_payload("msgpack", data)
    assert payload.encoding == compression.ZD1
    # An equal payload read back from the store is another bytes object.
    again = codec.Payload("msgpack", compression.ZD1, bytes(bytearray(payload.data)))
    assert codec.payload_bytes(payload, "k") == ("msgpack", data)
    assert codec.payload_bytes(again, "k") == ("msgpack", data)
    assert calls == [compression.ZD1]
    # The type comes from the payload, not from the cache.
    assert (
        codec.payload_bytes(codec.Payload("json", compression.ZD1, payload.data), "k")[0] == "json"
    )


def test_large_payloads_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    data = b"x" * (compression.DECOMPRESSED_KEPT_MAX + 1)
    payload = codec.make_payload("msgpack", data)
    for _ in range(2):
        assert codec.payload_bytes(payload, "k")[1] == data
    assert len(calls) == 2


def test_a_corrupt_payload_fails_every_time() -> None:
    bad = codec.Payload("msgpack", compression.ZD1, b"\x28\xb5\x2f\xfd garbage")
    for _ in range(2):
        with pytest.raises(CorruptObjectError, match="key-7"):
            codec.payload_bytes(bad, "key-7")


# --- (de)compressors lent across threads ------------------------------------------------------


def test_new_threads_borrow_compressors_instead_of_making_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LangGraph's blocking loop writes each invocation's checkpoints from
    # threads started for it: one compressor per thread was made every turn.
    made: list[int] = []
    real = zstandard.ZstdCompressor

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    data = b"question 1 " + b"q" * 300
    compression.compressed(data)  # one is free now
    monkeypatch.setattr(zstandard, "ZstdCompressor", counted)
    for _ in range(20):
        worker = threading.Thread(target=compression.compressed, args=(data,))
        worker.start()
        worker.join()
    assert made == []


def test_threads_compressing_at_once_each_get_their_own_compressor() -> None:
    rng = random.Random(7)
    inputs = [b"m%d " % i + rng.randbytes(64) * rng.randint(2, 40) for i in range(64)]
    expected = [compression.new_compressor().compress(d) for d in inputs]
    start = threading.Barrier(8)
    got: dict[int, tuple[str, bytes]] = {}
    wrong: list[int] = []

    def work(k: int) -> None:
        start.wait(10)
        for _ in range(30):
            for i in range(k, len(inputs), 8):
                got[i] = compression.compressed(inputs[i])
                encoding, data = got[i]
                if compression.decompressed(encoding, data, f"k{i}") != inputs[i]:
                    wrong.append(i)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not wrong
    assert [got[i][1] for i in range(len(inputs))] == expected
