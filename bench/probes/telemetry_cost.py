"""CPU cost of the saver's telemetry, per storage request and per chat turn.

Run ``python -m bench.probes.telemetry_cost``. Two measurements, each in three modes:

* ``off``: the saver passes no telemetry call to its driver (the code path
  before telemetry existed; the baseline);
* ``no-sdk``: the default: counters on, spans asked of OpenTelemetry's global
  provider, which is a no-op because no SDK is configured;
* ``sdk``: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (what an
  application configures) feeding an exporter that counts and drops the
  spans, so every span is made, queued and exported by the SDK's thread
  (whose CPU is counted too; each round ends with a flush).

``driver``: one-request batches (a GET) on a store that does nothing, so the
figure is the driver's and the telemetry's own CPU per request. ``chat``: the
seed chat of ``bench.graphs`` compiled by LangGraph on an in-memory store,
CPU per turn (LangGraph's own work included). CPU is ``time.process_time``
(every thread of the process); the minimum over rounds is reported, modes
interleaved. Requests and spans are counted, not estimated.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind

from bench.graphs import SEED, chat_graph
from objstore_saver import ObjectStoreSaver
from objstore_saver.driver import Driver
from objstore_saver.plans.requests import Batch, Get
from objstore_saver.storage.base import (
    MAX_LIST_PAGE,
    ListPage,
    ObjectExistsError,
    ObjectInfo,
    ObjectNotFoundError,
    PutMode,
    ThreadedAsync,
)
from objstore_saver.telemetry import Telemetry

MODES = ("off", "no-sdk", "sdk")


class MemoryStore(ThreadedAsync):
    """A dict as an object store: no disk, no network, so the saver's CPU shows."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._keys: list[str] = []
        self._lock = threading.Lock()
        self._when = time.time()

    @property
    def location(self) -> str:
        """``memory://``."""
        return "memory://"

    def put(self, key: str, data: bytes, mode: PutMode = PutMode.OVERWRITE) -> None:
        """Store ``data``; a create finding the key taken raises ObjectExistsError."""
        with self._lock:
            if key in self._objects:
                if mode is PutMode.CREATE:
                    raise ObjectExistsError(self.location, key)
            else:
                bisect.insort(self._keys, key)
            self._objects[key] = bytes(data)

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        """The object, or a slice of it."""
        with self._lock:
            if key not in self._objects:
                raise ObjectNotFoundError(self.location, key)
            data = self._objects[key]
        return data if byte_range is None else data[byte_range[0] : byte_range[1]]

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int = MAX_LIST_PAGE
    ) -> ListPage:
        """Keys under ``prefix`` after ``start_after``, ascending."""
        when = datetime.fromtimestamp(self._when, UTC)
        with self._lock:
            if start_after is not None and start_after >= prefix:
                i = bisect.bisect_right(self._keys, start_after)
            else:
                i = bisect.bisect_left(self._keys, prefix)
            out: list[ObjectInfo] = []
            while i < len(self._keys) and self._keys[i].startswith(prefix):
                if len(out) == limit:
                    return ListPage(out, True)
                key = self._keys[i]
                out.append(ObjectInfo(key, len(self._objects[key]), when))
                i += 1
        return ListPage(out, False)

    def delete(self, keys: Sequence[str]) -> None:
        """Drop the keys."""
        with self._lock:
            for key in keys:
                if self._objects.pop(key, None) is not None:
                    self._keys.remove(key)


class _NullStore:
    location = "null://"

    def get(self, key: str, byte_range: tuple[int, int] | None = None) -> bytes:
        return b"x"


class CountingExporter(SpanExporter):
    """Counts the spans it is given and drops them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Count ``spans``."""
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _provider() -> tuple[TracerProvider, CountingExporter]:
    exporter = CountingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=100_000))
    return provider, exporter


def _cpu(action: Callable[[], None], provider: TracerProvider) -> float:
    start = time.process_time()
    action()
    provider.force_flush()
    return time.process_time() - start


def driver_cost(requests: int, rounds: int) -> dict[str, Any]:
    """CPU µs per one-request batch on a store that does nothing, by mode.

    Two more figures frame ``sdk``: ``sdk-unsampled`` (an SDK whose sampler
    drops the trace: no request spans are made) and ``sdk-bare-span``: the
    SDK's own cost of one span with the same name and attributes, started and
    ended with nothing else (the floor of any instrumentation).
    """
    store: Any = _NullStore()
    driver = Driver(store, max_workers=1)
    provider, exporter = _provider()
    unsampled = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    telemetry = {
        "no-sdk": Telemetry(store),
        "sdk": Telemetry(store, provider),
        "sdk-unsampled": Telemetry(store, unsampled),
    }
    op = Get("threads/_t/checkpoints/_/k")
    batch = Batch([op])
    bare_tracer = provider.get_tracer("bare")
    naming = telemetry["sdk"].naming

    def run(mode: str) -> None:
        if mode == "sdk-bare-span":
            for _ in range(requests):
                bare_tracer.start_span(
                    naming.name(op), kind=SpanKind.CLIENT, attributes=naming.attributes(op)
                ).end()
            return
        call = None if mode == "off" else telemetry[mode].call("get_tuple", {})
        if call is not None:
            call.start()
        for _ in range(requests):
            driver._run_batch(batch, call)
        if call is not None:
            call.finish()

    modes = (*MODES, "sdk-unsampled", "sdk-bare-span")
    best = dict.fromkeys(modes, float("inf"))
    spans = 0
    for _ in range(rounds):
        for mode in modes:
            exporter.spans = 0
            best[mode] = min(best[mode], _cpu(lambda mode=mode: run(mode), provider))
            if mode == "sdk":
                spans = exporter.spans
    driver.close()
    provider.shutdown()
    per_request = {mode: round(best[mode] / requests * 1e6, 2) for mode in modes}
    return {
        "requests_per_round": requests,
        "spans_per_round_sdk": spans,
        "cpu_us_per_request": per_request,
        "overhead_us_per_request": {
            mode: round(per_request[mode] - per_request["off"], 2)
            for mode in ("no-sdk", "sdk", "sdk-unsampled")
        },
    }


def call_cost(calls: int, rounds: int) -> dict[str, float]:
    """CPU µs of a saver call's own telemetry (count, span start and end), no request."""
    store: Any = _NullStore()
    provider, _ = _provider()
    telemetry = {"no-sdk": Telemetry(store), "sdk": Telemetry(store, provider)}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    def run(mode: str) -> None:
        tel = telemetry[mode]
        for _ in range(calls):
            call = tel.call("put", config, checkpoint_id="1f0-abc")
            call.start()
            call.finish()

    best = {mode: float("inf") for mode in telemetry}
    for _ in range(rounds):
        for mode in telemetry:
            best[mode] = min(best[mode], _cpu(lambda mode=mode: run(mode), provider))
    provider.shutdown()
    return {mode: round(best[mode] / calls * 1e6, 2) for mode in telemetry}


def _python_calls(action: Callable[[], None]) -> int:
    """Python function calls ``action`` makes, in this thread and threads it starts."""
    counter = itertools.count()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            next(counter)  # atomic under the GIL

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return next(counter)


def chat_cost(turns: int, rounds: int) -> dict[str, Any]:
    """CPU ms and Python calls per chat turn, requests and spans per turn, by mode.

    The last round runs under a profiler counting Python function calls: a
    figure that does not depend on the machine's load, unlike the CPU time.
    """
    provider, exporter = _provider()
    best = dict.fromkeys(MODES, float("inf"))
    python_calls: dict[str, int] = {}
    requests = spans = calls = 0
    for r in range(rounds + 1):
        for mode in MODES:
            # A new saver per run: its worker threads start inside the measured run.
            saver = ObjectStoreSaver(
                MemoryStore(), tracer_provider=provider if mode == "sdk" else None
            )
            if mode == "off":
                saver._call = lambda *args, **kwargs: None  # type: ignore[method-assign]
            graph = chat_graph(saver, SEED)
            config = {"configurable": {"thread_id": f"chat-{r}"}}
            exporter.spans = 0

            def chat(graph: Any = graph, config: dict[str, Any] = config) -> None:
                for t in range(turns):
                    graph.invoke({"messages": SEED.inputs(t)}, config)

            if r == rounds:
                python_calls[mode] = _python_calls(chat)
                provider.force_flush()
            else:
                best[mode] = min(best[mode], _cpu(chat, provider))
            if mode == "no-sdk":
                requests = saver.stats().total_requests
                calls = sum(saver.stats().calls.values())
            if mode == "sdk":
                spans = exporter.spans
            saver.close()
    provider.shutdown()
    per_turn = {mode: round(best[mode] / turns * 1e3, 3) for mode in MODES}
    return {
        "turns": turns,
        "requests_per_turn": round(requests / turns, 2),
        "calls_per_turn": round(calls / turns, 2),
        "spans_per_turn_sdk": round(spans / turns, 2),
        "cpu_ms_per_turn": per_turn,
        "overhead_pct_per_turn": {
            mode: round(100 * (per_turn[mode] - per_turn["off"]) / per_turn["off"], 1)
            for mode in MODES[1:]
        },
        "python_calls_per_turn": {mode: round(n / turns) for mode, n in python_calls.items()},
        "python_calls_overhead_pct": {
            mode: round(100 * (python_calls[mode] - python_calls["off"]) / python_calls["off"], 2)
            for mode in MODES[1:]
        },
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print both measurements as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    driver = driver_cost(args.requests, args.rounds)
    calls = call_cost(args.requests, args.rounds)
    chat = chat_cost(args.turns, args.rounds)
    # The chat's CPU varies by a few percent run to run, more than the no-SDK
    # overhead; this figure adds up the two measured costs instead.
    per_request = driver["overhead_us_per_request"]
    estimate = {
        mode: round(
            chat["requests_per_turn"] * per_request[mode] + chat["calls_per_turn"] * calls[mode], 1
        )
        for mode in ("no-sdk", "sdk")
    }
    result = {
        "driver": driver,
        "call_cpu_us": calls,
        "chat": chat,
        "telemetry_us_per_turn": estimate,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
