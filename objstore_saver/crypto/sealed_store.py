"""A store that seals every object of a thread on the way out and opens it on the way in.

docs/encryption.md, "Where the sealing happens". A listing's content objects come
in the order of their stored names, not of their addresses: no plan relies on it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from objstore_saver.crypto import sealing
from objstore_saver.crypto.key_versions import KeyVersions
from objstore_saver.crypto.names import (
    epoch_scope,
    key_object_key,
    key_stem,
    marked_keys_prefix,
    namespace_scope,
    scope_of_key_object,
    scope_of_prefix,
    scope_owner,
    scope_path,
    split_scope,
    token_of_prefix,
)
from objstore_saver.crypto.scope_keys import ScopeKeys, trim
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.crypto.thread_keys import ThreadKey
from objstore_saver.errors import CorruptObjectError, ObjectNotFoundError
from objstore_saver.format import keys, store_keys
from objstore_saver.storage.base import (
    MAX_LIST_PAGE,
    KeyLayer,
    ListPage,
    ObjectInfo,
    ObjectStore,
    PutMode,
    in_thread,
    validate_byte_range,
)
from objstore_saver.storage.requests import (
    Delete,
    Get,
    Handles,
    ListKeys,
    Put,
    SendsAhead,
    StorageRequest,
    acall,
    arun_steps,
    call,
    run_steps,
    send_steps_ahead,
)
from objstore_saver.telemetry import Counters

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
    """A sealed key: the scope (a thread's token or ``store/<P>``) whose key seals it.

    ``bound_to``: what its sealed bytes are bound to, a content object's address
    (``digest``), else the key's name within its scope.
    """

    pfx: str
    scope: str
    bound_to: bytes | str
    digest: bytes | None

    @property
    def is_thread(self) -> bool:
        return self.pfx.startswith(keys.THREADS)

    @classmethod
    def of(cls, key: str | None) -> Route | None:
        """The route of a sealed key; None for a run marker, a tombstone or a key in clear."""
        if not key:
            return None
        where = thread_of(key)
        if where is None:
            return namespace_route(key)
        pfx, token, rest = where
        if rest.startswith(_RUNS) or keys.tombstone_epoch_of(key) is not None:
            return None
        digest = _address(rest)
        return cls(pfx, token, rest if digest is None else digest, digest)

    def stored(self, thread: ThreadKey | None, key: str) -> str:
        """Where ``key`` is stored: a content object under its sealed name, if ``thread``."""
        if self.digest is None or thread is None:
            return key
        return self.pfx + OBJECTS + sealing.sealed_name(thread, self.digest)


def namespace_route(key: str) -> Route | None:
    """The route of a long-term store item or index object (spec §8.1), else None."""
    path, kind = store_keys.classify(key)
    if not path or kind == "clear markers":
        return None  # a clear marker holds no data: in clear, as a thread's tombstone
    root = store_keys.INDEX if kind != "items" else store_keys.ITEMS
    pfx = root + path + "/"
    return Route(pfx, namespace_scope(path), key[len(pfx) :], None)


def _address(rest: str) -> bytes | None:
    if not rest.startswith(OBJECTS) or len(rest) != len(OBJECTS) + _DIGEST_HEX:
        return None
    try:
        return bytes.fromhex(rest[len(OBJECTS) :])
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class NeedKey:
    """A step of a request: the key of ``scope`` (None: it has none; ``create``: make it)."""

    scope: str
    create: bool


@dataclass(frozen=True, slots=True)
class NeedRing:
    """A step of a request: every key of ``scope`` by id, read again (spec §6.16)."""

    scope: str


#: A step of a request: keys it needs, or a request to the wrapped store.
_Step = NeedKey | NeedRing | StorageRequest
_Request = Generator[_Step, Any, Any]


def _run_both(steps_of: Callable[..., _Request], doc: str) -> tuple[Any, Any]:
    """The blocking method and the coroutine that run the request ``steps_of`` builds."""

    def method(self: SealingStore, *args: Any, **kwargs: Any) -> Any:
        return run_steps(steps_of(self, *args, **kwargs), self._perform)

    async def coroutine(self: SealingStore, *args: Any, **kwargs: Any) -> Any:
        return await arun_steps(steps_of(self, *args, **kwargs), self._aperform)

    name = steps_of.__name__.removeprefix("_")
    for made, made_name in ((method, name), (coroutine, "a" + name)):
        functools.update_wrapper(made, steps_of)
        made.__name__ = made_name
        made.__qualname__ = f"SealingStore.{made_name}"
    method.__doc__ = doc
    coroutine.__doc__ = f"Coroutine twin of :meth:`{name}`."
    return method, coroutine


class SealingStore(KeyLayer):
    """Seals the objects of every thread with the thread's own key (docs/encryption.md).

    Each request is one generator (``_put`` ... ``_delete``) of steps, which the
    runners of :mod:`~objstore_saver.storage.requests` perform with :meth:`_perform`.
    """

    def __init__(self, inner: ObjectStore, settings: ClientEncryption) -> None:
        super().__init__(inner)
        self.settings = settings
        self._key_store: ObjectStore = settings.key_store or inner
        self._lock = threading.Lock()
        #: The greatest epoch (and its scope) of each thread token seen in a tombstone
        #: or an opened object (spec §4.11): this process writes with that epoch's key.
        self._epochs: OrderedDict[str, tuple[int, str]] = OrderedDict()
        #: Key objects' requests and envelope bytes (a saver's ``stats()`` adds them).
        self.counters = Counters()
        self._scopes = ScopeKeys(inner, self._key_store, settings.master_keys, self.counters)
        #: Listed content objects that another key of their scope named: key -> stored name.
        self._other_names: OrderedDict[str, str] = OrderedDict()
        self._versions = KeyVersions(self._key_store, self.counters)
        #: Each request's steps under the protocol's names, for storage.requests.call.
        builders = SimpleNamespace(
            get=self._get, put=self._put, list=self._list, delete=self._delete
        )
        self._steps_of = cast(Handles, builders)

    @property
    def replica(self) -> bool:
        """The store is a replica (spec §6.16): keys are made as :mod:`.scope_keys` says."""
        return self._scopes.replica

    @replica.setter
    def replica(self, value: bool) -> None:
        self._scopes.replica = value

    def forget(self, scope: str) -> None:
        """Drop a scope's key from memory (it was shredded)."""
        self._scopes.forget(scope, shredded=True)

    def saw_epoch(self, token: str, epoch: int) -> None:
        """Learn that the thread ``token`` is in ``epoch`` at least (spec §4.11)."""
        with self._lock:
            if epoch > self._epochs.get(token, (0, token))[0]:
                self._epochs[token] = (epoch, epoch_scope(token, epoch))
                self._epochs.move_to_end(token)
                trim(self._epochs)

    def _epoch_of(self, token: str) -> int:
        with self._lock:
            return self._epochs.get(token, (0, token))[0]

    def _writing_scope(self, token: str) -> str:
        with self._lock:
            return self._epochs.get(token, (0, token))[1]

    def _learn(self, listed: Iterable[str]) -> None:
        """Learn the epochs the tombstones and clear markers among these keys begin."""
        for key in listed:
            epoch = keys.tombstone_epoch_of(key)
            if epoch is not None:
                self.saw_epoch(keys.split_thread_key(key)[0][len(keys.THREADS) : -1], epoch)
                continue
            clear = store_keys.clear_of(key)
            if clear is not None:
                self.saw_epoch(namespace_scope(clear[0]), clear[1])

    def _put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> _Request:
        route = Route.of(key)
        if route is None:
            # A tombstone (in clear: it holds only an epoch) begins a new epoch:
            # what this process writes there next is sealed with that epoch's key.
            self._learn([key])
            return (yield (Put(key, data, mode)))
        thread = yield NeedKey(self._writing_scope(route.scope), True)
        body = sealing.seal(thread, route.bound_to, data)
        self.counters.add_bytes(sent=len(body) - len(data))
        return (yield (Put(route.stored(thread, key), body, mode)))

    def _get(self, key: str, byte_range: tuple[int, int] | None = None) -> _Request:
        route = Route.of(key)
        if route is None:
            return (yield (Get(key, byte_range)))
        if route.digest is not None:
            # Its stored name is the key's secret: the epoch this process is in.
            scope = self._writing_scope(route.scope)
            thread = yield NeedKey(scope, False)
            if thread is None:
                raise self._scopes.missing(scope)
            stored = route.stored(thread, key)
            try:
                data = yield from self._get_stored(stored, key)
            except ObjectNotFoundError:
                # Stored by a writer with another key of the scope (spec §6.16), or missing.
                found = yield from self._under_another_key(route, scope, thread, key)
                if found is None:
                    raise
                thread, stored, data = found
        else:
            stored = key
            data = yield from self._get_stored(key, key)
            # The envelope names the epoch and the data key that sealed it.
            try:
                epoch, sealed_by = sealing.envelope_key(data, key)
            except CorruptObjectError:
                # Not sealed: in a scope written in clear (it has no key), or planted.
                if (yield NeedKey(self._writing_scope(route.scope), False)) is None:
                    raise self._scopes.missing(self._writing_scope(route.scope)) from None
                raise
            if route.is_thread:
                self.saw_epoch(route.scope, epoch)
            scope = epoch_scope(route.scope, epoch)
            thread = yield NeedKey(scope, False)
            if thread is None and not route.is_thread and epoch >= self._epoch_of(route.scope):
                # A namespace is read without a listing: its clears tell whether
                # a delete ended this epoch (spec §8.4.9).
                clears = store_keys.path_clears_prefix(scope_path(route.scope))
                page = yield (ListKeys(clears))
                self._learn(o.key for o in page.objects)
            if thread is None:
                if epoch < self._epoch_of(route.scope):
                    # Sealed in an ended epoch whose key a delete destroyed: for
                    # the epoch in force it is not there (spec §4.11, §8.4.9).
                    raise ObjectNotFoundError(self.location, key)
                # Without a key object, a present object was shredded or written in clear.
                raise self._scopes.missing(scope)
            if sealed_by is not None and sealed_by != thread.key_id:
                # Another key of the scope (spec §6.16); none: opening names both keys.
                ring = yield NeedRing(scope)
                thread = ring.get(sealed_by, thread)
        opened = _cut(sealing.unseal(thread, route.bound_to, data, stored), byte_range)
        self.counters.add_bytes(received=len(data) - len(opened))
        return opened

    def _under_another_key(
        self, route: Route, scope: str, tried: ThreadKey, key: str
    ) -> Generator[_Step, Any, tuple[ThreadKey, str, bytes] | None]:
        """A content object stored under another key of the scope's name; None if none."""
        ring = yield NeedRing(scope)
        for other in ring.values():
            if other.key_id == tried.key_id:
                continue
            stored = route.stored(other, key)
            try:
                return other, stored, (yield from self._get_stored(stored, key))
            except ObjectNotFoundError:
                continue
        return None

    def _get_stored(self, stored: str, key: str) -> Generator[_Step, Any, bytes]:
        try:
            return (yield (Get(stored)))
        except ObjectNotFoundError as exc:
            raise ObjectNotFoundError(exc.location, key) from exc

    def _list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> _Request:
        after = None if start_after is None else (yield from self._stored_name(start_after))
        page: ListPage = yield (ListKeys(prefix, after, limit))
        self._learn(o.key for o in page.objects)
        listed = [(o, thread_of(o.key)) for o in page.objects]
        objects = {w[1] for _, w in listed if w is not None and w[2].startswith(OBJECTS)}
        rings: dict[str, list[ThreadKey]] = {}
        for token in objects:
            thread = yield NeedKey(self._writing_scope(token), False)
            rings[token] = [] if thread is None else [thread]
        out: list[ObjectInfo | None] = [None] * len(listed)
        unopened = []
        for i, (o, where) in enumerate(listed):
            if where is not None and where[2].startswith(OBJECTS) and rings[where[1]]:
                opened = _opened_info(rings[where[1]], o, where)
                if opened is None:
                    unopened.append(i)
                    continue
                o = opened
            out[i] = o
        for token in {listed[i][1][1] for i in unopened}:  # type: ignore[index]
            ring = yield NeedRing(self._writing_scope(token))
            rings[token] = list(ring.values())
        for i in unopened:
            o, where = listed[i]
            assert where is not None
            # A name no key of the scope made (an ended epoch's) stays as stored.
            opened = _opened_info(rings[where[1]], o, where)
            if opened is not None:
                self._remember_name(opened.key, o.key)
            out[i] = opened or o
        return ListPage([o for o in out if o is not None], page.truncated)

    def _remember_name(self, key: str, stored: str) -> None:
        with self._lock:
            self._other_names[key] = stored
            trim(self._other_names)

    def _stored_name(self, key: str) -> Generator[_Step, Any, str]:
        route = Route.of(key)
        if route is None or route.digest is None:
            return key
        return self._other_names.get(key) or route.stored(
            (yield NeedKey(self._writing_scope(route.scope), False)), key
        )

    def _delete(self, keys_: Sequence[str]) -> _Request:
        stored = []
        for k in keys_:
            stored.append((yield from self._stored_name(k)))
        return (yield (Delete(tuple(stored))))

    def _perform(self, step: _Step) -> Any:
        """A scope's key or keys, loaded if not known, or the wrapped store's answer."""
        if isinstance(step, NeedKey):
            return self._scopes.held.get(step.scope) or self._scopes.key(step.scope, step.create)
        if isinstance(step, NeedRing):
            return self._scopes.ring(step.scope)
        return call(self._inner, step)

    async def _aperform(self, step: _Step) -> Any:
        if isinstance(step, NeedKey):
            held = self._scopes.held.get(step.scope)
            return held or await self._scopes.akey(step.scope, step.create)
        if isinstance(step, NeedRing):
            return await self._scopes.aring(step.scope)
        return await acall(self._inner, step)

    put, aput = _run_both(_put, "Seal and store ``data``; a scope's first write makes its key.")
    get, aget = _run_both(
        _get,
        "The opened object, a range cut from it: ThreadKeyMissingError without a key object,"
        " CorruptObjectError for plain, altered or another key's bytes.",
    )
    list, alist = _run_both(_list, "A page of keys, content objects named by their addresses.")
    delete, adelete = _run_both(_delete, "Delete these keys' objects, content ones by sealed name.")

    def shred(self, prefix: str, below: int) -> None:
        """Delete the key objects of every epoch below ``below`` of a thread or store namespace.

        ``prefix``: ``threads/<T>/`` or ``store/ix/<P>/x/``; epoch ``below``'s key stays.
        """
        token = scope_of_prefix(prefix)
        listing = ListKeys(marked_keys_prefix(token))
        page = self._key_store.list(listing.prefix)
        self.counters.record([listing], [page])
        self._key_store.delete(self._shredded(token, below, page))
        self._destroy_versions(token, below)

    async def ashred(self, prefix: str, below: int) -> None:
        """Coroutine twin of :meth:`shred`."""
        token = scope_of_prefix(prefix)
        listing = ListKeys(marked_keys_prefix(token))
        page = await self._key_store.alist(listing.prefix)
        self.counters.record([listing], [page])
        await self._key_store.adelete(self._shredded(token, below, page))
        await in_thread(self._destroy_versions, token, below)

    @property
    def key_versions(self) -> KeyVersions:
        """The versions of key objects, in a key store that keeps them (``verify``, ``prune``)."""
        return self._versions

    def _destroy_versions(self, token: str, below: int) -> None:
        def doomed(scope: str) -> bool:
            owner, epoch = split_scope(scope)
            return owner == token and epoch < below

        # Lists the scope's own key objects (and, for a namespace, those of
        # the namespaces below it, which ``doomed`` leaves alone).
        self._versions.destroy(key_stem(token), doomed, scope_owner(token))

    def _shredded(self, token: str, below: int, page: ListPage) -> list[str]:
        """The key objects a shred deletes (second ones too), forgotten here first."""
        doomed = [key_object_key(token)] + [
            o.key
            for o in page.objects
            if (scope := scope_of_key_object(o.key))
            and split_scope(scope)[0] == token
            and split_scope(scope)[1] < below
        ]
        for scope in {token} | {scope_of_key_object(k) or token for k in doomed}:
            self.forget(scope)
        self.saw_epoch(token, below)
        return doomed

    def has_key(self, thread_prefix: str, epoch: int = 0) -> bool:
        """Whether the thread ``threads/<T>/`` has its key of ``epoch`` (loaded if not known)."""
        scope = epoch_scope(token_of_prefix(thread_prefix), epoch)
        return self._scopes.key(scope, create=False) is not None

    async def ahas_key(self, thread_prefix: str, epoch: int = 0) -> bool:
        """Coroutine twin of :meth:`has_key`."""
        scope = epoch_scope(token_of_prefix(thread_prefix), epoch)
        return await self._scopes.akey(scope, create=False) is not None


class _SealingStoreAhead(SealingStore):
    """A :class:`SealingStore` over a store that sends requests ahead (:class:`SendsAhead`)."""

    def send_ahead(self, request: StorageRequest) -> Callable[[], Any]:
        """Load keys and seal now, send the first request ahead."""
        inner = self._inner
        assert isinstance(inner, SendsAhead)
        request_steps = call(self._steps_of, request)
        return send_steps_ahead(request_steps, self._perform, inner.send_ahead, (NeedKey,))


def _opened_info(
    ring: Sequence[ThreadKey], info: ObjectInfo, where: tuple[str, str, str]
) -> ObjectInfo | None:
    """A listed content object named by its address, by the first key that made its name."""
    for thread in ring:
        d = sealing.opened_name(thread, where[2][len(OBJECTS) :])
        if d is not None:
            return ObjectInfo(where[0] + OBJECTS + d.hex(), info.size, info.last_modified)
    return None


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
