"""Decompressed payloads are remembered by content (codec.payload_bytes).

A conversation's messages are decoded from the same stored payloads at every
turn; the second decode of one payload must not decompress it again, and a
payload that does not decompress must still fail, every time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from objstore_saver import codec, compression
from objstore_saver.errors import CorruptObjectError
from objstore_saver.fifo import BoundedFifo


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = compression._decompressor

    def counted(encoding: str) -> Any:
        calls.append(encoding)
        return real(encoding)

    monkeypatch.setattr(compression, "_decompressor", counted)
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
