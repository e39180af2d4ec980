"""Workload 4: a supervisor, ``Send`` fan-out to 8 workers and a subgraph."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import HumanMessage

from bench import graphs
from bench.savers import Env, SaverSpec
from bench.workloads.common import Delay, cfg, mean, measured
from bench.workloads.sizes import Sizes


def run_agent(spec: SaverSpec, env: Env, sizes: Sizes) -> dict[str, Any]:
    """Workload 4: supervisor, ``Send`` fan-out to 8 workers and a subgraph."""
    with spec.open_sync(env) as h, Delay(env, sizes.delay_ms):
        graph = graphs.agent_graph(h.saver)
        rows = []
        deadline = time.monotonic() + sizes.agent_cap_s
        for t in range(sizes.agent_turns):
            if time.monotonic() > deadline:
                break
            _, row = measured(
                h,
                lambda t=t: graph.invoke(
                    {"messages": [HumanMessage(f"task {t} " + "x" * 200)]}, cfg("agent")
                ),
            )
            rows.append(row)
        state = graph.get_state(cfg("agent")).values
    n = len(rows)
    calls = [r["saver_calls"] for r in rows]
    return {
        "meter": h.meter.kind,
        "turns": n,
        "turns_target": sizes.agent_turns,
        "results_stored": len(state["results"]),
        "results_expected": graphs.FANOUT * n,
        "checkpoints_per_turn": mean([c.get("put", 0) for c in calls]),
        "put_writes_calls_per_turn": mean([c.get("put_writes", 0) for c in calls]),
        "writes_per_turn": mean([c.get("writes", 0) for c in calls]),
        "requests_per_turn": mean([r["total_requests"] for r in rows]),
        "requests_by_op_per_turn": _per_turn_ops(rows),
        "bytes_per_turn": mean([r["bytes_sent"] for r in rows]),
        "bytes_last_turn": rows[-1]["bytes_sent"] if rows else 0,
        "wall_s_per_turn": mean([r["wall_s"] for r in rows]),
    }


def _per_turn_ops(rows: list[dict[str, Any]]) -> dict[str, float]:
    ops: dict[str, float] = {}
    for r in rows:
        for op, k in r["requests"].items():
            ops[op] = ops.get(op, 0) + k / len(rows)
    return ops
