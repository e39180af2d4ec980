"""The benchmark's scripted inputs and sizes are what its workloads say (counts, no timings)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench import graphs
from bench.meters import Meter, Reading
from bench.savers import Env, Handle, InMemory
from bench.workloads.concurrency import _round_sizes, run_async, run_threads
from bench.workloads.sizes import FULL, QUICK


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


def test_full_sizes_match_the_workloads() -> None:
    assert FULL.chat_turns == 30 and FULL.long_turns == 1000
    assert FULL.long_checkpoints == (10, 100, 1000)
    assert FULL.large_bytes == 20 * 2**20 and FULL.agent_turns == 20
    assert (FULL.os_threads, FULL.thread_turns) == (8, 50)
    assert FULL.async_conversations == (1, 8, 64) and FULL.delay_ms == 20
    assert [FULL.async_turns(n) for n in FULL.async_conversations] == [16, 8, 8]
    assert QUICK.delay_ms == FULL.delay_ms


def test_round_sizes_split_every_turn_once() -> None:
    assert _round_sizes(50, 5) == [10] * 5
    assert _round_sizes(7, 3) == [2, 2, 3]
    assert _round_sizes(1, 5) == [1]  # never an empty round
    assert _round_sizes(4, 0) == [4]


class _Logged(Meter):
    """A meter that logs which saver starts a measured round."""

    def __init__(self, name: str, inner: Meter, log: list[str]) -> None:
        self.name, self.inner, self.log = name, inner, log

    def snapshot(self) -> Reading:
        return self.inner.snapshot()

    def begin(self) -> Reading:
        self.log.append(self.name)
        return self.inner.begin()


class _Garbage:
    """A reference cycle that logs when the cyclic collector frees it."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name, self.me = log, name, self

    def __del__(self) -> None:
        self.log.append(f"freed {self.name}")


class _LoggedInMemory(InMemory):
    """InMemorySaver whose meter logs each measured step it begins (a 6a round, a 6b size).

    ``fail_after``: its puts fail once more than that many steps began;
    ``slow_first_round_s``: each put of its first step sleeps that long;
    ``litter``: the first put of each step leaves a :class:`_Garbage` behind.
    """

    def __init__(
        self,
        name: str,
        log: list[str],
        *,
        fail_after: int | None = None,
        slow_first_round_s: float = 0.0,
        litter: bool = False,
    ) -> None:
        self.name, self.log, self.fail_after = name, log, fail_after
        self.slow_first_round_s = slow_first_round_s
        self.litter = litter
        self._littered: set[int] = set()

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        with super().open_sync(env) as h:
            saver = h.saver
            put = saver.put

            def put_as_told(*args: Any, **kwargs: Any) -> Any:
                rounds_begun = self.log.count(self.name)
                if self.fail_after is not None and rounds_begun > self.fail_after:
                    raise RuntimeError(f"{self.name} broke")
                if rounds_begun == 1:
                    time.sleep(self.slow_first_round_s)
                if self.litter and rounds_begun not in self._littered:
                    self._littered.add(rounds_begun)
                    _Garbage(self.log, self.name)
                return put(*args, **kwargs)

            saver.put = put_as_told
            yield dataclasses.replace(h, meter=_Logged(self.name, h.meter, self.log))


class _Unopenable(InMemory):
    name = "unopenable"

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        raise ConnectionError("no server for unopenable")
        yield  # pragma: no cover


def test_workload_6a_interleaves_savers_and_rotates_who_goes_first(env: Env) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory(n, log) for n in ("a", "b", "c")]
    sizes = dataclasses.replace(QUICK, os_threads=2, thread_turns=6, thread_rounds=3, delay_ms=0)
    rows = run_threads([*specs, _Unopenable()], env, sizes)
    assert log == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert rows["unopenable"] == {"error": "ConnectionError: no server for unopenable"}
    for name in ("a", "b", "c"):
        row = rows[name]
        assert (row["turns"], row["turns_target"], row["rounds"]) == (12, 12, 3)
        assert row["histories_complete"] is True  # every turn, in order, across rounds
        assert len(row["cpu_s_per_turn_rounds"]) == 3
        assert row["cpu_s_per_turn"] > 0


def test_workload_6a_a_saver_failing_mid_run_leaves_the_later_rounds(env: Env) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory("ok", log), _LoggedInMemory("bad", log, fail_after=1)]
    sizes = dataclasses.replace(QUICK, os_threads=2, thread_turns=6, thread_rounds=3, delay_ms=0)
    rows = run_threads(specs, env, sizes)
    assert log == ["ok", "bad", "bad", "ok", "ok"]  # "bad" failed in its second round
    assert rows["bad"]["error"].startswith("2 thread(s) failed; first: RuntimeError: bad broke")
    assert rows["ok"]["turns"] == 12 and rows["ok"]["histories_complete"] is True


def test_workload_6a_a_conversation_stopped_by_the_cap_goes_on_in_the_next_round(
    env: Env,
) -> None:
    log: list[str] = []
    # A turn puts 3 checkpoints: 1.2 s in round 1, over its 1 s cap; the later
    # rounds' turns take milliseconds, far inside theirs.
    slow = _LoggedInMemory("slow", log, slow_first_round_s=0.4)
    sizes = dataclasses.replace(
        QUICK, os_threads=2, thread_turns=6, thread_rounds=3, delay_ms=0, concurrency_cap_s=3.0
    )
    rows = run_threads([slow], env, sizes)
    row = rows["slow"]
    # Round 1 ends each conversation after one slow turn; rounds 2 and 3 run
    # two turns each from where it stopped: 5 of 6 turns, in order.
    assert (row["turns"], row["turns_target"]) == (10, 12)
    assert row["histories_complete"] is True
    assert len(row["cpu_s_per_turn_rounds"]) == 3
    assert all(c is not None for c in row["cpu_s_per_turn_rounds"])


def test_workload_6b_repeats_every_size_with_savers_rotated_and_sums_the_repeats(
    env: Env,
) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory("a", log), _LoggedInMemory("b", log)]
    sizes = dataclasses.replace(
        QUICK, async_conversations=(1, 3), async_total_turns=4, async_min_turns=1, delay_ms=0
    )
    sizes = dataclasses.replace(sizes, async_repeats=3)
    rows = run_async(specs, env, sizes)
    # Each repetition measures 1 then 3 conversations of one saver, then the other's.
    assert log == ["a", "a", "b", "b", "b", "b", "a", "a", "a", "a", "b", "b"]
    for name in ("a", "b"):
        one, three = rows[name]["1"], rows[name]["3"]
        assert (one["turns"], one["turns_target"], one["repeats"]) == (12, 12, 3)  # 4 turns x 3
        assert (three["turns"], three["turns_target"]) == (9, 9)  # 3 conversations x 1 turn x 3
        assert len(one["turns_per_s_repeats"]) == 3
        assert one["turns_per_s"] == pytest.approx(one["turns"] / one["wall_s"])
        assert one["cpu_s_per_turn"] > 0


def test_workload_6b_a_saver_failing_leaves_the_later_repeats(env: Env) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory("ok", log), _LoggedInMemory("bad", log, fail_after=2)]
    sizes = dataclasses.replace(
        QUICK, async_conversations=(1, 2), async_total_turns=2, async_min_turns=1, delay_ms=0
    )
    rows = run_async(specs, env, dataclasses.replace(sizes, async_repeats=3))
    assert rows["bad"]["error"] == "RuntimeError: bad broke"
    assert log.count("bad") == 3  # its second repetition failed at its first size
    assert rows["ok"]["1"]["repeats"] == 3 and rows["ok"]["2"]["turns"] == 6


@pytest.fixture
def collector_off() -> Iterator[None]:
    """Only an explicit ``gc.collect()`` frees reference cycles during the test."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def test_workload_6a_frees_the_garbage_of_the_saver_before_each_round(
    env: Env, collector_off: None
) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory(n, log, litter=True) for n in ("a", "b")]
    sizes = dataclasses.replace(QUICK, os_threads=2, thread_turns=4, thread_rounds=2, delay_ms=0)
    run_threads(specs, env, sizes)
    # The cycle a round leaves is freed before the next round starts measuring,
    # so no saver's CPU includes freeing another's garbage.
    assert log == ["a", "freed a", "b", "freed b", "b", "freed b", "a"]


def test_workload_6b_frees_the_garbage_of_the_step_before_each_size(
    env: Env, collector_off: None
) -> None:
    log: list[str] = []
    specs = [_LoggedInMemory(n, log, litter=True) for n in ("a", "b")]
    sizes = dataclasses.replace(
        QUICK,
        async_conversations=(1, 2),
        async_total_turns=2,
        async_min_turns=1,
        async_repeats=1,
        delay_ms=0,
    )
    run_async(specs, env, sizes)
    assert log == ["a", "freed a", "a", "freed a", "b", "freed b", "b"]
