"""Fault injection for tests (docs/reliability.md): a store wrapper and botocore client hooks.

:class:`FaultyStore` makes chosen requests of any store raise
:class:`InjectedFaultError` instead of (for a lost response, after) carrying
them out; nothing retries there. :func:`install_client_faults` fails chosen
HTTP attempts of a boto3 client, so botocore's retries and the S3 store's
lost-response handling run against a real server. A *fault plan* (any callable
taking a :class:`Request`, returning a :class:`Fault` or ``None``) picks the
requests: :class:`FailAt`, :class:`FailWhere` and :class:`RandomFaults`.
"""

from __future__ import annotations

import contextlib
import enum
import random
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from objstore_saver.storage.base import ObjectStore, StorageError
from objstore_saver.storage.layer import Answer, Layer
from objstore_saver.storage.requests import Delete, Get, ListKeys, Put, StorageRequest


class Fault(enum.Enum):
    """What goes wrong with one request."""

    ERROR = "error"
    """HTTP 500 InternalError: the request was not carried out."""
    SLOW_DOWN = "slow_down"
    """HTTP 503 SlowDown: the request was not carried out."""
    CONNECTION_RESET = "connection_reset"
    """The connection closed before the request reached the server."""
    READ_TIMEOUT = "read_timeout"
    """No answer in time; the request was not carried out."""
    LOST_RESPONSE = "lost_response"
    """The request was carried out, then its response was lost."""


#: Faults after which the request is known not to have been carried out.
NOT_CARRIED_OUT = frozenset(set(Fault) - {Fault.LOST_RESPONSE})


@dataclass(frozen=True, slots=True)
class Request:
    """One request as a fault plan sees it.

    ``index`` counts the wrapper's requests from 0 (a client's retried attempts
    count apart). ``op`` is ``put``, ``get``, ``list`` or ``delete``, or a client
    hook's S3 operation name (``PutObject``...). ``key`` is the key, a list's
    prefix, a delete's first key, or a client hook's URL path (bucket included);
    ``keys`` every key of a ``delete`` (else empty).
    """

    index: int
    op: str
    key: str
    keys: tuple[str, ...] = ()


FaultPlan = Callable[[Request], Fault | None]


@dataclass(frozen=True)
class FailAt:
    """Fail the requests whose (0-based) indexes are listed, with ``fault``."""

    indexes: Collection[int]
    fault: Fault = Fault.ERROR

    def __call__(self, request: Request) -> Fault | None:
        return self.fault if request.index in self.indexes else None


@dataclass
class FailWhere:
    """Fail requests matching ``predicate`` with ``fault``, at most ``times`` times (None: all)."""

    predicate: Callable[[Request], bool]
    fault: Fault = Fault.ERROR
    times: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __call__(self, request: Request) -> Fault | None:
        if not self.predicate(request):
            return None
        with self._lock:
            if self.times is not None:
                if self.times <= 0:
                    return None
                self.times -= 1
        return self.fault


class RandomFaults:
    """Fail each request with probability ``rate``, drawing the fault from ``faults``.

    Faults are drawn uniformly. Decisions depend only on the seed and the
    request index, so the same requests in the same order fail the same way.
    """

    def __init__(self, rate: float, seed: int, faults: Sequence[Fault] = tuple(Fault)) -> None:
        if not 0 <= rate <= 1:
            raise ValueError(f"rate must be between 0 and 1, got {rate}")
        if not faults:
            raise ValueError("faults must not be empty")
        self.rate = rate
        self.seed = seed
        self.faults = tuple(faults)

    def __call__(self, request: Request) -> Fault | None:
        rng = random.Random(self.seed * 1_000_003 + request.index)
        if rng.random() >= self.rate:
            return None
        return rng.choice(self.faults)


class InjectedFaultError(StorageError):
    """The error a :class:`FaultyStore` raises for an injected fault."""

    def __init__(self, fault: Fault, request: Request, location: str) -> None:
        self.fault = fault
        self.request = request
        super().__init__(
            f"injected {fault.value} on {request.op} of key {request.key!r} "
            f"(request {request.index}) in {location}"
        )


class FaultyStore(Layer):
    """An :class:`~objstore_saver.storage.base.ObjectStore` that fails on purpose.

    Thread-safe. Every call is one request (a ``delete`` of many keys too).
    Without a ``plan`` it injects nothing and only counts requests.
    """

    def __init__(self, inner: ObjectStore, plan: FaultPlan | None = None) -> None:
        super().__init__(inner)
        self.plan = plan
        self._lock = threading.Lock()
        self.requests = 0
        """Requests seen so far, failed ones included."""
        self.injected: list[tuple[Request, Fault]] = []
        """Every injected fault, in the order the requests were seen."""
        self.seen: list[Request] = []
        """Every request, in the order they were seen."""

    def _decide(
        self, op: str, key: str, keys: tuple[str, ...] = ()
    ) -> tuple[Request, Fault | None]:
        with self._lock:
            request = Request(self.requests, op, key, keys)
            self.requests += 1
            self.seen.append(request)
        fault = self.plan(request) if self.plan is not None else None
        if fault is not None:
            with self._lock:
                self.injected.append((request, fault))
            if fault in NOT_CARRIED_OUT:
                raise InjectedFaultError(fault, request, self.location)
        return request, fault

    @contextlib.contextmanager
    def around(self, request: StorageRequest) -> Iterator[Answer]:
        """Fail ``request`` before it goes down, or lose its answer, as the plan says."""
        match request:
            case Put(key):
                seen, fault = self._decide("put", key)
            case Get(key):
                seen, fault = self._decide("get", key)
            case ListKeys(prefix):
                seen, fault = self._decide("list", prefix)
            case Delete(keys):
                seen, fault = self._decide("delete", keys[0] if keys else "", keys)
        if fault is None:
            yield Answer()
            return
        # Lost response: the caller sees an error whatever the store answered
        # (the object stored, or "exists", or "not found").
        try:
            yield Answer()
        except StorageError as exc:
            raise InjectedFaultError(fault, seen, self.location) from exc
        raise InjectedFaultError(fault, seen, self.location)


class _Raw:
    """The raw body of a synthetic response, as ``AWSResponse`` reads it."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def error_response(url: str, status: int, code: str, message: str) -> Any:
    """A botocore response carrying an S3 error document, as a ``before-send`` hook returns it."""
    from botocore.awsrequest import AWSResponse

    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{message}</Message><RequestId>injected</RequestId></Error>"
    ).encode()
    headers = {"Content-Type": "application/xml", "Content-Length": str(len(body))}
    return AWSResponse(url, status, headers, _Raw(body))


class ClientFaults:
    """The faults installed on one boto3 client; see :func:`install_client_faults`.

    ``attempts`` counts HTTP attempts, failed ones included; ``injected`` lists
    every injected fault with its request, in order.
    """

    def __init__(self, client: Any, plan: FaultPlan) -> None:
        from botocore.httpsession import URLLib3Session

        self._client = client
        self.plan = plan
        self._lock = threading.Lock()
        self._session = URLLib3Session()
        self.attempts = 0
        self.injected: list[tuple[Request, Fault]] = []
        self._handler = self._before_send
        client.meta.events.register("before-send.s3", self._handler)

    def remove(self) -> None:
        """Uninstall the hook; the client behaves normally again."""
        self._client.meta.events.unregister("before-send.s3", self._handler)
        self._session.close()

    def _before_send(self, request: Any, event_name: str, **_: Any) -> Any:
        from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

        op = event_name.rsplit(".", 1)[-1]
        path = request.url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
        with self._lock:
            req = Request(self.attempts, op, path)
            self.attempts += 1
        fault = self.plan(req)
        if fault is None:
            return None
        with self._lock:
            self.injected.append((req, fault))
        if fault is Fault.ERROR:
            return error_response(request.url, 500, "InternalError", "injected fault")
        if fault is Fault.SLOW_DOWN:
            return error_response(request.url, 503, "SlowDown", "injected fault")
        if fault is Fault.CONNECTION_RESET:
            raise ConnectionClosedError(endpoint_url=request.url)
        if fault is Fault.READ_TIMEOUT:
            raise ReadTimeoutError(endpoint_url=request.url)
        # Lost response: the server carries the request out, the client never
        # hears of it and retries it as a new attempt.
        self._session.send(request).content  # noqa: B018 - read so the request completes
        request.reset_stream()
        raise ConnectionClosedError(endpoint_url=request.url)


def install_client_faults(client: Any, plan: FaultPlan) -> ClientFaults:
    """Make HTTP attempts of a boto3 S3 client fail as ``plan`` says.

    The hook runs before each attempt is sent, so botocore sees the fault as
    it would see a real one and applies its retry mode; a lost response is
    sent for real, then reported as a closed connection. Hooks are per client;
    the result has the counters and a ``remove`` method.
    """
    return ClientFaults(client, plan)
