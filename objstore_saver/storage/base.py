"""The storage protocol every backend implements: ``put``, ``get``, ``list``, ``delete``,
each a blocking, thread-safe method and a coroutine (``aput``...) alike."""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

# Re-exported: the protocol's errors, defined with the package's other errors.
from objstore_saver.errors import (
    InvalidKeyError as InvalidKeyError,
    ObjectExistsError as ObjectExistsError,
    ObjectNotFoundError as ObjectNotFoundError,
    StorageError as StorageError,
    StoreUnavailableError as StoreUnavailableError,
)
from objstore_saver.storage.worker_pool import shared_pool

T = TypeVar("T")


class PutMode(enum.Enum):
    """How ``put`` treats an existing object at the key."""

    CREATE = "create"
    """Write only if no object exists at the key (``If-None-Match: *``)."""
    OVERWRITE = "overwrite"
    """Replace whatever is stored at the key."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One entry of a listing."""

    key: str
    size: int
    last_modified: datetime
    """Timezone-aware UTC time the object was last written."""


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a listing, keys in ascending byte order."""

    objects: list[ObjectInfo]
    truncated: bool
    """True when more keys may follow the last one of this page."""


#: Largest number of keys one ``delete`` call sends in one request on S3.
MAX_DELETE_BATCH = 1000
#: Default and largest page size of ``list``.
MAX_LIST_PAGE = 1000
#: Longest key, in bytes (keys are ASCII, so also in characters).
MAX_KEY_BYTES = 1024

_KEY_RE = re.compile(r"[A-Za-z0-9._~%/-]+")


def validate_key(key: str, prefix: str = "") -> str:
    """Check that ``key`` is in the key alphabet every backend accepts (else
    InvalidKeyError naming it); return ``prefix + key``."""
    if not isinstance(key, str):
        raise InvalidKeyError(f"invalid key {key!r}: keys are str, not {type(key).__name__}")
    if not key:
        raise InvalidKeyError(f"invalid key {key!r}: keys are not empty")
    if not _KEY_RE.fullmatch(key):
        raise InvalidKeyError(
            f"invalid key {key!r}: only the characters A-Z a-z 0-9 - . _ ~ % / are allowed"
        )
    if len(key) > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"invalid key {key!r}: {len(key)} bytes, at most {MAX_KEY_BYTES} are allowed"
        )
    if key.startswith("/") or key.endswith("/"):
        raise InvalidKeyError(f"invalid key {key!r}: keys neither start nor end with '/'")
    wrapped = f"/{key}/"
    if "//" in wrapped or "/./" in wrapped or "/../" in wrapped:
        raise InvalidKeyError(f"invalid key {key!r}: empty, '.' or '..' segment")
    if not prefix:
        return key
    full = prefix + key
    if len(full) > MAX_KEY_BYTES:
        raise InvalidKeyError(
            f"invalid key {key!r}: with prefix {prefix!r} it is {len(full)} bytes, "
            f"at most {MAX_KEY_BYTES} are allowed"
        )
    return full


def validate_byte_range(byte_range: tuple[int, int]) -> tuple[int, int]:
    """``(start, end)`` of a ``get`` byte range (ValueError unless ``0 <= start <= end``)."""
    start, end = byte_range
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
        raise ValueError(f"invalid byte range {byte_range!r}: need integers 0 <= start <= end")
    return start, end


@runtime_checkable
class ObjectStore(Protocol):
    """The four operations of a storage backend.

    Keys are non-empty ASCII strings of at most 1,024 bytes made of the
    characters ``A-Z a-z 0-9 - . _ ~ % /`` with no empty, ``.`` or ``..``
    segment between slashes. Every backend accepts exactly these keys.
    """

    @property
    def location(self) -> str:
        """Human-readable location, e.g. ``s3://bucket/prefix`` or ``file:///dir``."""
        ...

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data`` at ``key``; ObjectExistsError when ``mode`` is ``CREATE`` and the
        key holds an object, InvalidKeyError for a key outside the key alphabet."""
        ...

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Return the object at ``key``, or bytes ``[start, end)`` of it (ObjectNotFoundError:
        nothing is stored at ``key``)."""
        ...

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """List up to ``limit`` (1 to 1,000) keys that start with ``prefix``, ascending,
        strictly greater than ``start_after``."""
        ...

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the given keys (holding nothing is not an error), in requests of at most
        1,000 keys."""
        ...

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Coroutine twin of :meth:`put`."""
        ...

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Coroutine twin of :meth:`get`."""
        ...

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """Coroutine twin of :meth:`list`."""
        ...

    async def adelete(self, keys: Sequence[str]) -> None:
        """Coroutine twin of :meth:`delete`."""
        ...


#: Worker threads shared by every :class:`ThreadedAsync` backend of the process.
BLOCKING_WORKERS = 64


async def in_thread(call: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking storage call in the shared worker pool, with the caller's context."""
    if kwargs:
        call = functools.partial(call, **kwargs)
    return await shared_pool(BLOCKING_WORKERS).submit(call, args)


class ThreadedAsync:
    """The coroutines of a backend whose client only blocks, each run through :func:`in_thread`."""

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        await in_thread(self.put, key, data, mode)  # type: ignore[attr-defined]

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return await in_thread(self.get, key, byte_range)  # type: ignore[attr-defined]

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        return await in_thread(self.list, prefix, start_after=start_after, limit=limit)  # type: ignore[attr-defined]

    async def adelete(self, keys: Sequence[str]) -> None:
        await in_thread(self.delete, list(keys))  # type: ignore[attr-defined]


@dataclass(frozen=True)
class RequestFacts:
    """How a backend's requests are named in telemetry (OpenTelemetry's conventions):
    ``service`` names the span (``S3``...), ``attributes`` go on every request span."""

    service: str
    s3: bool = False
    key_prefix: str = ""
    file_root: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class DescribesRequests(Protocol):
    """A backend that says how its requests are named (every backend of the package)."""

    def request_facts(self) -> RequestFacts: ...


class StoreWrapper:
    """Base of stores that wrap another one (metering, fault injection)."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner

    @property
    def inner(self) -> ObjectStore:
        """The wrapped store."""
        return self._inner

    @property
    def location(self) -> str:
        """Location of the wrapped store."""
        return self._inner.location

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"


def layers(store: ObjectStore) -> Iterator[ObjectStore]:
    """The layers of a store stack, from ``store`` down to its backend."""
    layer: ObjectStore = store
    while True:
        yield layer
        if not isinstance(layer, StoreWrapper):
            return
        layer = layer.inner


class KeyLayer(StoreWrapper):
    """The layer that holds keys: client-side encryption's sealing layer, declared here so
    the plans find it (:func:`sealing_layer`) without importing the encryption code."""

    #: The encryption settings the layer was built with.
    settings: Any
    #: What the layer adds to the requests above it (a saver's ``stats()`` adds them).
    counters: Any
    #: The versions of key objects, in a key store that keeps them (``verify``, ``prune``).
    key_versions: Any

    def shred(self, prefix: str, below: int) -> None:
        """Destroy the keys of the epochs below ``below`` of a thread or store namespace."""
        raise NotImplementedError

    async def ashred(self, prefix: str, below: int) -> None:
        """Coroutine twin of :meth:`shred`."""
        raise NotImplementedError

    def has_key(self, thread_prefix: str, epoch: int = 0) -> bool:
        """Whether a thread has its key of ``epoch``."""
        raise NotImplementedError

    async def ahas_key(self, thread_prefix: str, epoch: int = 0) -> bool:
        """Coroutine twin of :meth:`has_key`."""
        raise NotImplementedError


def sealing_layer(store: ObjectStore) -> KeyLayer | None:
    """The client-side encryption layer of a store stack (under any other wrappers), or None."""
    return next((layer for layer in layers(store) if isinstance(layer, KeyLayer)), None)
