"""The settings a LangGraph server hands its custom checkpointer and store, checked.

The server (``langgraph-api`` 0.16.7) calls the factory with no arguments; its
blocks arrive as environment variables (``LANGGRAPH_CHECKPOINTER``,
``LANGGRAPH_THREAD_TTL``, ``LANGGRAPH_STORE``). They are read as the server
reads them, refused by name when invalid (``docs/langgraph-server.md``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objstore_saver.constructors import replica_lag_seconds
from objstore_saver.errors import ConfigurationError

__all__ = [
    "LANGGRAPH_CHECKPOINTER",
    "LANGGRAPH_STORE",
    "LANGGRAPH_THREAD_TTL",
    "TTL_STRATEGIES",
    "ThreadTTL",
    "checkpointer_block",
    "describe_ttl",
    "store_options",
    "thread_ttl",
]

logger = logging.getLogger("objstore_saver.config")

#: The server's copy of ``langgraph.json``'s ``checkpointer`` block, as JSON.
LANGGRAPH_CHECKPOINTER = "LANGGRAPH_CHECKPOINTER"
#: The ``store`` block of ``langgraph.json``, as a LangGraph server passes it on.
LANGGRAPH_STORE = "LANGGRAPH_STORE"
#: The server's thread TTL override: minutes, or a JSON object like ``checkpointer.ttl``.
LANGGRAPH_THREAD_TTL = "LANGGRAPH_THREAD_TTL"
#: Names the server's runtime; ``langgraph dev`` sets ``inmem``.
_RUNTIME_EDITION = "LANGGRAPH_RUNTIME_EDITION"

#: The strategies ``checkpointer.ttl.strategy`` accepts (the server's ``ThreadTTLConfig``).
TTL_STRATEGIES = ("delete", "keep_latest")
_TTL_KEYS = frozenset({"strategy", "default_ttl", "ttl", "sweep_interval_minutes", "sweep_limit"})


@dataclass(frozen=True, slots=True)
class ThreadTTL:
    """A thread TTL as the server will apply it.

    ``default_ttl``: minutes after a thread's last update, or None (only threads
    created with their own TTL expire); ``source``: the setting it came from.
    """

    strategy: str
    default_ttl: float | None
    sweep_interval_minutes: float | None
    sweep_limit: int | None
    source: str


def _json_setting(name: str, env: Mapping[str, str]) -> Any:
    """The JSON value of the variable ``name``, or ``{}`` when it is not set."""
    raw = env.get(name, "").strip()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} is not JSON: {exc}") from exc


def checkpointer_block(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return the server's ``checkpointer`` block, or ``{}`` outside a server."""
    block = _json_setting(LANGGRAPH_CHECKPOINTER, os.environ if environ is None else environ)
    if not isinstance(block, dict):
        raise ConfigurationError(
            f"{LANGGRAPH_CHECKPOINTER} is not a JSON object (langgraph.json's "
            f"'checkpointer' block): found {type(block).__name__}"
        )
    return block


def checkpointer_options(block: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The saver options of the ``checkpointer`` block (default :func:`checkpointer_block`):
    ``replica_lag`` (seconds, ``docs/replication.md``)."""
    return _replica_lag(checkpointer_block() if block is None else block, "checkpointer")


def _replica_lag(block: Mapping[str, Any], name: str) -> dict[str, Any]:
    if "replica_lag" not in block:
        return {}
    return {"replica_lag": replica_lag_seconds(block["replica_lag"], f"{name}.replica_lag")}


def store_options(
    settings: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The :class:`~objstore_saver.ObjectStoreStore` options of the ``store`` block
    (``ttl``, ``index``, ``replica_lag``); default ``LANGGRAPH_STORE``."""
    if settings is None:
        settings = _json_setting(LANGGRAPH_STORE, os.environ if environ is None else environ)
    if not isinstance(settings, Mapping):
        raise ConfigurationError(
            f"the store block of langgraph.json must be an object: {settings!r}"
        )
    options: dict[str, Any] = {
        name: dict(settings[name]) for name in ("ttl", "index") if settings.get(name)
    }
    return options | _replica_lag(settings, "store")


def _number(source: str, name: str, value: object, *, integer: bool = False) -> float | None:
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        # The server's own parsing (pydantic, lax) turns "60" into 60.0.
        with contextlib.suppress(ValueError):
            number = float(value)
    if (
        number is None
        or not math.isfinite(number)
        or number <= 0
        or (integer and not number.is_integer())
    ):
        kind = "a positive integer" if integer else "a positive number of minutes"
        raise ConfigurationError(f"{source}.{name} must be {kind} or null, not {value!r}")
    return number


def _from_mapping(source: str, ttl: Mapping[str, Any]) -> ThreadTTL:
    unknown = sorted(set(ttl) - _TTL_KEYS)
    if unknown:
        # The server drops keys it does not know without a word; a newer
        # server may know more: say so, do not refuse to start.
        logger.warning(
            "checkpointer: %s has settings this version does not know: %s (known: %s)",
            source,
            ", ".join(unknown),
            ", ".join(sorted(_TTL_KEYS)),
        )
    strategy = ttl.get("strategy", "delete")
    if strategy not in TTL_STRATEGIES:
        raise ConfigurationError(
            f"{source}.strategy must be one of {', '.join(TTL_STRATEGIES)}, not {strategy!r}"
        )
    # The server reads "ttl" before "default_ttl" (langgraph_api.grpc.ops.threads).
    key = "ttl" if "ttl" in ttl else "default_ttl"
    limit = _number(source, "sweep_limit", ttl.get("sweep_limit"), integer=True)
    return ThreadTTL(
        strategy=strategy,
        default_ttl=_number(source, key, ttl.get(key)),
        sweep_interval_minutes=_number(
            source, "sweep_interval_minutes", ttl.get("sweep_interval_minutes")
        ),
        sweep_limit=None if limit is None else int(limit),
        source=source,
    )


def thread_ttl(
    block: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> ThreadTTL | None:
    """Return the thread TTL the server applies, or None when there is none.

    The server's precedence: ``LANGGRAPH_THREAD_TTL`` (minutes: ``strategy="delete"``
    every 5.1 minutes; or a JSON object), else the ``ttl`` of ``block`` (default
    :func:`checkpointer_block`). Raises ConfigurationError naming a bad setting.
    """
    env = os.environ if environ is None else environ
    override = env.get(LANGGRAPH_THREAD_TTL, "").strip()
    if override:
        if override.startswith("{"):
            parsed = _json_setting(LANGGRAPH_THREAD_TTL, env)
            if not isinstance(parsed, dict):
                raise ConfigurationError(f"{LANGGRAPH_THREAD_TTL} is not a JSON object")
            return _from_mapping(LANGGRAPH_THREAD_TTL, parsed)
        try:
            minutes = float(override)
        except ValueError:
            raise ConfigurationError(
                f"{LANGGRAPH_THREAD_TTL} must be minutes or a JSON object, not {override!r}"
            ) from None
        return _from_mapping(
            LANGGRAPH_THREAD_TTL,
            {"strategy": "delete", "default_ttl": minutes, "sweep_interval_minutes": 5.1},
        )
    settings = checkpointer_block(env) if block is None else block
    ttl = settings.get("ttl")
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigurationError(
            f"checkpointer.ttl must be an object with strategy, default_ttl and "
            f"sweep_interval_minutes, not {ttl!r}"
        )
    return _from_mapping("checkpointer.ttl", ttl)


def describe_ttl(ttl: ThreadTTL, environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Say what the server will do with ``ttl`` here: a log level and a message."""
    env = os.environ if environ is None else environ
    setting = (
        f"{ttl.source}: strategy={ttl.strategy}, default_ttl={ttl.default_ttl} min, "
        f"sweep_interval_minutes={ttl.sweep_interval_minutes}"
    )
    if env.get(_RUNTIME_EDITION, "").strip() == "inmem":
        return logging.WARNING, (
            f"{setting}; the in-memory runtime (langgraph dev) never sweeps expired "
            "threads, so nothing is deleted by TTL here: use `objstore-saver prune` "
            "for retention (docs/scheduling.md)"
        )
    action = (
        "delete the thread (adelete_thread)"
        if ttl.strategy == "delete"
        else "keep each thread's newest checkpoint (aprune(strategy='keep_latest'))"
    )
    return logging.INFO, f"{setting}; the server's sweeper will {action} on expired threads"
