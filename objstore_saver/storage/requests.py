"""The storage protocol's requests as frozen values, and how they are carried out.

:func:`call` and :func:`acall` carry one out on a store. A layer writes each of
its requests once, as a generator of steps (frozen values) that receives each
step's answer, or has its error raised inside; :func:`run_steps` blocks,
:func:`arun_steps` awaits, :func:`send_steps_ahead` starts the request now and
finishes it when its answer is read (docs/architecture.md).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from objstore_saver.storage.base import MAX_LIST_PAGE, ObjectStore, PutMode


@dataclass(frozen=True, slots=True)
class Get:
    """GET an object. Result: its bytes, or None when nothing is stored (for a plan)."""

    key: str
    byte_range: tuple[int, int] | None = None
    #: Verify's reads: an object the store cannot open is the result, as
    #: :class:`~objstore_saver.plans.requests.Unopened`, instead of failing the plan.
    unopened_as_result: bool = False


@dataclass(frozen=True, slots=True)
class Put:
    """PUT an object. Result: True if written, False if CREATE found one already (for a plan)."""

    key: str
    data: bytes
    mode: PutMode = PutMode.CREATE


@dataclass(frozen=True, slots=True)
class ListKeys:
    """LIST one page. Result: a :class:`~objstore_saver.storage.base.ListPage`."""

    prefix: str
    start_after: str | None = None
    limit: int = MAX_LIST_PAGE


@dataclass(frozen=True, slots=True)
class Delete:
    """DELETE keys (the store batches them). Result: None."""

    keys: tuple[str, ...]


StorageRequest = Get | Put | ListKeys | Delete


class Handles(Protocol):
    """Whatever has the protocol's four blocking methods: a store, or step builders
    (the S3 plans, the sealing layer's), for which :func:`call` makes a generator of steps."""

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Any: ...
    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> Any: ...
    def list(
        self, prefix: str, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> Any: ...
    def delete(self, keys: Sequence[str]) -> Any: ...


def call(target: Handles, request: StorageRequest) -> Any:
    """Carry out ``request`` with the target's blocking method; what that method returns."""
    match request:
        case Get(key, byte_range):
            return target.get(key, byte_range)
        case Put(key, data, mode):
            return target.put(key, data, mode)
        case ListKeys(prefix, start_after, limit):
            return target.list(prefix, start_after=start_after, limit=limit)
        case Delete(keys):
            return target.delete(keys)
    raise TypeError(f"not a storage request: {request!r}")


async def acall(store: ObjectStore, request: StorageRequest) -> Any:
    """Coroutine twin of :func:`call`, with the store's coroutines."""
    match request:
        case Get(key, byte_range):
            return await store.aget(key, byte_range)
        case Put(key, data, mode):
            return await store.aput(key, data, mode)
        case ListKeys(prefix, start_after, limit):
            return await store.alist(prefix, start_after=start_after, limit=limit)
        case Delete(keys):
            return await store.adelete(keys)
    raise TypeError(f"not a storage request: {request!r}")


@runtime_checkable
class SendsAhead(Protocol):
    """A backend that can send a blocking request before its answer is awaited (optional):
    ``send_ahead(Get(key))`` returns the function (to call once) returning ``get(key)``."""

    def send_ahead(self, request: StorageRequest) -> Callable[[], Any]: ...


# --- the runners of a layer's generators of steps ---------------------------------

S = TypeVar("S")
T = TypeVar("T")

#: A request as steps: yields steps of type ``S``, receives their answers, returns a ``T``.
Steps = Generator[S, Any, T]


def run_steps(
    steps: Steps[S, T],
    perform: Callable[[S], Any],
    answer: Any = None,
    error: Exception | None = None,
) -> T:
    """Carry out ``steps`` with the blocking ``perform``; what the generator returns.
    ``answer`` or ``error``: what its last step came to, when it was begun elsewhere."""
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


async def arun_steps(steps: Steps[S, T], perform: Callable[[S], Awaitable[Any]]) -> T:
    """Coroutine twin of :func:`run_steps`: each step with the coroutine ``perform``."""
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


def send_steps_ahead(
    steps: Steps[S, T],
    perform: Callable[[S], Any],
    ahead: Callable[[S], Callable[[], Any] | None],
    now: tuple[type, ...] = (),
) -> Callable[[], T]:
    """Start ``steps`` now and send its first step ahead; the returned function (called
    once) finishes it, returning or raising what :func:`run_steps` would.

    Steps of the types in ``now`` are performed at once; the first other one goes to
    ``ahead``, which returns the function reading its answer, or None (performed then).
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
        return run_steps(steps, perform, error=exc)
    return run_steps(steps, perform, answer)


def _raise(error: Exception) -> Any:
    raise error
