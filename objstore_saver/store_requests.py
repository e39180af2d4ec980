"""Requests a plan asks for, and how one request is carried out on a store.

Plans (see :mod:`objstore_saver.plans`) are generators that yield
:class:`Batch` (requests to run in parallel; the generator receives their
results in order) or :class:`Emit` (an item for the caller, e.g. a listed
checkpoint). They never touch the store themselves.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from objstore_saver.storage.base import (
    ListPage,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Get:
    """GET an object. Result: its bytes, or None when nothing is stored."""

    key: str
    byte_range: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Put:
    """PUT an object. Result: True if written, False if CREATE found one already."""

    key: str
    data: bytes
    mode: PutMode = PutMode.CREATE


@dataclass(frozen=True, slots=True)
class ListKeys:
    """LIST one page. Result: a :class:`ListPage`."""

    prefix: str
    start_after: str | None = None
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class Delete:
    """DELETE keys (the store batches them). Result: None."""

    keys: tuple[str, ...]


Op = Get | Put | ListKeys | Delete


@dataclass(frozen=True, slots=True)
class Batch:
    """Requests that may run concurrently; results come back in the same order."""

    ops: Sequence[Op]


@dataclass(frozen=True, slots=True)
class Emit:
    """An item the plan hands to its caller before going on."""

    item: Any


Plan = Generator[Batch | Emit, list[Any] | None, T]


def execute(store: ObjectStore, op: Op) -> Any:
    """Carry out one request on a store (runs in a worker thread for async)."""
    if isinstance(op, Get):
        try:
            return store.get(op.key, op.byte_range)
        except ObjectNotFoundError:
            return None
    if isinstance(op, Put):
        try:
            store.put(op.key, op.data, op.mode)
        except ObjectExistsError:
            return False
        return True
    if isinstance(op, ListKeys):
        return store.list(op.prefix, start_after=op.start_after, limit=op.limit)
    store.delete(op.keys)
    return None


def run_batch(*ops: Op) -> Generator[Batch, list[Any] | None, list[Any]]:
    """Sub-plan helper: ``results = yield from run_batch(op1, op2)``."""
    if not ops:
        return []
    results = yield Batch(ops)
    assert results is not None
    return results


def run_one(op: Op) -> Generator[Batch, list[Any] | None, Any]:
    """Sub-plan helper for a single request."""
    results = yield from run_batch(op)
    return results[0]


def list_all(
    prefix: str, start_after: str | None = None
) -> Generator[Batch, list[Any] | None, list[str]]:
    """Sub-plan: every key under ``prefix`` (all pages)."""
    keys: list[str] = []
    after = start_after
    while True:
        page: ListPage = yield from run_one(ListKeys(prefix, after))
        keys.extend(o.key for o in page.objects)
        if not page.truncated or not page.objects:
            return keys
        after = page.objects[-1].key
