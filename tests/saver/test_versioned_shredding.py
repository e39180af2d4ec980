"""Shredding on a key store that keeps versions (docs/encryption.md, "Shredding").

On a versioned bucket a DELETE of a thread's key object only stacks a delete
marker: the key would stay readable from its noncurrent version. These
tests delete threads of encrypted savers whose key objects live in a
versioned bucket, and a bucket with Object Lock, over both S3 transports,
and look at the bucket's versions afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lean_helpers import lean
from ops_helpers import chat_graph

from objstore_saver import ObjectStoreSaver, ops
from objstore_saver.crypto import ClientEncryption
from objstore_saver.crypto.master_keys import LocalMasterKey
from objstore_saver.crypto.names import KEY_ENV
from objstore_saver.errors import ThreadKeyMissingError
from objstore_saver.ops._common import OpsConfig
from objstore_saver.storage import PutMode
from objstore_saver.storage.s3.boto3_store import Boto3S3Store

pytestmark = pytest.mark.usefixtures("creds_env")

WARNING = "are kept in versions"


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _chat(saver: ObjectStoreSaver, thread: str, turns: int = 2) -> None:
    graph = chat_graph(saver)
    for t in range(turns):
        graph.invoke({"messages": [("user", f"secret {thread} {t}")]}, _cfg(thread))


def _key_versions(client: Any, bucket: str, token: str) -> list[tuple[str, bool]]:
    """(key, is a delete marker) of every version of the thread's key objects."""
    answer = client.list_object_versions(Bucket=bucket, Prefix=f"pfx/keys/threads/{token}")
    return sorted(
        [(v["Key"], False) for v in answer.get("Versions", [])]
        + [(m["Key"], True) for m in answer.get("DeleteMarkers", [])]
    )


def _retain(
    client: Any, bucket: str, key: str, version: str, span: dt.timedelta, bypass: bool = False
) -> dt.datetime:
    """Governance retention of a version for ``span`` from now (``bypass``: shortened)."""
    until = dt.datetime.now(dt.UTC) + span
    client.put_object_retention(
        Bucket=bucket,
        Key=key,
        VersionId=version,
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until},
        **({"BypassGovernanceRetention": True} if bypass else {}),
    )
    return until


def _data_versions(client: Any, bucket: str, token: str) -> list[str]:
    return [k for k, marker in _key_versions(client, bucket, token) if not marker]


@pytest.fixture(params=["lean", "boto3"])
def open_store(request: pytest.FixtureRequest, s3_endpoint: Any) -> Any:
    def open_(bucket: str) -> Any:
        if request.param == "lean":
            return lean(s3_endpoint, bucket, "pfx/")
        return Boto3S3Store(bucket, "pfx/", client=s3_endpoint.client())

    return open_


@pytest.fixture
def versioned(s3_endpoint: Any) -> Iterator[str]:
    with s3_endpoint.new_bucket("ver", versioned=True) as bucket:
        yield bucket


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_delete_thread_deletes_every_version_of_its_key(
    s3_endpoint: Any,
    versioned: str,
    open_store: Any,
    run_async: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = s3_endpoint.client()
    store = open_store(versioned)
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    caplog.set_level(logging.WARNING, logger="objstore_saver.encryption")
    with ObjectStoreSaver(store, client_encryption=settings) as saver:
        _chat(saver, "t1")
        _chat(saver, "t2")
        # A noncurrent version of the key object, as an overwrite (a rekey) leaves.
        key = "pfx/keys/threads/_t1"
        body = client.get_object(Bucket=versioned, Key=key)["Body"].read()
        client.put_object(Bucket=versioned, Key=key, Body=body)
        assert _key_versions(client, versioned, "_t1") == [(key, False), (key, False)]
        backup = {
            o["Key"]: client.get_object(Bucket=versioned, Key=o["Key"])["Body"].read()
            for o in client.list_objects_v2(Bucket=versioned, Prefix="pfx/threads/_t1/")["Contents"]
        }
        if run_async:
            asyncio.run(saver.adelete_thread("t1"))
        else:
            saver.delete_thread("t1")
        saver.delete_thread("t2")
    # No version and no marker is left of either thread's key.
    assert _key_versions(client, versioned, "_t1") == []
    assert _key_versions(client, versioned, "_t2") == []
    # Warned once, naming the bucket and its state, for the two deletes.
    warned = [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]
    assert len(warned) == 1 and versioned in warned[0] and "versioning Enabled" in warned[0]
    # The backup of the thread restored without its tombstone: unreadable.
    for k, v in backup.items():
        client.put_object(Bucket=versioned, Key=k, Body=v)
    tombstones = [k for k in backup if "/-" in k]
    for o in client.list_objects_v2(Bucket=versioned, Prefix="pfx/threads/_t1/")["Contents"]:
        if "/-" in o["Key"] and o["Key"] not in tombstones:
            client.delete_object(Bucket=versioned, Key=o["Key"])
    with (
        ObjectStoreSaver(open_store(versioned), client_encryption=settings) as fresh,
        pytest.raises(ThreadKeyMissingError),
    ):
        fresh.get_tuple(_cfg("t1"))


def test_a_bucket_without_versions_costs_one_request_a_process(
    s3_endpoint: Any, s3_bucket: str, open_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="objstore_saver.encryption")
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))
    with ObjectStoreSaver(open_store(s3_bucket), client_encryption=settings) as saver:
        _chat(saver, "a")
        _chat(saver, "b")
        before = saver.stats().requests
        saver.delete_thread("a")
        first = saver.stats().requests
        saver.delete_thread("b")
        second = saver.stats().requests
    gets = [first["get"] - before["get"], second["get"] - first["get"]]
    assert gets == [1, 0]  # GetBucketVersioning, at the first shred only
    assert not [r for r in caplog.records if WARNING in r.getMessage()]


def test_object_lock_keeps_a_version_that_verify_counts_and_prune_sweeps_once_released(
    s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client = s3_endpoint.client()
    secret = os.urandom(32)
    monkeypatch.setenv(KEY_ENV, base64.b64encode(secret).decode())
    caplog.set_level(logging.WARNING, logger="objstore_saver.encryption")
    with s3_endpoint.new_bucket("lock", object_lock=True) as locked:
        url = f"s3://{locked}/pfx/?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
        config = OpsConfig(url=url)
        store = lean(s3_endpoint, locked, "pfx/")
        with ObjectStoreSaver(store) as saver:  # the key from the environment
            _chat(saver, "held")
            key = "pfx/keys/threads/_held"
            version = client.head_object(Bucket=locked, Key=key)["VersionId"]
            _retain(client, locked, key, version, dt.timedelta(days=1))
            saver.delete_thread("held")  # completes: the thread is deleted
            assert saver.get_tuple(_cfg("held")) is None
        refusals = [r.getMessage() for r in caplog.records if "refused to delete" in r.getMessage()]
        assert len(refusals) == 1 and "keys/threads/_held" in refusals[0] and version in refusals[0]
        assert any("Object Lock is on" in r.getMessage() for r in caplog.records)
        # The retained version stays, under delete markers (each shred's DELETE adds one).
        assert _data_versions(client, locked, "_held") == [key]
        assert _key_versions(client, locked, "_held")[-1] == (key, True)
        report = ops.verify(config=config, read_data=True)
        assert report["key_store"] == "versioning Enabled, Object Lock on"
        assert report["retained_key_versions"] == 1
        dry = ops.prune(config=config)
        assert dry["retained_key_versions"] == 1 and "key_versions_deleted" not in dry
        refused = ops.prune(config=config, apply=True)
        assert refused["key_versions_refused"] == 1
        assert _data_versions(client, locked, "_held") == [key]
        # Its retention shortened to end at once (governance mode: by a user allowed
        # to bypass it; S3 refuses a date in the past, Ceph an empty retention).
        ends = _retain(client, locked, key, version, dt.timedelta(seconds=2), bypass=True)
        time.sleep(max(0.0, (ends - dt.datetime.now(dt.UTC)).total_seconds()) + 1.0)
        swept = ops.prune(config=config, apply=True)
        assert (swept["key_versions_deleted"], swept["key_versions_refused"]) == (1, 0)
        assert _key_versions(client, locked, "_held") == []
        assert ops.verify(config=config, read_data=True)["retained_key_versions"] == 0


def test_a_live_key_is_never_counted_as_retained(
    s3_endpoint: Any, versioned: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, base64.b64encode(os.urandom(32)).decode())
    store = lean(s3_endpoint, versioned, "pfx/")
    with ObjectStoreSaver(store) as saver:
        _chat(saver, "live")
        store.put("keys/threads/_live", store.get("keys/threads/_live"), PutMode.OVERWRITE)
    url = f"s3://{versioned}/pfx/?endpoint_url={s3_endpoint.url}&region={s3_endpoint.region}"
    swept = ops.prune(config=OpsConfig(url=url), apply=True)
    assert swept["retained_key_versions"] == 0 and "key_versions_deleted" not in swept
    assert len(_key_versions(s3_endpoint.client(), versioned, "_live")) == 2
    with ObjectStoreSaver(lean(s3_endpoint, versioned, "pfx/")) as fresh:
        assert fresh.get_tuple(_cfg("live")) is not None


def test_delete_namespace_deletes_every_version_of_its_keys(
    s3_endpoint: Any, versioned: str, open_store: Any
) -> None:
    """A long-term store namespace's delete shreds as a thread's does (spec §8.4.9 step 5)."""
    from objstore_saver import ObjectStoreStore

    client = s3_endpoint.client()
    settings = ClientEncryption.of(LocalMasterKey(os.urandom(32)))

    def versions(prefix: str) -> list[str]:
        answer = client.list_object_versions(Bucket=versioned, Prefix=prefix)
        return sorted(
            v["Key"] for v in answer.get("Versions", []) + answer.get("DeleteMarkers", [])
        )

    with ObjectStoreStore(open_store(versioned), client_encryption=settings) as store:
        store.put(("users", "u1"), "prefs", {"secret": 1})
        store.put(("users", "u1", "notes"), "n", {"secret": 2})
        key = "pfx/keys/store/_users/_u1/k"
        body = client.get_object(Bucket=versioned, Key=key)["Body"].read()
        client.put_object(Bucket=versioned, Key=key, Body=body)  # a noncurrent version
        store.delete_namespace(("users", "u1"))
        store.put(("users", "u1"), "again", {"after": True})
    kept = versions("pfx/keys/store/_users/_u1")
    # The ended life's key: no version, no marker. The namespace below it and
    # the new life keep theirs.
    assert key not in kept
    assert "pfx/keys/store/_users/_u1/_notes/k" in kept
    assert [k for k in kept if "%e" in k] and all(k.endswith("/k") for k in kept)
