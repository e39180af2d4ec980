"""The four requests of the storage protocol as frozen values, and how a store carries one out.

Plans yield these values and store layers pass them on: :func:`call` and
:func:`acall` carry one out, a store that sends ahead (:class:`SendsAhead`)
takes it too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from objstore_saver.storage.base import MAX_LIST_PAGE, ListPage, ObjectStore, PutMode


@dataclass(frozen=True, slots=True)
class Get:
    """GET an object. Result: its bytes, or None when nothing is stored (for a plan)."""

    key: str
    byte_range: tuple[int, int] | None = None
    #: Verify's reads: an object the store cannot open (an encrypted store's
    #: object altered, moved or stored plain) is the result, as
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
            page: ListPage = await store.alist(prefix, start_after=start_after, limit=limit)
            return page
        case Delete(keys):
            return await store.adelete(keys)
    raise TypeError(f"not a storage request: {request!r}")


@runtime_checkable
class SendsAhead(Protocol):
    """A backend that can send a blocking request before its answer is awaited (optional).

    ``send_ahead(Get(key))`` sends what ``get(key)`` would and returns the
    function (to call exactly once) that returns or raises what it would.
    """

    def send_ahead(self, request: StorageRequest) -> Callable[[], Any]: ...
