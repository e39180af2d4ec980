"""16 writers on one thread, as OS threads and as processes.

Each writer has its own saver (no shared memory), like separate workers.
Forks of one turn (same parent, distinct ids) must all survive and be
readable by id, the newest must become the head, nothing may be torn; one
id written by all with different content must end with exactly one whole
winner and clear conflicts for the others; ``put_writes`` of one task must
keep one stored value per index (first write wins) and one special write in
force.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

import pytest
import race_worker as rw
from backends import Backend
from faultkit import check_integrity

from objstore_saver import ObjectStoreSaver
from objstore_saver.storage import ObjectStore

WRITERS = 16


# Both S3 transports: the races are decided by the server's create-only PUT,
# but each transport maps its 412, retries and lost answers on its own.
@pytest.fixture
def spec(backend: Backend) -> dict[str, Any]:
    """How a writer opens the backend's store (``race_worker.open_store``), in any process."""
    if not backend.is_s3:
        return {"kind": "local", "path": str(backend.root / "race")}
    ep = backend.endpoint
    assert ep is not None
    return {
        "kind": "s3",
        "transport": backend.transport,
        "url": ep.url,
        "region": ep.region,
        "access_key": ep.access_key,
        "secret_key": ep.secret_key,
        "bucket": backend.bucket,
        "prefix": "race/",
    }


def _seed_parent(store: ObjectStore, thread: str) -> None:
    with ObjectStoreSaver(store) as saver:
        values = rw.parent_values()
        cp = rw.checkpoint(rw.PARENT, values, 1)
        saver.put(rw.cfg(thread), cp, {"step": 0}, dict.fromkeys(values, 1))


def _in_threads(spec: dict[str, Any], job: Callable[..., str], thread: str) -> dict[int, str]:
    barrier = threading.Barrier(WRITERS)
    results: dict[int, str] = {}

    def run(w: int) -> None:
        store = rw.open_store(spec)
        barrier.wait()
        try:
            results[w] = job(store, thread, w)
        except Exception as exc:  # noqa: BLE001 - asserted on below
            results[w] = f"error {type(exc).__name__}: {exc}"

    workers = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return results


def _in_processes(spec: dict[str, Any], thread: str) -> dict[str, dict[int, str]]:
    # A fork server that has imported the worker (LangGraph included) once
    # starts the 16 processes quickly and without the parent's threads.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["race_worker"])
    barrier = ctx.Barrier(WRITERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=rw.process_main, args=(spec, thread, w, barrier, out))
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    results: dict[str, dict[int, str]] = {"fork": {}, "same": {}}
    for _ in range(2 * WRITERS):
        job, w, result = out.get(timeout=300)
        results[job][w] = result
    for p in procs:
        p.join()
        assert p.exitcode == 0
    return results


def _check_forks(store: ObjectStore, thread: str, results: dict[int, str]) -> None:
    assert results == dict.fromkeys(range(WRITERS), "ok")
    with ObjectStoreSaver(store) as reader:
        for w in range(WRITERS):
            t = reader.get_tuple(rw.cfg(thread, rw.fork_id(w)))
            assert t is not None, w
            assert t.checkpoint["channel_values"] == rw.fork_values(w)
            assert t.metadata["writer"] == w
            assert t.parent_config["configurable"]["checkpoint_id"] == rw.PARENT
        head = reader.get_tuple(rw.cfg(thread))
        assert head.config["configurable"]["checkpoint_id"] == rw.fork_id(WRITERS - 1)
        assert len(list(reader.list(rw.cfg(thread)))) == WRITERS + 1
        # First write wins per index of the shared task; one special write in force.
        parent = reader.get_tuple(rw.cfg(thread, rw.PARENT))
        writes = {(task, ch): v for task, ch, v in parent.pending_writes}
        assert set(writes) == {("shared", "turn"), ("shared", "blob"), ("shared", "__error__")}
        assert writes[("shared", "turn")] in range(WRITERS)
        assert writes[("shared", "blob")] in [bytes([w]) * 3000 for w in range(WRITERS)]
        assert writes[("shared", "__error__")] in [f"error {w}" for w in range(WRITERS)]
    with ObjectStoreSaver(store) as again:  # stable: every reader sees the same winners
        assert again.get_tuple(rw.cfg(thread, rw.PARENT)).pending_writes == parent.pending_writes
    assert check_integrity(store) >= WRITERS + 1


def _check_same_id(store: ObjectStore, thread: str, results: dict[int, str]) -> None:
    winners = [w for w, r in results.items() if r == "ok"]
    assert len(winners) == 1, results
    assert all(r.startswith("conflict threads/") for w, r in results.items() if w not in winners)
    with ObjectStoreSaver(store) as reader:
        t = reader.get_tuple(rw.cfg(thread))
        w = winners[0]
        assert t.metadata["writer"] == w
        assert t.checkpoint["channel_values"] == {"turn": w, "blob": bytes([w]) * 5000}
    check_integrity(store)


def test_forks_in_threads(spec: dict[str, Any]) -> None:
    store = rw.open_store(spec)
    _seed_parent(store, "forks")
    _check_forks(store, "forks", _in_threads(spec, rw.write_fork, "forks"))


def test_same_id_in_threads(spec: dict[str, Any]) -> None:
    store = rw.open_store(spec)
    _check_same_id(store, "same", _in_threads(spec, rw.write_same_id, "same"))


# Writers without shared memory race above the store; each transport's mapping
# of the server's 412 is raced by the tests in threads above.
@pytest.mark.backends("local", "s3-lean")
def test_forks_and_same_id_in_processes(spec: dict[str, Any]) -> None:
    store = rw.open_store(spec)
    _seed_parent(store, "p-fork")
    results = _in_processes(spec, "p")
    _check_forks(store, "p-fork", results["fork"])
    _check_same_id(store, "p-same", results["same"])
