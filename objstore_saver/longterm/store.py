"""``ObjectStoreStore``: LangGraph's ``BaseStore`` on object storage (spec §8).

``batch`` and ``abatch`` differ only in how embeddings are computed (LangChain's
sync or async calls); both build one plan from the ops and hand it to the
blocking or the asyncio driver.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from objstore_saver.constructors import OnObjectStore, replica_lag_seconds
from objstore_saver.crypto.layer import sealed
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.driver import Driver
from objstore_saver.longterm import plans, query, searches
from objstore_saver.longterm.clear import Cleared, clear_namespace
from objstore_saver.longterm.records import Record, encode_value, to_datetime
from objstore_saver.plans.requests import Plan
from objstore_saver.storage.base import ObjectStore, sealing_layer


@dataclass
class _Prepared:
    """Ops checked and split: reads in order, puts deduplicated, texts to embed."""

    ops: list[Op]
    puts: dict[tuple[tuple[str, ...], str], int] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    # put op index -> [(field path, index into texts)]
    put_texts: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)


class ObjectStoreStore(OnObjectStore, BaseStore):
    """Long-term memory (LangGraph ``BaseStore``) on an S3 bucket or a directory.

    Items are JSON documents under a namespace and a key; ``get`` is one GET,
    ``search`` reads per-namespace index segments (no GET per item), semantic
    search uses the ``index`` config's embeddings, and TTLs are honoured at
    read time. The format is spec §8.

    Args:
        store: The object store (a saver's may be shared: keys live under ``store/``).
        index: ``{"dims", "embed", "fields"}`` to enable semantic search.
        ttl: ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
        max_workers: Parallel requests of one batch.
        clock: Epoch seconds for timestamps and TTL (tests inject one).
        index_grace: G of §8.4.6, seconds a replaced index segment is kept.
        compact_after: Records beyond a snapshot before a writer compacts.
        client_encryption: A key per namespace (docs/encryption.md): settings,
            ``None`` to read them from ``OBJSTORE_SAVER_ENCRYPTION_KEY(S)`` as the
            saver does, ``False`` for clear. A store that seals already is kept.
        replica_lag: The bucket is a replica whose objects arrive up to this long
            after the rest (docs/replication.md): a namespace whose key has not
            arrived reads as not replicated yet, writes to it are refused, and
            ``get`` reads its index (the newer of two regions' writes wins).

    Example:
        >>> store = ObjectStoreStore.from_directory("./memories")
        >>> store.put(("users", "u1"), "prefs", {"theme": "dark"})  # doctest: +SKIP
    """

    supports_ttl = True

    def __init__(
        self,
        store: ObjectStore,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        max_workers: int = 32,
        clock: Callable[[], float] = time.time,
        index_grace: float = 60.0,
        compact_after: int = plans.COMPACT_AFTER,
        client_encryption: ClientEncryption | bool | None = None,
        replica_lag: timedelta | float | None = None,
    ) -> None:
        lag = replica_lag_seconds(replica_lag)
        store, self.client_encryption = sealed(store, client_encryption)
        layer = sealing_layer(store)
        if layer is not None and lag is not None:
            layer.replica = True
        self.store = store
        self.ttl_config = ttl
        self.index_config = dict(index) if index else None
        self.embeddings = ensure_embeddings(index.get("embed")) if index else None
        self._fields: list[tuple[str, list[str] | str]] = []
        if index:
            self._fields = [
                (p, tokenize_path(p) if p != "$" else "$") for p in (index.get("fields") or ["$"])
            ]
        self._driver = Driver(store, max_workers=max_workers)
        self._ctx = plans.StoreContext(
            clock=clock, grace=index_grace, compact_after=compact_after, replica_lag=lag
        )

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ops; reads see the state before the batch's puts (as InMemoryStore)."""
        prep = self._prepare(ops)
        vectors = self.embeddings.embed_documents(prep.texts) if prep.texts else []
        queries = [self.embeddings.embed_query(q) for q in prep.queries] if prep.queries else []
        return self._driver.run(self._plan(prep, vectors, queries))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch`."""
        prep = self._prepare(ops)
        vectors = await self.embeddings.aembed_documents(prep.texts) if prep.texts else []
        queries = [await self.embeddings.aembed_query(q) for q in prep.queries]
        return await self._driver.arun(self._plan(prep, vectors, queries))

    def delete_namespace(self, namespace: tuple[str, ...]) -> Cleared:
        """Delete every item of ``namespace`` (not of the namespaces below it), for good.

        Spec §8.4.9 and docs/store.md: concurrent writes survive, after the delete;
        running it again after a failure completes it. InvalidNamespaceError: an
        empty namespace or a label that is not a non-empty string.
        """
        return self._driver.run(clear_namespace(self._ctx, _checked(namespace)))

    async def adelete_namespace(self, namespace: tuple[str, ...]) -> Cleared:
        """Coroutine twin of :meth:`delete_namespace`."""
        return await self._driver.arun(clear_namespace(self._ctx, _checked(namespace)))

    def _prepare(self, ops: Iterable[Op]) -> _Prepared:
        prep = _Prepared(list(ops))
        for i, op in enumerate(prep.ops):
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise TypeError(f"unknown store operation {type(op).__name__}")
            validate_op_namespace(op)
            if isinstance(op, (GetOp, PutOp)) and not isinstance(op.key, str):
                raise TypeError(f"key {op.key!r} in namespace {op.namespace!r} must be a string")
            if isinstance(op, PutOp):
                self._check_put(op)
                prep.puts[(tuple(op.namespace), op.key)] = i
            elif isinstance(op, SearchOp) and op.query and self.embeddings:
                prep.queries.append(op.query)
        prep.queries = list(dict.fromkeys(prep.queries))
        for i in prep.puts.values():
            op = prep.ops[i]
            assert isinstance(op, PutOp)
            if op.value is not None:
                prep.put_texts[i] = self._texts_of(op, prep.texts)
        return prep

    @staticmethod
    def _check_put(op: PutOp) -> None:
        if op.value is None:
            return
        if not op.namespace:
            raise InvalidNamespaceError(f"namespace of key {op.key!r} cannot be empty")
        if op.namespace[0] == "langgraph":
            raise InvalidNamespaceError(
                f'root label of namespace {op.namespace!r} cannot be "langgraph"'
            )
        encode_value(op.namespace, op.key, op.value)
        if op.ttl is not None and (not isinstance(op.ttl, (int, float)) or op.ttl <= 0):
            raise ValueError(
                f"ttl {op.ttl!r} of key {op.key!r} in namespace {op.namespace!r} "
                "must be a positive number of minutes"
            )

    def _texts_of(self, op: PutOp, texts: list[str]) -> list[tuple[str, int]]:
        """Field paths of a put to embed, each with the index of its text in ``texts``."""
        if not self.embeddings or op.index is False:
            return []
        paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        out: list[tuple[str, int]] = []
        for path, tokens in paths:
            found = get_text_at_path(op.value, tokens)
            named = (
                [(path, found[0])]
                if len(found) == 1
                else [(f"{path}.{n}", text) for n, text in enumerate(found)]
            )
            for name, text in named:
                out.append((name, len(texts)))
                texts.append(text)
        return out

    def _plan(
        self,
        prep: _Prepared,
        vectors: Sequence[Sequence[float]],
        queries: Sequence[Sequence[float]],
    ) -> Plan[list[Result]]:
        results: list[Result] = [None] * len(prep.ops)
        self._check_vectors(prep, vectors, queries)
        query_vectors = dict(zip(prep.queries, queries, strict=True))
        gets = [(i, op) for i, op in enumerate(prep.ops) if isinstance(op, GetOp)]
        now = self._ctx.now()
        wanted = [(tuple(op.namespace), op.key) for _, op in gets]
        if self._ctx.replica_lag is None:
            found = yield from plans.get_items(wanted, now)
        else:
            found = yield from searches.indexed_items(self._ctx, wanted, now)
        for (i, op), rec in zip(gets, found, strict=True):
            if rec is not None and op.refresh_ttl and rec.ttl is not None:
                rec = yield from plans.refresh_item(self._ctx, rec)
            results[i] = None if rec is None else Item(**_fields(rec))
        for i, op in enumerate(prep.ops):
            if isinstance(op, SearchOp):
                results[i] = yield from self._search(op, query_vectors.get(op.query or ""))
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_namespaces(op)
        for i in prep.puts.values():
            op = prep.ops[i]
            assert isinstance(op, PutOp)
            ns = tuple(op.namespace)
            if op.value is None:
                yield from plans.delete_item(self._ctx, ns, op.key)
                continue
            vec = {name: query.pack_vector(vectors[t]) for name, t in prep.put_texts.get(i, [])}
            ttl = None if op.ttl is None else float(op.ttl)
            yield from plans.put_item(self._ctx, ns, op.key, dict(op.value), ttl=ttl, vectors=vec)
        return results

    def _check_vectors(
        self,
        prep: _Prepared,
        vectors: Sequence[Sequence[float]],
        queries: Sequence[Sequence[float]],
    ) -> None:
        """Refuse embeddings whose count or size differs from what the index asked for."""
        if len(vectors) != len(prep.texts) or len(queries) != len(prep.queries):
            raise ValueError(
                f"the embeddings returned {len(vectors)} document and {len(queries)} query "
                f"vectors for {len(prep.texts)} texts and {len(prep.queries)} queries"
            )
        dims = (self.index_config or {}).get("dims")
        for i, fields in prep.put_texts.items():
            op = prep.ops[i]
            assert isinstance(op, PutOp)
            for name, t in fields:
                if dims is not None and len(vectors[t]) != dims:
                    raise ValueError(
                        f"embedding of field {name!r} of key {op.key!r} in namespace "
                        f"{tuple(op.namespace)!r} has {len(vectors[t])} dimensions; the "
                        f"index says dims={dims}"
                    )

    def _search(self, op: SearchOp, query_vector: Sequence[float] | None) -> Plan[list[SearchItem]]:
        ns = tuple(op.namespace_prefix)
        candidates = yield from searches.search_candidates(self._ctx, ns, self._ctx.now())
        kept = [r for r in candidates if query.passes(r, op.filter)]
        ranked = query.page(kept, query_vector, op.offset, op.limit)
        out: list[SearchItem] = []
        for rec, score in ranked:
            if op.refresh_ttl and rec.ttl is not None:
                rec = yield from plans.refresh_item(self._ctx, rec)
            out.append(SearchItem(**_fields(rec), score=score))
        return out

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        conds = op.match_conditions or ()
        # The first prefix condition's labels before any "*" narrow the listing.
        prefix = next((c.path for c in conds if c.match_type == "prefix"), ())
        literal = tuple(itertools.takewhile(lambda label: label != "*", prefix))
        found = yield from searches.live_namespaces(self._ctx, literal, self._ctx.now())
        chosen = [ns for ns in found if all(_matches(c, ns) for c in conds)]
        if op.max_depth is not None:
            chosen = sorted({ns[: op.max_depth] for ns in chosen})
        return chosen[op.offset : op.offset + op.limit]


def _checked(namespace: Sequence[str]) -> tuple[str, ...]:
    """A namespace to delete, refused with its value when malformed."""
    ns = tuple(namespace) if isinstance(namespace, (tuple, list)) else None
    if not ns or not all(isinstance(label, str) and label for label in ns):
        raise InvalidNamespaceError(
            f"cannot delete namespace {namespace!r}: it must be a non-empty tuple of "
            "non-empty string labels"
        )
    return ns


def _matches(cond: MatchCondition, ns: tuple[str, ...]) -> bool:
    """A prefix or suffix condition, ``*`` matching any one label."""
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    if cond.match_type == "prefix":
        part = ns[: len(path)]
    elif cond.match_type == "suffix":
        part = ns[len(ns) - len(path) :]
    else:
        raise ValueError(f"unsupported namespace match type {cond.match_type!r}")
    return all(p in ("*", label) for p, label in zip(path, part, strict=True))


def _fields(rec: Record) -> dict[str, Any]:
    """An item's fields as LangGraph's ``Item`` and ``SearchItem`` take them."""
    return {
        "value": dict(rec.value or {}),
        "key": rec.key,
        "namespace": rec.ns,
        "created_at": to_datetime(rec.ca),
        "updated_at": to_datetime(rec.ua),
    }
