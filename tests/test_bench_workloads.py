"""The benchmark's scripted inputs are what the issue specifies (counts, no timings)."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bench import graphs
from bench.meters import Meter, Reading
from bench.proxy import MeteringProxy
from bench.savers import Env, Handle, InMemory
from bench.workloads import FULL, QUICK, _round_turns, run_threads


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


def test_round_turns_split_every_turn_once_in_order() -> None:
    assert _round_turns(50, 5) == [range(i, i + 10) for i in range(0, 50, 10)]
    assert _round_turns(7, 3) == [range(0, 2), range(2, 4), range(4, 7)]
    assert _round_turns(1, 5) == [range(0, 1)]  # never an empty round
    assert _round_turns(4, 0) == [range(0, 4)]


class _Logged(Meter):
    """A meter that logs which saver starts a measured round."""

    def __init__(self, name: str, inner: Meter, log: list[str]) -> None:
        self.name, self.inner, self.log = name, inner, log

    def snapshot(self) -> Reading:
        return self.inner.snapshot()

    def begin(self) -> Reading:
        self.log.append(self.name)
        return self.inner.begin()


class _LoggedInMemory(InMemory):
    def __init__(self, name: str, log: list[str], *, fail_at_round: int | None = None) -> None:
        self.name, self.log, self.fail_at_round = name, log, fail_at_round

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        with super().open_sync(env) as h:
            if self.fail_at_round is not None:
                saver = h.saver
                put = saver.put

                def failing_put(*args: Any, **kwargs: Any) -> Any:
                    if self.log.count(self.name) > self.fail_at_round:
                        raise RuntimeError(f"{self.name} broke")
                    return put(*args, **kwargs)

                saver.put = failing_put
            yield dataclasses.replace(h, meter=_Logged(self.name, h.meter, self.log))


class _Unopenable(InMemory):
    name = "unopenable"

    @contextlib.contextmanager
    def open_sync(self, env: Env) -> Iterator[Handle]:
        raise ConnectionError("no server for unopenable")
        yield  # pragma: no cover


@pytest.fixture
def env(s3_endpoint: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """A benchmark environment with a metering proxy (no delay) before the test's S3."""
    # Env points the AWS_* variables at the proxy; they are restored afterwards.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    server = MeteringProxy(s3_endpoint.url.split("://", 1)[1], delay=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Env(server.url, s3_endpoint.url, str(tmp_path))
    finally:
        server.shutdown()
        server.server_close()


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
    specs = [_LoggedInMemory("ok", log), _LoggedInMemory("bad", log, fail_at_round=1)]
    sizes = dataclasses.replace(QUICK, os_threads=2, thread_turns=6, thread_rounds=3, delay_ms=0)
    rows = run_threads(specs, env, sizes)
    assert log == ["ok", "bad", "bad", "ok", "ok"]  # "bad" failed in its second round
    assert rows["bad"]["error"].startswith("2 thread(s) failed; first: RuntimeError: bad broke")
    assert rows["ok"]["turns"] == 12 and rows["ok"]["histories_complete"] is True
