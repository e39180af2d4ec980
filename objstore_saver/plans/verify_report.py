"""What ``verify`` reports: the problems it found and its counts (spec §6.11, §8.4.8),
and how deep it read (:class:`Depth`)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from objstore_saver.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in the store: the ``key`` at fault, ``detail`` naming the referrer.

    ``kind``: ``unreadable`` (does not decode, or a newer format), ``digest``
    (bytes do not hash to the key), ``missing`` (referenced, absent),
    ``wrong-kind`` (a reference reaches an object of another kind), ``shape``
    (counts or sizes disagree), ``unknown-key``, or ``disagrees`` (a store
    item and its namespace's index differ).
    """

    key: str
    kind: str
    detail: str


def parse_subset(spec: str | tuple[int, int]) -> tuple[int, int]:
    """``"K/N"`` (or ``(K, N)``), K from 1 to N, as ``(K, N)``; else a ConfigurationError."""
    if isinstance(spec, str):
        k, sep, n = spec.strip().partition("/")
        if not sep or not k.isdigit() or not n.isdigit():
            raise ConfigurationError(
                f"--read-data-subset {spec!r}: use K/N, e.g. 1/5 for the first of 5 shares "
                "(K counts from 1)"
            )
        spec = (int(k), int(n))
    k, n = spec
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (k, n))
    if not ints or n < 1 or not 1 <= k <= n:
        raise ConfigurationError(
            f"--read-data-subset {k}/{n}: K must be 1 to N (counting from 1), N 1 or more"
        )
    return k, n


@dataclass(frozen=True, slots=True)
class Depth:
    """How much ``verify`` reads (spec §6.11).

    The default reads every manifest and pending write (and what they embed)
    and checks every other reference against the listing, reading no content
    object (``objects/<H>``). ``read_data`` also reads and re-hashes the
    content objects, and walks into them; with ``subset`` ``(K, N)`` only those
    whose key falls in share K of N (K from 1): N runs, K = 1..N, read each
    object once.
    """

    read_data: bool = False
    subset: tuple[int, int] | None = None

    @classmethod
    def of(
        cls, read_data: bool = False, read_data_subset: str | tuple[int, int] | None = None
    ) -> Depth:
        """The depth of ``verify``'s options; a subset implies ``read_data``."""
        if read_data_subset is None:
            return cls(bool(read_data))
        k, n = parse_subset(read_data_subset)
        return cls(True, None if n == 1 else (k, n))

    @property
    def full(self) -> bool:
        """Whether every content object is read (so orphans can be counted)."""
        return self.read_data and self.subset is None

    def reads(self, key: str) -> bool:
        """Whether the content object at ``key`` is read at this depth."""
        if self.subset is None:
            return self.read_data
        k, n = self.subset
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % n == k - 1

    def __str__(self) -> str:
        if not self.read_data:
            return "default"
        return "read-data" if self.subset is None else "read-data-subset"


@dataclass
class VerifyReport:
    """What :func:`~objstore_saver.verify.verify` found, and at which ``depth``.

    ``ok`` is True when there are no problems.
    """

    threads: int = 0
    manifests: int = 0
    writes: int = 0
    #: Content objects (``objects/<H>``) read and re-hashed, and their bytes.
    objects: int = 0
    bytes: int = 0
    #: Content objects found in the listing and not read at this depth: their
    #: presence and listed size checked.
    objects_not_read: int = 0
    #: Objects no reference reaches; counted only when every object is read
    #: (``--read-data`` without a subset), else None.
    orphan_objects: int | None = 0
    orphan_bytes: int | None = 0
    orphan_writes: int = 0
    #: On a replica (spec §6.16): objects referenced and not there yet, in
    #: threads written within the replica lag. Not problems: still arriving.
    arriving: int = 0
    #: Manifests of epochs a tombstone ended (spec §4.11): late writes, or what a
    #: delete that stopped left. Never read; the next delete or prune removes them.
    ended_manifests: int = 0
    #: Keys of encrypted threads whose key a stopped ``delete_thread`` destroyed:
    #: unreadable by design, swept by the next delete.
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
    depth: Depth = field(default_factory=Depth)

    def __post_init__(self) -> None:
        if not self.depth.full:
            self.orphan_objects = self.orphan_bytes = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-serializable data: ``depth`` is ``default``,
        ``read-data`` or ``read-data-subset`` (then ``read_data_subset`` is ``K/N``)."""
        out = asdict(self)
        out["ok"] = self.ok
        out["depth"] = str(self.depth)
        subset = self.depth.subset
        out["read_data_subset"] = None if subset is None else f"{subset[0]}/{subset[1]}"
        return out
