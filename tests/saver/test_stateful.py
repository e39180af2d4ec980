"""Hypothesis state machine: the saver and InMemorySaver agree at every step.

Random sequences of put (children of any stored checkpoint, so forks too),
put_writes (regular and special channels), get_tuple, list (with filters,
``before`` and ``limit``), delete_thread, copy_thread and prune over several
threads and namespaces, through the sync or the async API. The reference is
:class:`faultkit.Model`: ``InMemorySaver`` plus copy and ``keep_latest``
prune as ``BaseCheckpointSaver`` documents them. After every step, every
thread reads back the same on both sides, and ``verify`` finds nothing wrong.

CI runs a bounded number of examples; ``--long`` runs many more.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from datetime import timedelta
from typing import Any

import pytest
from faultkit import Model, check_integrity, config, snapshot
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import LocalStore

THREADS = ["t1", "t10", "t/1"]
NAMESPACES = ["", "sub:a"]
TASKS = ["task-a", "task-b"]
CHANNELS = ["messages", "counter", "blob"]

values_st = st.one_of(
    st.integers(-5, 5),
    st.text(max_size=8),
    st.binary(min_size=1000, max_size=3000),
    st.lists(st.text(max_size=300), max_size=4),
)


def _cid(n: int) -> str:
    return f"1f0{n:05x}-0000-6000-8000-{n:012x}"


class SaverMachine(RuleBasedStateMachine):
    """Our saver against the model; ``mode`` picks the sync or async API."""

    mode = "sync"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.store = LocalStore(self.tmp.name, fsync=False)
        self.ours = ObjectStoreSaver(self.store, prune_grace=timedelta(0))
        self.model = Model()
        self.n = 0
        #: (thread, ns) -> {checkpoint id: the checkpoint dict as put}
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.loop = asyncio.new_event_loop() if self.mode == "async" else None

    def teardown(self) -> None:
        self.ours.close()
        if self.loop is not None:
            self.loop.close()
        self.tmp.cleanup()

    # -- calling our saver through the chosen API ------------------------------------

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.loop is None:
            result = getattr(self.ours, name)(*args, **kwargs)
            return list(result) if name == "list" else result
        if name == "list":

            async def collect() -> list[Any]:
                return [t async for t in self.ours.alist(*args, **kwargs)]

            return self.loop.run_until_complete(collect())
        return self.loop.run_until_complete(getattr(self.ours, "a" + name)(*args, **kwargs))

    # -- rules -------------------------------------------------------------------------

    @initialize()
    def first(self) -> None:
        self._put(THREADS[0], "", None, {"counter": 0})

    def _put(self, thread: str, ns: str, parent: str | None, changes: dict[str, Any]) -> None:
        self.n += 1
        known = self.stored.setdefault((thread, ns), {})
        cp = copy.deepcopy(known[parent]) if parent else empty_checkpoint()
        cp["id"] = _cid(self.n)
        cp["ts"] = f"2026-01-01T00:00:00.{self.n:06d}+00:00"
        new: dict[str, int] = {}
        for ch, v in changes.items():
            if ch == "messages":
                v = [*cp["channel_values"].get("messages", []), HumanMessage(content=str(v))]
            cp["channel_values"][ch] = v
            # Versions unique across the run: the model keys values by version.
            cp["channel_versions"][ch] = self.n
            new[ch] = self.n
        md = {"source": "loop", "step": self.n, "writer": thread}
        cfg = config(thread, ns, parent)
        got = self._call("put", cfg, copy.deepcopy(cp), md, new)
        assert got == self.model.put(cfg, copy.deepcopy(cp), md, new)
        known[cp["id"]] = cp

    @rule(
        thread=st.sampled_from(THREADS),
        ns=st.sampled_from(NAMESPACES),
        pick=st.integers(0, 10),
        fork=st.booleans(),
        changes=st.dictionaries(st.sampled_from(CHANNELS), values_st, max_size=3),
    )
    def put(self, thread: str, ns: str, pick: int, fork: bool, changes: dict[str, Any]) -> None:
        known = sorted(self.stored.get((thread, ns), {}))
        parent = None
        if known:
            parent = known[pick % len(known)] if fork else known[-1]
        self._put(thread, ns, parent, changes)

    def _targets(self) -> list[tuple[str, str, str]]:
        return sorted((t, ns, c) for (t, ns), cps in self.stored.items() for c in cps)

    @precondition(lambda self: self._targets())
    @rule(
        pick=st.integers(0, 100),
        task=st.sampled_from(TASKS),
        writes=st.lists(
            st.tuples(st.sampled_from([*CHANNELS, "__error__", "__interrupt__"]), values_st),
            min_size=1,
            max_size=3,
        ),
    )
    def put_writes(self, pick: int, task: str, writes: list[tuple[str, Any]]) -> None:
        targets = self._targets()
        t, ns, c = targets[pick % len(targets)]
        self._call("put_writes", config(t, ns, c), writes, task)
        self.model.put_writes(config(t, ns, c), writes, task)

    @precondition(lambda self: self._targets())
    @rule(pick=st.integers(0, 100), latest=st.booleans())
    def get_tuple(self, pick: int, latest: bool) -> None:
        t, ns, c = self._targets()[pick % len(self._targets())]
        cfg = config(t, ns) if latest else config(t, ns, c)
        assert _view(self._call("get_tuple", cfg)) == _view(self.model.get_tuple(cfg))

    @rule(
        thread=st.sampled_from([*THREADS, None]),
        ns=st.sampled_from([*NAMESPACES, None]),
        limit=st.sampled_from([None, 1, 2]),
        before=st.integers(0, 100),
        use_before=st.booleans(),
        step=st.sampled_from([None, 1, 2, 3]),
    )
    def list(
        self,
        thread: str | None,
        ns: str | None,
        limit: int | None,
        before: int,
        use_before: bool,
        step: int | None,
    ) -> None:
        cfg = None
        if thread is not None:
            cfg = {"configurable": {"thread_id": thread}}
            if ns is not None:
                cfg["configurable"]["checkpoint_ns"] = ns
        kwargs: dict[str, Any] = {"limit": limit}
        if step is not None:
            kwargs["filter"] = {"step": step}
        if use_before and self._targets():
            bt, bns, bc = self._targets()[before % len(self._targets())]
            kwargs["before"] = config(bt, bns, bc)
        several = thread is None or ns is None
        if several:
            # Across threads and namespaces ours lists in key order, the model
            # in insertion order (spec §6.4): compare sets, without a limit.
            kwargs["limit"] = None
        ours = [_view(t) for t in self._call("list", cfg, **kwargs)]
        theirs = [_view(t) for t in self.model.list(cfg, **kwargs)]
        if several:
            ours, theirs = sorted(ours, key=repr), sorted(theirs, key=repr)
        assert ours == theirs

    @rule(thread=st.sampled_from(THREADS))
    def delete_thread(self, thread: str) -> None:
        self._call("delete_thread", thread)
        self.model.delete_thread(thread)
        for key in [k for k in self.stored if k[0] == thread]:
            del self.stored[key]

    @rule(source=st.sampled_from(THREADS), dest=st.sampled_from(THREADS))
    def copy_thread(self, source: str, dest: str) -> None:
        if source == dest or any(k[0] == dest for k in self.stored):
            return  # copying onto a thread that has checkpoints is not defined
        self._call("copy_thread", source, dest)
        self.model.copy_thread(source, dest)
        for (t, ns), cps in list(self.stored.items()):
            if t == source:
                self.stored[(dest, ns)] = copy.deepcopy(cps)

    @rule(threads=st.lists(st.sampled_from(THREADS), min_size=1, max_size=2, unique=True))
    def prune(self, threads: list[str]) -> None:
        self._call("prune", threads)
        self.model.prune(threads)
        for (t, ns), cps in self.stored.items():
            if t in threads:
                left = self.model.storage.get(t, {}).get(ns, {})
                for c in [c for c in cps if c not in left]:
                    del cps[c]

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def agree(self) -> None:
        with ObjectStoreSaver(self.store) as fresh:  # what is stored, not remembered
            assert snapshot(fresh, THREADS) == snapshot(self.model, THREADS)

    @invariant()
    def intact(self) -> None:
        check_integrity(self.store)


class AsyncSaverMachine(SaverMachine):
    mode = "async"


def _view(t: Any) -> Any:
    if t is None:
        return None
    cp = dict(t.checkpoint)
    parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
    writes = sorted((w[0], w[1], repr(w[2])) for w in t.pending_writes or [])
    return (t.config["configurable"], cp, dict(t.metadata), parent, writes)


@pytest.mark.parametrize("machine", [SaverMachine, AsyncSaverMachine], ids=["sync", "async"])
def test_saver_agrees_with_in_memory_saver(machine: type[SaverMachine], long_run: bool) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=300 if long_run else 25,
            stateful_step_count=40 if long_run else 20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            derandomize=not long_run,
        ),
    )
