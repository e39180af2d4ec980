"""Workloads 1 and 1b: a scripted 30-turn chat, bytes and requests of every turn."""

from __future__ import annotations

from typing import Any

from bench import graphs
from bench.savers import Env, SaverSpec
from bench.workloads.common import Delay, bytes_row, cfg, chat_turns, mean
from bench.workloads.sizes import Sizes

#: LangGraph's durability modes: when a run's checkpoints and writes are stored.
DURABILITY_MODES = ("sync", "async", "exit")
#: Turns of the chat measured in each durability mode (a thread each).
DURABILITY_TURNS = 10


def run_chat(
    spec: SaverSpec,
    env: Env,
    sizes: Sizes,
    script: graphs.Script,
    *,
    durability: bool = False,
) -> dict[str, Any]:
    """Workloads 1 / 1b: a scripted chat under the injected round trip.

    With ``durability``, the chat's first turns are run again on a fresh
    thread in each of LangGraph's durability modes, and their requests per
    turn are reported too (``durability``: mode -> requests by operation per
    turn).
    """
    with spec.open_sync(env) as h, Delay(env, sizes.delay_ms):
        graph = graphs.chat_graph(h.saver, script)
        rows = chat_turns(h, graph, "chat", script, range(sizes.chat_turns))
        final = graph.get_state(cfg("chat")).values["messages"]
        modes = {}
        if durability:
            turns = min(DURABILITY_TURNS, sizes.chat_turns)
            for mode in DURABILITY_MODES:
                measured_rows = chat_turns(
                    h, graph, f"durability-{mode}", script, range(turns), durability=mode
                )
                modes[mode] = _per_turn(measured_rows)
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
    if modes:
        out["durability"] = modes
    if len(written) >= 30:
        out["flatness"] = mean(written[25:30]) / mean(written[5:10])
        ratios = [w / r for w, r in zip(written, raw, strict=True)]
        out["bytes_over_raw_turns_5_9"] = mean(ratios[5:10])
        out["bytes_over_raw_turns_25_29"] = mean(ratios[25:30])
    return out


def _per_turn(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests by operation, and bytes each way, per turn of measured rows."""
    n = len(rows)
    requests: dict[str, float] = {}
    for r in rows:
        for op, k in r["requests"].items():
            requests[op] = requests.get(op, 0) + k / n
    return {
        "turns": n,
        "requests_per_turn": requests,
        "bytes_sent_per_turn": sum(r["bytes_sent"] for r in rows) / n,
        "bytes_received_per_turn": sum(r["bytes_received"] for r in rows) / n,
    }
