"""The benchmark's scripted inputs are what the issue specifies (counts, no timings)."""

from __future__ import annotations

from bench import graphs
from bench.workloads import FULL, QUICK


def test_realistic_chat_has_seed_lengths_and_is_reproducible() -> None:
    real, again = graphs.realistic_script(), graphs.realistic_script()
    assert len(real.system) == len(graphs.SEED.system)
    for t in (0, 7, 29):
        assert len(real.user(t)) == len(graphs.SEED.user(t))
        assert len(real.reply(t)) == len(graphs.SEED.reply(t))
        assert real.user(t) == again.user(t) and real.reply(t) == again.reply(t)
    assert real.reply(3) != real.reply(4)
    words = set(" ".join(real.reply(t) for t in range(30)).split())
    assert len(words) > 500  # drawn from a vocabulary of thousands, not a repeated letter


def test_seed_script_inputs_and_raw_bytes() -> None:
    first, later = graphs.SEED.inputs(0), graphs.SEED.inputs(5)
    assert [m.type for m in first] == ["system", "human"]
    assert [m.type for m in later] == ["human"]
    assert later[0].content == "question 5 " + "q" * 200
    assert graphs.SEED.reply(5) == "answer 5 " + "a" * 800
    assert graphs.SEED.new_message_bytes(5) == len("question 5 ") + 200 + len("answer 5 ") + 800
    assert graphs.SEED.new_message_bytes(0) == (
        len(graphs.SEED_SYSTEM) + len("question 0 ") + 200 + len("answer 0 ") + 800
    )


def test_large_payload_is_exact_size_and_varied() -> None:
    payload = graphs.large_payload(3 * 2**20 + 5)
    assert len(payload.encode()) == 3 * 2**20 + 5
    assert payload[: 2**20] != payload[2**20 : 2 * 2**20]


def test_full_sizes_match_the_issue() -> None:
    assert FULL.chat_turns == 30 and FULL.long_turns == 1000
    assert FULL.long_checkpoints == (10, 100, 1000)
    assert FULL.large_bytes == 20 * 2**20 and FULL.agent_turns == 20
    assert (FULL.os_threads, FULL.thread_turns) == (8, 50)
    assert FULL.async_conversations == (1, 8, 64) and FULL.delay_ms == 20
    assert QUICK.delay_ms == FULL.delay_ms
