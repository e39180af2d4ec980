"""Meters: what a saver sent to storage, read the same way for every saver.

A meter's :meth:`snapshot` returns a :class:`Reading`; the difference of two
readings is what happened in between. S3 savers are read from the proxy's
counters, the local-directory saver from a :class:`~objstore_saver.MeteredStore`,
and the savers without object storage (in memory, SQLite, PostgreSQL) from the
bytes their serializer produced and the saver calls they received.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from objstore_saver import MeteredStore


@dataclass(frozen=True)
class Reading:
    """Counters at one moment, or the difference of two moments."""

    requests: Mapping[str, int] = field(default_factory=dict)
    bytes_sent: int = 0
    bytes_received: int = 0
    largest_request_body: int = 0
    largest_response_body: int = 0
    objects_written: int = 0
    server_s: float = 0.0
    """Seconds the S3 server itself took, summed over requests (proxy meter only)."""

    @property
    def total_requests(self) -> int:
        """Requests of every operation."""
        return sum(self.requests.values())

    def __sub__(self, earlier: Reading) -> Reading:
        """What happened between ``earlier`` and this reading.

        The largest bodies are those of this reading: meters reset them by
        :meth:`Meter.begin`, which the workloads call before each measured step.
        """
        ops = set(self.requests) | set(earlier.requests)
        requests = {
            op: self.requests.get(op, 0) - earlier.requests.get(op, 0)
            for op in sorted(ops)
            if self.requests.get(op, 0) - earlier.requests.get(op, 0)
        }
        return Reading(
            requests=requests,
            bytes_sent=self.bytes_sent - earlier.bytes_sent,
            bytes_received=self.bytes_received - earlier.bytes_received,
            largest_request_body=self.largest_request_body,
            largest_response_body=self.largest_response_body,
            objects_written=self.objects_written - earlier.objects_written,
            server_s=self.server_s - earlier.server_s,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return {
            "requests": dict(self.requests),
            "total_requests": self.total_requests,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "largest_request_body": self.largest_request_body,
            "largest_response_body": self.largest_response_body,
            "objects_written": self.objects_written,
            "server_s": self.server_s,
        }


class Meter:
    """Base meter: a source of readings.

    ``kind`` says what the counts mean: ``"s3"`` (HTTP requests at the proxy),
    ``"store"`` (object-store calls) or ``"serde"`` (serialized bytes and saver
    calls; there is no object storage to bill).
    """

    kind = "none"

    def snapshot(self) -> Reading:
        """Counters now."""
        raise NotImplementedError

    def begin(self) -> Reading:
        """Start a measured step: reset the largest-body maxima, return a reading."""
        return self.snapshot()


class ProxyMeter(Meter):
    """Reads the counters of a :class:`~bench.proxy.MeteringProxy`.

    Savers are measured one at a time, so the proxy's counters between two
    readings belong to the saver being measured.
    """

    kind = "s3"

    def __init__(self, proxy_url: str) -> None:
        self.base = proxy_url.rstrip("/") + "/__bench__/"
        self.url = self.base + "counters"

    def begin(self) -> Reading:
        req = urllib.request.Request(self.base + "reset-maxima", data=b"", method="POST")
        with urllib.request.urlopen(req) as resp:
            resp.read()
        return self.snapshot()

    def snapshot(self) -> Reading:
        with urllib.request.urlopen(self.url) as resp:
            data = json.loads(resp.read())
        return Reading(
            requests=data["requests"],
            bytes_sent=data["bytes_sent"],
            bytes_received=data["bytes_received"],
            largest_request_body=data["largest_request_body"],
            largest_response_body=data["largest_response_body"],
            objects_written=data["objects_written"],
            server_s=data["server_s"],
        )


def set_proxy_delay(proxy_url: str, delay_ms: float) -> None:
    """Change the round trip the proxy injects."""
    req = urllib.request.Request(
        proxy_url.rstrip("/") + f"/__bench__/delay?ms={delay_ms}", method="PUT"
    )
    with urllib.request.urlopen(req) as resp:
        resp.read()


def open_tcp_relay(proxy_url: str, host: str, port: int) -> int:
    """Open a relay to ``host:port`` in the proxy's process, delayed like S3 requests; its port."""
    req = urllib.request.Request(
        proxy_url.rstrip("/") + f"/__bench__/tcp-relay?to={host}:{port}", method="PUT"
    )
    with urllib.request.urlopen(req) as resp:
        return int(json.loads(resp.read())["port"])


class StoreMeter(Meter):
    """Reads a :class:`~objstore_saver.MeteredStore` (the local-directory backend)."""

    kind = "store"

    def __init__(self, store: MeteredStore) -> None:
        self.store = store

    def snapshot(self) -> Reading:
        m = self.store.snapshot()
        return Reading(
            requests={op: n for op, n in m.requests.items() if n},
            bytes_sent=m.bytes_sent,
            bytes_received=m.bytes_received,
            largest_request_body=m.largest_request_body,
            largest_response_body=m.largest_response_body,
            objects_written=m.objects_put,
        )


class CountingSerializer(JsonPlusSerializer):
    """LangGraph's default serializer, counting the bytes it produces and reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self.dumped = 0
        self.loaded = 0
        self.largest_dump = 0
        self.largest_load = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize and count the bytes."""
        type_, data = super().dumps_typed(obj)
        with self._lock:
            self.dumped += len(data)
            self.largest_dump = max(self.largest_dump, len(data))
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Count the bytes and deserialize."""
        with self._lock:
            self.loaded += len(data[1])
            self.largest_load = max(self.largest_load, len(data[1]))
        return super().loads_typed(data)

    def reset_maxima(self) -> None:
        """Forget the largest bodies seen so far."""
        with self._lock:
            self.largest_dump = self.largest_load = 0


#: Saver methods counted as "requests" where there is no object storage.
SAVER_CALLS = ("get_tuple", "list", "put", "put_writes", "delete_thread", "prune")


class CallCounter:
    """Counts the calls a saver instance receives, sync and async alike.

    Installs counting wrappers as instance attributes, so LangGraph's own calls
    through the checkpointer are counted without changing what they do.
    """

    def __init__(self, saver: Any) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.items: dict[str, int] = {}
        for name in SAVER_CALLS:
            self._wrap(saver, name, name)
            self._wrap(saver, "a" + name, name)

    def _wrap(self, saver: Any, attr: str, name: str) -> None:
        original = getattr(saver, attr, None)
        if original is None:
            return
        counter = self

        if attr == "alist":

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                counter.count(name, args)
                return original(*args, **kwargs)

        elif attr.startswith("a"):

            async def wrapper(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                counter.count(name, args)
                return await original(*args, **kwargs)

        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                counter.count(name, args)
                return original(*args, **kwargs)

        setattr(saver, attr, wrapper)

    def count(self, name: str, args: tuple[Any, ...]) -> None:
        """Record one call (and, for ``put_writes``, how many writes it carried)."""
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == "put_writes" and len(args) >= 2:
                self.items["writes"] = self.items.get("writes", 0) + len(args[1])

    def snapshot(self) -> dict[str, int]:
        """Calls so far, plus ``writes`` (items passed to ``put_writes``)."""
        with self._lock:
            return {**self.calls, **self.items}


class SerdeMeter(Meter):
    """Serialized bytes as "bytes written", saver calls as "requests"."""

    kind = "serde"

    def __init__(self, serde: CountingSerializer, calls: CallCounter) -> None:
        self.serde = serde
        self.calls = calls

    def begin(self) -> Reading:
        self.serde.reset_maxima()
        return self.snapshot()

    def snapshot(self) -> Reading:
        calls = self.calls.snapshot()
        return Reading(
            requests={k: v for k, v in calls.items() if k != "writes"},
            bytes_sent=self.serde.dumped,
            bytes_received=self.serde.loaded,
            largest_request_body=self.serde.largest_dump,
            largest_response_body=self.serde.largest_load,
            objects_written=calls.get("put", 0) + calls.get("writes", 0),
        )
