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

    The method runs the plan ``build`` returns with the blocking driver, as the
    call ``build.__name__`` (:class:`~objstore_saver.telemetry.Call`, given
    the attributes ``build`` returns); the twin with the asyncio driver, as
    ``"a" + build.__name__``. ``list`` (and ``alist``) iterate what the plan emits.
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
    """``method`` named and documented as ``like``, its coroutine twin as ``method.twin``.

    The twin is named ``"a" + like.__name__`` (the ``aget_tuple`` of ``get_tuple``).
    """
    functools.update_wrapper(method, like)
    functools.update_wrapper(twin, like)
    twin.__name__ = "a" + like.__name__
    twin.__qualname__ = like.__qualname__.removesuffix(like.__name__) + twin.__name__
    twin.__doc__ = f"Async :meth:`{like.__name__}`."
    method.twin = twin
    return method


class ObjectStoreSaver(OnObjectStore, BaseCheckpointSaver[str | int]):
    """A LangGraph checkpoint saver that stores increments in an object store.

    Checkpoints are create-only manifests; channel values are content-addressed
    objects of their thread, shared by every checkpoint that holds them; lists
    such as ``messages`` are stored in chunks so an appended message writes only
    what is new. The on-storage format is ``docs/spec.md``.

    The saver offers LangGraph's complete sync and async API on one instance, so
    the same object serves ``graph.invoke`` and ``graph.ainvoke``.

    Args:
        store: The storage backend (:class:`~objstore_saver.storage.Boto3S3Store`,
            :class:`~objstore_saver.storage.LocalStore`, or any
            :class:`~objstore_saver.storage.ObjectStore`).
        serde: LangGraph serializer; defaults to ``JsonPlusSerializer``.
        max_workers: Requests run in parallel by one batch, and in total.
        object_cache_bytes: Bound of the in-process memory of fetched objects.
        remembered_checkpoints: How many checkpoints' channel entries are kept
            so a child checkpoint reuses them without serializing.
        prune_grace: Default ``min_age`` of :meth:`prune`: values younger than this
            are never marked for the sweep.
        sweep_delay: A prune sweeps (deletes) only objects marked by an earlier
            run at least this long ago; a thread with a younger mark is left
            alone. Must be at least ``reuse_window`` (spec §6.9).
        reuse_window: W of spec §6.9: the saver skips writing an object it
            believes stored only if it confirmed that within W/2, and a put
            that takes longer than W/2 re-confirms before its manifest.
        tracer_provider: OpenTelemetry ``TracerProvider`` of the call and
            request spans; ``None`` uses the global one (a no-op until the
            application configures an SDK). See ``docs/observability.md``.
        client_encryption: Encrypt every thread with a key of its own
            (``docs/encryption.md``): a
            :class:`~objstore_saver.crypto.ClientEncryption`, ``None`` (the
            default) for the environment's ``OBJSTORE_SAVER_ENCRYPTION_KEY``
            if set, ``False`` for none. An encrypting saver refuses to read
            a thread written in clear, and the reverse.
        replica_lag: The bucket is a replica that receives objects this long
            (a ``timedelta`` or seconds; S3 RTC: 15 minutes) after what
            references them: a checkpoint whose objects are not all there yet
            is read as not replicated yet, and the newest complete one is the
            latest (``docs/replication.md``). ``None`` (the default): a
            missing object is corruption and raises.

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

        LangGraph calls this when compiling a graph, with the types of its
        state. The clone shares this saver's store, workers and memories.
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
        """The context the saver's plans run with (serde, caches, reuse window).

        For operator jobs that run the saver's plans themselves, e.g. a prune of
        threads they listed in one flat scan (:mod:`objstore_saver.ops`).
        """
        return self._ctx

    def stats(self) -> SaverStats:
        """Counters of this saver's calls and storage requests since creation or reset.

        Counted whether or not OpenTelemetry is configured; thread-safe. Clones
        made by :meth:`with_allowlist` share them. ``later - earlier`` gives the
        work in between; ``.as_dict()`` is JSON-serializable.

        With client-side encryption they include the sealing layer's work:
        its key objects' requests and the envelopes' bytes (a long-term
        store built on this saver's store shares that layer, and its key
        objects' requests count here too).
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

        ``keep_latest`` keeps each thread's newest ``keep_last`` root checkpoints,
        for each of them the newest checkpoint of every subgraph namespace
        written during its run, and the ancestors a ``DeltaChannel`` of a kept
        checkpoint replays; it deletes the other checkpoints and their writes.
        Values no kept checkpoint reaches are marked, and deleted by a later
        run at least ``sweep_delay`` after, if still unreferenced then.
        ``delete`` (or LangGraph's ``delete_all``) removes the threads entirely.

        With ``idle_for``, a thread whose newest root checkpoint is older than
        that (decided from one LIST, no read) and that nothing else wrote to
        since is idle: it is deleted (``idle_action="delete"``) or reduced to
        its latest checkpoint (``"keep_latest"``, two-phase). Ages are the
        store's ``LastModified`` of manifests.

        Args:
            thread_ids: Threads to prune.
            keep_last: Root checkpoints kept per thread (at least 1); None
                (only with ``idle_for``) leaves threads that are not idle alone.
            min_age: Seconds; values younger than this are never marked.
                Defaults to the saver's ``prune_grace``.
            dry_run: Only report what would be deleted and marked.
            strategy: ``"keep_latest"``, ``"delete"`` or ``"delete_all"``.
            older_than: Seconds; no checkpoint younger than this is deleted,
                root or subgraph (those beyond ``keep_last`` go once this old).
            idle_for: Seconds without a write after which a thread is idle.
            idle_action: ``"delete"`` or ``"keep_latest"``, for idle threads.
            tombstone_window: Seconds a deleted thread's tombstones are kept
                (default 30 days); then a thread holding nothing else loses them.

        Returns:
            A JSON-serializable report: totals (``checkpoints_kept``,
            ``checkpoints_deleted``, ``writes_deleted``, ``objects_marked``,
            ``bytes_marked``, ``objects_swept``, ``bytes_swept``,
            ``marks_executed``, ``objects_extracted``: embedded objects of
            deleted manifests stored alone), ``threads_deferred``,
            ``threads_idle`` and one entry per thread.

        Raises:
            ValueError: An unknown strategy or idle action (named with the
                accepted ones), or a bad ``keep_last``, duration or thread id;
                before any request.
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
        """Check the stored objects of one thread, or of every thread (an fsck).

        Every manifest and write must decode and every reference must resolve;
        by default against the listing, reading no content object. With
        ``read_data`` every content object is also read: it must hash to its
        key and be of the kind its reference expects; ``read_data_subset``
        (``"K/N"``, K from 1) reads share K of N of them. Reads the store
        itself, not this saver's memory.

        Returns:
            A :class:`~objstore_saver.plans.verify_report.VerifyReport`; ``report.ok`` is False
            when ``report.problems`` names a key at fault.
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

    :class:`ObjectStoreSaver` already implements every async method
    (``aget_tuple``, ``alist``, ``aput``...) on the event loop without
    blocking it, and is an async context manager; this subclass adds nothing
    but the name, so ``async with AsyncObjectStoreSaver.from_url(url) as saver``
    reads like LangGraph's other async savers.
    """
