"""Spans and counters of saver calls, against real stores (a directory and moto's S3).

Spans are read back from the SDK's in-memory exporter; every count they carry
is checked against a :class:`MeteredStore` wrapped around the same store.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from backends import Backend
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from repo_root import ROOT
from standalone_values import ALONE_VALUE_SIZE, ALONE_VALUES

from objstore_saver import InvalidIdentifierError, ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.plans.requests import Batch, Get
from objstore_saver.storage import (
    Boto3S3Store,
    LeanS3Store,
    LocalStore,
    Meter,
    MeteredStore,
    ObjectStore,
    PutMode,
)
from objstore_saver.storage.base import MAX_LIST_PAGE, ListPage, StoreWrapper, ThreadedAsync
from objstore_saver.telemetry import SaverStats, Telemetry
from objstore_saver.testing.faults import FailWhere, FaultyStore, InjectedFaultError

# --- fixtures and helpers ---------------------------------------------------------


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def base_store(backend: Backend) -> ObjectStore:
    return backend.store("saver/", fsync=False)


@pytest.fixture
def metered(base_store: ObjectStore) -> MeteredStore:
    return MeteredStore(base_store, log=True)


@pytest.fixture
def saver(metered: MeteredStore, provider: TracerProvider) -> Iterator[ObjectStoreSaver]:
    with ObjectStoreSaver(metered, tracer_provider=provider) as s:
        yield s


def _config(thread: str, ns: str = "", cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def _checkpoint(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    cp = empty_checkpoint()
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict.fromkeys(values, 1)
    return cp, dict(cp["channel_versions"])


def _big_values(n: int, tag: str) -> dict[str, str]:
    # Each value is above the inline limit: a value object, embedded in the manifest.
    return {f"ch{i}": f"{tag}-{i}-" + os.urandom(1500).hex() for i in range(n)}


def _values_alone(n: int, tag: str) -> dict[str, bytes]:
    """``n`` values of a value object each, stored alone: one object PUT each, of one batch.

    Each is under 256 KiB, so it would be embedded, but together they would
    carry the manifest past 1 MiB, so the put stores them alone (spec §4.1).
    """
    assert n >= ALONE_VALUES
    return {f"ch{i}": tag.encode() + os.urandom(ALONE_VALUE_SIZE) for i in range(n)}


def _diff(after: Meter, before: Meter) -> dict[str, int]:
    return {
        "put": after.put_requests - before.put_requests,
        "get": after.get_requests - before.get_requests,
        "list": after.list_requests - before.list_requests,
        "delete": after.delete_requests - before.delete_requests,
        "bytes_sent": after.bytes_sent - before.bytes_sent,
        "bytes_received": after.bytes_received - before.bytes_received,
        "create_conflicts": after.create_conflicts - before.create_conflicts,
    }


def _span_counts(span: ReadableSpan) -> dict[str, int]:
    a = span.attributes or {}
    return {
        "put": a["objstore_saver.requests.put"],
        "get": a["objstore_saver.requests.get"],
        "list": a["objstore_saver.requests.list"],
        "delete": a["objstore_saver.requests.delete"],
        "bytes_sent": a["objstore_saver.bytes_sent"],
        "bytes_received": a["objstore_saver.bytes_received"],
        "create_conflicts": a["objstore_saver.create_conflicts"],
    }


def _stats_counts(stats: SaverStats) -> dict[str, int]:
    return {
        **stats.requests,
        "bytes_sent": stats.bytes_sent,
        "bytes_received": stats.bytes_received,
        "create_conflicts": stats.create_conflicts,
    }


def _tree(exporter: InMemorySpanExporter, name: str) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one finished call span named ``name`` and the request spans under it."""
    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if s.name == name]
    children = [
        s for s in spans if s.parent is not None and s.parent.span_id == call.context.span_id
    ]
    return call, children


def _check_tree(
    call: ReadableSpan,
    children: Sequence[ReadableSpan],
    meter: dict[str, int],
    log: Sequence[Any],
    store: ObjectStore,
) -> None:
    """The call span's totals equal the meter; each logged request has its child span."""
    assert call.kind is SpanKind.INTERNAL
    assert call.parent is None
    assert call.status.status_code is StatusCode.UNSET
    assert _span_counts(call) == meter
    assert call.attributes["objstore_saver.requests"] == sum(
        meter[k] for k in ("put", "get", "list", "delete")
    )
    assert all(c.kind is SpanKind.CLIENT for c in children)
    assert all(c.context.trace_id == call.context.trace_id for c in children)
    assert all(c.start_time >= call.start_time and c.end_time <= call.end_time for c in children)
    # One child span per request (no deletes here: one logged entry per request).
    by_kind = {k: sorted(e.key for e in log if e.op == k) for k in ("put", "get", "list")}
    span_keys: dict[str, list[str]] = {"put": [], "get": [], "list": []}
    for c in children:
        a = c.attributes or {}
        kind = a["objstore_saver.request.kind"]
        span_keys[kind].append(
            a["objstore_saver.list.prefix" if kind == "list" else "objstore_saver.key"]
        )
    prefix = store.prefix if isinstance(store, Boto3S3Store | LeanS3Store) else ""
    assert {k: sorted(v) for k, v in span_keys.items()} == {
        k: sorted(prefix + key if k == "list" else key for key in keys)
        for k, keys in by_kind.items()
    }
    for c in children:
        _check_request_span(c, store)


_METHODS = {
    "put": "PutObject",
    "get": "GetObject",
    "list": "ListObjectsV2",
    "delete": "DeleteObjects",
}


def _check_request_span(span: ReadableSpan, store: ObjectStore) -> None:
    a = span.attributes or {}
    kind = a["objstore_saver.request.kind"]
    if isinstance(store, Boto3S3Store | LeanS3Store):
        assert span.name == f"S3.{_METHODS[kind]}"
        assert a["rpc.system"] == "aws-api"
        assert a["rpc.service"] == "S3"
        assert a["rpc.method"] == _METHODS[kind]
        assert a["aws.s3.bucket"] == store.bucket
        endpoint = os.environ.get("OBJSTORE_TEST_ENDPOINT")
        assert a["server.address"] == (urlsplit(endpoint).hostname if endpoint else "127.0.0.1")
        assert isinstance(a["server.port"], int)
        if kind in ("put", "get"):
            assert a["aws.s3.key"] == store.prefix + a["objstore_saver.key"]
    else:
        assert isinstance(store, LocalStore)
        assert span.name == f"LocalStore.{_METHODS[kind]}"
        assert "rpc.system" not in a
        assert a["file.directory"] == store.root
        if kind in ("put", "get"):
            path = Path(a["file.path"])
            assert path == Path(store.root, *a["objstore_saver.key"].split("/"))
            assert path.is_file()


# --- span trees of saver calls -------------------------------------------------------


@pytest.mark.parametrize("where", ["embedded", "alone"])
def test_put_and_get_tuple_span_trees_match_the_meter(
    saver: ObjectStoreSaver,
    metered: MeteredStore,
    base_store: ObjectStore,
    exporter: InMemorySpanExporter,
    where: str,
) -> None:
    values = _big_values(4, "put") if where == "embedded" else _values_alone(ALONE_VALUES, "put")
    cp, versions = _checkpoint({**values, "small": 1})
    # As LangGraph's loop does: the thread is looked up before its first put
    # (which then knows the thread's epoch, spec §6.1 step 1).
    assert saver.get_tuple(_config("t-put")) is None
    exporter.clear()
    metered.reset()
    before = metered.snapshot()
    stored = saver.put(_config("t-put", "sub:1"), cp, {"step": 0}, versions)
    meter = _diff(metered.snapshot(), before)
    # The manifest, which embeds four value objects; or five objects alone and the manifest.
    assert meter["put"] == (1 if where == "embedded" else ALONE_VALUES + 1)
    call, children = _tree(exporter, "objstore_saver.put")
    _check_tree(call, children, meter, metered.log, base_store)
    attrs = call.attributes or {}
    assert attrs["langgraph.thread_id"] == "t-put"
    assert attrs["langgraph.checkpoint_ns"] == "sub:1"
    assert attrs["langgraph.checkpoint_id"] == cp["id"] == stored["configurable"]["checkpoint_id"]
    assert attrs["objstore_saver.operation"] == "put"
    assert attrs["objstore_saver.store"] == base_store.location
    assert len(children) == meter["put"]
    sent = {
        c.attributes["objstore_saver.key"]: c.attributes["objstore_saver.bytes_sent"]
        for c in children
    }
    assert sent == {e.key: e.nbytes for e in metered.log}

    exporter.clear()
    metered.reset()
    tup = saver.get_tuple(_config("t-put", "sub:1"))
    assert tup is not None
    meter = _diff(metered.snapshot(), Meter())
    call, children = _tree(exporter, "objstore_saver.get_tuple")
    _check_tree(call, children, meter, metered.log, base_store)
    assert call.attributes["langgraph.checkpoint_id"] == cp["id"]  # learnt from the result
    assert meter["get"] == 0  # the newest manifest is the one this saver just wrote

    exporter.clear()
    metered.reset()
    assert saver.get_tuple(stored) is not None  # by id: the manifest is read
    meter = _diff(metered.snapshot(), Meter())
    call, children = _tree(exporter, "objstore_saver.get_tuple")
    _check_tree(call, children, meter, metered.log, base_store)
    received = {
        c.attributes["objstore_saver.key"]: c.attributes["objstore_saver.bytes_received"]
        for c in children
        if c.attributes["objstore_saver.request.kind"] == "get"
    }
    assert received == {e.key: e.nbytes for e in metered.log if e.op == "get"}
    assert sum(received.values()) == meter["bytes_received"] > 0


async def test_aput_aget_tuple_and_alist_span_trees_match_the_meter(
    saver: ObjectStoreSaver,
    metered: MeteredStore,
    base_store: ObjectStore,
    exporter: InMemorySpanExporter,
) -> None:
    cp, versions = _checkpoint(_big_values(3, "aput"))
    await saver.aput(_config("t-async"), cp, {"step": 0}, versions)
    meter = _diff(metered.snapshot(), Meter())
    call, children = _tree(exporter, "objstore_saver.aput")
    _check_tree(call, children, meter, metered.log, base_store)
    assert call.attributes["langgraph.thread_id"] == "t-async"

    for name, action in (
        ("objstore_saver.aget_tuple", lambda: saver.aget_tuple(_config("t-async", cid=cp["id"]))),
        ("objstore_saver.alist", lambda: _collect(saver.alist(_config("t-async")))),
    ):
        exporter.clear()
        metered.reset()
        assert await action()
        meter = _diff(metered.snapshot(), Meter())
        call, children = _tree(exporter, name)
        _check_tree(call, children, meter, metered.log, base_store)
        assert call.attributes["langgraph.thread_id"] == "t-async"
        assert meter["get"] >= 1 and meter["list"] >= 1


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


def test_list_span_ends_when_the_caller_stops_early(
    saver: ObjectStoreSaver, exporter: InMemorySpanExporter
) -> None:
    parent = None
    for step in range(3):
        cp, versions = _checkpoint({"v": step})
        parent = saver.put(
            _config(
                "t-list", cid=None if parent is None else parent["configurable"]["checkpoint_id"]
            ),
            cp,
            {"step": step},
            versions,
        )
    exporter.clear()
    listing = saver.list(_config("t-list"))
    assert not [s for s in exporter.get_finished_spans() if s.name == "objstore_saver.list"]
    next(listing)
    listing.close()
    call, children = _tree(exporter, "objstore_saver.list")
    assert call.status.status_code is StatusCode.UNSET
    assert children and call.attributes["objstore_saver.requests"] == len(children)
    assert saver.stats().calls["list"] == 1
    assert not saver.stats().call_errors


def test_the_application_span_is_the_parent_of_the_call_span(
    saver: ObjectStoreSaver, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("graph step") as app:
        saver.get_tuple(_config("t-none"))
    call, children = _tree(exporter, "objstore_saver.get_tuple")
    assert call.parent is not None and call.parent.span_id == app.get_span_context().span_id
    assert children  # the latest lookup still lists
    assert call.attributes["objstore_saver.not_found"] == 0
    assert "langgraph.checkpoint_id" not in call.attributes


async def test_delete_thread_spans_name_the_deleted_keys(
    saver: ObjectStoreSaver,
    metered: MeteredStore,
    base_store: ObjectStore,
    exporter: InMemorySpanExporter,
) -> None:
    cp, versions = _checkpoint(_values_alone(ALONE_VALUES, "del"))
    stored = saver.put(_config("t-del"), cp, {"step": 0}, versions)
    saver.put_writes(stored, [("ch", "w")], task_id="task")
    stored_keys = [o.key for o in base_store.list("threads/").objects]
    # The values alone, the manifest and the write.
    assert len(stored_keys) == ALONE_VALUES + 2
    exporter.clear()
    metered.reset()
    await saver.adelete_thread("t-del")
    meter = _diff(metered.snapshot(), Meter())
    call, children = _tree(exporter, "objstore_saver.adelete_thread")
    assert call.attributes["langgraph.thread_id"] == "t-del"
    assert _span_counts(call) == meter and meter["delete"] >= 1
    deletes = [c for c in children if c.attributes["objstore_saver.request.kind"] == "delete"]
    assert sum(c.attributes["objstore_saver.requests"] for c in deletes) == meter["delete"]
    deleted = [e.key for e in metered.log if e.op == "delete"]
    assert sorted(deleted) == sorted(stored_keys)
    assert sum(c.attributes["objstore_saver.delete.keys"] for c in deletes) == len(deleted)
    for span in deletes:
        assert span.kind is SpanKind.CLIENT
        if isinstance(base_store, Boto3S3Store | LeanS3Store):
            assert span.name == "S3.DeleteObjects"
            assert span.attributes["rpc.method"] == "DeleteObjects"
            assert span.attributes["aws.s3.bucket"] == base_store.bucket
        else:
            assert span.name == "LocalStore.DeleteObjects"
    assert saver.stats().calls["adelete_thread"] == 1


# --- parallel requests: pool threads and gathered tasks --------------------------------


class _RendezvousStore(ThreadedAsync, StoreWrapper):
    """Holds each object PUT until ``parties`` of them run at once, in different threads.

    Records, per key, the span current in the thread that runs the request.
    """

    def __init__(self, inner: ObjectStore, parties: int) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(parties, timeout=20)
        self.current: dict[str, tuple[int, str]] = {}

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        if "/objects/" in key:
            self.barrier.wait()  # raises BrokenBarrierError if the PUTs were not concurrent
        self.current[key] = (
            trace.get_current_span().get_span_context().span_id,
            threading.current_thread().name,
        )
        self._inner.put(key, data, mode)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return self._inner.get(key, byte_range)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        return self._inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, keys: Sequence[str]) -> None:
        self._inner.delete(keys)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parallel_requests_of_one_batch_are_children_of_the_call(
    mode: str, tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    parties = ALONE_VALUES
    store = _RendezvousStore(LocalStore(tmp_path / "store", fsync=False), parties)
    cp, versions = _checkpoint(_values_alone(parties, mode))
    with ObjectStoreSaver(store, tracer_provider=provider) as saver:
        assert saver.get_tuple(_config("t-par")) is None  # the thread's epoch, as LangGraph does
        exporter.clear()
        if mode == "sync":
            saver.put(_config("t-par"), cp, {"step": 0}, versions)
        else:
            asyncio.run(saver.aput(_config("t-par"), cp, {"step": 0}, versions))
    _call, children = _tree(exporter, f"objstore_saver.{'put' if mode == 'sync' else 'aput'}")
    object_spans = [c for c in children if "/objects/" in c.attributes["objstore_saver.key"]]
    assert len(object_spans) == parties
    # The span current inside each request, on its own thread, is that request's span.
    for span in children:
        key = span.attributes["objstore_saver.key"]
        assert store.current[key][0] == span.context.span_id
    threads = {store.current[s.attributes["objstore_saver.key"]][1] for s in object_spans}
    assert len(threads) == parties
    # Sync: the caller's thread runs the batch's first request, the driver's
    # workers the others. Async: the local store runs every request in a thread.
    off_caller = threads - {threading.current_thread().name}
    assert len(off_caller) == (parties - 1 if mode == "sync" else parties)


# --- errors ------------------------------------------------------------------------


def test_a_bad_thread_id_fails_the_call_span_and_is_counted(
    saver: ObjectStoreSaver, exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(InvalidIdentifierError):
        saver.get_tuple({"configurable": {"thread_id": ["not", "a", "string"]}})
    call, children = _tree(exporter, "objstore_saver.get_tuple")
    assert not children
    assert call.status.status_code is StatusCode.ERROR
    assert "thread_id must be a string" in (call.status.description or "")
    assert call.attributes["error.type"] == "objstore_saver.errors.InvalidIdentifierError"
    assert "langgraph.thread_id" not in call.attributes
    (event,) = call.events
    assert event.name == "exception"
    stats = saver.stats()
    assert stats.calls == {"get_tuple": 1}
    assert stats.call_errors == {"get_tuple": 1}
    assert stats.total_requests == 0


@pytest.mark.parametrize(
    "config",
    [{"configurable": "not a mapping"}, {"configurable": {"thread_id": "t", "checkpoint_ns": 3}}],
)
def test_malformed_configs_fail_as_they_do_without_tracing(
    config: Any, metered: MeteredStore, saver: ObjectStoreSaver, exporter: InMemorySpanExporter
) -> None:
    # No SDK: the plan alone reads the config.
    with ObjectStoreSaver(metered) as untraced, pytest.raises(Exception) as plain:
        untraced.get_tuple(config)
    with pytest.raises(type(plain.value)) as traced:
        saver.get_tuple(config)
    assert str(traced.value) == str(plain.value)
    call, _ = _tree(exporter, "objstore_saver.get_tuple")
    assert call.status.status_code is StatusCode.ERROR
    assert "langgraph.checkpoint_ns" not in call.attributes


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_storage_fault_fails_its_request_span_and_the_call_span(
    mode: str, base_store: ObjectStore, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    cp, versions = _checkpoint({"v": "x"})
    faulty = FaultyStore(base_store)
    metered = MeteredStore(faulty)
    with ObjectStoreSaver(metered, tracer_provider=provider) as saver:
        saver.put(_config("t-fault"), cp, {"step": 0}, versions)
        # The latest lookup LISTs (the manifest it finds is remembered, not read).
        faulty.plan = FailWhere(lambda r: r.op == "list", times=1)
        before = metered.snapshot()
        with pytest.raises(InjectedFaultError):
            if mode == "sync":
                saver.get_tuple(_config("t-fault"))
            else:
                asyncio.run(saver.aget_tuple(_config("t-fault")))
        meter = _diff(metered.snapshot(), before)
        stats = saver.stats()
    name = "objstore_saver.get_tuple" if mode == "sync" else "objstore_saver.aget_tuple"
    call, children = _tree(exporter, name)
    (failed,) = [c for c in children if c.status.status_code is StatusCode.ERROR]
    assert failed.attributes["objstore_saver.request.kind"] == "list"
    assert failed.attributes["error.type"] == "objstore_saver.testing.faults.InjectedFaultError"
    assert [e.name for e in failed.events] == ["exception"]
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes["error.type"] == failed.attributes["error.type"]
    assert call.attributes["objstore_saver.request_errors"] == 1
    assert _span_counts(call) == meter
    assert stats.request_errors == 1
    assert stats.call_errors == {name.removeprefix("objstore_saver."): 1}


def test_a_create_conflict_is_counted_not_failed(
    base_store: ObjectStore, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    metered = MeteredStore(base_store)
    cp, versions = _checkpoint({"v": 1})
    with ObjectStoreSaver(metered) as first:
        stored = first.put(_config("t-412"), cp, {"step": 0}, versions)
        first.put_writes(stored, [("ch", "first")], task_id="task")
    with ObjectStoreSaver(metered, tracer_provider=provider) as second:
        before = metered.snapshot()
        second.put_writes(stored, [("ch", "second")], task_id="task")  # first write wins
        meter = _diff(metered.snapshot(), before)
        stats = second.stats()
    assert meter["create_conflicts"] == 1
    call, children = _tree(exporter, "objstore_saver.put_writes")
    assert call.status.status_code is StatusCode.UNSET
    assert call.attributes["objstore_saver.create_conflicts"] == 1
    assert call.attributes["objstore_saver.task_id"] == "task"
    (conflict,) = [c for c in children if c.attributes.get("objstore_saver.create_conflict")]
    assert conflict.status.status_code is StatusCode.UNSET
    assert conflict.attributes["objstore_saver.put.create_only"] is True
    assert stats.create_conflicts == 1 and stats.request_errors == 0


# --- counters --------------------------------------------------------------------


async def test_stats_equal_the_meter_over_a_mixed_workload(
    saver: ObjectStoreSaver, metered: MeteredStore
) -> None:
    parent = None
    for turn in range(4):
        cp, versions = _checkpoint({**_big_values(2, f"turn{turn}"), "turn": turn})
        config = _config(
            "t-mix", cid=None if parent is None else parent["configurable"]["checkpoint_id"]
        )
        if turn % 2:
            parent = await saver.aput(config, cp, {"step": turn}, versions)
            await saver.aput_writes(parent, [("ch", turn)], task_id="t")
        else:
            parent = saver.put(config, cp, {"step": turn}, versions)
            saver.put_writes(parent, [("ch", turn)], task_id="t")
        assert saver.get_tuple(_config("t-mix")) is not None
    assert len(list(saver.list(_config("t-mix")))) == 4
    assert len(await _collect(saver.alist(_config("t-mix"), limit=2))) == 2
    saver.copy_thread("t-mix", "t-copy")
    await saver.adelete_thread("t-copy")
    assert saver.get_tuple(_config("t-copy")) is None
    assert saver.get_tuple(_config("t-copy", cid=parent["configurable"]["checkpoint_id"])) is None
    saver.prune(["t-mix"], keep_last=1, min_age=0)
    assert saver.verify("t-mix", read_data=True).ok

    stats = saver.stats()
    meter = _diff(metered.snapshot(), Meter())
    assert _stats_counts(stats) == meter
    assert meter["delete"] >= 1 and meter["create_conflicts"] == 0
    assert stats.not_found >= 1  # the deleted thread's checkpoint
    assert stats.calls == {
        "put": 2,
        "aput": 2,
        "put_writes": 2,
        "aput_writes": 2,
        "get_tuple": 6,
        "list": 1,
        "alist": 1,
        "copy_thread": 1,
        "adelete_thread": 1,
        "prune": 1,
        "verify": 1,
    }
    assert not stats.call_errors
    assert json.loads(json.dumps(stats.as_dict()))["total_requests"] == sum(
        meter[k] for k in ("put", "get", "list", "delete")
    )

    # A snapshot difference covers the work in between; reset zeroes everything.
    before, mark = stats, metered.snapshot()
    saver.get_tuple(_config("t-mix"))
    delta = saver.stats() - before
    assert delta.calls == {"get_tuple": 1}
    assert _stats_counts(delta) == _diff(metered.snapshot(), mark)
    saver.reset_stats()
    assert saver.stats() == SaverStats()


def test_stats_count_from_many_threads(saver: ObjectStoreSaver, metered: MeteredStore) -> None:
    cp, versions = _checkpoint({"v": 1})
    saver.put(_config("t-threads"), cp, {"step": 0}, versions)
    saver.reset_stats()
    metered.reset()
    workers = [
        threading.Thread(target=lambda: [saver.get_tuple(_config("t-threads")) for _ in range(10)])
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    stats = saver.stats()
    assert stats.calls == {"get_tuple": 40}
    assert _stats_counts(stats) == _diff(metered.snapshot(), Meter())


def test_clones_share_the_counters(metered: MeteredStore) -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    with ObjectStoreSaver(metered, serde=strict) as saver:
        clone = saver.with_allowlist([("collections", "OrderedDict")])
        assert clone is not saver
        clone.get_tuple(_config("t-clone"))
        saver.get_tuple(_config("t-clone"))
        assert saver.stats().calls == clone.stats().calls == {"get_tuple": 2}


# --- the disabled path ----------------------------------------------------------------


def test_without_an_sdk_no_span_records_and_stats_still_count(
    metered: MeteredStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This test process never sets a global tracer provider: the API's default is a no-op.
    assert not trace.get_tracer("probe").start_span("probe").is_recording()

    def traced(*_: Any) -> Any:
        raise AssertionError("a request ran under a span with no SDK configured")

    monkeypatch.setattr("objstore_saver.telemetry.Call.execute", traced)
    monkeypatch.setattr("objstore_saver.telemetry.Call.aexecute", traced)
    cp, versions = _checkpoint(_big_values(3, "nosdk"))
    with ObjectStoreSaver(metered) as saver:
        saver.put(_config("t-nosdk"), cp, {"step": 0}, versions)
        asyncio.run(saver.aget_tuple(_config("t-nosdk")))
        stats = saver.stats()
    assert stats.calls == {"put": 1, "aget_tuple": 1}
    assert _stats_counts(stats) == _diff(metered.snapshot(), Meter())


def _python_calls(action: Any) -> int:
    """Python function calls made while ``action()`` runs in this thread."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count


class _NullStore:
    """A store that does no work, so only the driver's own calls are counted."""

    location = "null://"

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return b"x"


@pytest.mark.parametrize("requests", [1, 50])
def test_the_disabled_path_adds_at_most_three_python_calls_per_request(requests: int) -> None:
    store: Any = _NullStore()
    driver = Driver(store, max_workers=1)
    telemetry = Telemetry(store)  # global provider: no SDK configured in this process
    ops = [Get(f"k{i}") for i in range(requests)]

    def batch(call: Any) -> None:
        # One request at a time in this thread, so the profiler sees every call.
        for op in ops:
            driver._run_batch(Batch([op]), call)

    def plain() -> None:
        batch(None)

    def counted() -> None:
        call = telemetry.call("get_tuple", _config("t"))
        call.start()
        batch(call)
        call.finish()

    try:
        base = _python_calls(plain)
        with_call = _python_calls(counted)
    finally:
        driver.close()
    # Per one-request batch: Counters.record, Tally.count (Call.record is
    # Counters.record without a recording span); plus a
    # fixed cost per call (making it, start: counter, no-op span; finish).
    per_call_fixed = _python_calls(lambda: telemetry.call("x").start()) + 1
    assert with_call - base <= 3 * requests + per_call_fixed
    assert telemetry.counters.snapshot().requests["get"] == requests


def test_the_global_sdk_is_used_when_configured_after_the_saver_is_made(tmp_path: Path) -> None:
    script = f"""
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from objstore_saver import ObjectStoreSaver
saver = ObjectStoreSaver.from_directory({str(tmp_path / "store")!r})
saver.get_tuple({{"configurable": {{"thread_id": "before"}}}})
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
saver.get_tuple({{"configurable": {{"thread_id": "after"}}}})
print(json.dumps([[s.name, dict(s.attributes)] for s in exporter.get_finished_spans()]))
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    spans = json.loads(out.stdout)
    calls = [attrs for name, attrs in spans if name == "objstore_saver.get_tuple"]
    assert [c["langgraph.thread_id"] for c in calls] == ["after"]
    assert (
        sum(name.startswith("LocalStore.") for name, _ in spans)
        == calls[0]["objstore_saver.requests"]
    )


def test_the_saver_works_and_counts_without_opentelemetry_installed(tmp_path: Path) -> None:
    script = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from objstore_saver import ObjectStoreSaver
from objstore_saver import telemetry
assert telemetry.otel_trace is None
saver = ObjectStoreSaver.from_directory({str(tmp_path / "store")!r})
cp = empty_checkpoint()
stored = saver.put({{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}, cp, {{}}, {{}})
assert saver.get_tuple(stored) is not None
assert not any(m.startswith("opentelemetry") for m in sys.modules)
print(saver.stats().as_dict()["requests"])
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    # The put LISTs the thread's tombstones (a process that never looked the
    # thread up), the read by id its checkpoint's keys and its namespace's
    # tombstones.
    assert out.stdout.strip() == str({"put": 1, "get": 1, "list": 3, "delete": 0})
