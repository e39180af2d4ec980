"""What client-side encryption may cost the seed chat, as bench/probes/encryption.py counts it.

Counts, not timings: the same on every machine. The probe plays the seed chat
(workload 1) in clear and encrypted, each on a fresh local-directory store
through :class:`~objstore_saver.MeteredStore`. Encryption must not change the
requests of any turn, except that a thread's first turn creates its key
object (one PUT), and it may add at most half the bytes.
"""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from bench.probes import encryption
from objstore_saver import LocalStore

TURNS = 6
#: Fresh threads whose first turn is checked: the first writes of a turn run
#: concurrently, so a race for the thread's key shows on some threads only.
FIRST_TURNS = 12


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return encryption.run(TURNS, "local")


def test_every_turn_after_the_first_sends_the_same_requests(report: dict[str, Any]) -> None:
    clear, enc = report["clear"]["turns"], report["encrypted"]["turns"]
    assert len(clear) == len(enc) == TURNS
    for c, e in zip(clear[1:], enc[1:], strict=True):
        assert e["requests"] == c["requests"], (c["turn"], c["requests"], e["requests"])
    assert report["comparison"]["turns_with_other_requests"] == []
    assert report["clear"]["complete"] and report["encrypted"]["complete"]


def test_the_first_turn_adds_exactly_the_key_object_put() -> None:
    # Every thread's first turn: the clear requests plus one PUT of
    # keys/threads/<T>, no GET (writers racing to create the key would add
    # a conflicting PUT and a GET each).
    seen = []
    for _ in range(FIRST_TURNS):
        with tempfile.TemporaryDirectory() as root:
            clear = encryption.play(LocalStore(f"{root}/c", fsync=False), 1, encrypted=False)
            enc = encryption.play(LocalStore(f"{root}/e", fsync=False), 1, encrypted=True)
            c0, e0 = clear["turn0_requests"], enc["turn0_requests"]
            seen.append(e0)
            assert (clear["stored"]["key_objects"], enc["stored"]["key_objects"]) == (0, 1)
        assert {**c0, "put": c0["put"] + 1} == e0, seen


def test_encryption_adds_at_most_half_the_bytes_of_the_last_turn(report: dict[str, Any]) -> None:
    cmp = report["comparison"]
    assert cmp["bytes_written_last_turn_ratio"] <= encryption.BYTES_RATIO_TARGET, cmp
    assert cmp["bytes_stored_ratio"] <= encryption.BYTES_RATIO_TARGET, cmp
    assert cmp["target_bytes_met"]
    # Sealing adds bytes (a tag per object): the encrypted store is never smaller.
    assert report["encrypted"]["stored"]["bytes"] > report["clear"]["stored"]["bytes"]


def test_the_printed_table_states_both_targets(report: dict[str, Any]) -> None:
    text = encryption.render(report)
    assert "Target: bytes at turn 6 <= 1.5x in clear" in text
    assert "Target: the same requests per turn" in text
    assert "keys/threads/<T>" in text


def test_the_long_term_store_adds_a_key_object_per_namespace_and_nothing_else() -> None:
    """bench/probes/store_encryption.py: the same requests as in clear, but the key objects."""
    from bench.probes import store_encryption

    users, memories = 3, 4
    r = store_encryption.run(users, memories)
    none = {"put": 0, "get": 0, "list": 0, "delete": 0}
    # A namespace's first write: its key object's create-only PUT. Its first read
    # (the store's own GET before a put) finds nothing and opens nothing: no key GET.
    assert r["added"]["write"] == {**none, "put": users}
    # A cold process: one GET of each namespace's key object, then as in clear.
    assert r["added"]["cold_read"] == {**none, "get": users}
    assert r["encrypted"]["stored_objects"] == r["clear"]["stored_objects"] + users
    assert 0 < r["bytes_per_object_added"] <= 100
    assert "encryption adds" in store_encryption.render(r)
