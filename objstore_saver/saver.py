"""`ObjectStoreSaver`: LangGraph's checkpoint saver API over an object store.

Every method is one line: it builds the plan of :mod:`objstore_saver.plans` and
hands it to the blocking or the asyncio driver. Sync and async share all logic.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any

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

from objstore_saver import plans
from objstore_saver import verify as fsck
from objstore_saver.driver import Driver
from objstore_saver.memory import EntryMemory, ObjectMemory
from objstore_saver.storage.base import ObjectStore
from objstore_saver.storage.local import LocalStore
from objstore_saver.storage.s3 import S3Store
from objstore_saver.verify import VerifyReport


class ObjectStoreSaver(BaseCheckpointSaver[str | int]):
    """A LangGraph checkpoint saver that stores increments in an object store.

    Checkpoints are create-only manifests; channel values are content-addressed
    objects of their thread, shared by every checkpoint that holds them; lists
    such as ``messages`` are stored in chunks so an appended message writes only
    what is new. The on-storage format is ``docs/spec.md``.

    The saver offers LangGraph's complete sync and async API on one instance, so
    the same object serves ``graph.invoke`` and ``graph.ainvoke``.

    Args:
        store: The storage backend (:class:`~objstore_saver.storage.S3Store`,
            :class:`~objstore_saver.storage.LocalStore`, or any
            :class:`~objstore_saver.storage.ObjectStore`).
        serde: LangGraph serializer; defaults to ``JsonPlusSerializer``.
        max_workers: Requests run in parallel by one batch, and in total.
        object_cache_bytes: Bound of the in-process memory of fetched objects.
        remembered_checkpoints: How many checkpoints' channel entries are kept
            so a child checkpoint reuses them without serializing.
        prune_grace: Objects younger than this are never swept by ``prune``.

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
    ) -> None:
        super().__init__(serde=serde)
        self.store = store
        self.prune_grace = prune_grace
        self._driver = Driver(store, max_workers=max_workers)
        self._ctx = plans.Context(
            self.serde,
            objects=ObjectMemory(object_cache_bytes),
            entries=EntryMemory(remembered_checkpoints),
        )

    # --- construction --------------------------------------------------------

    @classmethod
    def from_bucket(
        cls,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        **kwargs: Any,
    ) -> ObjectStoreSaver:
        """A saver on an S3 bucket; credentials come from boto3's usual chain."""
        store = S3Store(bucket, prefix, endpoint_url=endpoint_url, region_name=region_name)
        return cls(store, **kwargs)

    @classmethod
    def from_client(
        cls, client: Any, bucket: str, prefix: str = "", **kwargs: Any
    ) -> ObjectStoreSaver:
        """A saver on an S3 bucket through an existing boto3 S3 client."""
        return cls(S3Store(bucket, prefix, client=client), **kwargs)

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str], **kwargs: Any) -> ObjectStoreSaver:
        """A saver on a local directory (created if missing); needs no server."""
        return cls(LocalStore(path), **kwargs)

    def close(self) -> None:
        """Stop the worker threads."""
        self._driver.close()

    def __enter__(self) -> ObjectStoreSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> ObjectStoreSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- sync API ----------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple: the one named by ``checkpoint_id``, else the latest."""
        return self._driver.run(plans.get_tuple(self._ctx, config))

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
            plans.list_checkpoints(self._ctx, config, filter=filter, before=before, limit=limit)
        )

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: new values as objects, then its create-only manifest."""
        return self._driver.run(plans.put(self._ctx, config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes (first write wins; special channels replace)."""
        self._driver.run(plans.put_writes(self._ctx, config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every object of a thread (a prefix sweep) and nothing else."""
        self._driver.run(plans.delete_thread(self._ctx, thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes whose metadata ``run_id`` is listed."""
        self._driver.run(plans.delete_for_runs(self._ctx, run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and value of a thread to another thread."""
        self._driver.run(plans.copy_thread(self._ctx, source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``keep_latest`` per namespace (DeltaChannel-safe), or ``delete``.

        ``keep_latest`` keeps the newest checkpoint of each namespace, plus the
        ancestors a ``DeltaChannel`` of it still replays, deletes the other
        checkpoints and their writes, then sweeps values no kept checkpoint
        reaches and that are older than ``prune_grace``.
        """
        self._driver.run(plans.prune(self._ctx, thread_ids, strategy, grace=self.prune_grace))

    def verify(self, thread_id: str | None = None) -> VerifyReport:
        """Check the stored objects of one thread, or of every thread (an fsck).

        Every manifest and write must decode, every reference must resolve to an
        object of the expected kind, and every content-addressed object must hash
        to its key. Reads the store itself, not this saver's memory.

        Returns:
            A :class:`~objstore_saver.verify.VerifyReport`; ``report.ok`` is False
            when ``report.problems`` names a key at fault.
        """
        return self._driver.run(fsck.verify(None if thread_id is None else [thread_id]))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of delta channels along the parent chain (LangGraph beta API)."""
        return self._driver.run(plans.delta_channel_history(self._ctx, config, channels))

    def get_next_version(self, current: str | int | None, channel: None = None) -> str | int:
        """Next channel version: integers for new threads, strings continue as strings."""
        return plans.next_version(current)

    # --- async API ---------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        return await self._driver.arun(plans.get_tuple(self._ctx, config))

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
        async for item in self._driver.aiterate(plan):
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
            plans.put(self._ctx, config, checkpoint, metadata, new_versions)
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self._driver.arun(plans.put_writes(self._ctx, config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._driver.arun(plans.delete_thread(self._ctx, thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._driver.arun(plans.delete_for_runs(self._ctx, run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._driver.arun(plans.copy_thread(self._ctx, source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self._driver.arun(
            plans.prune(self._ctx, thread_ids, strategy, grace=self.prune_grace)
        )

    async def averify(self, thread_id: str | None = None) -> VerifyReport:
        """Async :meth:`verify`."""
        return await self._driver.arun(fsck.verify(None if thread_id is None else [thread_id]))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""
        return await self._driver.arun(plans.delta_channel_history(self._ctx, config, channels))
