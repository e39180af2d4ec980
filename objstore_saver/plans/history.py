"""The delta channel history walk (spec §6.10)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite

from objstore_saver.format import keys
from objstore_saver.plans.context import Context, Step
from objstore_saver.plans.lookup import latest_id
from objstore_saver.plans.reading import (
    effective_writes,
    fetch_entries,
    list_write_keys,
    materialize,
    read_checkpoint_manifest,
    read_writes,
)


def delta_channel_history(ctx: Context, config: RunnableConfig, channels: Sequence[str]) -> Step:
    """Plan: spec §6.10, with the return contract of LangGraph's default walk."""
    if not channels:
        return {}
    scope = keys.scope_of(config)
    cid = scope.checkpoint_id
    if cid is None:
        cid = yield from latest_id(scope)
        if cid is None:
            return {c: {"writes": []} for c in channels}
    pfx = keys.thread_prefix(scope.thread_id)
    found = yield from read_checkpoint_manifest(scope.thread_id, scope.checkpoint_ns, cid)
    target = None if found is None else found[1]
    collected: dict[str, list[PendingWrite]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    cursor_id = target.parent_checkpoint_id if target is not None else None
    while cursor_id is not None and remaining:
        found = yield from read_checkpoint_manifest(scope.thread_id, scope.checkpoint_ns, cursor_id)
        if found is None:
            break
        mkey, m = found
        (wkeys,) = yield from list_write_keys([found])
        writes = effective_writes((yield from read_writes(wkeys)))
        wanted = [w for w in writes if w.channel in remaining]
        seeded = [c for c in remaining if c in m.channels]
        entries = [w.value for w in wanted] + [m.channels[c] for c in seeded]
        got = yield from fetch_entries(ctx, pfx, entries, mkey, holders=[(mkey, m)])
        for w in reversed(wanted):
            collected[w.channel].append(
                (w.task_id, w.channel, materialize(ctx.serde, w.value, got, pfx))
            )
        for c in seeded:
            seeds[c] = materialize(ctx.serde, m.channels[c], got, pfx)
            remaining.discard(c)
        cursor_id = m.parent_checkpoint_id
    result: dict[str, DeltaChannelHistory] = {}
    for c in channels:
        entry: DeltaChannelHistory = {"writes": list(reversed(collected[c]))}
        if c in seeds:
            entry["seed"] = seeds[c]
        result[c] = entry
    return result
