"""Key layout (spec §3): tokens are injective, prefix-free and round-trip."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from payloads import HOSTILE_IDS

from objstore_saver.errors import InvalidIdentifierError
from objstore_saver.format import keys
from objstore_saver.storage.base import validate_key


@pytest.mark.parametrize("value", HOSTILE_IDS)
def test_token_is_a_valid_key_segment(value: str) -> None:
    tok = keys.token("thread_id", value)
    validate_key(f"threads/{tok}/x")
    assert "/" not in tok
    assert tok not in ("", ".", "..")
    assert len(tok) <= keys.MAX_QUOTED_TOKEN + 1 or len(tok) == 65


@pytest.mark.parametrize("value", [v for v in HOSTILE_IDS if len(v) < 60])
def test_readable_token_round_trips(value: str) -> None:
    assert keys.untoken(keys.token("thread_id", value)) == value


def test_tokens_are_injective_and_no_thread_prefix_is_another_threads() -> None:
    prefixes = [keys.thread_prefix(v) for v in HOSTILE_IDS]
    assert len(set(prefixes)) == len(HOSTILE_IDS)
    for a in prefixes:
        for b in prefixes:
            if a != b:
                assert not b.startswith(a), (a, b)


def test_long_ids_fall_back_to_distinct_hashes() -> None:
    a, b = keys.token("t", "x" * 2000), keys.token("t", "x" * 1999 + "y")
    assert a.startswith("~") and b.startswith("~") and a != b
    assert keys.untoken(a) is None


def test_non_string_and_unencodable_ids_are_rejected_by_name() -> None:
    with pytest.raises(InvalidIdentifierError, match="thread_id"):
        keys.token("thread_id", 42)
    with pytest.raises(InvalidIdentifierError, match="thread_id"):
        keys.token("thread_id", "lone surrogate \udcff")


# 30 characters are at most 120 UTF-8 bytes, the checkpoint id limit.
@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_reverse_id_reverses_string_order(a: str, b: str) -> None:
    ra, rb = keys.reverse_id(a), keys.reverse_id(b)
    assert keys.unreverse_id(ra) == a
    if a < b:
        assert ra > rb
    elif a > b:
        assert ra < rb
    else:
        assert ra == rb


def test_reverse_id_limits() -> None:
    with pytest.raises(InvalidIdentifierError, match="checkpoint_id"):
        keys.reverse_id("")
    with pytest.raises(InvalidIdentifierError, match="121 bytes"):
        keys.reverse_id("c" * 121)


def test_longest_key_fits_ceph_limit() -> None:
    long = "z" * 5000
    key = keys.write_key(long, long, "c" * 120, long, -4)
    assert len(key) <= 1024 - 256
    key = keys.manifest_key(long, long, "é" * 60)
    assert len(key) <= 1024 - 256
