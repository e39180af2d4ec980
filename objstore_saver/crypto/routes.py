"""Where a sealed object belongs: the scope whose key seals it (spec §4.10, §8.4.9).

A scope is a thread's epoch (``<T>`` or ``<T>%e<n>``) or a long-term store
namespace's (``store/<P>``, ``store/<P>%e<n>``). Pure functions of keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from objstore_saver.crypto import sealing
from objstore_saver.crypto.names import namespace_scope
from objstore_saver.crypto.thread_keys import ThreadKey
from objstore_saver.format import keys, store_keys

OBJECTS = "objects/"
_RUNS = "runs/"
_DIGEST_HEX = 64


def thread_of(key: str) -> tuple[str, str, str] | None:
    """(thread prefix, token, rest) of a key under ``threads/<T>/``, else None."""
    if not key.startswith(keys.THREADS):
        return None
    end = key.find("/", len(keys.THREADS))
    if end < 0:
        return None
    return key[: end + 1], key[len(keys.THREADS) : end], key[end + 1 :]


@dataclass(frozen=True, slots=True)
class Route:
    """A key whose body is sealed: the scope whose key seals it, and a content object's address.

    A scope is a thread (its token) or a long-term store namespace
    (``store/<P>``: its items and index segments).
    """

    pfx: str
    scope: str
    rest: str
    #: The address of ``objects/<64 hex>``; None for a keyed object (manifest, write, item...).
    digest: bytes | None

    @property
    def is_thread(self) -> bool:
        """A thread's object (its key is its epoch's), not a store namespace's."""
        return self.pfx.startswith(keys.THREADS)

    @classmethod
    def of(cls, key: str | None) -> Route | None:
        """The route of a sealed key; None for a run marker, a tombstone or a key in clear."""
        if not key:
            return None
        where = thread_of(key)
        if where is None:
            return namespace_route(key)
        if where[2].startswith(_RUNS) or keys.is_tombstone_key(key):
            return None
        pfx, token, rest = where
        return cls(pfx, token, rest, _address(rest))

    def stored(self, thread: ThreadKey | None, key: str) -> str:
        """Where ``key`` is stored: a content object under its sealed name (when the key is had)."""
        if self.digest is None or thread is None:
            return key
        return self.pfx + OBJECTS + sealing.sealed_name(thread, self.digest)

    def seal(self, thread: ThreadKey, data: bytes) -> bytes:
        if self.digest is not None:
            return sealing.seal_object(thread, self.digest, data)
        return sealing.seal_keyed(thread, self.rest, data)

    def open(self, thread: ThreadKey, data: bytes, stored: str) -> bytes:
        if self.digest is not None:
            return sealing.open_object(thread, self.digest, data, stored)
        return sealing.open_keyed(thread, self.rest, data, stored)


def namespace_route(key: str) -> Route | None:
    """The route of a long-term store item or index object (spec §8.1), else None."""
    path, kind = store_keys.classify(key)
    if not path or kind == "clear markers":
        return None  # a clear marker holds no data: in clear, as a thread's tombstone
    root = store_keys.INDEX if kind != "items" else store_keys.ITEMS
    pfx = root + path + "/"
    return Route(pfx, namespace_scope(path), key[len(pfx) :], None)


def _address(rest: str) -> bytes | None:
    """The address of ``objects/<64 hex>``, else None."""
    if not rest.startswith(OBJECTS) or len(rest) != len(OBJECTS) + _DIGEST_HEX:
        return None
    try:
        return bytes.fromhex(rest[len(OBJECTS) :])
    except ValueError:
        return None
