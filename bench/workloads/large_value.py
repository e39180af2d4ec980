"""Workload 3: a chat turn carrying a large ``ToolMessage``, and reading it back."""

from __future__ import annotations

import tracemalloc
from typing import Any

from bench import graphs
from bench.savers import Env, SaverSpec
from bench.workloads.common import Delay, cfg, chat_turns, compact, measured
from bench.workloads.sizes import Sizes


def run_large(spec: SaverSpec, env: Env, sizes: Sizes, payload: str) -> dict[str, Any]:
    """Workload 3: a chat turn carrying a large ``ToolMessage``."""
    with spec.open_sync(env) as h, Delay(env, sizes.delay_ms):
        graph = graphs.chat_graph(h.saver)
        chat_turns(h, graph, "big", graphs.SEED, range(1))
        inputs = graphs.tool_turn_inputs(payload)
        tracemalloc.start()
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        try:
            _, row = measured(h, lambda: graph.invoke({"messages": inputs}, cfg("big")))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        _, read = measured(h, lambda: h.saver.get_tuple(cfg("big")))
        state = graph.get_state(cfg("big")).values["messages"]
        tool = [m for m in state if m.type == "tool"]
    return {
        "payload_bytes": len(payload),
        "meter": h.meter.kind,
        "write": compact(row)
        | {
            "largest_request_body": row["largest_request_body"],
            "largest_response_body": row["largest_response_body"],
        },
        "read": compact(read) | {"largest_response_body": read["largest_response_body"]},
        "largest_body": max(
            row["largest_request_body"], row["largest_response_body"], read["largest_response_body"]
        ),
        "peak_traced_bytes": peak - base,
        "peak_over_payload": (peak - base) / len(payload),
        "round_trip_equal": len(tool) == 1 and tool[0].content == payload,
    }
