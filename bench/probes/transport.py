"""Client CPU per S3 request and 64-way throughput of candidate S3 transports.

``python -m bench.probes.transport`` starts ``bench.server`` (moto plus the metering,
latency-injecting proxy, in another process so the server's CPU is not
counted), then for each transport runs the request mix of a chat turn:
create-only PUT (``If-None-Match: *``), create-only PUT on an existing key
(412), ranged GET, LIST with ``max-keys=1`` and ``start-after``, and a
``DeleteObjects`` of 10 keys. It reports the process CPU time per request
(``time.process_time``, all threads, no injected delay) and the proxy's
response bytes per request, then wall throughput and CPU per request of ranged
GETs run 1 and 64 at a time with 20 ms injected per request.

``--compare TREE`` measures another checkout's package (``git worktree add
--detach /tmp/before <commit>``) and this tree's in alternating rounds against
one server and prints the median of each and their ratio: one before/after
run, robust to a machine whose load drifts.

Transports: ``boto3`` (the current ``Boto3S3Store``, sync), ``lean`` (``LeanS3Store``
sync and async: SigV4 here, http.client / asyncio streams), ``aiobotocore`` (async),
``obstore`` (sync and async). Missing packages are reported and skipped; run it
in the venv of ``docs/transport.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3

from bench.probes import add_compare_arguments, attached_round, compare_rounds
from bench.server import ServerProcess

BODY = os.urandom(2048)
RANGED = os.urandom(16384)
KINDS = ("put_create", "put_exists", "get_range", "list_1", "delete_10")
REGION = "us-east-1"


@dataclass
class Client:
    """One transport: the five request kinds, as blocking calls or coroutines."""

    name: str
    is_async: bool
    put_create: Callable[[str, bytes], Any]
    put_exists: Callable[[str, bytes], Any]  # must see the 412 and swallow it
    get_range: Callable[[str, int, int], Any]
    list_1: Callable[[str, str], Any]
    delete: Callable[[list[str]], Any]
    close: Callable[[], Any] = lambda: None


# --- the transports -----------------------------------------------------------------


def _boto3(url: str, bucket: str) -> Client:
    from objstore_saver.storage import Boto3S3Store, ObjectExistsError, PutMode

    s = Boto3S3Store(bucket, endpoint_url=url, region_name=REGION)

    def exists(k: str, d: bytes) -> None:
        try:
            s.put(k, d, PutMode.CREATE)
        except ObjectExistsError:
            return
        raise AssertionError("no 412")

    return Client(
        "boto3 (Boto3S3Store, sync)",
        False,
        lambda k, d: s.put(k, d, PutMode.CREATE),
        exists,
        lambda k, a, b: s.get(k, (a, b)),
        lambda p, after: s.list(p, start_after=after, limit=1),
        s.delete,
    )


def _lean(url: str, bucket: str, is_async: bool) -> Client:
    from objstore_saver.storage import ObjectExistsError, PutMode

    try:
        from objstore_saver.storage.s3.lean import LeanS3Store
    except ModuleNotFoundError:  # a tree from before storage/s3/ (``--compare``)
        from objstore_saver.storage.s3_lean import LeanS3Store  # type: ignore[no-redef]

    s = LeanS3Store(bucket, endpoint_url=url, region_name=REGION)
    if not is_async:

        def exists(k: str, d: bytes) -> None:
            try:
                s.put(k, d, PutMode.CREATE)
            except ObjectExistsError:
                return
            raise AssertionError("no 412")

        return Client(
            "lean (LeanS3Store, sync: http.client)",
            False,
            lambda k, d: s.put(k, d, PutMode.CREATE),
            exists,
            lambda k, a, b: s.get(k, (a, b)),
            lambda p, after: s.list(p, start_after=after, limit=1),
            s.delete,
            s.close,
        )

    async def aexists(k: str, d: bytes) -> None:
        try:
            await s.aput(k, d, PutMode.CREATE)
        except ObjectExistsError:
            return
        raise AssertionError("no 412")

    return Client(
        "lean (LeanS3Store, async: asyncio streams)",
        True,
        lambda k, d: s.aput(k, d, PutMode.CREATE),
        aexists,
        lambda k, a, b: s.aget(k, (a, b)),
        lambda p, after: s.alist(p, start_after=after, limit=1),
        s.adelete,
        s.aclose,
    )


def _aiobotocore(url: str, bucket: str, holder: dict[str, Any]) -> Client:
    # The client is entered inside the running loop by _open_aiobotocore.
    async def put(k: str, d: bytes) -> None:
        await holder["c"].put_object(Bucket=bucket, Key=k, Body=d, IfNoneMatch="*")

    async def exists(k: str, d: bytes) -> None:
        from botocore.exceptions import ClientError

        try:
            await holder["c"].put_object(Bucket=bucket, Key=k, Body=d, IfNoneMatch="*")
        except ClientError as exc:
            assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 412
            return
        raise AssertionError("no 412")

    async def get(k: str, a: int, b: int) -> bytes:
        r = await holder["c"].get_object(Bucket=bucket, Key=k, Range=f"bytes={a}-{b - 1}")
        async with r["Body"] as body:
            return await body.read()

    async def lst(p: str, after: str) -> Any:
        return await holder["c"].list_objects_v2(
            Bucket=bucket, Prefix=p, StartAfter=after, MaxKeys=1
        )

    async def delete(keys: list[str]) -> Any:
        return await holder["c"].delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )

    async def close() -> None:
        await holder["cm"].__aexit__(None, None, None)

    return Client("aiobotocore (async)", True, put, exists, get, lst, delete, close)


async def _open_aiobotocore(url: str, holder: dict[str, Any]) -> None:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    cm = get_session().create_client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        config=AioConfig(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "total_max_attempts": 5},
            max_pool_connections=64,
        ),
    )
    holder["cm"] = cm
    holder["c"] = await cm.__aenter__()


def _obstore(url: str, bucket: str, is_async: bool) -> Client:
    import obstore
    from obstore.exceptions import AlreadyExistsError
    from obstore.store import S3Store as ObS3

    s = ObS3(
        bucket,
        endpoint=url,
        region=REGION,
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True, "pool_max_idle_per_host": "64"},
    )
    if not is_async:

        def exists(k: str, d: bytes) -> None:
            try:
                obstore.put(s, k, d, mode="create")
            except AlreadyExistsError:
                return
            raise AssertionError("no 412")

        def lst(p: str, after: str) -> Any:
            # No max-keys: the stream asks for full pages; take the first item.
            stream = obstore.list(s, p, offset=after, chunk_size=1)
            return next(stream, None)

        return Client(
            "obstore (sync)",
            False,
            lambda k, d: obstore.put(s, k, d, mode="create"),
            exists,
            lambda k, a, b: bytes(obstore.get(s, k, options={"range": (a, b)}).bytes()),
            lst,
            lambda keys: obstore.delete(s, keys),
        )

    async def aexists(k: str, d: bytes) -> None:
        try:
            await obstore.put_async(s, k, d, mode="create")
        except AlreadyExistsError:
            return
        raise AssertionError("no 412")

    async def aget(k: str, a: int, b: int) -> bytes:
        r = await obstore.get_async(s, k, options={"range": (a, b)})
        return bytes(await r.bytes_async())

    async def alst(p: str, after: str) -> Any:
        stream = obstore.list(s, p, offset=after, chunk_size=1)
        async for chunk in stream:
            return chunk
        return None

    return Client(
        "obstore (async)",
        True,
        lambda k, d: obstore.put_async(s, k, d, mode="create"),
        aexists,
        aget,
        alst,
        lambda keys: obstore.delete_async(s, keys),
    )


# --- measuring ---------------------------------------------------------------------------


def _counters(proxy: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{proxy}/__bench__/counters") as r:
        return json.loads(r.read())


def _set_delay(proxy: str, ms: float) -> None:
    req = urllib.request.Request(f"{proxy}/__bench__/delay?ms={ms}", method="PUT", data=b"")
    urllib.request.urlopen(req).read()


def _calls(c: Client, kind: str, run: str, n: int) -> list[Callable[[], Any]]:
    """``n`` calls of one request kind, with distinct keys where it matters."""
    if kind == "put_create":
        return [lambda i=i: c.put_create(f"{run}/new/{i}", BODY) for i in range(n)]
    if kind == "put_exists":
        return [lambda: c.put_exists("fixed/exists", BODY)] * n
    if kind == "get_range":
        return [lambda: c.get_range("fixed/ranged", 1024, 2048)] * n
    if kind == "list_1":
        return [lambda: c.list_1("fixed/list/", "fixed/list/k0050")] * n
    return [lambda i=i: c.delete([f"{run}/new/{i}/{j}" for j in range(10)]) for i in range(n)]


async def _aseq(calls: list[Callable[[], Awaitable[Any]]]) -> None:
    for call in calls:
        await call()


def _sequential(c: Client, kind: str, n: int, proxy: str, loop: Any) -> dict[str, float]:
    run = uuid.uuid4().hex[:8]
    warm = _calls(c, kind, run + "w", 5)
    calls = _calls(c, kind, run, n)
    if c.is_async:
        loop.run_until_complete(_aseq(warm))
    else:
        for call in warm:
            call()
    before = _counters(proxy)
    cpu = time.process_time()
    if c.is_async:
        loop.run_until_complete(_aseq(calls))
    else:
        for call in calls:
            call()
    cpu = time.process_time() - cpu
    after = _counters(proxy)
    sent = sum(after["requests"].values()) - sum(before["requests"].values())
    return {
        "cpu_ms_per_call": 1000 * cpu / n,
        "requests_per_call": sent / n,
        "response_bytes_per_call": (after["bytes_received"] - before["bytes_received"]) / n,
    }


def _concurrent(c: Client, width: int, per_task: int, loop: Any) -> dict[str, float]:
    def task_calls() -> list[Callable[[], Any]]:
        return [lambda: c.get_range("fixed/ranged", 1024, 2048)] * per_task

    total = width * per_task
    wall, cpu = time.perf_counter(), time.process_time()
    if c.is_async:

        async def all_tasks() -> None:
            await asyncio.gather(*(_aseq(task_calls()) for _ in range(width)))

        loop.run_until_complete(all_tasks())
    else:

        def one(_: int) -> None:
            for call in task_calls():
                call()

        with ThreadPoolExecutor(width) as pool:
            list(pool.map(one, range(width)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"requests_per_s": total / wall, "cpu_ms_per_request": 1000 * cpu / total}


def _seed(url: str, bucket: str) -> None:
    raw = boto3.client("s3", endpoint_url=url, region_name=REGION)
    raw.create_bucket(Bucket=bucket)
    raw.put_object(Bucket=bucket, Key="fixed/exists", Body=BODY)
    raw.put_object(Bucket=bucket, Key="fixed/ranged", Body=RANGED)
    for i in range(100):
        raw.put_object(Bucket=bucket, Key=f"fixed/list/k{i:04d}", Body=b"x")


def _build(name: str, url: str, bucket: str, loop: Any) -> Client:
    if name == "boto3":
        return _boto3(url, bucket)
    if name == "lean-sync":
        return _lean(url, bucket, False)
    if name == "lean-async":
        return _lean(url, bucket, True)
    if name == "aiobotocore":
        holder: dict[str, Any] = {}
        loop.run_until_complete(_open_aiobotocore(url, holder))
        return _aiobotocore(url, bucket, holder)
    if name == "obstore-sync":
        return _obstore(url, bucket, False)
    if name == "obstore-async":
        return _obstore(url, bucket, True)
    raise ValueError(f"unknown transport {name!r}")


TRANSPORTS = ("boto3", "lean-sync", "lean-async", "aiobotocore", "obstore-sync", "obstore-async")


def _measure(url: str, bucket: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every transport of ``args.transports`` measured against the proxy at ``url``."""
    results: dict[str, Any] = {}
    for name in args.transports.split(","):
        loop = asyncio.new_event_loop()
        try:
            client = _build(name, url, bucket, loop)
        except ImportError as exc:
            results[name] = {"skipped": f"not installed: {exc}"}
            print(f"{name}: skipped ({exc})", flush=True)
            loop.close()
            continue
        row: dict[str, Any] = {"label": client.name}
        _set_delay(url, 0)
        for kind in KINDS:
            row[kind] = _sequential(client, kind, args.n, url, loop)
        _set_delay(url, args.delay_ms)
        row["1-way"] = _concurrent(client, 1, args.width, loop)
        row[f"{args.width}-way"] = _concurrent(client, args.width, args.per_task, loop)
        _set_delay(url, 0)
        closing = client.close()
        if asyncio.iscoroutine(closing):
            loop.run_until_complete(closing)
        loop.close()
        results[name] = row
        print(json.dumps({name: row}), flush=True)
    return results


def _compare(args: argparse.Namespace, server: dict[str, Any]) -> None:
    """Alternate rounds of the package at ``args.compare`` and this tree; print medians."""
    options = ["-n", str(args.n), "--transports", args.transports, "--width", str(args.width)]
    options += ["--per-task", str(args.per_task), "--delay-ms", str(args.delay_ms)]
    trees, rounds = compare_rounds("bench.probes.transport", args, server, options)
    width = f"{args.width}-way"
    print(f"| transport | measure | before ({trees['before']}) | now | now / before |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.transports.split(","):
        for kind in (*KINDS, width):
            field = "cpu_ms_per_request" if kind == width else "cpu_ms_per_call"
            medians = [
                statistics.median(r[name][kind][field] for r in rounds[label]) for label in trees
            ]
            print(
                f"| {name} | {kind} ms CPU | {medians[0]:.3f} | {medians[1]:.3f} "
                f"| {medians[1] / medians[0]:.2f} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="calls per request kind")
    parser.add_argument("--width", type=int, default=64, help="concurrent tasks or threads")
    parser.add_argument("--per-task", type=int, default=10, help="GETs per task when concurrent")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--s3-server", default="moto", help="S3 server of bench.server")
    parser.add_argument("--json", help="write the results here too")
    add_compare_arguments(parser)
    args = parser.parse_args()
    attached = attached_round(args)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    if attached is not None:
        results = _measure(attached["proxy"], attached["bucket"], args)
    else:
        with ServerProcess(delay_ms=0, s3_server=args.s3_server) as server:
            access, secret = server.keys
            os.environ.update(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
            bucket = f"transport-{uuid.uuid4().hex[:8]}"
            _seed(server.proxy_url, bucket)
            if args.compare:
                _compare(args, {"proxy": server.proxy_url, "bucket": bucket, "keys": server.keys})
                return
            results = _measure(server.proxy_url, bucket, args)
    _print_table(results, args.width)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _print_table(results: dict[str, Any], width: int) -> None:
    head = [
        "transport",
        *(f"{k} ms" for k in KINDS),
        "list_1 bytes",
        "1-way req/s",
        f"{width}-way req/s",
        f"{width}-way ms CPU/req",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for row in results.values():
        if "skipped" in row:
            continue
        cells = [row["label"], *(f"{row[k]['cpu_ms_per_call']:.3f}" for k in KINDS)]
        cells.append(f"{row['list_1']['response_bytes_per_call']:.0f}")
        cells.append(f"{row['1-way']['requests_per_s']:.1f}")
        cells.append(f"{row[f'{width}-way']['requests_per_s']:.0f}")
        cells.append(f"{row[f'{width}-way']['cpu_ms_per_request']:.3f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
