"""The benchmark's meters count what they claim to: requests, bytes, largest bodies.

Counts only, never timings: the proxy runs with no injected delay.
"""

from __future__ import annotations

import gc
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from bench.meters import (
    CallCounter,
    CountingSerializer,
    ProxyMeter,
    Reading,
    SerdeMeter,
    StoreMeter,
    open_tcp_relay,
    set_proxy_delay,
)
from bench.probes.saturation import GcTimer
from bench.proxy import MeteringProxy, classify
from objstore_saver import Boto3S3Store, LocalStore, MeteredStore, ObjectStoreSaver


@pytest.fixture
def proxy(s3_endpoint: Any) -> Iterator[MeteringProxy]:
    """A metering proxy without delay in front of the session's S3 endpoint."""
    upstream = s3_endpoint.url.split("://", 1)[1]
    server = MeteringProxy(upstream, delay=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _client(s3_endpoint: Any, proxy: MeteringProxy) -> Any:
    import boto3
    import botocore.config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=proxy.url,
        region_name=s3_endpoint.region,
        aws_access_key_id=s3_endpoint.access_key,
        aws_secret_access_key=s3_endpoint.secret_key,
        config=botocore.config.Config(
            s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 1}
        ),
    )


def test_proxy_counts_operations_bodies_and_largest(
    s3_endpoint: Any, s3_bucket: str, proxy: MeteringProxy
) -> None:
    client = _client(s3_endpoint, proxy)
    meter = ProxyMeter(proxy.url)
    start = meter.begin()
    bodies = {"a/1": b"x" * 1000, "a/2": b"y" * 70_000, "a/3": b""}
    for key, body in bodies.items():
        client.put_object(Bucket=s3_bucket, Key=key, Body=body)
    with pytest.raises(botocore.exceptions.ClientError):
        client.put_object(Bucket=s3_bucket, Key="a/1", Body=b"z" * 10, IfNoneMatch="*")
    got = client.get_object(Bucket=s3_bucket, Key="a/2")["Body"].read()
    client.head_object(Bucket=s3_bucket, Key="a/1")
    listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="a/")
    client.delete_objects(Bucket=s3_bucket, Delete={"Objects": [{"Key": "a/1"}, {"Key": "a/3"}]})
    d = meter.snapshot() - start

    assert got == bodies["a/2"] and listed["KeyCount"] == 3
    assert dict(d.requests) == {
        "PutObject": 4,
        "GetObject": 1,
        "HeadObject": 1,
        "ListObjectsV2": 1,
        "DeleteObjects": 1,
    }
    assert d.objects_written == 3  # the conflicting create-only put stored nothing
    delete_body = d.bytes_sent - sum(map(len, bodies.values())) - 10
    assert 0 < delete_body < 1000  # the DeleteObjects XML, nothing else
    assert d.largest_request_body == 70_000
    assert d.largest_response_body == 70_000
    assert d.bytes_received > 70_000  # the object plus the listing and error XML


def test_proxy_maxima_reset_and_delay_control(
    s3_endpoint: Any, s3_bucket: str, proxy: MeteringProxy
) -> None:
    client = _client(s3_endpoint, proxy)
    meter = ProxyMeter(proxy.url)
    client.put_object(Bucket=s3_bucket, Key="big", Body=b"b" * 50_000)
    meter.begin()
    client.put_object(Bucket=s3_bucket, Key="small", Body=b"s" * 10)
    assert meter.snapshot().largest_request_body == 10
    set_proxy_delay(proxy.url, 35)
    assert proxy.delay == pytest.approx(0.035)
    set_proxy_delay(proxy.url, 0)
    assert proxy.delay == 0
    # Control requests are not counted as S3 requests.
    assert meter.snapshot().requests == {"PutObject": 2}


def _raw_exchange(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``; return the bytes received up to the end of one response's head."""
    sock.sendall(data)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def test_proxy_dechunks_a_body_sent_after_100_continue(
    s3_endpoint: Any, s3_bucket: str, proxy: MeteringProxy
) -> None:
    """A chunked upload that waits for ``100 Continue`` reaches the server whole and is counted."""
    meter = ProxyMeter(proxy.url)
    start = meter.begin()
    host, port = proxy.server_address
    payload = b"0123456789" * 700
    with socket.create_connection((host, port), timeout=30) as sock:
        head = (
            f"PUT /{s3_bucket}/chunked HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        assert _raw_exchange(sock, head).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = b"".join(
            b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:4000], payload[4000:])
        )
        answer = _raw_exchange(sock, body + b"0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer
    stored = _client(s3_endpoint, proxy).get_object(Bucket=s3_bucket, Key="chunked")["Body"]
    assert stored.read() == payload
    d = meter.snapshot() - start
    assert dict(d.requests) == {"PutObject": 1, "GetObject": 1}
    assert d.bytes_sent == len(payload)


def test_proxy_answers_502_naming_an_unreachable_server() -> None:
    with socket.socket() as probe:  # a port nobody listens on once closed
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"
    server = MeteringProxy(dead, delay=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=30)
        conn.request("GET", "/bucket/key")
        resp = conn.getresponse()
        assert resp.status == 502
        assert dead in json.loads(resp.read())["error"]
        assert server.counters.snapshot()["requests"] == {}
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not thread.is_alive()


def test_proxy_answers_400_to_a_malformed_request_line(proxy: MeteringProxy) -> None:
    with socket.create_connection(proxy.server_address, timeout=30) as sock:
        answer = _raw_exchange(sock, b"NONSENSE\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request"), answer
    assert proxy.counters.snapshot()["requests"] == {}


def test_proxy_unknown_control_path_is_404(proxy: MeteringProxy) -> None:
    conn = http.client.HTTPConnection(*proxy.server_address, timeout=30)
    conn.request("GET", "/__bench__/nothing")
    resp = conn.getresponse()
    assert resp.status == 404
    assert "/__bench__/nothing" in json.loads(resp.read())["error"]
    conn.close()


def test_proxy_shutdown_hangs_up_on_idle_keep_alive_clients(
    s3_endpoint: Any, s3_bucket: str
) -> None:
    server = MeteringProxy(s3_endpoint.url.split("://", 1)[1], delay=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    conn = http.client.HTTPConnection(*server.server_address, timeout=30)
    conn.request("GET", "/__bench__/counters")
    assert conn.getresponse().read()  # the connection stays open, idle
    server.shutdown()
    server.server_close()
    thread.join(30)
    assert not thread.is_alive()
    assert conn.sock is not None and conn.sock.recv(1) == b""  # hung up on
    conn.close()


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "op"),
    [
        ("GET", "/b", {"list-type": ["2"], "prefix": ["x/"]}, {}, "ListObjectsV2"),
        ("GET", "/b", {"prefix": ["x/"]}, {}, "ListObjects"),
        ("GET", "/b/k/1", {}, {}, "GetObject"),
        ("HEAD", "/b/k", {}, {}, "HeadObject"),
        ("HEAD", "/b", {}, {}, "HeadBucket"),
        ("PUT", "/b/k", {}, {}, "PutObject"),
        ("PUT", "/b/k", {}, {"x-amz-copy-source": "/b/j"}, "CopyObject"),
        ("PUT", "/b/k", {"uploadId": ["u"], "partNumber": ["1"]}, {}, "UploadPart"),
        ("POST", "/b", {"delete": [""]}, {}, "DeleteObjects"),
        ("POST", "/b/k", {"uploads": [""]}, {}, "CreateMultipartUpload"),
        ("POST", "/b/k", {"uploadId": ["u"]}, {}, "CompleteMultipartUpload"),
        ("DELETE", "/b/k", {}, {}, "DeleteObject"),
        ("PUT", "/b", {}, {}, "CreateBucket"),
    ],
)
def test_classify(method: str, path: str, query: Any, headers: Any, op: str) -> None:
    assert classify(method, path, query, headers) == op


def _chat(saver: Any, turns: int) -> None:
    def bot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("answer " + "a" * 500)]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    graph = builder.compile(checkpointer=saver)
    for t in range(turns):
        graph.invoke(
            {"messages": [HumanMessage(f"q{t} " + "q" * 100)]}, {"configurable": {"thread_id": "m"}}
        )


def test_proxy_agrees_with_metered_store(
    s3_endpoint: Any, s3_bucket: str, proxy: MeteringProxy
) -> None:
    """Two independent meters of the same saver traffic count the same requests and bytes."""
    store = MeteredStore(
        Boto3S3Store(s3_bucket, "p/", client=_client(s3_endpoint, proxy)), log=True
    )
    meter = ProxyMeter(proxy.url)
    start = meter.begin()
    with ObjectStoreSaver(store) as saver:
        _chat(saver, 4)
        saver.delete_thread("m")
    d = meter.snapshot() - start
    m = store.snapshot()
    assert d.requests.get("PutObject", 0) == m.put_requests
    assert d.requests.get("GetObject", 0) == m.get_requests
    assert d.requests.get("ListObjectsV2", 0) == m.list_requests
    assert d.requests.get("DeleteObjects", 0) == m.delete_requests
    assert d.total_requests == m.total_requests
    assert d.objects_written == m.objects_put
    # Request bodies: the puts' bytes plus the DeleteObjects XML.
    assert d.bytes_sent > m.bytes_sent
    deleted = sum(1 for e in store.log if e.op == "delete")
    assert d.bytes_sent - m.bytes_sent < 200 * deleted
    assert d.largest_request_body >= m.largest_request_body


def test_store_meter_reads_metered_store(tmp_path: Any) -> None:
    store = MeteredStore(LocalStore(tmp_path, fsync=False))
    meter = StoreMeter(store)
    start = meter.begin()
    store.put("k/a", b"12345")
    store.put("k/b", b"1234567")
    assert store.get("k/b") == b"1234567"
    store.list("k/")
    d = meter.snapshot() - start
    assert d == Reading(
        requests={"get": 1, "list": 1, "put": 2},
        bytes_sent=12,
        bytes_received=7,
        largest_request_body=7,
        largest_response_body=7,
        objects_written=2,
    )


def test_serde_meter_counts_serialized_bytes_and_saver_calls() -> None:
    serde = CountingSerializer()
    saver = InMemorySaver(serde=serde)
    calls = CallCounter(saver)
    meter = SerdeMeter(serde, calls)
    start = meter.begin()
    _chat(saver, 2)
    d = meter.snapshot() - start
    # Everything the saver holds was serialized once, and nothing else was.
    stored = sum(len(blob[1]) for blob in saver.blobs.values())
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for checkpoint, metadata, _parent in checkpoints.values():
                stored += len(checkpoint[1]) + len(metadata[1])
    for writes in saver.writes.values():
        stored += sum(len(w[2][1]) for w in writes.values())
    assert d.bytes_sent == stored > 0
    assert d.requests["put"] == calls.calls["put"] > 0
    assert d.requests["put_writes"] == calls.calls["put_writes"] > 0
    assert d.requests["get_tuple"] == 2  # one lookup per invoke
    assert d.objects_written == calls.calls["put"] + calls.items["writes"]


def test_gc_timer_counts_the_collections_made_while_installed() -> None:
    timer = GcTimer()
    gc.collect()  # before: not counted
    with timer.installed():
        gc.collect()
        gc.collect(0)
    gc.collect()  # after: not counted either
    assert timer.collections == 2
    assert timer.seconds > 0
    assert timer._callback not in gc.callbacks


def _echo_server() -> tuple[socket.socket, threading.Thread]:
    """A loopback server answering each connection's bytes with themselves, then hanging up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)
                if data.endswith(b"!"):
                    return  # hang up after the last message

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, f"connection ended after {len(got)} of {n} bytes"
        got += chunk
    return got


def test_tcp_relay_passes_bytes_in_order_each_held_for_the_proxys_round_trip(
    proxy: MeteringProxy,
) -> None:
    listener, server = _echo_server()
    with listener:
        port = open_tcp_relay(proxy.url, *listener.getsockname()[:2])
        set_proxy_delay(proxy.url, 50)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            # Many small sends in a row come back whole and in order.
            started = time.monotonic()
            messages = [f"message {i};".encode() for i in range(200)]
            for message in messages:
                sock.sendall(message)
            assert _recv_exactly(sock, sum(map(len, messages))) == b"".join(messages)
            # Held at least the injected round trip (a lower bound: nothing can be early).
            assert time.monotonic() - started >= 0.05
            set_proxy_delay(proxy.url, 0)
            sock.sendall(b"last!")
            assert _recv_exactly(sock, 5) == b"last!"
            # The server hung up: the relay ends the client's connection too.
            assert sock.recv(1) == b""
        server.join(30)
    # Relayed bytes are not S3 requests.
    assert proxy.counters.snapshot()["requests"] == {}
