"""``migrate``: copy threads from another LangGraph saver into the object store.

The source is read only through LangGraph's public saver API (``list`` with
the pending writes of each tuple); the target is written only through
``put`` and ``put_writes``, oldest checkpoint first, so every manifest's parent
is stored before it. Only what the target lacks is written: a checkpoint
whose manifest exists is skipped, and so is each pending write whose
(task, index) slot exists. A run that is killed part way is completed by the
next run, and nothing is stored twice.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, CheckpointTuple

from objstore_saver.backend_choice import POSTGRES_URL
from objstore_saver.driver import Driver
from objstore_saver.format import codec, keys
from objstore_saver.ops._common import (
    CancelCheck,
    JobError,
    OpsConfig,
    ProgressCallback,
    SubPlan,
    never_cancel,
    no_progress,
    open_saver,
    redact,
    redact_error,
)
from objstore_saver.ops.views import thread_prefixes
from objstore_saver.plans.requests import Get, list_all, run_one
from objstore_saver.saver import ObjectStoreSaver
from objstore_saver.storage.urls import redact_url

SOURCES = ("postgres", "sqlite", "saver", "objstore")


@dataclass
class _Source:
    saver: BaseCheckpointSaver[Any]
    thread_ids: list[str]
    description: str


@dataclass
class _Counts:
    checkpoints_source: int = 0
    checkpoints_present: int = 0
    checkpoints_missing: int = 0
    checkpoints_copied: int = 0
    writes_source: int = 0
    writes_present: int = 0
    writes_missing: int = 0
    writes_copied: int = 0
    diverged: list[dict[str, Any]] = field(default_factory=list)


# --- opening a source ---------------------------------------------------------------


def _distinct_threads_sql(conn: Any) -> list[str]:
    rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id").fetchall()
    out = []
    for row in rows:
        value = row["thread_id"] if isinstance(row, dict) else row[0]
        out.append(str(value))
    return out


def _threads_by_listing(saver: BaseCheckpointSaver[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for tup in saver.list(None):
        seen.setdefault(str(tup.config["configurable"]["thread_id"]), None)
    return sorted(seen)


@contextlib.contextmanager
def _open_source(kind: str, source: str | None, config: OpsConfig) -> Iterator[_Source]:
    if kind == "postgres":
        if source is not None:
            raise JobError(
                "a PostgreSQL source is taken from configuration (POSTGRES_URL, or the CLI's "
                "--source-url), not from the job's arguments"
            )
        url = config.postgres_url
        if not url:
            raise JobError(f"--from postgres needs {POSTGRES_URL} (or --source-url) to be set")
        postgres_saver = _saver_class("postgres", "PostgresSaver")
        with postgres_saver.from_conn_string(url) as saver:
            yield _Source(saver, _distinct_threads_sql(saver.conn), f"postgres {redact_url(url)}")
        return
    if kind == "sqlite":
        if not source:
            raise JobError("--from sqlite needs the path of the SQLite file")
        if not os.path.isfile(source):
            raise JobError(f"SQLite file {source!r} does not exist")
        sqlite_saver = _saver_class("sqlite", "SqliteSaver")
        with sqlite_saver.from_conn_string(source) as saver:
            yield _Source(saver, _distinct_threads_sql(saver.conn), f"sqlite {source}")
        return
    if kind == "saver":
        if not source or ":" not in source:
            raise JobError("--from saver needs a factory as module:callable")
        module_name, _, attr = source.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise JobError(f"cannot load the source saver factory {source!r}: {exc}") from None
        made = factory()
        with contextlib.ExitStack() as stack:
            if not isinstance(made, BaseCheckpointSaver) and hasattr(made, "__enter__"):
                made = stack.enter_context(made)
            if not isinstance(made, BaseCheckpointSaver):
                raise JobError(
                    f"source factory {source!r} returned {type(made).__name__}, "
                    "not a LangGraph BaseCheckpointSaver"
                )
            yield _Source(made, _threads_by_listing(made), f"saver {source}")
        return
    if kind == "objstore":
        if not source:
            raise JobError("--from objstore needs the source URL (s3://... or file:///...)")
        with ObjectStoreSaver.from_url(source) as saver:
            prefixes = Driver(saver.store, max_workers=1)
            try:
                pfxs = prefixes.run(thread_prefixes())
            finally:
                prefixes.close()
            ids = []
            for pfx in pfxs:
                tid = keys.untoken(pfx[len(keys.THREADS) : -1])
                if tid is None:
                    raise JobError(
                        f"source {saver.store.location} holds a thread with a hashed key "
                        f"token ({pfx}); migrate it with copy by thread id"
                    )
                ids.append(tid)
            yield _Source(saver, ids, f"objstore {saver.store.location}")
        return
    raise JobError(f"unknown migration source {kind!r}: use one of {', '.join(SOURCES)}")


# --- what the target holds ------------------------------------------------------------


def _stored_checkpoints(thread_id: str) -> SubPlan:
    """Sub-plan: {(namespace token, checkpoint id)} of the target, in key order."""
    found = yield from list_all(keys.manifests_prefix(thread_id))
    out: list[tuple[str, str]] = []
    for k in found:
        ns_tok, seg = keys.namespace_of_manifest_key(k)
        out.append((ns_tok, keys.unreverse_id(seg)))
    return out


def _stored_write_slots(thread_id: str, ns: str, cid: str) -> SubPlan:
    found = yield from list_all(keys.writes_prefix(thread_id, ns, cid))
    slots: set[tuple[str, int]] = set()
    for k in found:
        task, idxs = keys.write_slots(k)
        slots.update((task, i) for i in idxs)
    return slots


def _ancestors_reach(thread_id: str, ns: str, head: str, wanted: str, known: set[str]) -> SubPlan:
    """Sub-plan: whether the target's parent chain from ``head`` reaches ``wanted``.

    The walk stops at the first checkpoint the source also holds: the target
    continues the source only if that checkpoint is the source's head.
    """
    cursor: str | None = head
    while cursor is not None:
        if cursor in known:
            return cursor == wanted
        key = keys.manifest_key(thread_id, ns, cursor)
        body = yield from run_one(Get(key))
        if body is None:
            return False
        cursor = codec.decode_manifest(body, key).parent_checkpoint_id
    return False


# --- copying one thread --------------------------------------------------------------------


def _conf(tup: CheckpointTuple) -> tuple[str, str]:
    c = tup.config["configurable"]
    return c.get("checkpoint_ns", "") or "", c["checkpoint_id"]


def _migrate_thread(
    thread_id: str,
    source: BaseCheckpointSaver[Any],
    target: ObjectStoreSaver,
    driver: Driver,
    counts: _Counts,
    apply: bool,
) -> None:
    tuples = list(source.list({"configurable": {"thread_id": thread_id}}))
    tuples.sort(key=lambda t: _conf(t)[1])  # checkpoint ids are time-ordered: oldest first
    stored = driver.run(_stored_checkpoints(thread_id))
    stored_set = set(stored)
    by_id: dict[tuple[str, str], CheckpointTuple] = {_conf(t): t for t in tuples}

    # Divergence: per namespace, a target head the source lacks that does not
    # descend from the source's head (a thread merely continued is fine).
    source_heads: dict[str, str] = {}
    for t in tuples:
        ns, cid = _conf(t)
        source_heads[ns] = max(source_heads.get(ns, cid), cid)
    target_heads: dict[str, str] = {}
    for ns_tok, cid in stored:
        target_heads.setdefault(ns_tok, cid)  # first listed is the newest
    for ns, src_head in source_heads.items():
        tgt_head = target_heads.get(keys.token("checkpoint_ns", ns))
        known = {cid for (n, cid) in by_id if n == ns}
        if tgt_head is None or tgt_head in known:
            continue
        if not driver.run(_ancestors_reach(thread_id, ns, tgt_head, src_head, known)):
            counts.diverged.append(
                {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "target_head": tgt_head,
                    "source_head": src_head,
                }
            )

    for tup in tuples:
        ns, cid = _conf(tup)
        counts.checkpoints_source += 1
        present = (keys.token("checkpoint_ns", ns), cid) in stored_set
        if present:
            counts.checkpoints_present += 1
        else:
            counts.checkpoints_missing += 1
            if apply:
                _put_checkpoint(thread_id, tup, by_id, target)
                counts.checkpoints_copied += 1
        writes = list(tup.pending_writes or [])
        counts.writes_source += len(writes)
        if not writes:
            continue
        slots: set[tuple[str, int]] = set()
        if present:
            slots = driver.run(_stored_write_slots(thread_id, ns, cid))
        missing = _missing_writes(writes, slots)
        counts.writes_present += len(writes) - sum(len(w) for _, w in missing)
        counts.writes_missing += sum(len(w) for _, w in missing)
        if apply:
            config: RunnableConfig = {
                "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
            }
            for task_id, task_writes in missing:
                target.put_writes(config, task_writes, task_id)
                counts.writes_copied += len(task_writes)


def _missing_writes(
    writes: list[tuple[str, str, Any]], slots: set[tuple[str, int]]
) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Pending writes to store, as ``put_writes`` calls: (task id, [(channel, value)]).

    Regular writes of a task go in one call (their index is their position);
    each special write (negative index) goes alone, and only if its slot is
    empty: a special write stored again would be a second object.
    """
    regular: dict[str, list[tuple[str, Any]]] = {}
    calls: list[tuple[str, list[tuple[str, Any]]]] = []
    for task_id, channel, value in writes:
        if channel in WRITES_IDX_MAP:
            if (keys.token("task_id", task_id), WRITES_IDX_MAP[channel]) not in slots:
                calls.append((task_id, [(channel, value)]))
        else:
            regular.setdefault(task_id, []).append((channel, value))
    for task_id, task_writes in regular.items():
        tok = keys.token("task_id", task_id)
        if any((tok, i) not in slots for i in range(len(task_writes))):
            calls.append((task_id, task_writes))
    return calls


def _put_checkpoint(
    thread_id: str,
    tup: CheckpointTuple,
    by_id: dict[tuple[str, str], CheckpointTuple],
    target: ObjectStoreSaver,
) -> None:
    ns, _ = _conf(tup)
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    versions = dict(tup.checkpoint.get("channel_versions", {}))
    new_versions = versions
    if tup.parent_config is not None:
        parent_id = tup.parent_config["configurable"].get("checkpoint_id")
        if parent_id:
            conf["checkpoint_id"] = parent_id
            parent = by_id.get((ns, parent_id))
            if parent is not None:
                before = parent.checkpoint.get("channel_versions", {})
                new_versions = {c: v for c, v in versions.items() if before.get(c) != v}
    target.put({"configurable": conf}, tup.checkpoint, tup.metadata, new_versions)


# --- the job -----------------------------------------------------------------------------------


def migrate(
    source_kind: str,
    source: str | None = None,
    *,
    config: OpsConfig | None = None,
    thread_ids: list[str] | None = None,
    apply: bool = False,
    progress: ProgressCallback = no_progress,
    should_cancel: CancelCheck = never_cancel,
) -> dict[str, Any]:
    """Copy threads from a LangGraph saver into the configured object store.

    Args:
        source_kind: ``postgres`` (database from ``config.postgres_url``, i.e.
            ``POSTGRES_URL``), ``sqlite`` (``source`` is the file), ``saver``
            (``source`` is ``module:factory`` returning a saver or a context
            manager of one) or ``objstore`` (``source`` is a store URL).
        source: See ``source_kind``; never a database URL with a password.
        config: Target store and database; default from the environment.
        thread_ids: Threads to migrate; default every thread of the source.
        apply: Write; without it the job only counts (dry run).
        progress: Called after each thread.
        should_cancel: Polled between threads; True stops cleanly.

    Returns:
        A JSON-serializable report: ``threads``, ``checkpoints`` (source,
        present, missing, copied), ``writes`` (same), ``diverged`` threads,
        ``cancelled`` and ``apply``.

    Raises:
        JobError: the source or target cannot be used; no secret is in the message.
    """
    config = config or OpsConfig.from_env()
    secrets = config.secrets()
    try:
        return _run(source_kind, source, config, thread_ids, apply, progress, should_cancel)
    except JobError as exc:
        raise JobError(redact(str(exc), secrets)) from None
    except Exception as exc:  # noqa: BLE001 - re-raised, with the source's secrets removed
        raise JobError(f"migration failed: {redact_error(exc, secrets)}") from None


def _run(
    source_kind: str,
    source: str | None,
    config: OpsConfig,
    thread_ids: list[str] | None,
    apply: bool,
    progress: ProgressCallback,
    should_cancel: CancelCheck,
) -> dict[str, Any]:
    counts = _Counts()
    done = 0
    cancelled = False
    with open_saver(config) as target, _open_source(source_kind, source, config) as src:
        wanted = src.thread_ids if thread_ids is None else list(thread_ids)
        driver = Driver(target.store, max_workers=4)
        try:
            for thread_id in wanted:
                if should_cancel():
                    cancelled = True
                    break
                _migrate_thread(thread_id, src.saver, target, driver, counts, apply)
                done += 1
                progress(done, len(wanted), thread_id)
        finally:
            driver.close()
        return {
            "source": src.description,
            "target": target.store.location,
            "apply": apply,
            "cancelled": cancelled,
            "threads": {"source": len(wanted), "done": done},
            "checkpoints": {
                "source": counts.checkpoints_source,
                "present": counts.checkpoints_present,
                "missing": counts.checkpoints_missing,
                "copied": counts.checkpoints_copied,
            },
            "writes": {
                "source": counts.writes_source,
                "present": counts.writes_present,
                "missing": counts.writes_missing,
                "copied": counts.writes_copied,
            },
            "diverged": counts.diverged,
        }


def _saver_class(kind: str, name: str) -> Any:
    """LangGraph's saver class for ``--from kind``, or a JobError naming the extra."""
    try:
        module = importlib.import_module(f"langgraph.checkpoint.{kind}")
    except ImportError:
        raise JobError(
            f"--from {kind} needs langgraph-checkpoint-{kind}: pip install 'objstore-saver[{kind}]'"
        ) from None
    return getattr(module, name)
