"""A store layer as one hook around request values, blocking and async alike: a layer
observing or altering requests (metering, fault injection) writes :meth:`Layer.around`,
which sees each request before it goes down and its answer (or error) after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from objstore_saver.storage.base import MAX_LIST_PAGE, ListPage, PutMode, StoreWrapper
from objstore_saver.storage.requests import Delete, Get, ListKeys, Put, StorageRequest, acall, call


@dataclass(slots=True)
class Answer:
    """What the layer below answered a request (set once it has answered)."""

    value: Any = None
    answered: bool = False


class Layer(StoreWrapper):
    """A wrapper whose requests all pass through :meth:`around`."""

    @contextlib.contextmanager
    def around(self, request: StorageRequest) -> Iterator[Answer]:
        """Wrap one request to the layer below; forwards it unchanged unless overridden."""
        yield Answer()

    def _forward(self, request: StorageRequest) -> Any:
        with self.around(request) as answer:
            answer.value = call(self._inner, request)
            answer.answered = True
        return answer.value

    async def _aforward(self, request: StorageRequest) -> Any:
        with self.around(request) as answer:
            answer.value = await acall(self._inner, request)
            answer.answered = True
        return answer.value

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        self._forward(Put(key, data, mode))

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._forward(Get(key, byte_range))  # type: ignore[no-any-return]

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        return self._forward(ListKeys(prefix, start_after, limit))  # type: ignore[no-any-return]

    def delete(self, keys: Sequence[str]) -> None:
        self._forward(Delete(tuple(keys)))

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        await self._aforward(Put(key, data, mode))

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return await self._aforward(Get(key, byte_range))  # type: ignore[no-any-return]

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        return await self._aforward(ListKeys(prefix, start_after, limit))  # type: ignore[no-any-return]

    async def adelete(self, keys: Sequence[str]) -> None:
        await self._aforward(Delete(tuple(keys)))
