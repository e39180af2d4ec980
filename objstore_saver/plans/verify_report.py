"""What ``verify`` reports: the problems it found and its counts (spec §6.11, §8.4.8).

Filled by :func:`~objstore_saver.plans.verify.verify_thread` and the long-term
store's :func:`~objstore_saver.longterm.verify.verify_store`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in the store.

    Attributes:
        key: The key at fault.
        kind: ``unreadable`` (does not decode, or a newer format), ``digest``
            (bytes do not hash to the key), ``missing`` (referenced, absent),
            ``wrong-kind`` (a reference reaches an object of another kind),
            ``shape`` (counts or sizes disagree), ``unknown-key``, or
            ``disagrees`` (a store item and its namespace's index differ).
        detail: What was found, naming the referrer where there is one.
    """

    key: str
    kind: str
    detail: str


@dataclass
class VerifyReport:
    """What :func:`~objstore_saver.verify.verify` found.

    ``ok`` is True when there are no problems.
    """

    threads: int = 0
    manifests: int = 0
    writes: int = 0
    objects: int = 0
    bytes: int = 0
    orphan_objects: int = 0
    orphan_bytes: int = 0
    orphan_writes: int = 0
    #: Manifests of epochs a tombstone ended (spec §4.11): late writes, or what a
    #: delete that stopped left. Never read; the next delete or prune removes them.
    ended_manifests: int = 0
    #: Keys of encrypted threads whose key object was deleted (a ``delete_thread``
    #: that stopped after destroying the key): unreadable by design, swept by the
    #: next delete. A thread with manifests left and no key is a problem instead.
    shredded_leftovers: int = 0
    #: Objects embedded in manifests (field ``e``, format version 2): counted
    #: here, not in ``objects``; their bytes are part of their manifests'.
    embedded_objects: int = 0
    embedded_bytes: int = 0
    #: Long-term store (spec §8): namespaces, item objects, index records and snapshots.
    store_namespaces: int = 0
    store_items: int = 0
    store_index_objects: int = 0
    #: Expired items (or index puts) a ``store-sweep`` has not removed yet.
    store_unswept: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-serializable data."""
        out = asdict(self)
        out["ok"] = self.ok
        return out
