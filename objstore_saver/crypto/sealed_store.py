"""A store that seals every object of a thread on the way out and opens it on the way in.

docs/encryption.md, "Where the sealing happens". The plans see the store as
in clear: content objects named by their SHA-256 address, manifests and
writes as the format encodes them. Below them this wrapper

- loads each thread's key (memory, else its key object; a thread's first
  write creates it, create-only, and a writer that meets ``exists`` reads
  and uses the stored one: two first writers agree on one key);
- seals every body under ``threads/<T>/`` (run markers, empty, stay as they
  are) and opens every body read there, refusing a plain one;
- renames content objects: ``objects/<address>`` is stored as
  ``objects/<sealed name>``, and a listing names them by address again (a
  sealed name is the address encrypted with the thread's name key, so the
  key holder can turn it back), so prune, verify and copy work unchanged;
- deletes a thread's key object when asked to shred the thread.

A listing's content-object names come in the order of their stored names,
which is not the order of their addresses; no plan relies on that order,
and paging resumes after the last stored name as it must.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from objstore_saver.crypto import sealing
from objstore_saver.crypto.master_keys import MasterKey
from objstore_saver.crypto.names import KEY_PREFIX
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.crypto.thread_keys import (
    ThreadKey,
    encode_key_object,
    new_thread_key,
    open_key_object,
)
from objstore_saver.errors import ObjectExistsError, ObjectNotFoundError, ThreadKeyMissingError
from objstore_saver.format import keys
from objstore_saver.storage.base import (
    MAX_LIST_PAGE,
    ListPage,
    ObjectInfo,
    ObjectStore,
    PutMode,
    SendsAhead,
    StoreWrapper,
    in_thread,
    validate_byte_range,
)

#: Thread keys kept in memory (a thread's key is read once per process while it is used).
KEYS_KEPT = 100_000
_OBJECTS = "objects/"
_RUNS = "runs/"
_DIGEST_HEX = 64


def key_object_key(token: str) -> str:
    """Key of a thread's key object in the key store: ``keys/threads/<T>``."""
    return f"{KEY_PREFIX}threads/{token}"


def _thread_of(key: str) -> tuple[str, str, str] | None:
    """(thread prefix, token, rest) of a key under ``threads/<T>/``, else None."""
    if not key.startswith(keys.THREADS):
        return None
    end = key.find("/", len(keys.THREADS))
    if end < 0:
        return None
    return key[: end + 1], key[len(keys.THREADS) : end], key[end + 1 :]


def _plain_digest(rest: str) -> bytes | None:
    """The address of ``objects/<64 hex>``, else None."""
    if not rest.startswith(_OBJECTS) or len(rest) != len(_OBJECTS) + _DIGEST_HEX:
        return None
    try:
        return bytes.fromhex(rest[len(_OBJECTS) :])
    except ValueError:
        return None


class SealingStore(StoreWrapper):
    """Seals the objects of every thread with the thread's own key (docs/encryption.md).

    Args:
        inner: The store of the data.
        settings: Master keys and the store of key objects (default: ``inner``).
    """

    #: What :func:`~objstore_saver.crypto.settings.sealed` looks for: never seal twice.
    seals_threads = True

    def __init__(self, inner: ObjectStore, settings: ClientEncryption) -> None:
        super().__init__(inner)
        self.settings = settings
        self._masters: tuple[MasterKey, ...] = settings.master_keys
        self._key_store: ObjectStore = settings.key_store or inner
        self._keys: OrderedDict[str, ThreadKey] = OrderedDict()
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    # --- thread keys ----------------------------------------------------------------

    def _known(self, token: str) -> ThreadKey | None:
        with self._lock:
            return self._keys.get(token)

    def _remember(self, key: ThreadKey) -> ThreadKey:
        with self._lock:
            self._keys[key.thread_id] = key
            while len(self._keys) > KEYS_KEPT:
                self._keys.popitem(last=False)
        return key

    def forget(self, token: str) -> None:
        """Drop a thread's key from memory (it was shredded)."""
        with self._lock:
            self._keys.pop(token, None)

    def _key(self, token: str, create: bool) -> ThreadKey | None:
        """The thread's key; None when it has no key object and ``create`` is false.

        One load per thread at a time in this process: concurrent first
        writes of a thread (a put's parallel objects) wait for one key
        object, rather than racing to create several.
        """
        known = self._known(token)
        if known is not None:
            return known
        with self._lock:
            loading = self._loading.setdefault(token, threading.Lock())
        with loading:
            known = self._known(token)
            if known is not None:
                return known
            try:
                return self._load(token, create)
            finally:
                with self._lock:
                    self._loading.pop(token, None)

    def _load(self, token: str, create: bool) -> ThreadKey | None:
        name = key_object_key(token)
        if create:
            # A thread's first write makes its key; a writer that meets one uses it.
            fresh = new_thread_key(token)
            try:
                self._key_store.put(
                    name, encode_key_object(fresh, self._masters[:1]), PutMode.CREATE
                )
                return self._remember(fresh)
            except ObjectExistsError:
                pass
        try:
            data = self._key_store.get(name)
        except ObjectNotFoundError:
            return None
        return self._remember(open_key_object(data, name, token, self._masters))

    async def _akey(self, token: str, create: bool) -> ThreadKey | None:
        # Once per thread and process: the blocking load in a worker thread
        # (a KMS call blocks too), under the same single-flight lock.
        return self._known(token) or await in_thread(self._key, token, create)

    # --- the pure parts of each request ---------------------------------------------

    @staticmethod
    def _stored_key(thread: ThreadKey | None, pfx: str, rest: str, key: str) -> str:
        """Where the plans' ``key`` is stored: content objects under their sealed name."""
        d = _plain_digest(rest) if thread is not None else None
        if d is None or thread is None:
            return key
        return pfx + _OBJECTS + sealing.sealed_name(thread, d)

    @staticmethod
    def _seal(thread: ThreadKey, rest: str, data: bytes) -> bytes:
        d = _plain_digest(rest)
        if d is not None:
            return sealing.seal_object(thread, d, data)
        return sealing.seal_keyed(thread, rest, data)

    @staticmethod
    def _open(thread: ThreadKey, rest: str, data: bytes, stored: str) -> bytes:
        d = _plain_digest(rest)
        if d is not None:
            return sealing.open_object(thread, d, data, stored)
        return sealing.open_keyed(thread, rest, data, stored)

    @staticmethod
    def _sealed_at(key: str) -> tuple[str, str, str] | None:
        """The thread of a key whose body is sealed (not a run marker, not outside threads)."""
        where = _thread_of(key)
        if where is None or where[2].startswith(_RUNS):
            return None
        return where

    def _missing(self, token: str) -> ThreadKeyMissingError:
        return ThreadKeyMissingError(keys.untoken(token) or token, key_object_key(token))

    def _named(self, page: ListPage, thread_keys: dict[str, ThreadKey | None]) -> ListPage:
        """A listing with sealed names turned back into addresses (where the key is had)."""
        out: list[ObjectInfo] = []
        for o in page.objects:
            where = _thread_of(o.key)
            thread = thread_keys.get(where[1]) if where is not None else None
            if where is not None and thread is not None and where[2].startswith(_OBJECTS):
                d = sealing.opened_name(thread, where[2][len(_OBJECTS) :])
                if d is not None:
                    o = ObjectInfo(where[0] + _OBJECTS + d.hex(), o.size, o.last_modified)
            out.append(o)
        return ListPage(out, page.truncated)

    @staticmethod
    def _tokens_with_objects(page: ListPage) -> set[str]:
        found = set()
        for o in page.objects:
            where = _thread_of(o.key)
            if where is not None and where[2].startswith(_OBJECTS):
                found.add(where[1])
        return found

    # --- blocking requests ----------------------------------------------------------

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Seal ``data`` with its thread's key (made at the thread's first write) and store it."""
        where = self._sealed_at(key)
        if where is None:
            return self._inner.put(key, data, mode)
        pfx, token, rest = where
        thread = self._key(token, create=True)
        assert thread is not None
        stored = self._stored_key(thread, pfx, rest, key)
        self._inner.put(stored, self._seal(thread, rest, data), mode)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """The opened object (a range is cut from the opened bytes).

        Raises:
            ThreadKeyMissingError: the thread has no key object.
            CorruptObjectError: the stored bytes are plain, altered, or another key's.
        """
        where = self._sealed_at(key)
        if where is None:
            return self._inner.get(key, byte_range)
        pfx, token, rest = where
        thread = self._key(token, create=False)
        if thread is None:
            raise self._missing(token)
        stored = self._stored_key(thread, pfx, rest, key)
        return _cut(self._open(thread, rest, self._got(stored, key), stored), byte_range)

    def _got(self, stored: str, key: str) -> bytes:
        try:
            return self._inner.get(stored)
        except ObjectNotFoundError as exc:
            raise ObjectNotFoundError(exc.location, key) from exc

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """A page of keys, content objects named by their addresses again."""
        after = self._stored_after(start_after, self._key_for_name)
        page = self._inner.list(prefix, start_after=after, limit=limit)
        tokens = self._tokens_with_objects(page)
        return self._named(page, {t: self._key(t, create=False) for t in tokens})

    def _key_for_name(self, token: str) -> ThreadKey | None:
        return self._key(token, create=False)

    def _stored_after(
        self, start_after: str | None, key_of: Callable[[str], ThreadKey | None]
    ) -> str | None:
        where = _thread_of(start_after) if start_after else None
        if where is None or _plain_digest(where[2]) is None:
            return start_after
        return self._stored_key(key_of(where[1]), where[0], where[2], start_after or "")

    def delete(self, keys_: Sequence[str]) -> None:
        """Delete the stored objects of these keys (content objects by their sealed names)."""
        self._inner.delete(self._stored_keys(keys_, self._key_for_name))

    def _stored_keys(
        self, keys_: Sequence[str], key_of: Callable[[str], ThreadKey | None]
    ) -> list[str]:
        out = []
        for k in keys_:
            where = _thread_of(k)
            if where is not None and _plain_digest(where[2]) is not None:
                out.append(self._stored_key(key_of(where[1]), where[0], where[2], k))
            else:
                out.append(k)
        return out

    def shred(self, thread_prefix: str) -> None:
        """Delete the key object of the thread ``threads/<T>/``: its objects become unreadable."""
        token = _token_of_prefix(thread_prefix)
        self.forget(token)
        self._key_store.delete([key_object_key(token)])

    def has_key(self, thread_prefix: str) -> bool:
        """Whether the thread ``threads/<T>/`` has a key object (loading it if not in memory)."""
        return self._key(_token_of_prefix(thread_prefix), create=False) is not None

    # --- coroutines -----------------------------------------------------------------

    async def aput(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Coroutine twin of :meth:`put`."""
        where = self._sealed_at(key)
        if where is None:
            return await self._inner.aput(key, data, mode)
        pfx, token, rest = where
        thread = await self._akey(token, create=True)
        assert thread is not None
        stored = self._stored_key(thread, pfx, rest, key)
        await self._inner.aput(stored, self._seal(thread, rest, data), mode)

    async def aget(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """Coroutine twin of :meth:`get`."""
        where = self._sealed_at(key)
        if where is None:
            return await self._inner.aget(key, byte_range)
        pfx, token, rest = where
        thread = await self._akey(token, create=False)
        if thread is None:
            raise self._missing(token)
        stored = self._stored_key(thread, pfx, rest, key)
        try:
            data = await self._inner.aget(stored)
        except ObjectNotFoundError as exc:
            raise ObjectNotFoundError(exc.location, key) from exc
        return _cut(self._open(thread, rest, data, stored), byte_range)

    async def alist(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """Coroutine twin of :meth:`list`."""
        after = start_after
        where = _thread_of(start_after) if start_after else None
        if where is not None and _plain_digest(where[2]) is not None:
            known = await self._akey(where[1], create=False)
            after = self._stored_after(start_after, lambda _t: known)
        page = await self._inner.alist(prefix, start_after=after, limit=limit)
        found = {t: await self._akey(t, create=False) for t in self._tokens_with_objects(page)}
        return self._named(page, found)

    async def adelete(self, keys_: Sequence[str]) -> None:
        """Coroutine twin of :meth:`delete`."""
        tokens = set()
        for k in keys_:
            where = _thread_of(k)
            if where is not None and _plain_digest(where[2]) is not None:
                tokens.add(where[1])
        found = {t: await self._akey(t, create=False) for t in tokens}
        await self._inner.adelete(self._stored_keys(keys_, found.__getitem__))

    async def ahas_key(self, thread_prefix: str) -> bool:
        """Coroutine twin of :meth:`has_key`."""
        return await self._akey(_token_of_prefix(thread_prefix), create=False) is not None

    async def ashred(self, thread_prefix: str) -> None:
        """Coroutine twin of :meth:`shred`."""
        token = _token_of_prefix(thread_prefix)
        self.forget(token)
        await self._key_store.adelete([key_object_key(token)])


class _SealingStoreAhead(SealingStore):
    """A :class:`SealingStore` over a store that sends requests ahead (:class:`SendsAhead`)."""

    def send_ahead(self, method: str, *args: Any, **kwargs: Any) -> Callable[[], Any]:
        """Seal and rename as the blocking call would, send now, open the answer when read."""
        inner = self._inner
        assert isinstance(inner, SendsAhead)
        if method == "get":
            key = args[0]
            byte_range = args[1] if len(args) > 1 else kwargs.get("byte_range")
            where = self._sealed_at(key)
            if where is None:
                return inner.send_ahead("get", *args, **kwargs)
            pfx, token, rest = where
            thread = self._key(token, create=False)
            if thread is None:
                error = self._missing(token)

                def fail() -> Any:
                    raise error

                return fail
            stored = self._stored_key(thread, pfx, rest, key)
            answer = inner.send_ahead("get", stored)

            def opened() -> bytes:
                try:
                    data = answer()
                except ObjectNotFoundError as exc:
                    raise ObjectNotFoundError(exc.location, key) from exc
                return _cut(self._open(thread, rest, data, stored), byte_range)

            return opened
        if method == "list":
            prefix = args[0]
            start_after = kwargs.get("start_after")
            limit = kwargs.get("limit", MAX_LIST_PAGE)
            after = self._stored_after(start_after, self._key_for_name)
            listed = inner.send_ahead("list", prefix, start_after=after, limit=limit)

            def named() -> ListPage:
                page: ListPage = listed()
                tokens = self._tokens_with_objects(page)
                return self._named(page, {t: self._key(t, create=False) for t in tokens})

            return named
        if method == "put":
            key, data = args[0], args[1]
            mode = args[2] if len(args) > 2 else kwargs.get("mode", PutMode.OVERWRITE)
            where = self._sealed_at(key)
            if where is None:
                return inner.send_ahead("put", key, data, mode)
            pfx, token, rest = where
            thread = self._key(token, create=True)
            assert thread is not None
            stored = self._stored_key(thread, pfx, rest, key)
            return inner.send_ahead("put", stored, self._seal(thread, rest, data), mode)
        keys_ = args[0]
        return inner.send_ahead("delete", self._stored_keys(keys_, self._key_for_name))


def _token_of_prefix(thread_prefix: str) -> str:
    where = _thread_of(thread_prefix)
    if where is None or where[2]:
        raise ValueError(f"not a thread prefix: {thread_prefix!r}")
    return where[1]


def _cut(data: bytes, byte_range: tuple[int, int] | None) -> bytes:
    if byte_range is None:
        return data
    start, end = validate_byte_range(byte_range)
    return data[start:end]


def sealing_store(inner: ObjectStore, settings: ClientEncryption) -> SealingStore:
    """``inner`` with every thread's objects sealed; sends ahead when ``inner`` does."""
    if isinstance(inner, SendsAhead):
        return _SealingStoreAhead(inner, settings)
    return SealingStore(inner, settings)
