"""The data keys of threads and store namespaces: loaded once, made at a scope's first write.

On a replica a new scope's key is a second key object, ``<scope>%r<key id>`` (spec §6.16).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from objstore_saver.crypto.master_keys import MasterKey
from objstore_saver.crypto.names import (
    STORE_SCOPE,
    key_object_key,
    scope_owner,
    scope_path,
    second_key_id,
    second_key_object_key,
    seconds_prefix,
    split_scope,
)
from objstore_saver.crypto.thread_keys import (
    ThreadKey,
    encode_key_object,
    new_thread_key,
    open_key_object,
)
from objstore_saver.errors import CorruptObjectError, ThreadKeyError, ThreadKeyMissingError
from objstore_saver.format import keys, store_keys
from objstore_saver.plans.requests import execute
from objstore_saver.storage.base import ObjectStore, PutMode, in_thread
from objstore_saver.storage.requests import Get, ListKeys, Put
from objstore_saver.telemetry import Counters

#: Keys kept in memory (a thread's key is read once per process while it is used).
KEYS_KEPT = 100_000


class ScopeKeys:
    """The keys of scopes (threads' epochs, store namespaces) one sealing layer uses."""

    def __init__(
        self,
        data: ObjectStore,
        key_store: ObjectStore,
        masters: Sequence[MasterKey],
        counters: Counters,
    ) -> None:
        self._data = data
        self._key_store = key_store
        self._masters = tuple(masters)
        self._counters = counters
        #: The key each scope's writes use; read without the lock (a dict read is atomic).
        self.held: OrderedDict[str, ThreadKey] = OrderedDict()
        #: Every key of a scope by id, for the scopes whose objects met another key.
        self._rings: OrderedDict[str, dict[bytes, ThreadKey]] = OrderedDict()
        #: Scopes a shred destroyed here: ended epochs never get a key again.
        self._shredded: OrderedDict[str, None] = OrderedDict()
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        #: A replica (spec §6.16): a scope holding objects gets no new key here
        #: (its own is arriving); a new scope's key is a second key object.
        self.replica = False

    def known(self, scope: str) -> ThreadKey | None:
        with self._lock:
            return self.held.get(scope)

    def _remember(self, key: ThreadKey) -> ThreadKey:
        with self._lock:
            self.held[key.thread_id] = key
            trim(self.held)
        return key

    def forget(self, scope: str, shredded: bool = False) -> None:
        """Drop a scope's keys from memory; ``shredded``: its key objects are destroyed."""
        with self._lock:
            self.held.pop(scope, None)
            self._rings.pop(scope, None)
            if shredded:
                self._shredded[scope] = None
                trim(self._shredded)

    def key(self, scope: str, create: bool) -> ThreadKey | None:
        """A scope's key; None: it has none, and ``create`` is false. One load per scope at
        a time: concurrent first writes wait for one key object rather than race to make two."""
        known = self.known(scope)
        if known is not None:
            return known
        with self._lock:
            if scope in self._shredded and not create:
                return None
            loading = self._loading.setdefault(scope, threading.Lock())
        with loading:
            known = self.known(scope)
            if known is not None:
                return known
            try:
                return self._load(scope, create)
            finally:
                with self._lock:
                    self._loading.pop(scope, None)

    async def akey(self, scope: str, create: bool) -> ThreadKey | None:
        """Coroutine twin of :meth:`key` (the load in a worker thread: a KMS call blocks)."""
        return self.known(scope) or await in_thread(self.key, scope, create)

    def ring(self, scope: str) -> dict[bytes, ThreadKey]:
        """Every key of a scope by id, read again: its key object's and its second ones'."""
        ring: dict[bytes, ThreadKey] = {}
        with self._lock:
            ring.update(self._rings.get(scope, {}))
        key = self._read(scope)
        if key is not None:
            ring.setdefault(key.key_id, key)
        for key in self._seconds(scope, have=ring):
            ring[key.key_id] = key
        with self._lock:
            self._rings[scope] = ring
            trim(self._rings)
        return ring

    async def aring(self, scope: str) -> dict[bytes, ThreadKey]:
        """Coroutine twin of :meth:`ring`."""
        return await in_thread(self.ring, scope)

    def _read(self, scope: str) -> ThreadKey | None:
        name = key_object_key(scope)
        data = self._request(Get(name))
        return None if data is None else open_key_object(data, name, scope, self._masters)

    def _load(self, scope: str, create: bool) -> ThreadKey | None:
        name = key_object_key(scope)
        if create and not self.replica:
            # A scope's first write makes its key; a writer that meets one uses it.
            fresh = new_thread_key(scope)
            body = encode_key_object(fresh, self._masters[:1])
            if self._request(Put(name, body, PutMode.CREATE)):
                return self._remember(fresh)
        found = self._read(scope)
        if found is not None:
            return self._remember(found)
        found = self._first_second(scope)
        if found is not None or not (create and self.replica):
            return found
        # On a replica, without the key object another region made nor a second
        # key: a scope holding objects is still arriving, else make a second key.
        if self._arriving(scope):
            raise ThreadKeyError(
                keys.untoken(scope) or scope,
                name,
                "not arrived on this replica yet, though objects it seals have: "
                "a write now would make a second key (docs/replication.md)",
                owner=scope_owner(scope),
            )
        fresh = new_thread_key(scope)
        body = encode_key_object(fresh, self._masters[:1])
        self._request(Put(second_key_object_key(scope, fresh.key_id), body, PutMode.CREATE))
        return self._remember(fresh)

    def _first_second(self, scope: str) -> ThreadKey | None:
        found = self._seconds(scope, have={}, first_only=True)
        return self._remember(found[0]) if found else None

    def _seconds(
        self, scope: str, have: dict[bytes, ThreadKey], first_only: bool = False
    ) -> list[ThreadKey]:
        """The scope's second keys not in ``have``: one LIST, a GET each."""
        page = self._request(ListKeys(seconds_prefix(scope)))
        out = []
        for info in page.objects:
            key_id = second_key_id(info.key, scope)
            if key_id is None:
                raise CorruptObjectError(
                    info.key, f"not a second key object of {scope_owner(scope)}"
                )
            if key_id in have:
                continue
            data = self._request(Get(info.key))
            if data is not None:
                out.append(open_key_object(data, info.key, scope, self._masters))
                if first_only:
                    break
        return out

    def _arriving(self, scope: str) -> bool:
        """On a replica: whether the never-deleted ``scope`` holds objects (its key is arriving)."""
        token, epoch = split_scope(scope)
        if epoch:
            return False  # a new epoch after a delete: its key is this writer's to make
        if token.startswith(STORE_SCOPE):
            prefix = store_keys.INDEX + scope_path(token) + "/x/"
        else:
            prefix = keys.THREADS + token + "/"
        return bool(execute(self._data, ListKeys(prefix, limit=1)).objects)

    def _request(self, op: Put | Get | ListKeys) -> Any:
        """One request for key objects (a GET finds None, a taken CREATE False), counted."""
        try:
            outcome = execute(self._key_store, op)
        except Exception as exc:
            self._counters.record([op], [exc])
            raise
        self._counters.record([op], [outcome])
        return outcome

    def missing(self, scope: str) -> ThreadKeyMissingError:
        token, _ = split_scope(scope)
        return ThreadKeyMissingError(
            keys.untoken(token) or token, key_object_key(scope), owner=scope_owner(scope)
        )


def trim(kept: OrderedDict[str, Any]) -> None:
    """Forget the oldest entries past :data:`KEYS_KEPT`."""
    while len(kept) > KEYS_KEPT:
        kept.popitem(last=False)
