"""One writer of the race tests; importable by a spawned process."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint

from objstore_saver import CheckpointConflictError, ObjectStoreSaver
from objstore_saver.storage import Boto3S3Store, LocalStore, ObjectStore
from objstore_saver.storage.s3.lean import LeanS3Store

PARENT = "1f000000-0000-6000-8000-000000000000"


def fork_id(writer: int) -> str:
    return f"1f000001-0000-6000-8000-{writer:012x}"


def open_store(spec: dict[str, Any]) -> ObjectStore:
    if spec["kind"] == "local":
        return LocalStore(spec["path"], fsync=False)
    if spec["transport"] == "lean":
        import boto3

        session = boto3.session.Session(
            aws_access_key_id=spec["access_key"],
            aws_secret_access_key=spec["secret_key"],
            region_name=spec["region"],
        )
        return LeanS3Store(
            spec["bucket"],
            spec["prefix"],
            endpoint_url=spec["url"],
            region_name=spec["region"],
            session=session,
        )
    import boto3

    client = boto3.session.Session().client(
        "s3",
        endpoint_url=spec["url"],
        region_name=spec["region"],
        aws_access_key_id=spec["access_key"],
        aws_secret_access_key=spec["secret_key"],
    )
    return Boto3S3Store(spec["bucket"], spec["prefix"], client=client)


def parent_values() -> dict[str, Any]:
    return {"messages": [AIMessage(content="root " * 100, id="root")], "turn": 0}


def fork_values(writer: int) -> dict[str, Any]:
    msgs = parent_values()["messages"] + [
        AIMessage(content=f"fork {writer} " + "y" * 2000, id=f"fork-{writer}")
    ]
    return {"messages": msgs, "turn": writer, "blob": bytes([writer]) * 5000}


def checkpoint(cid: str, values: dict[str, Any], version: int) -> Any:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["ts"] = "2026-01-01T00:00:00+00:00"
    cp["channel_values"] = values
    cp["channel_versions"] = {k: version for k in values}
    return cp


def cfg(thread: str, cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def write_fork(store: ObjectStore, thread: str, writer: int) -> str:
    """Put writer's child of the shared parent, then its writes; first-wins writes too."""
    with ObjectStoreSaver(store) as saver:
        values = fork_values(writer)
        cp = checkpoint(fork_id(writer), values, 2)
        saver.put(cfg(thread, PARENT), cp, {"step": 1, "writer": writer}, dict.fromkeys(values, 2))
        # Every writer writes the same task of the parent: the first write wins per index.
        saver.put_writes(
            cfg(thread, PARENT), [("turn", writer), ("blob", bytes([writer]) * 3000)], "shared"
        )
        saver.put_writes(cfg(thread, PARENT), [("__error__", f"error {writer}")], "shared")
    return "ok"


def write_same_id(store: ObjectStore, thread: str, writer: int) -> str:
    """Put a checkpoint under an id every writer uses, with this writer's content."""
    with ObjectStoreSaver(store) as saver:
        values = {"turn": writer, "blob": bytes([writer]) * 5000}
        cp = checkpoint("1f000002-0000-6000-8000-000000000000", values, 1)
        try:
            saver.put(cfg(thread), cp, {"step": 2, "writer": writer}, dict.fromkeys(values, 1))
        except CheckpointConflictError as exc:
            return f"conflict {exc.key}"
    return "ok"


def process_main(spec: dict[str, Any], thread: str, writer: int, barrier: Any, out: Any) -> None:
    """Both races in one process: the forks of one turn, then one id for all."""
    store = open_store(spec)
    for job, name in ((write_fork, "fork"), (write_same_id, "same")):
        barrier.wait()
        try:
            result = job(store, f"{thread}-{name}", writer)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            result = f"error {type(exc).__name__}: {exc}"
        out.put((name, writer, result))
