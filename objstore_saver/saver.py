"""`ObjectStoreSaver`: LangGraph's checkpoint saver API over an object store.

Each method of LangGraph's API is written once, as the plan of
:mod:`objstore_saver.plans` it runs; ``_planned`` makes it the blocking method
and its ``a…`` twin, which hand the plan to the blocking or the asyncio driver.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    SerializerProtocol,
)

from objstore_saver import plans, verify as fsck
from objstore_saver.caches.facts import EntryCache, ObjectCache
from objstore_saver.constructors import OnObjectStore, replica_lag_seconds
from objstore_saver.crypto.layer import sealed
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.driver import Driver
from objstore_saver.errors import ConfigurationError
from objstore_saver.plans.requests import Plan
from objstore_saver.plans.verify_report import VerifyReport
from objstore_saver.storage.base import ObjectStore, sealing_layer
from objstore_saver.telemetry import SaverStats, Telemetry

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

T = TypeVar("T")
#: What a saver method builds: its plan, and the attributes of its telemetry call.
_Built = tuple[Plan[T], dict[str, Any]]


def _planned(build: Callable[..., _Built[Any]]) -> Any:
    """A saver method written once, as its plan; its async twin is ``method.twin``.

    Each runs the plan with its driver, as the call of its name (``list`` iterates).
    """
    name = build.__name__
    aname = "a" + name
    twin: Callable[..., Any]
    if name == "list":

        def method(self: ObjectStoreSaver, *args: Any, **kwargs: Any) -> Any:
            plan, attrs = build(self, *args, **kwargs)
            return self._driver.iterate(plan, self._call(name, **attrs))

        async def twin(self: ObjectStoreSaver, *args: Any, **kwargs: Any) -> Any:
            plan, attrs = build(self, *args, **kwargs)
            async for item in self._driver.aiterate(plan, self._call(aname, **attrs)):
                yield item

    else:

        def method(self: ObjectStoreSaver, *args: Any, **kwargs: Any) -> Any:
            plan, attrs = build(self, *args, **kwargs)
            return self._driver.run(plan, self._call(name, **attrs))

        async def twin(self: ObjectStoreSaver, *args: Any, **kwargs: Any) -> Any:
            plan, attrs = build(self, *args, **kwargs)
            return await self._driver.arun(plan, self._call(aname, **attrs))

    return with_twin(build, method, twin)


def with_twin(like: Callable[..., Any], method: Any, twin: Any) -> Any:
    """``method`` named and documented as ``like``; ``method.twin``, its ``a…`` twin."""
    functools.update_wrapper(method, like)
    functools.update_wrapper(twin, like)
    twin.__name__ = "a" + like.__name__
    twin.__qualname__ = like.__qualname__.removesuffix(like.__name__) + twin.__name__
    twin.__doc__ = f"Async :meth:`{like.__name__}`."
    method.twin = twin
    return method


class ObjectStoreSaver(OnObjectStore, BaseCheckpointSaver[str | int]):
    """A LangGraph checkpoint saver that stores increments in an object store (``docs/spec.md``).

    One instance offers LangGraph's complete sync and async API. ``store`` is
    any :class:`~objstore_saver.storage.ObjectStore`; the other options are the
    table "Saver options" of ``docs/configuration.md``, and:

    Args:
        tracer_provider: OpenTelemetry provider of the spans; ``None``: the
            global one (``docs/observability.md``).
        client_encryption: A :class:`~objstore_saver.crypto.ClientEncryption`;
            ``None``: ``OBJSTORE_SAVER_ENCRYPTION_KEY`` if set; ``False``: none
            (``docs/encryption.md``). Clear and encrypted threads do not mix.

    Example:
        >>> saver = ObjectStoreSaver.from_directory("./agent-memory")
        >>> graph = builder.compile(checkpointer=saver)  # doctest: +SKIP
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        serde: SerializerProtocol | None = None,
        max_workers: int = 32,
        object_cache_bytes: int = 64 * 1024 * 1024,
        remembered_checkpoints: int = 4096,
        prune_grace: timedelta = timedelta(seconds=60),
        sweep_delay: timedelta = timedelta(hours=1),
        reuse_window: timedelta = timedelta(seconds=plans.REUSE_WINDOW),
        tracer_provider: TracerProvider | None = None,
        client_encryption: ClientEncryption | bool | None = None,
        replica_lag: timedelta | float | None = None,
    ) -> None:
        super().__init__(serde=serde)
        lag = replica_lag_seconds(replica_lag)
        if lag is not None and lag >= sweep_delay.total_seconds():
            raise ConfigurationError(
                f"replica_lag ({lag:g} s) must be shorter than sweep_delay ({sweep_delay}): "
                "a prune's sweep would delete an object whose manifest is still arriving"
            )
        if sweep_delay < reuse_window:
            raise ValueError(
                f"sweep_delay ({sweep_delay}) must be at least reuse_window ({reuse_window}): "
                "a shorter delay lets a prune delete a value a concurrent put relies on"
            )
        store, self.client_encryption = sealed(store, client_encryption)
        self.store = store
        # Its counters are part of stats(): its key objects' requests, the envelopes' bytes.
        self._sealing = sealing_layer(store)
        if self._sealing is not None and lag is not None:
            self._sealing.replica = True
        self.prune_grace = prune_grace
        self.sweep_delay = sweep_delay
        self._driver = Driver(store, max_workers=max_workers)
        self._telemetry = Telemetry(store, tracer_provider)
        self._call = self._telemetry.call
        self._ctx = plans.Context(
            self.serde,
            objects=ObjectCache(object_cache_bytes),
            entries=EntryCache(remembered_checkpoints),
            reuse_window=reuse_window.total_seconds(),
            replica_lag=lag,
        )

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> ObjectStoreSaver:
        """A clone whose serializer also allows ``extra_allowlist`` (msgpack types).

        It shares this saver's store, workers and memories.
        """
        clone = super().with_allowlist(extra_allowlist)
        if clone is self:
            return self
        assert isinstance(clone, ObjectStoreSaver)
        clone._ctx = self._ctx.with_serde(clone.serde)
        return clone

    # --- telemetry ------------------------------------------------------------------

    @property
    def plan_context(self) -> plans.Context:
        """The context the saver's plans run with, for jobs that run them (:mod:`~.ops`)."""
        return self._ctx

    def stats(self) -> SaverStats:
        """Counters of this saver's calls and storage requests since creation or reset.

        Thread-safe, shared with clones; ``later - earlier`` gives the work in
        between. With client-side encryption they include the sealing layer's
        key object requests and envelope bytes (``docs/observability.md``).
        """
        stats = self._telemetry.counters.snapshot()
        return stats if self._sealing is None else stats + self._sealing.counters.snapshot()

    def reset_stats(self) -> None:
        """Zero the counters of :meth:`stats`."""
        self._telemetry.counters.reset()
        if self._sealing is not None:
            self._sealing.counters.reset()

    # --- LangGraph's API: each method is its plan; ``_planned`` runs it sync and async ---

    @_planned
    def get_tuple(self, config: RunnableConfig) -> _Built[CheckpointTuple | None]:
        """Fetch a checkpoint tuple: the one named by ``checkpoint_id``, else the latest."""
        return plans.get_tuple(self._ctx, config), {"config": config}

    @_planned
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> _Built[None]:
        """List checkpoints newest first, like ``InMemorySaver.list``."""
        plan = plans.list_checkpoints(self._ctx, config, filter=filter, before=before, limit=limit)
        return plan, {"config": config}

    @_planned
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> _Built[RunnableConfig]:
        """Store a checkpoint: new values as objects, then its create-only manifest."""
        plan = plans.put(self._ctx, config, checkpoint, metadata, new_versions)
        return plan, {"config": config, "checkpoint": checkpoint}

    @_planned
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> _Built[None]:
        """Store a task's pending writes (first write wins; special channels replace)."""
        plan = plans.put_writes(self._ctx, config, writes, task_id, task_path)
        return plan, {"config": config, "task_id": task_id}

    @_planned
    def delete_thread(self, thread_id: str) -> _Built[None]:
        """Delete every object of a thread (a prefix sweep) and nothing else."""
        return plans.delete_thread(self._ctx, thread_id), {"thread_id": thread_id}

    @_planned
    def delete_for_runs(self, run_ids: Sequence[str]) -> _Built[None]:
        """Delete the checkpoints and writes whose metadata ``run_id`` is listed."""
        return plans.delete_for_runs(self._ctx, run_ids), {}

    @_planned
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> _Built[None]:
        """Copy every checkpoint, write and value of a thread to another thread."""
        plan = plans.copy_thread(self._ctx, source_thread_id, target_thread_id)
        return plan, {"thread_id": source_thread_id, "target_thread_id": target_thread_id}

    def _prune_plan(
        self,
        thread_ids: Sequence[str],
        strategy: str,
        keep_last: int | None,
        min_age: float | None,
        dry_run: bool,
        now: datetime | None = None,
        *,
        older_than: float | None = None,
        idle_for: float | None = None,
        idle_action: str = "delete",
        tombstone_window: float | None = None,
    ) -> plans.Step:
        def span(seconds: float | None) -> timedelta | None:
            return None if seconds is None else timedelta(seconds=seconds)

        return plans.prune(
            self._ctx,
            thread_ids,
            strategy,
            keep_last=keep_last,
            min_age=self.prune_grace if min_age is None else timedelta(seconds=min_age),
            sweep_delay=self.sweep_delay,
            dry_run=dry_run,
            now=now,
            older_than=span(older_than),
            idle_for=span(idle_for),
            idle_action=idle_action,
            tombstone_window=span(tombstone_window),
        )

    @_planned
    def prune(  # type: ignore[override]  # returns a report where LangGraph's returns None
        self,
        thread_ids: Sequence[str],
        *,
        keep_last: int | None = 1,
        min_age: float | None = None,
        dry_run: bool = False,
        strategy: str = "keep_latest",
        older_than: float | None = None,
        idle_for: float | None = None,
        idle_action: str = "delete",
        tombstone_window: float | None = None,
    ) -> _Built[dict[str, Any]]:
        """Prune threads, safely while agents write to them (spec §6.9).

        ``keep_latest`` keeps each thread's newest ``keep_last`` root checkpoints
        (with their runs' newest subgraph checkpoints and the ancestors a kept
        ``DeltaChannel`` replays) and deletes the rest; values no kept checkpoint
        reaches are marked, and swept by a run ``sweep_delay`` later if still
        unreferenced. ``delete`` (or ``delete_all``) removes the threads.
        With ``idle_for``, a thread not written for that long (its manifests'
        ``LastModified``) gets ``idle_action``: ``"delete"`` or ``"keep_latest"``.

        Args:
            keep_last: At least 1; None (only with ``idle_for``) leaves threads
                that are not idle alone.
            min_age: Seconds; younger values are never marked (default ``prune_grace``).
            dry_run: Only report what would be deleted and marked.
            older_than: Seconds; no younger checkpoint is deleted, root or subgraph.
            tombstone_window: Seconds a deleted thread's tombstones are kept (default 30 days).

        Returns:
            A JSON-serializable report: ``totals``, ``threads_deferred``,
            ``threads_idle`` and one entry per thread.

        Raises:
            ValueError: A bad strategy, idle action, ``keep_last``, duration or
                thread id (named), before any request.
        """
        plan = self._prune_plan(
            thread_ids,
            strategy,
            keep_last,
            min_age,
            dry_run,
            older_than=older_than,
            idle_for=idle_for,
            idle_action=idle_action,
            tombstone_window=tombstone_window,
        )
        return plan, {"threads": len(thread_ids)}

    @_planned
    def verify(
        self,
        thread_id: str | None = None,
        *,
        read_data: bool = False,
        read_data_subset: str | tuple[int, int] | None = None,
    ) -> _Built[VerifyReport]:
        """Check the stored objects of one thread, or of every thread (an fsck, spec §6.11).

        References are checked against the listing; ``read_data`` also reads
        and re-hashes every content object, ``read_data_subset`` (``"K/N"``)
        share K of N of them. Returns a :class:`VerifyReport` whose
        ``problems`` name the keys at fault.
        """
        threads = None if thread_id is None else [thread_id]
        plan = fsck.verify(
            threads,
            read_data=read_data,
            read_data_subset=read_data_subset,
            replica_lag=self._ctx.replica_lag,
        )
        return plan, {"thread_id": thread_id}

    @_planned
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> _Built[Mapping[str, DeltaChannelHistory]]:
        """Writes and seed of delta channels along the parent chain (LangGraph beta API)."""
        return plans.delta_channel_history(self._ctx, config, channels), {"config": config}

    def get_next_version(self, current: str | int | None, channel: None = None) -> str | int:
        """Next channel version: integers for new threads, strings continue as strings."""
        return plans.next_version(current)

    aget_tuple = get_tuple.twin
    alist = list.twin
    aput = put.twin
    aput_writes = put_writes.twin
    adelete_thread = delete_thread.twin
    adelete_for_runs = delete_for_runs.twin
    acopy_thread = copy_thread.twin
    aprune = prune.twin
    averify = verify.twin
    aget_delta_channel_history = get_delta_channel_history.twin


class AsyncObjectStoreSaver(ObjectStoreSaver):
    """The same saver, under the name LangGraph users look for in async code.

    :class:`ObjectStoreSaver` already implements every async method; this adds only the name.
    """
