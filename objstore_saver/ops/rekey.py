"""``rekey``: rewrap every data key (threads', store namespaces') under the current master key.

docs/encryption.md, "Algorithms that change"; docs/runbooks.md, "Key rotation".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from objstore_saver.crypto.names import (
    KEY_ENV,
    KEY_PREFIX,
    KEYS_ENV,
    STORE_SCOPE,
    scope_of_key_object,
    scope_path,
    split_scope,
)
from objstore_saver.crypto.settings import ClientEncryption
from objstore_saver.driver import Driver
from objstore_saver.errors import (
    ConfigurationError,
    CorruptObjectError,
    ObjectNotFoundError,
    ThreadKeyError,
    UnsupportedFormatError,
)
from objstore_saver.format import keys, store_keys
from objstore_saver.ops._common import (
    CancelCheck,
    OpsConfig,
    ProgressCallback,
    never_cancel,
    no_progress,
    redact,
    redact_error,
    secrets_kept_out,
)
from objstore_saver.ops.fanout import DEFAULT_CONCURRENCY, Fanout, blocking, check_concurrency
from objstore_saver.ops.job_cursor import Cursor, for_each_resumable, resumable_fields
from objstore_saver.ops.sharding import ALL, Shard
from objstore_saver.storage.base import MAX_LIST_PAGE, ObjectInfo, ObjectStore, PutMode, in_thread
from objstore_saver.storage.urls import store_from_url

if TYPE_CHECKING:  # the ``encryption`` extra's; loaded when a master key is configured
    from objstore_saver.crypto.master_keys import MasterKey

__all__ = ["KEY_OBJECTS", "arekey", "rekey"]

#: Where key objects live in the key store.
KEY_OBJECTS = KEY_PREFIX


def cursor_source(current: str, drop_old: bool) -> str:
    """What a rekey cursor describes: a run towards another key or mode has its own cursor."""
    mode = ", dropping the others" if drop_old else ""
    return f"key objects of this key store (threads', namespaces'), wrapped by {current}{mode}"


@dataclass
class _Row:
    """What the job did (or, in a dry run, would do) to one key object."""

    key: str
    status: str = "current"  # "rewrapped", "dropped_deleted", "vanished" or "failed"
    error: str | None = None


@dataclass
class _Job:
    """One run's stores and settings; :meth:`key_object` is the work on one key object."""

    data: ObjectStore
    key_store: ObjectStore
    masters: Sequence[MasterKey]
    apply: bool
    drop_old: bool
    secrets: Sequence[str] = ()

    async def key_object(self, listed: ObjectInfo) -> _Row:
        """Rewrap one key object: one GET, and in apply mode one PUT when it is not current.
        One that is not a key object or that no master key opens fails alone."""
        row = _Row(listed.key)
        scope = scope_of_key_object(listed.key)
        try:
            if scope is None:
                raise CorruptObjectError(
                    listed.key, "not a key object (keys/threads/<T> or keys/store/<P>/k)"
                )
            try:
                data = await self.key_store.aget(listed.key)
            except ObjectNotFoundError:
                row.status = "vanished"  # its thread was deleted since the listing
                return row
            # A KMS key's unwrap and wrap block: in a worker thread, off the loop.
            new = await in_thread(_rewrapped, data, listed.key, scope, self.masters, self.drop_old)
            if new is None:
                return row
            row.status = "rewrapped"
            if self.apply:
                await self.key_store.aput(listed.key, new, PutMode.OVERWRITE)
                if await self._thread_is_gone(listed.key, scope):
                    row.status = "dropped_deleted"
        except (CorruptObjectError, ThreadKeyError, UnsupportedFormatError) as exc:
            row.status, row.error = "failed", redact_error(exc, list(self.secrets))
        return row

    async def _thread_is_gone(self, key: str, scope: str) -> bool:
        """After a PUT: True, with the key object deleted again, when a delete ended its epoch.

        Race: a ``delete_thread`` (spec §6.6) that destroyed the key between this job's
        GET and PUT had it brought back by the PUT. So the newest tombstone (a
        namespace's clear markers, §8.4.9) is listed after the PUT: one beginning a
        later epoch means the delete happened, and the key goes again. A later delete
        destroys what the PUT wrote; no key outlives its epoch.
        """
        token, epoch = split_scope(scope)
        if token.startswith(STORE_SCOPE):
            page = await self.data.alist(store_keys.path_clears_prefix(scope_path(token)))
            clears = [c[1] for o in page.objects if (c := store_keys.clear_of(o.key)) is not None]
            ended = [max(clears)] if clears else []
        else:
            root = keys.token("checkpoint_ns", "")
            page = await self.data.alist(
                f"{keys.THREADS}{token}/checkpoints/{root}/{keys.TOMBSTONE_MARK}", limit=1
            )
            ended = [e for o in page.objects if (e := keys.tombstone_epoch_of(o.key)) is not None]
        if not ended or ended[0] <= epoch:
            return False
        await self.key_store.adelete([key])
        return True


def _rewrapped(
    data: bytes, key: str, scope: str, masters: Sequence[MasterKey], drop_old: bool
) -> bytes | None:
    from objstore_saver.crypto.thread_keys import rewrapped  # needs the encryption extra

    return rewrapped(data, key, scope, masters, drop_old=drop_old)


def _settings() -> ClientEncryption:
    settings = ClientEncryption.from_env()
    if settings is None:
        raise ConfigurationError(
            f"rekey needs the master keys: set {KEYS_ENV} to the new key and the old ones, "
            f"comma-separated, current first (or {KEY_ENV} to one key)"
        )
    return settings


async def arekey(
    config: OpsConfig | None = None,
    *,
    apply: bool = False,
    drop_old: bool = False,
    restart: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    shard: Shard = ALL,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Rewrap every key object (threads', store namespaces') under the current master key.

    docs/encryption.md, "Algorithms that change". The master keys and the key store
    come from the environment (``OBJSTORE_SAVER_ENCRYPTION_KEYS``, current first;
    ``OBJSTORE_SAVER_KEYS_URL``, default the data store). ``drop_old`` keeps the
    current master key's wrapping alone: afterwards the other keys open no data key.
    Progress, cancellation and ``shard`` work by key object.

    Returns:
        ``store``, ``key_store``, ``current_master_key`` (its name), ``apply``,
        ``dry_run``, ``drop_old``, ``key_objects`` (scanned, rewrapped (or to rewrap),
        current, failed, dropped_deleted: rewrapped while their thread was deleted,
        and deleted again; vanished: deleted since the listing), ``errors`` (key and
        error of each failed one), ``cancelled``, ``complete``, ``resumed_after``,
        ``cursor``, ``shard``, ``run``.

    Raises:
        ConfigurationError: no master key is configured, or a setting is invalid.
        JobError: a store cannot be used or a request failed (no secret in
            the message); the cursor is stored: the same command goes on.
    """
    check_concurrency(concurrency)
    config = config or OpsConfig.from_env()
    secrets = config.secrets()
    with secrets_kept_out("rekey", secrets):
        settings = await asyncio.to_thread(_settings)  # a key store's check, a KMS client
        data = await asyncio.to_thread(store_from_url, config.require_url())
        key_store = settings.key_store or data
        job = _Job(data, key_store, settings.master_keys, apply, drop_old, secrets)
        try:
            return await _run(job, restart, concurrency, shard, progress, should_cancel)
        finally:
            for store in {id(data): data, id(key_store): key_store}.values():
                aclose = getattr(store, "aclose", None)
                if aclose is not None:
                    await aclose()


rekey = blocking(arekey)


async def _run(
    job: _Job,
    restart: bool,
    concurrency: int,
    shard: Shard,
    progress: ProgressCallback,
    should_cancel: CancelCheck,
) -> dict[str, Any]:
    """The job on given stores (the tests' entry point)."""
    cursor = Cursor.of("rekey", cursor_source(job.masters[0].name, job.drop_old), shard)
    rows: list[_Row] = []
    run = Fanout()

    async def listed(after: str | None) -> AsyncGenerator[ObjectInfo, None]:
        while True:  # one flat listing, in key order: the cursor's mark needs it
            page = await job.key_store.alist(KEY_OBJECTS, start_after=after, limit=MAX_LIST_PAGE)
            run.lists += 1
            for o in page.objects:
                yield o
            if not page.truncated or not page.objects:
                return
            after = page.objects[-1].key

    def name(o: ObjectInfo) -> str:
        scope = scope_of_key_object(o.key)
        if scope is None or scope.startswith(STORE_SCOPE):
            return o.key
        token, epoch = split_scope(scope)
        thread = keys.untoken(token) or token
        return thread if epoch == 0 else f"{thread} (epoch {epoch})"

    # The driver carries the cursor's requests only.
    with contextlib.closing(Driver(job.key_store, max_workers=2)) as driver:
        complete = await for_each_resumable(
            cursor,
            driver,
            listed,
            job.key_object,
            lambda _o, row: rows.append(row),
            position=lambda o: o.key,
            token=lambda o: o.key[len(KEY_OBJECTS) :],
            shard=shard,
            restart=restart,
            apply=job.apply,
            stats=run,
            failed=lambda row: row.status == "failed",
            concurrency=concurrency,
            name=name,
            progress=progress,
            should_cancel=should_cancel,
        )
    status = [r.status for r in rows]
    failed = sorted((r for r in rows if r.error is not None), key=lambda r: r.key)
    secrets = list(job.secrets)
    counted = ("rewrapped", "current", "failed", "dropped_deleted", "vanished")
    return {
        "store": redact(job.data.location, secrets),
        "key_store": redact(job.key_store.location, secrets),
        "current_master_key": job.masters[0].name,
        "apply": job.apply,
        "dry_run": not job.apply,
        "drop_old": job.drop_old,
        **resumable_fields(run, complete, shard, cursor, keep=True),
        "key_objects": {"scanned": len(rows), **{s: status.count(s) for s in counted}},
        "errors": [{"key": r.key, "error": r.error} for r in failed],
        "run": run.to_dict(),
    }
