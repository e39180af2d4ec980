"""Identifiers a config names, checked, and the channel version sequence (spec §5)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig

from objstore_saver.errors import (
    InvalidIdentifierError,
)
from objstore_saver.format import keys


@dataclass(frozen=True, slots=True)
class Scope:
    """Thread, namespace and (optional) checkpoint id named by a config."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def scope_of(config: RunnableConfig, *, need_checkpoint_id: bool = False) -> Scope:
    """Read and check the identifiers of a config."""
    conf = config.get("configurable") or {}
    if "thread_id" not in conf:
        raise InvalidIdentifierError(
            "config['configurable']['thread_id'] is required by objstore-saver"
        )
    thread_id = conf["thread_id"]
    if not isinstance(thread_id, str):
        raise InvalidIdentifierError(
            f"thread_id must be a string, got {type(thread_id).__name__} {thread_id!r}"
        )
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise InvalidIdentifierError(f"checkpoint_ns must be a string, got {ns!r}")
    cid = conf.get("checkpoint_id") or None
    if cid is not None:
        keys.reverse_id(cid)
    if need_checkpoint_id and cid is None:
        raise InvalidIdentifierError(
            f"config of thread {thread_id!r} names no checkpoint_id; writes belong to a checkpoint"
        )
    return Scope(thread_id, ns, cid)


def checkpoint_config(thread_id: str, ns: str, cid: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}


def next_version(current: str | int | float | None) -> str | int:
    """Next channel version, keeping the thread's type (spec §5)."""
    if current is None:
        return 1
    if isinstance(current, int):
        return current + 1
    if isinstance(current, float):
        return int(current) + 1
    head = int(str(current).split(".")[0]) + 1
    return f"{head:032}.{random.random():016}"
