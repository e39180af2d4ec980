"""Client CPU per request of the two HTTP pools alone: direct, and through a forward proxy.

``python -m bench.probes.http_pool_cpu`` starts, in other processes (their CPU
is not counted), a keep-alive loopback origin answering every request like a
small S3 GET (11 headers, a 1 KiB body) and, with ``--proxy``, a forward proxy
(``tests/helpers/http_servers.ForwardProxy``: absolute form for ``http``).
It then sends ``-n`` GETs one at a time on the blocking pool and on the
asyncio pool and prints ``time.process_time()`` per request, the median of
``--rounds`` rounds. Run it on two trees (``PYTHONPATH``) to compare them; the
machine's noise shows as the spread between rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time
from typing import Any

BODY = b"x" * 1024
ANSWER = (
    b"HTTP/1.1 200 OK\r\n"
    b"x-amz-id-2: dGhpcyBpcyBhIHJlcXVlc3QgaWQgb2YgYSBmZXcgYnl0ZXM=\r\n"
    b"x-amz-request-id: 4442587FB7D0A2F9\r\n"
    b"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
    b"Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
    b'ETag: "b1946ac92492d2347c6235b4d2611184"\r\n'
    b"Accept-Ranges: bytes\r\n"
    b"Content-Range: bytes 0-1023/16384\r\n"
    b"Content-Type: application/octet-stream\r\n"
    b"Server: AmazonS3\r\n"
    b"x-amz-server-side-encryption: AES256\r\n"
    b"Content-Length: 1024\r\n\r\n" + BODY
)


def _origin(port_out: Any) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port_out.send(listener.getsockname()[1])

    def serve(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                data = data.split(b"\r\n\r\n", 1)[1]
                conn.sendall(ANSWER)

    import threading

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def _proxy(port_out: Any) -> None:
    from tests.helpers import http_servers

    http_servers.LIFETIME_S = 3600.0
    proxy = http_servers.ForwardProxy()
    port_out.send(proxy.port)
    time.sleep(3600)


def _start(target: Any) -> tuple[multiprocessing.Process, int]:
    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.Process(target=target, args=(theirs,), daemon=True)
    process.start()
    return process, ours.recv()


def _sync_round(pool: Any, request: Any, n: int) -> float:
    began = time.process_time()
    for _ in range(n):
        reply = pool.send(request)
        assert reply.status == 200 and len(reply.body) == 1024, reply
    return (time.process_time() - began) / n * 1000


async def _async_round(pool: Any, request: Any, n: int) -> float:
    began = time.process_time()
    for _ in range(n):
        reply = await pool.send(request)
        assert reply.status == 200 and len(reply.body) == 1024, reply
    return (time.process_time() - began) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=3000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--proxy", action="store_true", help="through a loopback forward proxy")
    args = parser.parse_args()

    from objstore_saver.storage.http.async_pool import AsyncConnectionPool
    from objstore_saver.storage.http.messages import HttpRequest
    from objstore_saver.storage.http.sync_pool import ConnectionPool

    origin, port = _start(_origin)
    options: dict[str, Any] = {"connect_timeout": 5.0, "read_timeout": 5.0, "max_idle": 4}
    helper = None
    if args.proxy:
        from objstore_saver.storage.http.proxy import Proxy

        helper, proxy_port = _start(_proxy)
        options["proxy"] = Proxy("127.0.0.1", proxy_port)
    host = f"127.0.0.1:{port}"
    request = HttpRequest(
        "GET",
        "/bucket/agents/threads/abc/checkpoints/0001",
        {
            "host": host,
            "range": "bytes=0-1023",
            "x-amz-date": "20240101T000000Z",
            "x-amz-content-sha256": "e3b0c442" * 8,
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIA/20240101/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=" + "0" * 64,
        },
    )
    try:
        pool = ConnectionPool("http", host, **options)
        _sync_round(pool, request, 200)  # warm-up
        sync = [_sync_round(pool, request, args.n) for _ in range(args.rounds)]
        pool.close()

        async def run() -> list[float]:
            apool = AsyncConnectionPool("http", host, **options)
            await _async_round(apool, request, 200)
            out = [await _async_round(apool, request, args.n) for _ in range(args.rounds)]
            await apool.close()
            return out

        aio = asyncio.run(run())
    finally:
        origin.terminate()
        if helper is not None:
            helper.terminate()
    path = "proxied" if args.proxy else "direct"
    for name, figures in (("sync", sync), ("async", aio)):
        shown = " ".join(f"{f:.4f}" for f in figures)
        print(f"{path} {name}: median {statistics.median(figures):.4f} ms/request ({shown})")


if __name__ == "__main__":
    main()
