"""A bucket replicator for tests: copies objects one by one, in no order, with lag.

It plays what S3 replication, MinIO's, Ceph RGW multisite and a scheduled
``rclone copy`` do (docs/replication.md): each object on its own, in no order,
late, deletes left behind. Each new version of a key is copied: one the target
holds with the same bytes is left alone (a pair does not copy back what it
copied), one with other bytes is overwritten and recorded in
:attr:`Replicator.conflicts` (the checkpoints never write a key twice with
different bytes, so there a conflict is a finding).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from objstore_saver.storage.base import (
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStore,
    PutMode,
)

__all__ = ["BothWays", "Replicator", "ReplicatorStats", "rclone_copy"]


@dataclass
class ReplicatorStats:
    """What a :class:`Replicator` has done so far."""

    copied: int = 0
    """Objects written to the target."""
    already_there: int = 0
    """Objects the target held with the same bytes (written there, or copied the other way)."""
    deleted: int = 0
    """Keys deleted in the target because the source no longer holds them (``deletes=True``)."""
    vanished: int = 0
    """Objects deleted in the source after they were listed and before they were copied."""
    ticks: int = 0


@dataclass
class _Seen:
    due: int
    """The tick from which the object's version may be copied (its lag)."""
    version: tuple[int, float]
    """The version listed last: size and ``LastModified``."""
    copied: bool = False
    sent: bytes | None = None
    """The bytes this replicator last wrote to the target at the key."""


@dataclass
class Replicator:
    """Copies the objects of ``source`` under ``prefix`` to ``target``, as bucket replication does.

    Stepped by :meth:`tick` or on a thread of its own (:meth:`running`). ``seed``
    replays a run's order and lags. An object waits 0 to ``max_lag`` ticks (at
    random) after the tick that first lists it; at most ``per_tick`` are copied a
    tick (None: every one due). ``deletes`` also deletes from the target what was
    copied and is gone from the source (S3's delete-marker replication, off as on S3).
    """

    source: ObjectStore
    target: ObjectStore
    prefix: str = ""
    seed: int | None = None
    max_lag: int = 3
    per_tick: int | None = None
    deletes: bool = False
    stats: ReplicatorStats = field(default_factory=ReplicatorStats)
    conflicts: list[str] = field(default_factory=list)
    """Keys the target held with other bytes than the source's (then overwritten)."""
    _seen: dict[str, _Seen] = field(default_factory=dict, repr=False)
    _paused: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.max_lag < 0:
            raise ValueError(f"Replicator max_lag must be 0 or more, not {self.max_lag}")
        if self.per_tick is not None and self.per_tick < 1:
            raise ValueError(f"Replicator per_tick must be 1 or more, not {self.per_tick}")
        self._rng = random.Random(self.seed)

    def tick(self) -> int:
        """List the source, then copy the objects that are due, in random order; return how
        many were copied (none when partitioned)."""
        with self._lock:
            if self._paused:
                return 0
            self.stats.ticks += 1
            now = self.stats.ticks
            listing = {o.key: (o.size, o.last_modified.timestamp()) for o in _all_infos(self)}
            listed = set(listing)
            for key, version in listing.items():
                seen = self._seen.get(key)
                if seen is None or seen.version != version:
                    # New, or a new version of it (a key written again): copied after its lag.
                    due = now + self._rng.randint(0, self.max_lag)
                    self._seen[key] = _Seen(due, version, sent=seen and seen.sent)
            due = [k for k, s in self._seen.items() if not s.copied and s.due <= now]
            self._rng.shuffle(due)
            if self.per_tick is not None:
                due = due[: self.per_tick]
            copied = sum(self._copy(key) for key in due)
            if self.deletes:
                self._delete_gone(listed)
            return copied

    def pending(self) -> list[str]:
        """Keys listed in the source and not copied yet, sorted."""
        with self._lock:
            return sorted(k for k, s in self._seen.items() if not s.copied)

    def drain(self, max_ticks: int = 1000) -> None:
        """Tick until every object the source holds is copied (RuntimeError: partitioned, or
        objects left to copy after ``max_ticks`` ticks)."""
        if self._paused:
            raise RuntimeError(
                f"replicator {self.source.location} -> {self.target.location} is partitioned: "
                "it copies nothing"
            )
        for _ in range(max_ticks):
            self.tick()
            if not self.pending():
                # One more listing: objects written since the last one.
                self.tick()
                if not self.pending():
                    return
        raise RuntimeError(
            f"replicator {self.source.location} -> {self.target.location}: "
            f"{len(self.pending())} objects not copied after {max_ticks} ticks"
        )

    @contextlib.contextmanager
    def partitioned(self) -> Iterator[None]:
        """Copy nothing inside the block (the link between the regions is down)."""
        with self._lock:
            self._paused = True
        try:
            yield
        finally:
            with self._lock:
                self._paused = False

    @contextlib.contextmanager
    def running(self, interval: float = 0.005, max_ticks: int = 100_000) -> Iterator[None]:
        """Tick on a thread of its own, every ``interval`` seconds, inside the block.

        An error on that thread is raised when the block ends.
        """
        stop = threading.Event()
        errors: list[BaseException] = []

        def loop() -> None:
            try:
                for _ in range(max_ticks):
                    if stop.wait(interval):
                        return
                    self.tick()
            except Exception as exc:  # noqa: BLE001 -- raised in the test's thread below
                errors.append(exc)

        thread = threading.Thread(target=loop, name="replicator", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        if errors:
            raise errors[0]

    def _copy(self, key: str) -> bool:
        seen = self._seen[key]
        try:
            data = self.source.get(key)
        except ObjectNotFoundError:
            # Deleted in the source after the listing: nothing to copy.
            del self._seen[key]
            self.stats.vanished += 1
            return False
        seen.copied = True
        try:
            self.target.put(key, data, PutMode.CREATE)
        except ObjectExistsError:
            there = self.target.get(key)
            if there == data:
                self.stats.already_there += 1  # written there, or copied the other way
                return False
            if there != seen.sent:
                # Written in both regions with other bytes: like S3, the copy
                # becomes the target's version (the last to land wins).
                self.conflicts.append(key)
            self.target.put(key, data, PutMode.OVERWRITE)
        seen.sent = data
        self.stats.copied += 1
        return True

    def _delete_gone(self, listed: set[str]) -> None:
        gone = [k for k, s in self._seen.items() if s.copied and k not in listed]
        if gone:
            self.target.delete(gone)
            for key in gone:
                del self._seen[key]
            self.stats.deleted += len(gone)


@dataclass
class BothWays:
    """Two regions replicating to each other: ``a`` to ``b`` and ``b`` to ``a``."""

    a_to_b: Replicator
    b_to_a: Replicator

    @classmethod
    def between(
        cls, a: ObjectStore, b: ObjectStore, *, seed: int | None = None, **options: object
    ) -> BothWays:
        """Replicators both ways between ``a`` and ``b`` with the same ``options``."""
        rng = random.Random(seed)
        return cls(
            Replicator(a, b, seed=rng.randrange(2**32), **options),  # type: ignore[arg-type]
            Replicator(b, a, seed=rng.randrange(2**32), **options),  # type: ignore[arg-type]
        )

    def tick(self) -> int:
        """One tick each way; the objects copied."""
        return self.a_to_b.tick() + self.b_to_a.tick()

    def drain(self, max_ticks: int = 1000) -> None:
        """Tick both ways until neither has anything left to copy."""
        for _ in range(max_ticks):
            self.a_to_b.drain(max_ticks)
            self.b_to_a.drain(max_ticks)
            if not (self.a_to_b.pending() or self.b_to_a.pending()):
                return
        raise RuntimeError(f"both-way replication not settled after {max_ticks} rounds")

    @contextlib.contextmanager
    def partitioned(self) -> Iterator[None]:
        """Neither way copies inside the block."""
        with self.a_to_b.partitioned(), self.b_to_a.partitioned():
            yield


def _all_infos(rep: Replicator) -> Iterator[ObjectInfo]:
    after: str | None = None
    while True:
        page = rep.source.list(rep.prefix, start_after=after)
        yield from page.objects
        if not page.truncated or not page.objects:
            return
        after = page.objects[-1].key


#: The flags of ``rclone copy`` that matter (docs/replication.md): ``copy``,
#: never ``sync`` (a sync deletes what the other region wrote); ``--immutable``
#: fails rather than overwrite a key that differs; ``--checksum`` compares by
#: hash, not by modification time.
RCLONE_FLAGS = ("--immutable", "--checksum", "--s3-no-check-bucket", "--transfers", "8")


def rclone_copy(
    source: str,
    target: str,
    *,
    endpoint_url: str,
    region: str,
    access_key: str,
    secret_key: str,
    rclone: str = "rclone",
) -> tuple[list[str], dict[str, str]]:
    """The command and environment of ``rclone copy`` from ``source`` to ``target`` on S3.

    ``source`` and ``target`` are ``bucket/prefix`` paths of one endpoint. The
    environment configures rclone's remote and drops the AWS SDK's variables
    (rclone reads them too: a CA bundle set for another client breaks it).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "RCLONE_CONFIG_REGION_TYPE": "s3",
        "RCLONE_CONFIG_REGION_PROVIDER": "Other",
        "RCLONE_CONFIG_REGION_ENDPOINT": endpoint_url,
        "RCLONE_CONFIG_REGION_REGION": region,
        "RCLONE_CONFIG_REGION_ACCESS_KEY_ID": access_key,
        "RCLONE_CONFIG_REGION_SECRET_ACCESS_KEY": secret_key,
        "RCLONE_CONFIG_REGION_FORCE_PATH_STYLE": "true",
    }
    return [rclone, "copy", f"region:{source}", f"region:{target}", *RCLONE_FLAGS], env
