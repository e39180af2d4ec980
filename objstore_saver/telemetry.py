"""What a saver tells about its work: OpenTelemetry spans and plain counters.

Every saver call is one :class:`Call`, counted in :class:`SaverStats` whether
or not tracing is on. A call whose span does not record (no SDK, or sampled
out) makes no request spans: the disabled path costs one ``is None`` test a
request. ``docs/observability.md`` lists every span, attribute and counter.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from objstore_saver._version import __version__
from objstore_saver.plans.requests import (
    Delete,
    Get,
    KeyState,
    ListKeys,
    Op,
    Put,
    Shred,
    aexecute,
    execute,
    shredder,
)
from objstore_saver.storage.base import (
    MAX_DELETE_BATCH,
    DescribesRequests,
    ObjectStore,
    PutMode,
    RequestFacts,
    layers,
)

try:
    from opentelemetry import context as otel_context, trace as otel_trace
except ImportError:  # the optional extra "otel" is not installed: counters only
    otel_context = None  # type: ignore[assignment]
    otel_trace = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span, Tracer, TracerProvider

#: Request kinds, as counted (and named in ``requests`` of :class:`SaverStats`).
KINDS = ("put", "get", "list", "delete")
#: Instrumentation scope name of the tracer.
SCOPE = "objstore_saver"
#: Prefix of the call span names: ``objstore_saver.put``, ``objstore_saver.aget_tuple``...
CALL_SPAN_PREFIX = "objstore_saver."


# --- counters ------------------------------------------------------------------


@dataclass(frozen=True)
class SaverStats:
    """A snapshot of a saver's counters (``docs/observability.md``); ``later - earlier``
    is the work in between."""

    calls: Mapping[str, int] = field(default_factory=dict)
    """Saver calls by method name (``put``, ``aput``, ``get_tuple``...), failed ones included."""
    call_errors: Mapping[str, int] = field(default_factory=dict)
    """Saver calls that raised, by method name."""
    requests: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    """Storage requests by kind: ``put``, ``get``, ``list``, ``delete`` (per 1,000 keys)."""
    request_errors: int = 0
    """Requests that raised (a missing key on GET and a taken key on PUT are not errors)."""
    bytes_sent: int = 0
    """Bytes of PUT bodies, sent or attempted."""
    bytes_received: int = 0
    """Bytes of GET results."""
    create_conflicts: int = 0
    """Create-only PUTs that found the key taken (S3's 412): the object was already stored."""
    not_found: int = 0
    """GETs that found no object at the key (S3's 404)."""

    @property
    def total_requests(self) -> int:
        """Requests of every kind."""
        return sum(self.requests.values())

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as plain dicts and ints, ``total_requests`` included."""
        out = asdict(self)
        out["total_requests"] = self.total_requests
        return out

    def __sub__(self, earlier: SaverStats) -> SaverStats:
        return self._combined(earlier, -1)

    def __add__(self, other: SaverStats) -> SaverStats:
        return self._combined(other, 1)

    def _combined(self, other: SaverStats, sign: int) -> SaverStats:
        def each(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
            return {k: a.get(k, 0) + sign * b.get(k, 0) for k in sorted(set(a) | set(b))}

        totals = {n: getattr(self, n) + sign * getattr(other, n) for n in _TOTALS}
        return SaverStats(
            calls={k: v for k, v in each(self.calls, other.calls).items() if v},
            call_errors={k: v for k, v in each(self.call_errors, other.call_errors).items() if v},
            requests=each(self.requests, other.requests),
            **totals,
        )


#: The counters of :class:`SaverStats` that are one number each.
_TOTALS = ("request_errors", "bytes_sent", "bytes_received", "create_conflicts", "not_found")


class Tally:
    """Request counters of one batch or one call (not locked: one owner)."""

    __slots__ = (*KINDS, *_TOTALS)

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def count(self, op: Op, outcome: Any) -> None:
        """Count one request and its outcome (its result, or the exception it raised)."""
        if isinstance(op, Put):
            self.put += 1
            self.bytes_sent += len(op.data)
            if outcome is False:
                self.create_conflicts += 1
        elif isinstance(op, Get):
            self.get += 1
            if outcome is None:
                self.not_found += 1
            elif isinstance(outcome, bytes):
                self.bytes_received += len(outcome)
        elif isinstance(op, ListKeys):
            self.list += 1
        elif isinstance(op, Shred):
            self.delete += 1 if outcome is True else 0
        elif isinstance(op, KeyState):
            pass  # a key object's GET, once per thread and process, is the sealing layer's
        else:
            self.delete += delete_requests(op)
        if isinstance(outcome, BaseException):
            self.request_errors += 1


def _no_request(store: ObjectStore, op: Op) -> bool:
    """A key operation on a store that does not encrypt: nothing is sent, no span is made."""
    return isinstance(op, Shred | KeyState) and shredder(store) is None


def delete_requests(op: Delete) -> int:
    """Requests a delete of ``op.keys`` makes: one per 1,000 keys."""
    return -(-len(op.keys) // MAX_DELETE_BATCH)


class Counters:
    """The saver-wide counters behind ``saver.stats()``; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._call_errors: dict[str, int] = {}
        self._tally = Tally()

    def call(self, method: str, *, failed: bool = False) -> None:
        """Count a call of ``method`` (``failed``: one that raised)."""
        counts = self._call_errors if failed else self._calls
        with self._lock:
            counts[method] = counts.get(method, 0) + 1

    def record(self, ops: Sequence[Op], outcomes: Sequence[Any]) -> None:
        """Count the requests of one batch and their outcomes."""
        with self._lock:
            count = self._tally.count
            for op, outcome in zip(ops, outcomes, strict=True):
                count(op, outcome)

    def add_bytes(self, sent: int = 0, received: int = 0) -> None:
        """Count bytes a layer under the plans added to requests they counted (envelopes)."""
        with self._lock:
            self._tally.bytes_sent += sent
            self._tally.bytes_received += received

    def snapshot(self) -> SaverStats:
        """The counters now."""
        with self._lock:
            t = self._tally
            return SaverStats(
                calls=dict(self._calls),
                call_errors=dict(self._call_errors),
                requests={kind: getattr(t, kind) for kind in KINDS},
                **{name: getattr(t, name) for name in _TOTALS},
            )

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._calls.clear()
            self._call_errors.clear()
            self._tally = Tally()


# --- request span names and attributes -------------------------------------------

#: Each request's S3 operation and kind (as counted).
_OPERATIONS: dict[type, tuple[str, str]] = {
    Put: ("PutObject", "put"),
    Get: ("GetObject", "get"),
    ListKeys: ("ListObjectsV2", "list"),
    Delete: ("DeleteObjects", "delete"),
    Shred: ("DeleteObject", "delete"),
    KeyState: ("GetObject", "get"),
}


class RequestNaming:
    """Names and attributes of the request spans of one store.

    S3 follows OpenTelemetry's AWS SDK conventions; a local directory uses the
    same operation names with ``file.*`` attributes; any other store, its class.
    """

    def __init__(self, store: ObjectStore) -> None:
        *_, base = layers(store)
        if isinstance(base, DescribesRequests):
            facts = base.request_facts()
        else:
            facts = RequestFacts(type(base).__name__)
        self._service = facts.service
        self._key_prefix = facts.key_prefix
        self._file_root = facts.file_root
        self._s3 = facts.s3
        self._common = dict(facts.attributes)

    def name(self, op: Op) -> str:
        """Span name, ``Service.Operation``: ``S3.GetObject``, ``LocalStore.PutObject``..."""
        return f"{self._service}.{_OPERATIONS[type(op)][0]}"

    def attributes(self, op: Op) -> dict[str, Any]:
        """Attributes known before the request is sent."""
        attrs = dict(self._common)
        method, kind = _OPERATIONS[type(op)]
        attrs["objstore_saver.request.kind"] = kind
        if self._s3:
            attrs["rpc.method"] = method
        if isinstance(op, Put | Get):
            attrs["objstore_saver.key"] = op.key
            if self._s3:
                attrs["aws.s3.key"] = self._key_prefix + op.key
            elif self._file_root is not None:
                attrs["file.path"] = os.path.join(self._file_root, *op.key.split("/"))
        if isinstance(op, Put):
            attrs["objstore_saver.bytes_sent"] = len(op.data)
            attrs["objstore_saver.put.create_only"] = op.mode is PutMode.CREATE
        elif isinstance(op, ListKeys):
            attrs["objstore_saver.list.prefix"] = self._key_prefix + op.prefix
        elif isinstance(op, Delete):
            attrs["objstore_saver.delete.keys"] = len(op.keys)
            attrs["objstore_saver.requests"] = delete_requests(op)
        return attrs


def _outcome_attributes(span: Span, op: Op, result: Any) -> None:
    if isinstance(op, Get):
        if result is None:
            span.set_attribute("objstore_saver.not_found", True)
        else:
            span.set_attribute("objstore_saver.bytes_received", len(result))
    elif isinstance(op, Put) and result is False:
        span.set_attribute("objstore_saver.create_conflict", True)


def _record_error(span: Span, exc: BaseException) -> None:
    """Mark a span failed, as OpenTelemetry's recording-errors convention says."""
    from opentelemetry.trace import Status, StatusCode

    kind = type(exc)
    span.set_attribute("error.type", f"{kind.__module__}.{kind.__qualname__}")
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {exc}"))


# --- the telemetry of a saver, and one call -------------------------------------------


class Telemetry:
    """Counters, tracer and request naming shared by every call of one saver.

    ``tracer_provider``: ``None`` uses the global one; ignored without ``opentelemetry-api``.
    """

    def __init__(self, store: ObjectStore, tracer_provider: TracerProvider | None = None) -> None:
        self.counters = Counters()
        self.naming = RequestNaming(store)
        self.location = store.location
        self.tracer: Tracer | None = None
        if otel_trace is not None:
            self.tracer = otel_trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        #: ``call(method, config=None, *, thread_id=None, checkpoint=None, **attributes)``
        self.call: Callable[..., Call] = functools.partial(Call, self)


def _identifier(value: object) -> str | None:
    # Only strings and ints become attributes; anything else is left for the
    # plan to refuse with its own error.
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


class Call:
    """One saver call: counts its requests, and traces it when a span records.

    The driver calls :meth:`start`, :meth:`record` after each batch and
    :meth:`finish` (a call that returns untraced needs none); while :attr:`span`
    records, requests run through :meth:`execute` / :meth:`aexecute`, one CLIENT
    span each. Identifiers are read only then.
    """

    __slots__ = (
        "_attributes",
        "_checkpoint",
        "_config",
        "_parent",
        "_tally",
        "_thread_id",
        "method",
        "record",
        "span",
        "telemetry",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        method: str,
        config: object = None,
        *,
        thread_id: object = None,
        checkpoint: object = None,
        **attributes: Any,
    ) -> None:
        self.telemetry = telemetry
        self.method = method
        self._config = config
        self._thread_id = thread_id
        self._checkpoint = checkpoint
        self._attributes = attributes
        self.span: Span | None = None
        """The call's span while it records, else ``None``."""
        self._parent: OtelContext | None = None
        self._tally: Tally | None = None
        # Without a recording span a batch is counted by the saver's counters alone.
        self.record: Callable[[Sequence[Op], Sequence[Any]], None] = telemetry.counters.record
        """Count the requests of one batch: results, or the exceptions raised."""

    def start(self) -> None:
        """Count the call and open its span (current context is its parent)."""
        telemetry = self.telemetry
        telemetry.counters.call(self.method)
        tracer = telemetry.tracer
        if tracer is None:
            return
        span = tracer.start_span(CALL_SPAN_PREFIX + self.method, kind=otel_trace.SpanKind.INTERNAL)
        if not span.is_recording():
            return
        span.set_attributes(self._start_attributes())
        self.span = span
        self._parent = otel_trace.set_span_in_context(span)
        self._tally = Tally()
        self.record = self._record_traced

    def _start_attributes(self) -> dict[str, Any]:
        # Read defensively: a malformed config is the plan's to refuse, by name.
        config = self._config if isinstance(self._config, Mapping) else {}
        conf = config.get("configurable")
        if not isinstance(conf, Mapping):
            conf = {}
        attrs: dict[str, Any] = {
            "objstore_saver.operation": self.method,
            "objstore_saver.store": self.telemetry.location,
        }
        thread = _identifier(
            self._thread_id if self._thread_id is not None else conf.get("thread_id")
        )
        if thread is not None:
            attrs["langgraph.thread_id"] = thread
        if conf:
            ns = conf.get("checkpoint_ns") or ""
            if isinstance(ns, str):
                attrs["langgraph.checkpoint_ns"] = ns
        checkpoint = self._checkpoint
        new_id = checkpoint.get("id") if isinstance(checkpoint, Mapping) else None
        cid = _identifier(new_id or conf.get("checkpoint_id"))
        if cid:
            attrs["langgraph.checkpoint_id"] = cid
        for name, value in self._attributes.items():
            attrs["objstore_saver." + name] = value
        return attrs

    def _record_traced(self, ops: Sequence[Op], outcomes: Sequence[Any]) -> None:
        self.telemetry.counters.record(ops, outcomes)
        tally = self._tally
        assert tally is not None
        for op, outcome in zip(ops, outcomes, strict=True):
            tally.count(op, outcome)

    def finish(self, error: BaseException | None = None, value: Any = None) -> None:
        """Count a failure, put the request totals (and the checkpoint id ``value``
        names) on the span and end it."""
        if error is not None:
            self.telemetry.counters.call(self.method, failed=True)
        span = self.span
        if span is None:
            return
        config = getattr(value, "config", value)
        if isinstance(config, Mapping):
            conf = config.get("configurable")
            cid = _identifier(conf.get("checkpoint_id")) if isinstance(conf, Mapping) else None
            if cid:
                span.set_attribute("langgraph.checkpoint_id", cid)
        tally = self._tally
        assert tally is not None
        attrs = {f"objstore_saver.requests.{kind}": getattr(tally, kind) for kind in KINDS}
        attrs["objstore_saver.requests"] = sum(attrs.values())
        attrs.update({f"objstore_saver.{name}": getattr(tally, name) for name in _TOTALS})
        span.set_attributes(attrs)
        if error is not None:
            _record_error(span, error)
        span.end()
        self.span = None

    @contextlib.contextmanager
    def _requesting(self, op: Op) -> Iterator[list[Any]]:
        """One request's CLIENT span, current while the request runs.

        The parent is passed explicitly, so requests run in pool threads or
        gathered tasks are all children of the call's span.
        """
        naming = self.telemetry.naming
        tracer = self.telemetry.tracer
        assert tracer is not None and otel_context is not None
        span = tracer.start_span(
            naming.name(op),
            context=self._parent,
            kind=otel_trace.SpanKind.CLIENT,
            attributes=naming.attributes(op),
        )
        token = otel_context.attach(otel_trace.set_span_in_context(span, self._parent))
        result: list[Any] = []
        try:
            yield result
            _outcome_attributes(span, op, result[0])
        except BaseException as exc:
            _record_error(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def execute(self, store: ObjectStore, op: Op) -> Any:
        """Carry out one request under its span (any thread)."""
        if _no_request(store, op):
            return execute(store, op)
        with self._requesting(op) as result:
            result.append(execute(store, op))
        return result[0]

    async def aexecute(self, store: ObjectStore, op: Op) -> Any:
        """Coroutine twin of :meth:`execute` (any task)."""
        if _no_request(store, op):
            return await aexecute(store, op)
        with self._requesting(op) as result:
            result.append(await aexecute(store, op))
        return result[0]
