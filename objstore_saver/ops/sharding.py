"""Splitting a bucket's threads between workers that do not talk to each other.

A shard ``K/N`` owns the threads whose key token (a function of the thread id alone,
spec §3) hashes to ``K`` modulo ``N`` (SHA-256, first 8 bytes big-endian), so N workers
agree on every thread's owner with no coordination.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from objstore_saver.errors import ConfigurationError

__all__ = ["ALL", "Shard"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based, as Kubernetes' ``JOB_COMPLETION_INDEX``)."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ConfigurationError(
                f"--shard: the shard count must be 1 or more, got {self.count!r}"
            )
        if (
            isinstance(self.index, bool)
            or not isinstance(self.index, int)
            or not 0 <= self.index < self.count
        ):
            raise ConfigurationError(
                f"--shard: the shard index must be 0 to {self.count - 1} (0-based) "
                f"for {self.count} shards, got {self.index!r}"
            )

    @classmethod
    def parse(cls, spec: str) -> Shard:
        """``"K/N"`` (K from 0 to N-1) as a shard, else a ``ConfigurationError`` naming
        ``--shard``."""
        index, sep, count = spec.strip().partition("/")
        if not sep or not index.isdigit() or not count.isdigit():
            raise ConfigurationError(
                f"--shard {spec!r}: use K/N, e.g. 0/4 for the first of 4 shards "
                "(K counts from 0, as JOB_COMPLETION_INDEX does)"
            )
        return cls(int(index), int(count))

    def owns(self, token: str) -> bool:
        """Whether this shard handles the thread whose key token is ``token``."""
        if self.count == 1:
            return True
        digest = hashlib.sha256(token.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


#: The whole bucket.
ALL = Shard()
