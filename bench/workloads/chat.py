"""Workloads 1 and 1b: a scripted 30-turn chat, bytes and requests of every turn."""

from __future__ import annotations

from typing import Any

from bench import graphs
from bench.savers import Env, SaverSpec
from bench.workloads.common import Delay, bytes_row, cfg, chat_turns, mean
from bench.workloads.sizes import Sizes


def run_chat(spec: SaverSpec, env: Env, sizes: Sizes, script: graphs.Script) -> dict[str, Any]:
    """Workloads 1 / 1b: a scripted chat under the injected round trip."""
    with spec.open_sync(env) as h, Delay(env, sizes.delay_ms):
        graph = graphs.chat_graph(h.saver, script)
        rows = chat_turns(h, graph, "chat", script, range(sizes.chat_turns))
        final = graph.get_state(cfg("chat")).values["messages"]
    rows_bytes = [bytes_row(r) for r in rows]
    written = [r["bytes_written"] for r in rows_bytes]
    raw = [script.new_message_bytes(t) for t in range(len(rows))]
    out: dict[str, Any] = {
        "turns": rows_bytes,
        "meter": h.meter.kind,
        "total_bytes_written": sum(written),
        "total_mib": sum(written) / 2**20,
        "total_requests": sum(r["total_requests"] for r in rows),
        "raw_new_message_bytes": sum(raw),
        "bytes_over_raw": sum(written) / sum(raw),
        "messages_stored": len(final),
        "messages_expected": 2 * len(rows) + 1,
    }
    if len(written) >= 30:
        out["flatness"] = mean(written[25:30]) / mean(written[5:10])
        ratios = [w / r for w, r in zip(written, raw, strict=True)]
        out["bytes_over_raw_turns_5_9"] = mean(ratios[5:10])
        out["bytes_over_raw_turns_25_29"] = mean(ratios[25:30])
    return out
