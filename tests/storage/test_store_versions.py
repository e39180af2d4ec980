"""Object versions on a real S3 endpoint, over both S3 transports.

What shredding on a versioned bucket builds on (docs/encryption.md): the
bucket's versioning and Object Lock state, every version and delete marker
under a prefix (page after page), and version deletes that remove a version
for good, or come back refused when Object Lock retains it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lean_helpers import lean

from objstore_saver.storage import versions as versions_module
from objstore_saver.storage.s3.boto3_store import Boto3S3Store
from objstore_saver.storage.versions import (
    NO_RETENTION,
    ObjectVersion,
    RefusedVersion,
    VersionedStore,
    destruction_order,
    markers_to_delete,
)

pytestmark = pytest.mark.usefixtures("creds_env")


@pytest.fixture(params=["lean", "boto3"])
def open_store(request: pytest.FixtureRequest, s3_endpoint: Any) -> Callable[[str], VersionedStore]:
    """Opens a store of the test's transport on a bucket: its version requests."""

    def open_(bucket: str) -> VersionedStore:
        if request.param == "lean":
            store: Any = lean(s3_endpoint, bucket, "pfx/")
        else:
            store = Boto3S3Store(bucket, "pfx/", client=s3_endpoint.client())
        assert isinstance(store, VersionedStore)
        return store

    return open_


@pytest.fixture
def versioned(s3_endpoint: Any) -> Iterator[str]:
    with s3_endpoint.new_bucket("ver", versioned=True) as bucket:
        yield bucket


def test_retention_of_each_kind_of_bucket(
    s3_endpoint: Any, s3_bucket: str, versioned: str, open_store: Callable[[str], VersionedStore]
) -> None:
    assert open_store(s3_bucket).retention() == NO_RETENTION
    kept = open_store(versioned).retention()
    assert (kept.versioning, kept.object_lock, kept.keeps_versions) == ("Enabled", False, True)
    s3_endpoint.client().put_bucket_versioning(
        Bucket=versioned, VersioningConfiguration={"Status": "Suspended"}
    )
    suspended = open_store(versioned).retention()
    assert (suspended.versioning, suspended.keeps_versions) == ("Suspended", True)
    with s3_endpoint.new_bucket("lock", object_lock=True) as locked:
        lock = open_store(locked).retention()
        assert (lock.versioning, lock.object_lock) == ("Enabled", True)
        assert lock.describe() == "versioning Enabled, Object Lock on"


def test_every_version_and_marker_listed_then_deleted_for_good(
    s3_endpoint: Any,
    versioned: str,
    open_store: Callable[[str], VersionedStore],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = s3_endpoint.client()
    for body in (b"one", b"two", b"three"):
        client.put_object(Bucket=versioned, Key="pfx/keys/a", Body=body)
    client.delete_object(Bucket=versioned, Key="pfx/keys/a")
    client.put_object(Bucket=versioned, Key="pfx/keys/b", Body=b"live")
    client.put_object(Bucket=versioned, Key="other/keys/a", Body=b"outside the prefix")
    # Two versions a page: the listing must follow the key and version-id markers.
    monkeypatch.setattr(versions_module, "PAGE_SIZE", 2)
    store = open_store(versioned)
    found = store.versions("keys/")
    assert sorted((v.key, v.delete_marker) for v in found) == [
        ("keys/a", False),
        ("keys/a", False),
        ("keys/a", False),
        ("keys/a", True),
        ("keys/b", False),
    ]
    assert len({v.version_id for v in found}) == 5
    latest = sorted((v.key, v.delete_marker) for v in found if v.latest)
    assert latest == [("keys/a", True), ("keys/b", False)]
    data, markers = destruction_order([v for v in found if v.key == "keys/a"])
    assert store.delete_versions(data) == []
    assert store.delete_versions(markers_to_delete(markers, [])) == []
    left = client.list_object_versions(Bucket=versioned, Prefix="pfx/")
    assert [v["Key"] for v in left.get("Versions", [])] == ["pfx/keys/b"]
    assert left.get("DeleteMarkers", []) == []
    assert client.get_object(Bucket=versioned, Key="other/keys/a")["Body"].read()


def test_a_retained_version_is_refused_not_lost(
    s3_endpoint: Any, open_store: Callable[[str], VersionedStore]
) -> None:
    client = s3_endpoint.client()
    with s3_endpoint.new_bucket("lock", object_lock=True) as locked:
        until = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        client.put_object(
            Bucket=locked,
            Key="pfx/keys/held",
            Body=b"retained",
            ObjectLockMode="GOVERNANCE",
            ObjectLockRetainUntilDate=until,
        )
        client.put_object(Bucket=locked, Key="pfx/keys/free", Body=b"free")
        store = open_store(locked)
        found = store.versions("keys/")
        refused = store.delete_versions(found)
        assert [(r.version.key, r.code) for r in refused] == [("keys/held", "AccessDenied")]
        assert [v.key for v in store.versions("keys/")] == ["keys/held"]


def test_markers_of_a_key_with_a_refused_version_stay() -> None:
    held = ObjectVersion("keys/a", "1", delete_marker=False, latest=False)
    marker_a = ObjectVersion("keys/a", "2", delete_marker=True, latest=True)
    marker_b = ObjectVersion("keys/b", "3", delete_marker=True, latest=True)
    data, markers = destruction_order([marker_a, held, marker_b])
    assert (data, markers) == ([held], [marker_a, marker_b])
    assert markers_to_delete(markers, [RefusedVersion(held, "AccessDenied", "")]) == [marker_b]
