"""The step runner: blocking, asyncio and send-ahead carry a generator of steps out alike."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import pytest

from objstore_saver.storage.requests import arun_steps, run_steps, send_steps_ahead


@dataclass(frozen=True)
class Local:
    n: int


@dataclass(frozen=True)
class Remote:
    n: int


def _request(log: list[Any]) -> Generator[Local | Remote, Any, int]:
    a = yield Local(1)
    b = yield Remote(a)
    try:
        yield Remote(-1)
    except KeyError as exc:
        log.append(exc)
    return a + b


def _perform(step: Local | Remote) -> int:
    if step.n < 0:
        raise KeyError(step.n)
    return step.n * 10


async def _aperform(step: Local | Remote) -> int:
    return _perform(step)


def test_run_and_arun_answer_alike_and_raise_a_step_error_inside() -> None:
    blocking: list[Any] = []
    awaited: list[Any] = []
    assert run_steps(_request(blocking), _perform) == 10 + 100
    assert asyncio.run(arun_steps(_request(awaited), _aperform)) == 10 + 100
    assert [type(e) for e in blocking] == [type(e) for e in awaited] == [KeyError]


def test_send_ahead_performs_now_steps_at_once_and_sends_the_first_other_ahead() -> None:
    sent: list[Any] = []
    performed: list[Any] = []

    def perform(step: Local | Remote) -> int:
        performed.append(step)
        return _perform(step)

    def ahead(step: Local | Remote) -> Callable[[], Any] | None:
        sent.append(step)
        return lambda: 7

    finish = send_steps_ahead(_request([]), perform, ahead, (Local,))
    assert performed == [Local(1)] and sent == [Remote(10)]
    assert finish() == 10 + 7
    assert performed == [Local(1), Remote(-1)]


def test_a_step_not_sent_ahead_is_performed_when_the_answer_is_read() -> None:
    performed: list[Any] = []

    def perform(step: Local | Remote) -> int:
        performed.append(step)
        return _perform(step)

    finish = send_steps_ahead(_request([]), perform, lambda step: None)
    assert performed == []
    assert finish() == 10 + 100


def test_an_error_while_starting_is_raised_when_the_answer_is_read() -> None:
    def broken() -> Generator[Remote, Any, int]:
        raise ValueError("bad request")
        yield Remote(0)

    finish = send_steps_ahead(broken(), _perform, lambda step: None)
    with pytest.raises(ValueError, match="bad request"):
        finish()


def test_an_error_reading_the_answer_is_raised_inside_the_generator() -> None:
    log: list[Any] = []

    def request() -> Generator[Remote, Any, str]:
        try:
            yield Remote(1)
        except OSError as exc:
            log.append(exc)
            return "named"
        return "answered"

    def fail() -> Any:
        raise OSError("lost")

    assert send_steps_ahead(request(), _perform, lambda step: fail)() == "named"
    assert [str(e) for e in log] == ["lost"]
