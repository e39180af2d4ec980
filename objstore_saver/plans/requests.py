"""Requests a plan asks for (:class:`Batch`, :class:`Emit`), and how one is carried out."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from objstore_saver.errors import CorruptObjectError
from objstore_saver.storage.base import (
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    StorageError,
    sealing_layer,
)
from objstore_saver.storage.requests import (
    Delete as Delete,
    Get as Get,
    ListKeys as ListKeys,
    Put as Put,
    SendsAhead,
    StorageRequest,
    acall,
    call,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Unopened:
    """The result of a :class:`Get` with ``unopened_as_result`` that the store could not open."""

    error: CorruptObjectError


@dataclass(frozen=True, slots=True)
class Shred:
    """Destroy the keys of every epoch below ``below`` of ``threads/<T>/`` or ``store/ix/<P>/x/``.

    Spec §4.11, §8.4.9. Result: True on a store that encrypts; None, with no
    request, on one that does not.
    """

    thread_prefix: str
    below: int


@dataclass(frozen=True, slots=True)
class KeyState:
    """Whether the thread ``threads/<T>/`` has its key of ``epoch`` (docs/encryption.md).

    Result: None on a store that does not encrypt (no request), else True or False.
    """

    thread_prefix: str
    epoch: int = 0


Op = StorageRequest | Shred | KeyState


@dataclass(frozen=True, slots=True)
class Batch:
    """Requests that may run concurrently; results come back in the same order.

    ``meanwhile``: CPU work run while they are in flight (:func:`run_batch_while`).
    """

    ops: Sequence[Op]
    meanwhile: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class Emit:
    """An item the plan hands to its caller before going on."""

    item: Any


Plan = Generator[Batch | Emit, list[Any] | None, T]


def shredder(store: ObjectStore) -> Any:
    """The layer of ``store`` that destroys thread keys (the sealing layer), or None.

    A shred goes straight to it, never held behind a coalescing layer's deletes.
    """
    return sealing_layer(store)


def _expected_absence(op: Op, exc: StorageError | CorruptObjectError) -> Any:
    """What a plan expects of a GET that finds nothing, a create-only PUT that finds a value,
    or an unopened GET with ``unopened_as_result``; else ``exc`` is raised."""
    if isinstance(op, Get) and isinstance(exc, ObjectNotFoundError):
        return None
    if isinstance(op, Put) and isinstance(exc, ObjectExistsError):
        return False
    if isinstance(op, Get) and op.unopened_as_result and isinstance(exc, CorruptObjectError):
        return Unopened(exc)
    raise exc


def execute(store: ObjectStore, op: Op) -> Any:
    """Carry out one request with the store's blocking methods.

    A put answers True when it stored the object (False: CREATE found one).
    """
    try:
        if isinstance(op, Put):
            store.put(op.key, op.data, op.mode)
            return True
        if isinstance(op, Shred | KeyState):
            layer = shredder(store)
            if layer is None:
                return None
            if isinstance(op, Shred):
                layer.shred(op.thread_prefix, op.below)
                return True
            return layer.has_key(op.thread_prefix, op.epoch)
        return call(store, op)
    except (ObjectNotFoundError, ObjectExistsError, CorruptObjectError) as exc:
        return _expected_absence(op, exc)


def execute_ahead(store: SendsAhead, op: Op) -> Callable[[], Any]:
    """Send one request now (:class:`SendsAhead`); the returned function finishes it as
    :func:`execute` would."""
    if isinstance(op, Shred | KeyState):
        result = execute(store, op)  # not sent ahead: runs alone, at a thread's start or end
        return lambda: result
    answer = store.send_ahead(op)

    def finish() -> Any:
        try:
            result = answer()
            return True if isinstance(op, Put) else result
        except (ObjectNotFoundError, ObjectExistsError, CorruptObjectError) as exc:
            return _expected_absence(op, exc)

    return finish


async def aexecute(store: ObjectStore, op: Op) -> Any:
    """Carry out one request with the store's coroutines (no thread hop of ours)."""
    try:
        if isinstance(op, Put):
            await store.aput(op.key, op.data, op.mode)
            return True
        if isinstance(op, Shred | KeyState):
            layer = shredder(store)
            if layer is None:
                return None
            if isinstance(op, Shred):
                await layer.ashred(op.thread_prefix, op.below)
                return True
            return await layer.ahas_key(op.thread_prefix, op.epoch)
        return await acall(store, op)
    except (ObjectNotFoundError, ObjectExistsError, CorruptObjectError) as exc:
        return _expected_absence(op, exc)


def run_batch(*ops: Op) -> Generator[Batch, list[Any] | None, list[Any]]:
    """Sub-plan helper: ``results = yield from run_batch(op1, op2)``."""
    if not ops:
        return []
    results = yield Batch(ops)
    assert results is not None
    return results


def run_batch_while(
    compute: Callable[[], T], *ops: Op
) -> Generator[Batch, list[Any] | None, tuple[list[Any], T]]:
    """Sub-plan helper: the results of ``ops`` and of ``compute()``, run while they are in
    flight (so it must not depend on them)."""
    box: list[T] = []
    results = yield Batch(ops, meanwhile=lambda: box.append(compute()))
    assert results is not None and box
    return results, box[0]


def run_one(op: Op) -> Generator[Batch, list[Any] | None, Any]:
    results = yield Batch((op,))
    assert results is not None
    return results[0]


def list_infos(
    prefix: str, start_after: str | None = None, page: ListPage | None = None
) -> Generator[Batch, list[Any] | None, list[ObjectInfo]]:
    """Sub-plan: every listing entry under ``prefix`` (all pages; ``page``: the first, listed)."""
    infos: list[ObjectInfo] = []
    while True:
        if page is None:
            page = yield from run_one(ListKeys(prefix, start_after))
        infos.extend(page.objects)
        if not page.truncated or not page.objects:
            return infos
        start_after, page = page.objects[-1].key, None


def list_all(
    prefix: str, start_after: str | None = None
) -> Generator[Batch, list[Any] | None, list[str]]:
    """Sub-plan: every key under ``prefix`` (all pages)."""
    return [o.key for o in (yield from list_infos(prefix, start_after))]
