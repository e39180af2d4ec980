"""`ObjectStoreSaver`: LangGraph's checkpoint saver API over an object store.

Every method is one line: it builds the plan of :mod:`objstore_saver.plans` and
hands it to the blocking or the asyncio driver. Sync and async share all logic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

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
from objstore_saver.constructors import OnObjectStore
from objstore_saver.crypto.layer import sealed
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.driver import Driver
from objstore_saver.plans.verify_report import VerifyReport
from objstore_saver.storage.base import ObjectStore, sealing_layer
from objstore_saver.telemetry import SaverStats, Telemetry

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


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
    ) -> None:
        super().__init__(serde=serde)
        if sweep_delay < reuse_window:
            raise ValueError(
                f"sweep_delay ({sweep_delay}) must be at least reuse_window ({reuse_window}): "
                "a shorter delay lets a prune delete a value a concurrent put relies on"
            )
        store, self.client_encryption = sealed(store, client_encryption)
        self.store = store
        # Its counters are part of stats(): its key objects' requests, the envelopes' bytes.
        self._sealing = sealing_layer(store)
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

    # --- sync API ----------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple: the one named by ``checkpoint_id``, else the latest."""
        return self._driver.run(plans.get_tuple(self._ctx, config), self._call("get_tuple", config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints newest first, like ``InMemorySaver.list``."""
        return self._driver.iterate(
            plans.list_checkpoints(self._ctx, config, filter=filter, before=before, limit=limit),
            self._call("list", config),
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: new values as objects, then its create-only manifest."""
        return self._driver.run(
            plans.put(self._ctx, config, checkpoint, metadata, new_versions),
            self._call("put", config, checkpoint=checkpoint),
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (first write wins; special channels replace)."""
        self._driver.run(
            plans.put_writes(self._ctx, config, writes, task_id, task_path),
            self._call("put_writes", config, task_id=task_id),
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete every object of a thread (a prefix sweep) and nothing else."""
        self._driver.run(
            plans.delete_thread(self._ctx, thread_id),
            self._call("delete_thread", thread_id=thread_id),
        )

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes whose metadata ``run_id`` is listed."""
        self._driver.run(plans.delete_for_runs(self._ctx, run_ids), self._call("delete_for_runs"))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and value of a thread to another thread."""
        self._driver.run(
            plans.copy_thread(self._ctx, source_thread_id, target_thread_id),
            self._call(
                "copy_thread", thread_id=source_thread_id, target_thread_id=target_thread_id
            ),
        )

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
    ) -> dict[str, Any]:
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
        return self._driver.run(plan, self._call("prune", threads=len(thread_ids)))

    def verify(
        self,
        thread_id: str | None = None,
        *,
        read_data: bool = False,
        read_data_subset: str | tuple[int, int] | None = None,
    ) -> VerifyReport:
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
        return self._driver.run(
            fsck.verify(
                None if thread_id is None else [thread_id],
                read_data=read_data,
                read_data_subset=read_data_subset,
            ),
            self._call("verify", thread_id=thread_id),
        )

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of delta channels along the parent chain (LangGraph beta API)."""
        return self._driver.run(
            plans.delta_channel_history(self._ctx, config, channels),
            self._call("get_delta_channel_history", config),
        )

    def get_next_version(self, current: str | int | None, channel: None = None) -> str | int:
        """Next channel version: integers for new threads, strings continue as strings."""
        return plans.next_version(current)

    # --- async API ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await self._driver.arun(
            plans.get_tuple(self._ctx, config), self._call("aget_tuple", config)
        )

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        plan = plans.list_checkpoints(self._ctx, config, filter=filter, before=before, limit=limit)
        async for item in self._driver.aiterate(plan, self._call("alist", config)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return await self._driver.arun(
            plans.put(self._ctx, config, checkpoint, metadata, new_versions),
            self._call("aput", config, checkpoint=checkpoint),
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self._driver.arun(
            plans.put_writes(self._ctx, config, writes, task_id, task_path),
            self._call("aput_writes", config, task_id=task_id),
        )

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._driver.arun(
            plans.delete_thread(self._ctx, thread_id),
            self._call("adelete_thread", thread_id=thread_id),
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._driver.arun(
            plans.delete_for_runs(self._ctx, run_ids), self._call("adelete_for_runs")
        )

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._driver.arun(
            plans.copy_thread(self._ctx, source_thread_id, target_thread_id),
            self._call(
                "acopy_thread", thread_id=source_thread_id, target_thread_id=target_thread_id
            ),
        )

    async def aprune(  # type: ignore[override]
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
    ) -> dict[str, Any]:
        """Async :meth:`prune`."""
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
        return await self._driver.arun(plan, self._call("aprune", threads=len(thread_ids)))

    async def averify(
        self,
        thread_id: str | None = None,
        *,
        read_data: bool = False,
        read_data_subset: str | tuple[int, int] | None = None,
    ) -> VerifyReport:
        """Async :meth:`verify`."""
        return await self._driver.arun(
            fsck.verify(
                None if thread_id is None else [thread_id],
                read_data=read_data,
                read_data_subset=read_data_subset,
            ),
            self._call("averify", thread_id=thread_id),
        )

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""
        return await self._driver.arun(
            plans.delta_channel_history(self._ctx, config, channels),
            self._call("aget_delta_channel_history", config),
        )


class AsyncObjectStoreSaver(ObjectStoreSaver):
    """The same saver, under the name LangGraph users look for in async code.

    :class:`ObjectStoreSaver` already implements every async method
    (``aget_tuple``, ``alist``, ``aput``...) on the event loop without
    blocking it, and is an async context manager; this subclass adds nothing
    but the name, so ``async with AsyncObjectStoreSaver.from_url(url) as saver``
    reads like LangGraph's other async savers.
    """
