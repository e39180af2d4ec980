"""`FallbackSaver`: move to the bucket now, migrate the history behind it (spec §6.14).

Each method is written once, as a plan of saver calls (:class:`SaverCall`) that
:func:`~objstore_saver.storage.requests.run_steps` carries out, blocking or async.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Collection, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from objstore_saver.caches.facts import BoundedSet
from objstore_saver.format import keys
from objstore_saver.saver import ObjectStoreSaver, with_twin
from objstore_saver.storage.requests import arun_steps, run_steps

__all__ = ["FallbackSaver", "put_writes_calls"]

T = TypeVar("T")
NEW, OLD = "new", "old"


class SaverMethod(enum.Enum):
    """The methods of LangGraph's saver API a fallback plan calls."""

    GET_TUPLE = "get_tuple"
    LIST = "list"
    PUT = "put"
    PUT_WRITES = "put_writes"
    DELETE_THREAD = "delete_thread"


GET_TUPLE, LIST, PUT, PUT_WRITES, DELETE_THREAD = SaverMethod


@dataclass(frozen=True)
class SaverCall:
    """One call of a saver's API: which saver (``NEW`` or ``OLD``), which method, its arguments."""

    saver: str
    method: SaverMethod
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: A fallback plan yields a call (or a list of calls to make at once) and gets its result(s).
SaverPlan = Generator[SaverCall | list[SaverCall], Any, T]


def _blocking(saver: BaseCheckpointSaver[Any], call: SaverCall) -> Any:
    """Make ``call`` with the saver's blocking API (a listing as a list)."""
    a, kw = call.args, call.kwargs
    match call.method:
        case SaverMethod.GET_TUPLE:
            return saver.get_tuple(*a, **kw)
        case SaverMethod.LIST:
            return list(saver.list(*a, **kw))
        case SaverMethod.PUT:
            return saver.put(*a, **kw)
        case SaverMethod.PUT_WRITES:
            return saver.put_writes(*a, **kw)
        case SaverMethod.DELETE_THREAD:
            return saver.delete_thread(*a, **kw)


async def _coroutine(saver: BaseCheckpointSaver[Any], call: SaverCall) -> Any:
    """Make ``call`` with the saver's async API (a listing as a list)."""
    a, kw = call.args, call.kwargs
    match call.method:
        case SaverMethod.GET_TUPLE:
            return await saver.aget_tuple(*a, **kw)
        case SaverMethod.LIST:
            return [t async for t in saver.alist(*a, **kw)]
        case SaverMethod.PUT:
            return await saver.aput(*a, **kw)
        case SaverMethod.PUT_WRITES:
            return await saver.aput_writes(*a, **kw)
        case SaverMethod.DELETE_THREAD:
            return await saver.adelete_thread(*a, **kw)


def _planned(plan: Callable[..., SaverPlan[Any]]) -> Any:
    """A method written once, as its plan of saver calls; its async twin is ``method.twin``."""
    twin: Callable[..., Any]
    if plan.__name__ == "list":

        def method(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
            yield from run_steps(plan(self, *args, **kwargs), self._perform)

        async def twin(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
            for tup in await arun_steps(plan(self, *args, **kwargs), self._aperform):
                yield tup

    else:

        def method(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
            return run_steps(plan(self, *args, **kwargs), self._perform)

        async def twin(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
            return await arun_steps(plan(self, *args, **kwargs), self._aperform)

    return with_twin(plan, method, twin)


def _bucket(blocking: Callable[..., Any], coroutine: Callable[..., Any]) -> Any:
    """The bucket saver's method (``blocking``), with ``coroutine`` as its twin ``method.twin``."""

    def method(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
        return blocking(self.new, *args, **kwargs)

    async def twin(self: FallbackSaver, *args: Any, **kwargs: Any) -> Any:
        return await coroutine(self.new, *args, **kwargs)

    method.__name__ = method.__qualname__ = blocking.__name__
    method.__doc__ = f"The bucket's ``{blocking.__name__}``."
    return with_twin(method, method, twin)


def _ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    c = config["configurable"]
    return str(c["thread_id"]), c.get("checkpoint_ns", "") or "", c.get("checkpoint_id")


def _at(thread_id: str, ns: str, checkpoint_id: str | None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _key(thread_id: str, ns: str) -> str:
    """What settles: one namespace of one thread."""
    return f"{thread_id}\0{ns}"


def _id_of(tup: CheckpointTuple) -> str:
    return str(tup.config["configurable"]["checkpoint_id"])


class FallbackSaver(BaseCheckpointSaver[str]):
    """The bucket for every write, the old saver for what the bucket does not hold yet.

    A thread is read from ``old`` (any LangGraph saver; written only by
    :meth:`delete_thread`) until the bucket holds it. The first write to a
    thread not in the bucket yet copies the checkpoint it builds on, so the
    bucket's head descends from the old head and ``migrate`` completes the
    history behind it. ``remembered_threads``: settled (thread, namespace) pairs kept.

    Example::

        old = PostgresSaver.from_conn_string(pg_url).__enter__()
        saver = FallbackSaver(ObjectStoreSaver.from_url("s3://bucket/agents/"), old)
        graph = builder.compile(checkpointer=saver)
        # meanwhile: objstore-saver migrate --from postgres --apply
    """

    def __init__(
        self,
        new: ObjectStoreSaver,
        old: BaseCheckpointSaver[Any],
        *,
        remembered_threads: int = 65536,
    ) -> None:
        super().__init__(serde=new.serde)
        self.new = new
        self.old = old
        self._settled = BoundedSet(remembered_threads)

    @property
    def store(self) -> Any:
        """The bucket's store (where every write goes)."""
        return self.new.store

    # --- LangGraph's API: each method is its plan of saver calls ---------------

    @_planned
    def get_tuple(self, config: RunnableConfig) -> SaverPlan[CheckpointTuple | None]:
        """The checkpoint, from the bucket if it holds the thread, else from the old saver."""
        thread_id, ns, checkpoint_id = _ids(config)
        if _key(thread_id, ns) in self._settled:
            return (yield SaverCall(NEW, GET_TUPLE, (config,)))
        if checkpoint_id is not None:
            found = yield SaverCall(NEW, GET_TUPLE, (config,))
            return found if found is not None else (yield SaverCall(OLD, GET_TUPLE, (config,)))
        new_head, old_head = yield [
            SaverCall(NEW, GET_TUPLE, (config,)),
            SaverCall(OLD, GET_TUPLE, (config,)),
        ]
        if old_head is None or (new_head is not None and _id_of(new_head) == _id_of(old_head)):
            self._settled.add(_key(thread_id, ns))
            return new_head
        if new_head is None:
            return old_head
        held = yield SaverCall(NEW, GET_TUPLE, (_at(thread_id, ns, _id_of(old_head)),))
        if held is None:
            return old_head
        self._settled.add(_key(thread_id, ns))
        # The head read above may predate the old head's arrival (a migration
        # puts it last): read the bucket's head again, now that it holds it.
        return (yield SaverCall(NEW, GET_TUPLE, (config,)))

    @_planned
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> SaverPlan[list[CheckpointTuple]]:
        """Both savers' checkpoints, merged newest first (the bucket's alone once settled)."""
        options = {"filter": filter, "before": before, "limit": limit}
        if config is not None:
            thread_id, ns, _ = _ids(config)
            named_ns = "checkpoint_ns" in config["configurable"]
            if named_ns and _key(thread_id, ns) in self._settled:
                return (yield SaverCall(NEW, LIST, (config,), options))
        new, old = yield [
            SaverCall(NEW, LIST, (config,), options),
            SaverCall(OLD, LIST, (config,), options),
        ]
        seen = {(*_ids(t.config)[:2], _id_of(t)) for t in new}
        merged = new + [t for t in old if (*_ids(t.config)[:2], _id_of(t)) not in seen]
        merged.sort(key=_id_of, reverse=True)
        return merged if limit is None else merged[:limit]

    def _copied_plan(self, thread_id: str, ns: str, checkpoint_id: str | None) -> SaverPlan[None]:
        """Make sure the bucket holds checkpoint ``checkpoint_id`` (copied from the old saver)."""
        if checkpoint_id is None or _key(thread_id, ns) in self._settled:
            return None
        at = _at(thread_id, ns, checkpoint_id)
        held, tup = yield [SaverCall(NEW, GET_TUPLE, (at,)), SaverCall(OLD, GET_TUPLE, (at,))]
        if held is None and tup is not None:
            parent = None if tup.parent_config is None else _ids(tup.parent_config)[2]
            versions = dict(tup.checkpoint.get("channel_versions", {}))
            yield SaverCall(
                NEW, PUT, (_at(thread_id, ns, parent), tup.checkpoint, tup.metadata, versions)
            )
            for task_id, writes in put_writes_calls(tup.pending_writes or []):
                yield SaverCall(NEW, PUT_WRITES, (at, writes, task_id))
        if held is not None or tup is not None:
            # The bucket now holds what the namespace builds on: its head descends
            # from the old head from now on.
            self._settled.add(_key(thread_id, ns))
        return None

    @_planned
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> SaverPlan[RunnableConfig]:
        """Store a checkpoint in the bucket (its parent copied there first if needed)."""
        yield from self._copied_plan(*_ids(config))
        return (yield SaverCall(NEW, PUT, (config, checkpoint, metadata, new_versions)))

    @_planned
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> SaverPlan[None]:
        """Store pending writes in the bucket (their checkpoint copied there first if needed)."""
        yield from self._copied_plan(*_ids(config))
        yield SaverCall(NEW, PUT_WRITES, (config, writes, task_id, task_path))

    @_planned
    def delete_thread(self, thread_id: str) -> SaverPlan[None]:
        """Delete the thread in the bucket and in the old saver."""
        yield [
            SaverCall(NEW, DELETE_THREAD, (thread_id,)),
            SaverCall(OLD, DELETE_THREAD, (thread_id,)),
        ]

    delete_for_runs = _bucket(ObjectStoreSaver.delete_for_runs, ObjectStoreSaver.adelete_for_runs)
    copy_thread = _bucket(ObjectStoreSaver.copy_thread, ObjectStoreSaver.acopy_thread)
    prune = _bucket(ObjectStoreSaver.prune, ObjectStoreSaver.aprune)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str | int:
        """The bucket's version sequence."""
        return self.new.get_next_version(current, channel)

    aget_tuple = get_tuple.twin
    alist = list.twin
    aput = put.twin
    aput_writes = put_writes.twin
    adelete_thread = delete_thread.twin
    adelete_for_runs = delete_for_runs.twin
    acopy_thread = copy_thread.twin
    aprune = prune.twin

    # --- drivers -------------------------------------------------------------

    def _saver(self, name: str) -> BaseCheckpointSaver[Any]:
        return self.new if name == NEW else self.old

    def _call(self, call: SaverCall) -> Any:
        return _blocking(self._saver(call.saver), call)

    def _perform(self, step: SaverCall | list[SaverCall]) -> Any:
        """Make one call, or a list of calls one after another (their results as a list)."""
        return [self._call(c) for c in step] if isinstance(step, list) else self._call(step)

    async def _acall(self, call: SaverCall) -> Any:
        try:
            return await _coroutine(self._saver(call.saver), call)
        except NotImplementedError:
            # A saver with a blocking API only (e.g. the sync PostgresSaver).
            return await asyncio.to_thread(self._call, call)

    async def _aperform(self, step: SaverCall | list[SaverCall]) -> Any:
        """Make one call, or a list of calls at once (their results as a list)."""
        if isinstance(step, list):
            return list(await asyncio.gather(*(self._acall(c) for c in step)))
        return await self._acall(step)


def put_writes_calls(
    writes: Sequence[tuple[str, str, Any]], stored: Collection[tuple[str, int]] = frozenset()
) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Pending writes as the ``put_writes`` calls that store them: (task id, [(channel, value)]).

    Regular writes of a task go in one call (their index is their position);
    each special write (negative index) goes alone. A call is left out when
    ``stored`` already holds its (task token, index) slots: a special write
    stored again would be a second object.
    """
    regular: dict[str, list[tuple[str, Any]]] = {}
    calls: list[tuple[str, list[tuple[str, Any]]]] = []
    for task_id, channel, value in writes:
        if channel in WRITES_IDX_MAP:
            if (keys.token("task_id", task_id), WRITES_IDX_MAP[channel]) not in stored:
                calls.append((task_id, [(channel, value)]))
        else:
            regular.setdefault(task_id, []).append((channel, value))
    for task_id, task_writes in regular.items():
        tok = keys.token("task_id", task_id)
        if any((tok, i) not in stored for i in range(len(task_writes))):
            calls.append((task_id, task_writes))
    return calls
