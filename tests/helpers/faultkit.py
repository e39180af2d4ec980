"""Shared pieces of the fault, crash, race and stateful suites.

* :class:`Model` — LangGraph's ``InMemorySaver`` plus the documented semantics
  of ``copy_thread`` and ``prune(keep_latest)`` (which it does not implement),
  used as the reference every suite compares against.
* :func:`redrive` — calls a saver method again after a storage error, as a
  LangGraph user re-invokes a graph whose checkpoint write failed.
* :func:`snapshot` / :func:`assert_agree` — everything a thread reads back,
  in a comparable form.
* :func:`check_integrity` — the store-wide invariant: every manifest and
  write decodes and reaches only stored, intact objects.
* :func:`put_values`, :func:`config`, :func:`checkpoint_id`, :func:`all_keys` —
  a checkpoint put by hand, and what a store holds.
* :class:`Workload` — a deterministic chat-like sequence of puts and writes.
"""

from __future__ import annotations

import asyncio
import copy
import random
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import MeteredStore, ObjectStore, StorageError

T = TypeVar("T")


# --- the reference ---------------------------------------------------------------


class Model(InMemorySaver):
    """``InMemorySaver`` with the documented semantics of copy and prune."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint, blob and write of the source, under the target's id."""
        for ns, cps in list(self.storage.get(source_thread_id, {}).items()):
            for cid, (cp, md, parent) in list(cps.items()):
                self.storage[target_thread_id][ns][cid] = (cp, md, parent)
        for (t, ns, ch, v), blob in list(self.blobs.items()):
            if t == source_thread_id:
                self.blobs[(target_thread_id, ns, ch, v)] = blob
        for (t, ns, cid), writes in list(self.writes.items()):
            if t == source_thread_id:
                self.writes[(target_thread_id, ns, cid)] = dict(writes)

    def prune(self, thread_ids: Iterable[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` with ``keep_last=1``, as spec §6.9 defines it.

        The newest root checkpoint stays, and of each subgraph namespace the
        newest checkpoint that belongs to it (a subgraph checkpoint belongs to
        the newest root checkpoint whose id is not greater, or to the oldest
        root checkpoint if it precedes them all). A thread without root
        checkpoints keeps the newest checkpoint of each namespace. Kept
        checkpoints keep their writes.
        """
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            namespaces = self.storage.get(thread_id, {})
            roots = sorted(namespaces.get("", {}))
            for ns, cps in namespaces.items():
                if not cps:
                    continue
                if not roots or ns == "":
                    keep = {max(cps)}
                else:
                    head = roots[-1]

                    def owner(x: str, roots: list[str] = roots) -> str:
                        earlier = [r for r in roots if r <= x]
                        return earlier[-1] if earlier else roots[0]

                    mine = [c for c in cps if owner(c) == head]
                    keep = {max(mine)} if mine else set()
                for cid in [c for c in cps if c not in keep]:
                    del cps[cid]
                    self.writes.pop((thread_id, ns, cid), None)


# --- driving ---------------------------------------------------------------------


@dataclass
class Redrive:
    """Counts of :func:`redrive` over a test."""

    calls: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)


def redrive(stats: Redrive, call: Callable[[], T], *, attempts: int = 200) -> T:
    """Run ``call`` until it stops raising :class:`StorageError`.

    Only storage errors are retried: anything else (a conflict, a corrupt
    object) fails the test at once.
    """
    stats.calls += 1
    for _ in range(attempts - 1):
        try:
            return call()
        except StorageError as exc:
            stats.failures += 1
            if len(stats.errors) < 5:
                stats.errors.append(str(exc))
    return call()


def config(thread: str, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put_values(
    saver: ObjectStoreSaver,
    thread: str,
    values: dict[str, Any],
    *,
    ns: str = "",
    parent: dict | None = None,
    metadata: dict | None = None,
    checkpoint_id: str | None = None,
) -> dict:
    """Put a root-or-``ns`` checkpoint of ``thread`` holding ``values`` (each at version 1).

    Its parent is ``parent`` (a config ``put`` returned); its id is new unless given.
    """
    config: dict = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    if checkpoint_id is not None:
        cp["id"] = checkpoint_id
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {name: 1 for name in values}
    return saver.put(config, cp, metadata or {"step": 0}, dict(cp["channel_versions"]))


def checkpoint_id(n: int) -> str:
    """Time-ordered ids, like LangGraph's, from a counter."""
    return f"1f0{n:05x}-0000-6000-8000-{n:012x}"


# --- comparing -------------------------------------------------------------------


def _tuple_view(t: CheckpointTuple | None) -> Any:
    if t is None:
        return None
    cp = dict(t.checkpoint)
    cp["channel_values"] = dict(cp.get("channel_values", {}))
    parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
    writes = sorted((w[0], w[1], repr(w[2])) for w in t.pending_writes or [])
    return (cp, dict(t.metadata), parent, writes)


def snapshot(saver: BaseCheckpointSaver, threads: Iterable[str]) -> dict[str, Any]:
    """Everything ``list`` returns for the threads, by (thread, ns, id)."""
    out: dict[str, Any] = {}
    for thread in threads:
        for t in saver.list({"configurable": {"thread_id": thread}}):
            c = t.config["configurable"]
            out[f"{thread!r}|{c['checkpoint_ns']!r}|{c['checkpoint_id']}"] = _tuple_view(t)
    return out


def latest_view(saver: BaseCheckpointSaver, thread: str, ns: str = "") -> Any:
    return _tuple_view(saver.get_tuple(config(thread, ns)))


def assert_agree(ours: BaseCheckpointSaver, model: BaseCheckpointSaver, threads: Any) -> int:
    """Assert ``list`` and latest ``get_tuple`` agree; return checkpoints compared."""
    a, b = snapshot(ours, threads), snapshot(model, threads)
    assert a.keys() == b.keys(), (sorted(a.keys() ^ b.keys()))[:5]
    for k in a:
        assert a[k] == b[k], k
    for thread in threads:
        namespaces = {k.split("|")[1] for k in a if k.startswith(f"{thread!r}|")}
        for ns_repr in namespaces:
            ns = eval(ns_repr)  # repr of a str we produced ourselves
            assert latest_view(ours, thread, ns) == latest_view(model, thread, ns)
    return len(a)


# --- integrity -------------------------------------------------------------------


def all_keys(store: ObjectStore, prefix: str = "") -> list[str]:
    out: list[str] = []
    after = None
    while True:
        page = store.list(prefix, start_after=after)
        out += [o.key for o in page.objects]
        if not page.truncated or not page.objects:
            return out
        after = page.objects[-1].key


def check_integrity(store: ObjectStore) -> int:
    """Read every checkpoint of the store with a fresh saver; return how many.

    A fresh saver has no memory, so each manifest, each of its writes and
    every object they reach is fetched, hash-checked and decoded; a missing or
    corrupt object raises. Uses ``verify`` when the saver has it.
    """
    with ObjectStoreSaver(store) as fresh:
        verify = getattr(fresh, "verify", None)
        if verify is not None:
            report = verify(read_data=True)
            assert report.ok, report.to_dict()
        return sum(1 for _ in fresh.list(None))


# --- a workload ------------------------------------------------------------------


def _message(i: int) -> Any:
    text = f"turn {i}: " + "lorem ipsum dolor sit amet " * (8 + i % 5)
    if i % 2:
        return AIMessage(content=text, id=f"ai-{i}")
    return HumanMessage(content=text, id=f"human-{i}")


@dataclass
class Workload:
    """A deterministic chat-like run over several threads and namespaces.

    Step ``i`` appends a message to the thread's ``messages`` list (stored in
    chunks once long), bumps a counter, sometimes stores a 3 KB blob (a value
    object) or a 300 KB blob (parts), then records two regular writes and,
    every fifth step, a special write for the new checkpoint.
    """

    threads: list[str]
    namespaces: list[str] = field(default_factory=lambda: ["", "sub:1"])
    heads: dict[tuple[str, str], tuple[str, Checkpoint]] = field(default_factory=dict)
    n: int = 0

    def step(self) -> tuple[RunnableConfig, Checkpoint, dict[str, Any], dict[str, int]]:
        i = self.n
        self.n += 1
        thread = self.threads[i % len(self.threads)]
        ns = self.namespaces[(i // len(self.threads)) % len(self.namespaces)]
        head = self.heads.get((thread, ns))
        if head is None:
            parent_id, cp = None, empty_checkpoint()
        else:
            parent_id, cp = head[0], copy.deepcopy(head[1])
        cp["id"] = checkpoint_id(i + 1)
        values = cp["channel_values"]
        versions = cp["channel_versions"]
        new: dict[str, int] = {}

        def set_(name: str, value: Any) -> None:
            values[name] = value
            new[name] = int(versions.get(name, 0)) + 1
            versions[name] = new[name]

        set_("messages", [*values.get("messages", []), _message(i)])
        set_("counter", i)
        if i % 7 == 3:
            set_("blob", bytes([i % 251]) * 3000)
        if i % 97 == 50:
            set_("big", f"{i}".encode() * 100_000)
        self.heads[(thread, ns)] = (cp["id"], copy.deepcopy(cp))
        md = {"source": "loop", "step": i, "parents": {}}
        return config(thread, ns, parent_id), cp, md, new

    def writes(self, cfg: RunnableConfig, i: int) -> list[tuple[list[tuple[str, Any]], str]]:
        calls: list[tuple[list[tuple[str, Any]], str]] = [
            ([("messages", _message(10_000 + i)), ("counter", i)], f"task-{i}")
        ]
        if i % 5 == 0:
            calls.append(([("__error__", f"boom {i}")], f"task-{i}"))
        return calls


def run_workload(
    ours: ObjectStoreSaver,
    model: Model,
    work: Workload,
    steps: int,
    stats: Redrive,
    *,
    api: str = "sync",
) -> list[RunnableConfig]:
    """Drive ``steps`` steps into both savers; return the stored configs.

    ``api="async"`` drives ``aput``/``aput_writes`` on an event loop of its own
    (the store's coroutines), ``"sync"`` the blocking methods.
    """
    loop = asyncio.new_event_loop() if api == "async" else None

    def put(*args: Any) -> RunnableConfig:
        if loop is not None:
            return loop.run_until_complete(ours.aput(*args))
        return ours.put(*args)

    def put_writes(*args: Any) -> None:
        if loop is not None:
            loop.run_until_complete(ours.aput_writes(*args))
        else:
            ours.put_writes(*args)

    stored: list[RunnableConfig] = []
    try:
        for _ in range(steps):
            cfg, cp, md, new = work.step()
            i = work.n - 1
            saved = redrive(stats, lambda: put(cfg, cp, md, new))  # noqa: B023
            model.put(cfg, cp, md, new)
            stored.append(saved)
            for writes, task in work.writes(saved, i):
                redrive(stats, lambda: put_writes(saved, writes, task))  # noqa: B023
                model.put_writes(saved, writes, task)
    finally:
        if loop is not None:
            loop.close()
    return stored


def counting_chat(saver: Any) -> Any:
    """A one-node chat graph whose bot answers with the number of messages it read."""

    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"read {len(state['messages'])} messages")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    return builder.compile(checkpointer=saver)


def word_text(nchars: int, seed: int, *, unicode: bool = False) -> str:
    """Word-like text of exactly ``nchars`` characters (compressible like prose).

    With ``unicode``, 2-, 3- and 4-byte characters in UTF-8 too.
    """
    rng = random.Random(seed)
    letters = "abcdefghij" + ("é中😀ß" if unicode else "")
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(500)]
    out: list[str] = []
    size = 0
    while size <= nchars:  # the joined words are one space shorter than ``size``
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    text = " ".join(out)[:nchars]
    assert len(text) == nchars
    return text


def tool_turn(payload: str) -> list[Any]:
    """A turn's input messages: a question, a tool call, and the tool's ``payload`` result."""
    return [
        HumanMessage("fetch the report"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "call-1"}]),
        ToolMessage(payload, tool_call_id="call-1"),
    ]


def traced_peak(fn: Callable[[], T]) -> tuple[int, T]:
    """Peak traced memory (bytes above the start) while ``fn`` runs, and its result."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base, out


class Crash(Exception):
    """Raised by :class:`CrashAfter`: the process stops here."""


class CrashAfter(MeteredStore):
    """A store whose PUTs and DELETEs fail (:class:`Crash`) after the first ``budget`` ones."""

    def __init__(self, inner: ObjectStore, budget: int) -> None:
        super().__init__(inner)
        self.budget = budget

    def _spend(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise Crash

    def put(self, *a: Any, **kw: Any) -> None:
        self._spend()
        super().put(*a, **kw)

    def delete(self, *a: Any, **kw: Any) -> None:
        self._spend()
        super().delete(*a, **kw)
