"""One runner for the generators a store layer writes its requests as.

A layer writes each request once, as a generator that yields steps (frozen
values) and receives each step's answer, or has its error raised inside it;
what it returns is the request's result. :func:`run` blocks, :func:`arun`
awaits, :func:`send_ahead` starts the request now and finishes it when its
answer is read.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

S = TypeVar("S")
T = TypeVar("T")

#: A request as steps: yields steps of type ``S``, receives their answers, returns a ``T``.
Steps = Generator[S, Any, T]


def run(
    steps: Steps[S, T],
    perform: Callable[[S], Any],
    answer: Any = None,
    error: Exception | None = None,
) -> T:
    """Carry out ``steps`` with the blocking ``perform``; what the generator returns.

    ``answer`` or ``error``: what its last step came to, when it was begun elsewhere.
    """
    while True:
        try:
            step = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            answer = perform(step)
        except Exception as exc:  # noqa: BLE001 -- raised inside the generator, which may name it
            error = exc


async def arun(steps: Steps[S, T], perform: Callable[[S], Awaitable[Any]]) -> T:
    """Coroutine twin of :func:`run`: each step with the coroutine ``perform``."""
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            answer = await perform(step)
        except Exception as exc:  # noqa: BLE001 -- raised inside the generator, which may name it
            error = exc


def send_ahead(
    steps: Steps[S, T],
    perform: Callable[[S], Any],
    ahead: Callable[[S], Callable[[], Any] | None],
    now: tuple[type, ...] = (),
) -> Callable[[], T]:
    """Start ``steps`` now and send its first step ahead; the returned function (called
    once) finishes it, returning or raising what :func:`run` would.

    Steps of the types in ``now`` are performed at once. The first other step
    goes to ``ahead``, which sends it and returns the function reading its
    answer, or None when it cannot (the step is then performed when read).
    """
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            step = steps.send(answer) if error is None else steps.throw(error)
        except StopIteration as stop:
            value: T = stop.value
            return lambda: value
        except Exception as exc:  # noqa: BLE001 -- raised where the answer is read
            return functools.partial(_raise, exc)
        answer, error = None, None
        try:
            if isinstance(step, now):
                answer = perform(step)
                continue
            read = ahead(step)
        except Exception as exc:  # noqa: BLE001 -- raised inside the generator, which may name it
            error = exc
            continue
        if read is None:
            read = functools.partial(perform, step)
        return functools.partial(_finish, steps, perform, read)


def _finish(steps: Steps[S, T], perform: Callable[[S], Any], read: Callable[[], Any]) -> T:
    try:
        answer = read()
    except Exception as exc:  # noqa: BLE001 -- raised inside the generator, which may name it
        return run(steps, perform, error=exc)
    return run(steps, perform, answer)


def _raise(error: Exception) -> Any:
    raise error
