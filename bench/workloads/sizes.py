"""The counts and caps of a run: ``FULL`` by default, ``QUICK`` with ``--quick``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    """Counts and caps of one run (``--quick`` shrinks them)."""

    chat_turns: int = 30
    long_turns: int = 1000
    long_cap_s: float = 90.0
    long_checkpoints: tuple[int, ...] = (10, 100, 1000)
    neighbour_turns: int = 3
    prune_turns: int = 30
    large_bytes: int = 20 * 2**20
    agent_turns: int = 20
    agent_cap_s: float = 45.0
    os_threads: int = 8
    thread_turns: int = 50
    thread_rounds: int = 5
    """Workload 6a runs each conversation's turns in this many rounds, savers interleaved."""
    async_conversations: tuple[int, ...] = (1, 8, 64)
    async_total_turns: int = 16
    """Turns per conversation: this divided by the conversations, at least ``async_min_turns``."""
    async_min_turns: int = 8
    """64 conversations of 2 turns were 128 turns in under a second: half of
    them first turns, and 64 new connections, the start and the tail, and
    whether a full garbage collection fell inside weighed on the rate. 8
    turns each are 512 turns, about 3.5 s: the steady state of 64 conversations."""
    async_repeats: int = 3
    """Workload 6b is measured this many times, savers interleaved; rows are totals."""
    concurrency_cap_s: float = 25.0
    """No new turn starts after this many seconds (turns in flight finish)."""
    delay_ms: float = 20.0

    def async_turns(self, conversations: int) -> int:
        """Turns each of ``conversations`` concurrent conversations runs."""
        return max(self.async_min_turns, self.async_total_turns // conversations)


FULL = Sizes()
QUICK = Sizes(
    chat_turns=6,
    long_turns=10,
    long_cap_s=4.0,
    long_checkpoints=(5, 10),
    neighbour_turns=1,
    prune_turns=4,
    large_bytes=2 * 2**20,
    agent_turns=2,
    thread_turns=1,
    async_conversations=(1, 8),
    async_total_turns=4,
    async_min_turns=1,
    async_repeats=1,
    concurrency_cap_s=8.0,
)
