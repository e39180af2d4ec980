"""Helpers of the long-term store tests: a fake embedding, a clock, sync/async calls."""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Iterator
from typing import Any

from langchain_core.embeddings import Embeddings

from objstore_saver.longterm import ObjectStoreStore
from objstore_saver.storage.base import ObjectStore

DIMS = 16


class HashEmbeddings(Embeddings):
    """Deterministic bag-of-words embedding: each word adds 1 to a hashed dimension."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims

    def _one(self, text: str) -> list[float]:
        vec = [0.0] * self.dims
        for word in text.lower().split():
            h = hashlib.sha256(word.encode()).digest()
            vec[h[0] % self.dims] += 1.0 + h[1] / 255.0
        return vec

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class Clock:
    """An injected clock (epoch seconds) that tests advance by hand."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Caller:
    """Calls a store's sync method or its ``a…`` coroutine, as the mode says."""

    def __init__(self, store: ObjectStoreStore, mode: str) -> None:
        self.store = store
        self.mode = mode
        self._loop = asyncio.new_event_loop() if mode == "async" else None

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._loop is None:
            return getattr(self.store, name)(*args, **kwargs)
        return self._loop.run_until_complete(getattr(self.store, "a" + name)(*args, **kwargs))

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
        self.store.close()


def caller(root: ObjectStore, mode: str, **options: Any) -> Iterator[Caller]:
    """Yield a :class:`Caller` on a new long-term store over ``root``."""
    store = ObjectStoreStore(root, **options)
    c = Caller(store, mode)
    try:
        yield c
    finally:
        c.close()


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))
