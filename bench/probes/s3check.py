"""Check that an S3 server gives the guarantees ``Boto3S3Store`` relies on.

``python -m bench.probes.s3check --s3-server seaweedfs`` starts that server (see
:mod:`bench.server`), runs the checks against it directly (no proxy) and prints
one line per check; ``--endpoint URL`` (with ``--access-key``/``--secret-key``)
checks a server already running. Exit status 1 when a required check fails.

Required checks are what the saver's correctness depends on (create-only puts
with exactly one winner, ranged reads, listing pages that continue after the
last key, multi-delete, missing-bucket errors). Informational checks report
where the server differs from AWS without the saver depending on it (the byte
order of a listing that spans several "directories").
"""

from __future__ import annotations

import argparse
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Keys whose byte order differs from path-by-path order ('-' and '.' sort before '/').
MIXED_KEYS = ("a-c", "a/b", "a.d/x", "a0", "t1-x", "t1.x", "t1/x", "t1/y", "t10/x", "t2")


@dataclass
class Result:
    """The outcome of one check."""

    name: str
    ok: bool
    required: bool
    detail: str


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None) or {}
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _race(client: Any, bucket: str, key: str, writers: int) -> list[int]:
    """``writers`` threads create ``key`` at once; their HTTP statuses."""
    from botocore.exceptions import ClientError

    barrier = threading.Barrier(writers)
    statuses: list[int] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        barrier.wait()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=f"w{i}".encode(), IfNoneMatch="*")
            status = 200
        except ClientError as exc:
            status = _status(exc) or 0
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return statuses


def run_checks(client: Any, bucket: str, *, races: int = 10, writers: int = 32) -> list[Result]:
    """Run every check in ``bucket`` (created here if missing); return the results."""
    from botocore.exceptions import ClientError

    results: list[Result] = []

    def check(name: str, required: bool = True) -> Callable[[Callable[[], str]], None]:
        def run(body: Callable[[], str]) -> None:
            try:
                results.append(Result(name, True, required, body()))
            except (AssertionError, ClientError) as exc:
                results.append(Result(name, False, required, f"{type(exc).__name__}: {exc}"))

        return run

    try:
        client.head_bucket(Bucket=bucket)
    except ClientError:
        client.create_bucket(Bucket=bucket)
    root = f"check-{uuid.uuid4().hex[:8]}/"

    @check("HeadBucket: existing 200, missing 404")
    def _() -> str:
        client.head_bucket(Bucket=bucket)
        missing = f"missing-{uuid.uuid4().hex[:12]}"
        try:
            client.head_bucket(Bucket=missing)
        except ClientError as exc:
            assert _status(exc) == 404, f"missing bucket gave {_status(exc)}"
            return "ok"
        raise AssertionError(f"HeadBucket of {missing} succeeded")

    @check("PutObject If-None-Match: * on an existing key gives 412, keeps the bytes")
    def _() -> str:
        key = root + "create/one"
        client.put_object(Bucket=bucket, Key=key, Body=b"first", IfNoneMatch="*")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*")
        except ClientError as exc:
            assert _status(exc) == 412, f"second create gave {_status(exc)}"
        else:
            raise AssertionError("second create-only PUT succeeded")
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == b"first", f"object now holds {body!r}"
        return "412"

    @check(f"{writers} concurrent create-only PUTs of one key: exactly one winner")
    def _() -> str:
        seen: dict[int, int] = {}
        for r in range(races):
            key = f"{root}race/{r}"
            statuses = _race(client, bucket, key, writers)
            for s in statuses:
                seen[s] = seen.get(s, 0) + 1
            winners = statuses.count(200)
            assert len(statuses) == writers, f"{key}: only {len(statuses)} writers finished"
            assert winners == 1, f"{key}: {winners} winners, statuses {sorted(statuses)}"
            assert set(statuses) <= {200, 409, 412}, f"{key}: statuses {sorted(set(statuses))}"
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert body.startswith(b"w"), f"{key} holds {body!r}"
        return f"{races} keys, statuses {dict(sorted(seen.items()))}"

    @check("ranged GET: bytes=2-5 gives 206 and 4 bytes; a range past the end gives 416")
    def _() -> str:
        key = root + "range"
        client.put_object(Bucket=bucket, Key=key, Body=b"0123456789")
        got = client.get_object(Bucket=bucket, Key=key, Range="bytes=2-5")
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206, "no 206"
        assert got["Body"].read() == b"2345", "wrong bytes"
        try:
            client.get_object(Bucket=bucket, Key=key, Range="bytes=10-20")
        except ClientError as exc:
            assert _status(exc) == 416, f"past the end gave {_status(exc)}"
            return "ok"
        raise AssertionError("a range past the end succeeded")

    @check("GET of a missing key gives 404 NoSuchKey")
    def _() -> str:
        try:
            client.get_object(Bucket=bucket, Key=root + "nothing-here")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            assert (_status(exc), code) == (404, "NoSuchKey"), f"gave {_status(exc)} {code}"
            return "ok"
        raise AssertionError("GET of a missing key succeeded")

    flat = [f"{root}flat/{i:02x}~" for i in range(0, 256, 7)] + [f"{root}flat/ff"]

    @check("ListObjectsV2 in one directory: byte order, MaxKeys pages, StartAfter")
    def _() -> str:
        for key in flat:
            client.put_object(Bucket=bucket, Key=key, Body=b"")
        listed, after = _list_paged(client, bucket, root + "flat/", 5)
        assert listed == sorted(flat), f"listed {listed}"
        mid = sorted(flat)[10]
        page = client.list_objects_v2(Bucket=bucket, Prefix=root + "flat/", StartAfter=mid)
        assert [o["Key"] for o in page["Contents"]] == sorted(flat)[11:], "StartAfter"
        return f"{len(flat)} keys in {after} pages of 5"

    @check("ListObjectsV2 across directories: pages continue after the last key, none lost")
    def _() -> str:
        keys = [root + "mixed/" + k for k in MIXED_KEYS]
        for key in keys:
            client.put_object(Bucket=bucket, Key=key, Body=b"")
        listed, pages = _list_paged(client, bucket, root + "mixed/", 3)
        assert sorted(listed) == sorted(keys), f"listed {listed}"
        assert len(set(listed)) == len(listed), "a key listed twice"
        return f"{len(keys)} keys in {pages} pages of 3"

    @check("ListObjectsV2 across directories is in byte order", required=False)
    def _() -> str:
        keys = [root + "mixed/" + k for k in MIXED_KEYS]
        listed = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=root)["Contents"]]
        listed = [k for k in listed if k in keys]
        skip = len(root + "mixed/")
        assert listed == sorted(keys), f"order {[k[skip:] for k in listed]}"
        return "ok"

    @check("DeleteObjects (quiet) of present and missing keys: no errors, keys gone")
    def _() -> str:
        keys = [*flat, root + "never-written"]
        reply = client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
        assert not reply.get("Errors"), f"errors {reply['Errors'][:3]}"
        left = client.list_objects_v2(Bucket=bucket, Prefix=root + "flat/").get("KeyCount", 0)
        assert left == 0, f"{left} keys left"
        return f"{len(keys)} keys"

    @check("a folder emptied by a delete is not listed with Delimiter='/'", required=False)
    def _() -> str:
        key = root + "gone/t/checkpoints/x"
        client.put_object(Bucket=bucket, Key=key, Body=b"")
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key}], "Quiet": True})
        inner = client.list_objects_v2(Bucket=bucket, Prefix=root + "gone/t/", Delimiter="/")
        outer = client.list_objects_v2(Bucket=bucket, Prefix=root + "gone/", Delimiter="/")
        listed = [o["Key"] for o in inner.get("Contents", [])] + [
            p["Prefix"] for p in inner.get("CommonPrefixes", []) + outer.get("CommonPrefixes", [])
        ]
        assert not listed, f"still listed: {listed}"
        return "ok"

    @check("PutObject into a missing bucket fails (no bucket is created)", required=False)
    def _() -> str:
        missing = f"missing-{uuid.uuid4().hex[:12]}"
        try:
            client.put_object(Bucket=missing, Key="k", Body=b"v")
        except ClientError as exc:
            return f"{_status(exc)} {exc.response.get('Error', {}).get('Code')}"
        _delete_bucket(client, missing)
        raise AssertionError(f"the PUT succeeded and created bucket {missing}")

    leftover = _list_paged(client, bucket, root, 1000)[0]
    for i in range(0, len(leftover), 1000):
        chunk = [{"Key": k} for k in leftover[i : i + 1000]]
        client.delete_objects(Bucket=bucket, Delete={"Objects": chunk, "Quiet": True})
    return results


def _list_paged(client: Any, bucket: str, prefix: str, size: int) -> tuple[list[str], int]:
    """Every key under ``prefix``, paging with StartAfter = the last key; and the page count."""
    keys: list[str] = []
    pages = 0
    while pages < 10_000:
        args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": size}
        if keys:
            args["StartAfter"] = keys[-1]
        page = client.list_objects_v2(**args)
        pages += 1
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated") or not page.get("Contents"):
            return keys, pages
    raise AssertionError(f"listing {prefix} did not end after {pages} pages")


def _delete_bucket(client: Any, bucket: str) -> None:
    keys = _list_paged(client, bucket, "", 1000)[0]
    if keys:
        client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
    client.delete_bucket(Bucket=bucket)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    import boto3
    import botocore.config

    from bench.server import BACKENDS, S3_KEYS, start_backend

    parser = argparse.ArgumentParser(prog="python -m bench.probes.s3check", description=__doc__)
    parser.add_argument("--s3-server", choices=sorted(BACKENDS), default="seaweedfs")
    parser.add_argument("--endpoint", help="check this running server instead of starting one")
    parser.add_argument("--access-key", default=S3_KEYS[0])
    parser.add_argument("--secret-key", default=S3_KEYS[1])
    parser.add_argument("--bucket", default="s3check")
    parser.add_argument("--races", type=int, default=10, help="keys raced by the writers")
    parser.add_argument("--writers", type=int, default=32)
    args = parser.parse_args(argv)
    backend = None
    if args.endpoint:
        endpoint, keys = args.endpoint, (args.access_key, args.secret_key)
        label = args.endpoint
    else:
        backend = start_backend(args.s3_server)
        endpoint, keys, label = backend.url, backend.keys, backend.describe()
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=keys[0],
            aws_secret_access_key=keys[1],
            region_name="us-east-1",
            config=botocore.config.Config(max_pool_connections=args.writers + 4),
        )
        results = run_checks(client, args.bucket, races=args.races, writers=args.writers)
    finally:
        if backend is not None:
            backend.stop()
    print(f"server: {label}")
    for r in results:
        mark = "ok  " if r.ok else ("FAIL" if r.required else "DIFF")
        print(f"{mark} {r.name}: {r.detail}")
    return 1 if any(r.required and not r.ok for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
