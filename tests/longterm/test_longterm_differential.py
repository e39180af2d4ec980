"""Differential test: ObjectStoreStore against LangGraph's InMemoryStore.

A Hypothesis state machine of put/delete/get/search (filter, limit, offset)/
list_namespaces (prefix, suffix, max_depth, limit, offset) and TTL (an
injected clock), on a directory and on S3 (moto), sync and async.

Two documented differences are applied to the reference, not to us:
InMemoryStore has no TTL (a model expires its items by deleting them when the
clock passes their expiry, and refreshes them as reads do), and it orders
namespaces by first use (search results are compared grouped by namespace in
sorted order, items keeping the reference's order within a namespace). It also
lists namespaces a ``get`` merely touched; the reference's empty namespaces are
dropped before listing, as we list only namespaces that hold items.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from backends import Backend
from hypothesis import settings, strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from langgraph.store.memory import InMemoryStore
from longterm_helpers import Caller, Clock

from objstore_saver.longterm import ObjectStoreStore

LABELS = ["a", "b"]
namespaces = hs.lists(hs.sampled_from(LABELS), min_size=1, max_size=2).map(tuple)
keys = hs.sampled_from(["k3", "k1", "k2", "k4"])
values = hs.fixed_dictionaries(
    {"n": hs.integers(0, 5), "tag": hs.sampled_from(["x", "y"])},
    optional={"m": hs.fixed_dictionaries({"z": hs.integers(0, 2)})},
)
filters = hs.sampled_from(
    [
        None,
        {"tag": "x"},
        {"n": {"$gte": 3}},
        {"n": {"$gt": 1, "$lte": 4}},
        {"n": {"$ne": 2}, "tag": {"$eq": "y"}},
        {"m": {"z": 1}},
        {"n": {"$lt": 2}},
    ]
)
patterns = hs.lists(hs.sampled_from([*LABELS, "*"]), min_size=1, max_size=2).map(tuple)
TTL_SECONDS = 60.0


class StoreMachine(RuleBasedStateMachine):
    """Ops applied to both stores; results compared at every step."""

    make_store: Any = None
    mode = "sync"

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.ours = Caller(self.make_store(self.clock), self.mode)
        self.ref = InMemoryStore()
        self.expiry: dict[tuple[tuple[str, ...], str], float] = {}

    def teardown(self) -> None:
        self.ours.close()

    # --- the TTL model of the reference ---------------------------------------

    def _expire(self) -> None:
        for (ns, key), when in list(self.expiry.items()):
            if when <= self.clock.now:
                self.ref.delete(ns, key)
                del self.expiry[(ns, key)]

    def _refresh(self, ns: tuple[str, ...], key: str) -> None:
        if (ns, key) in self.expiry:
            self.expiry[(ns, key)] = self.clock.now + TTL_SECONDS

    def _drop_empty_namespaces(self) -> None:
        for ns in [ns for ns, items in self.ref._data.items() if not items]:
            del self.ref._data[ns]

    # --- rules -------------------------------------------------------------------

    @rule(ns=namespaces, key=keys, value=values, ttl=hs.sampled_from([None, 1.0]))
    def put(self, ns: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None) -> None:
        self._expire()
        self.ours("put", ns, key, value, ttl=ttl)
        self.ref.put(ns, key, value)
        self.expiry.pop((ns, key), None)
        if ttl is not None:
            self.expiry[(ns, key)] = self.clock.now + TTL_SECONDS

    @rule(ns=namespaces, key=keys)
    def delete(self, ns: tuple[str, ...], key: str) -> None:
        self._expire()
        self.ours("delete", ns, key)
        self.ref.delete(ns, key)
        self.expiry.pop((ns, key), None)

    @rule(ns=namespaces, key=keys, refresh=hs.booleans())
    def get(self, ns: tuple[str, ...], key: str, refresh: bool) -> None:
        self._expire()
        got = self.ours("get", ns, key, refresh_ttl=refresh)
        want = self.ref.get(ns, key)
        assert (got and (got.namespace, got.key, got.value)) == (
            want and (want.namespace, want.key, want.value)
        )
        if got is not None and refresh:
            self._refresh(ns, key)

    @rule(
        prefix=hs.lists(hs.sampled_from(LABELS), max_size=2).map(tuple),
        filter_=filters,
        limit=hs.integers(1, 6),
        offset=hs.integers(0, 4),
        refresh=hs.booleans(),
    )
    def search(
        self,
        prefix: tuple[str, ...],
        filter_: dict[str, Any] | None,
        limit: int,
        offset: int,
        refresh: bool,
    ) -> None:
        self._expire()
        got = self.ours(
            "search", prefix, filter=filter_, limit=limit, offset=offset, refresh_ttl=refresh
        )
        every = self.ref.search(prefix, filter=filter_, limit=10_000)
        order = sorted(range(len(every)), key=lambda i: (every[i].namespace, i))
        want = [every[i] for i in order][offset : offset + limit]
        view = [(r.namespace, r.key, r.value, r.score) for r in got]
        assert view == [(r.namespace, r.key, r.value, r.score) for r in want]
        if refresh:
            for r in got:
                self._refresh(r.namespace, r.key)

    @rule(
        prefix=hs.none() | patterns,
        suffix=hs.none() | patterns,
        max_depth=hs.sampled_from([None, 1, 2]),
        limit=hs.integers(1, 5),
        offset=hs.integers(0, 3),
    )
    def list_namespaces(
        self,
        prefix: tuple[str, ...] | None,
        suffix: tuple[str, ...] | None,
        max_depth: int | None,
        limit: int,
        offset: int,
    ) -> None:
        self._expire()
        self._drop_empty_namespaces()
        kwargs = {
            "prefix": prefix,
            "suffix": suffix,
            "max_depth": max_depth,
            "limit": limit,
            "offset": offset,
        }
        assert self.ours("list_namespaces", **kwargs) == self.ref.list_namespaces(**kwargs)

    @rule(seconds=hs.sampled_from([7.0, 28.0, 63.0]))  # multiples of 7: never exactly 60
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(ops=hs.lists(hs.tuples(namespaces, keys, hs.none() | values), min_size=1, max_size=4))
    def batch_of_puts(self, ops: list[tuple[tuple[str, ...], str, Any]]) -> None:
        from langgraph.store.base import PutOp

        self._expire()
        self.ours("batch", [PutOp(ns, k, v) for ns, k, v in ops])
        self.ref.batch([PutOp(ns, k, v) for ns, k, v in ops])
        for ns, k, _ in ops:
            self.expiry.pop((ns, k), None)

    @invariant()
    def whole_view_agrees(self) -> None:
        self._expire()
        got = self.ours("search", (), limit=1000, refresh_ttl=False)
        want = self.ref.search((), limit=1000)
        assert sorted((r.namespace, r.key, str(r.value)) for r in got) == sorted(
            (r.namespace, r.key, str(r.value)) for r in want
        )


#: Many short programs on the directory, a few on moto (each S3 step costs ~10 requests).
RUNS = {
    "local": settings(max_examples=150, stateful_step_count=25, deadline=None, derandomize=True),
    "s3-lean": settings(max_examples=8, stateful_step_count=25, deadline=None, derandomize=True),
}


@pytest.mark.backends(*RUNS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_differential(backend: Backend, mode: str) -> None:
    counter = itertools.count()

    def make(clock: Clock) -> ObjectStoreStore:
        return ObjectStoreStore(
            backend.store(f"ex{next(counter)}/"),
            clock=clock,
            compact_after=4,
            index_grace=0.0,
        )

    machine = type(
        f"Machine_{backend.kind.replace('-', '_')}_{mode}",
        (StoreMachine,),
        {"make_store": staticmethod(make), "mode": mode},
    )
    run_state_machine_as_test(machine, settings=RUNS[backend.kind])
