"""A graph whose state has a DeltaChannel (the differential and prune suites run it)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph


def extend_log(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    """The delta channel's reducer: the writes appended in order."""
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class DeltaState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend_log, snapshot_frequency=3)]
    count: int


def delta_builder() -> StateGraph:
    """``tick`` then ``left`` and ``right`` in parallel, 4 rounds an invocation.

    All three append to the delta channel, so one super-step holds two writes
    of it, and the replay order (``writes_sort_key``) matters.
    """

    def tick(state: DeltaState) -> dict[str, Any]:
        n = state.get("count", 0) + 1
        filler = "x" * (1500 if n % 3 == 0 else 40)
        return {"log": [f"tick {n} {filler}"], "count": n}

    def left(state: DeltaState) -> dict[str, Any]:
        return {"log": [f"left {state['count']}"]}

    def right(state: DeltaState) -> dict[str, Any]:
        time.sleep(random.uniform(0, 0.002))
        return {"log": [f"right {state['count']}", "r" * 300]}

    def again(state: DeltaState) -> list[str] | str:
        return ["left", "right"] if state["count"] % 4 else END

    builder = StateGraph(DeltaState)
    builder.add_node("tick", tick)
    builder.add_node("left", left)
    builder.add_node("right", right)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges("tick", again, ["left", "right", END])
    # Two edges, not a join: a join's barrier set is handed to the background
    # put live and mutated by the next step, so a saver slower than
    # InMemorySaver may store a later value (a LangGraph race, not the saver's).
    builder.add_edge("left", "tick")
    builder.add_edge("right", "tick")
    return builder


def expected_log(rounds: int) -> list[str]:
    """The ``log`` of :func:`delta_builder`'s graph after ``rounds`` ticks (``start`` and
    ``more`` are the inputs of its two invocations, the second before round 5)."""
    out: list[str] = ["start"]
    for n in range(1, rounds + 1):
        if n == 5:
            out.append("more")
        out.append(f"tick {n} {'x' * (1500 if n % 3 == 0 else 40)}")
        if n % 4:
            out += [f"left {n}", f"right {n}", "r" * 300]
    return out
