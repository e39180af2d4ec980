"""What every plan shares: the context of a saver and the plan type."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import SerializerProtocol

from objstore_saver.caches.facts import (
    BoundedSet,
    ElementCache,
    EntryCache,
    EpochCache,
    HeadCache,
    ObjectCache,
)
from objstore_saver.format import keys
from objstore_saver.large_value_gate import Hold, LargeValueGate
from objstore_saver.plans.requests import Batch, Emit

Step = Generator[Batch | Emit | Hold, list[Any] | None, Any]

#: How many manifests a listing reads in parallel.
LIST_READ_AHEAD = 16
#: Default reuse window W (spec §6.9), seconds.
REUSE_WINDOW = 300.0
#: How many times a put restarts its object phase before giving up (spec §6.1).
PUT_ATTEMPTS = 3


@dataclass
class Context:
    """What plans share: the serializer, the saver's memories, a write sequence.

    ``reuse_window`` is W of spec §6.9, measured by ``clock`` (monotonic seconds).
    """

    serde: SerializerProtocol
    objects: ObjectCache = field(default_factory=ObjectCache)
    entries: EntryCache = field(default_factory=EntryCache)
    elements: ElementCache = field(default_factory=ElementCache)
    heads: HeadCache = field(default_factory=HeadCache)
    epochs: EpochCache = field(default_factory=EpochCache)
    #: (thread, run) pairs whose run markers this process has written.
    marked_runs: BoundedSet = field(default_factory=BoundedSet)
    reuse_window: float = REUSE_WINDOW
    clock: Callable[[], float] = time.monotonic
    #: Seconds since 1970 (UTC) on this machine: the floor of a delete's epoch (§4.11).
    wall_clock: Callable[[], float] = time.time
    seqs: SeqSource = field(default_factory=lambda: SeqSource())
    #: One large serialized value alive at a time (spec §6.1 step 2.2).
    gate: LargeValueGate = field(default_factory=LargeValueGate)
    #: Seconds an object may arrive after what references it: the bucket is a
    #: replica (spec §6.16); None: it is not, and a missing object is corruption.
    replica_lag: float | None = None

    #: How long a remembered fact is trusted, and how long a put may take: W/2.
    trust_age: float = field(init=False)
    #: ``trust_age``, or -inf in a context made by :meth:`distrusting`.
    belief_age: float = field(init=False)

    def __post_init__(self) -> None:
        self.trust_age = self.belief_age = self.reuse_window / 2
        self.objects.clock = self.clock
        self.entries.clock = self.clock
        self.epochs.clock = self.clock

    def saw_epoch(self, thread_id: str, epoch: int, *, confirmed: bool = True) -> None:
        """Record a thread's epoch; a newer one than known drops the thread's memories (§4.11)."""
        if self.epochs.saw_thread(thread_id, epoch, confirmed=confirmed):
            pfx = keys.thread_prefix(thread_id)
            self.objects.forget_thread(pfx)
            self.entries.forget_prefix(pfx)
            self.heads.forget_thread(thread_id)

    def distrusting(self) -> Context:
        """The same memories, none believed: a slow put's retry confirms everything (§6.1)."""
        ctx = dataclasses.replace(self)
        ctx.belief_age = -math.inf
        return ctx

    def with_serde(self, serde: SerializerProtocol) -> Context:
        """The same memories, write sequence and gate, with another serializer."""
        return dataclasses.replace(self, serde=serde)


class SeqSource:
    """Sequence numbers of special writes, shared by every context of a saver."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        """A number greater than any given before, at least the clock in ns."""
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last
