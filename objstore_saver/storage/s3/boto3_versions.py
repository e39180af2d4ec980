"""The boto3 store's requests on object versions (storage/versions.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from objstore_saver.storage import versions as versions_module
from objstore_saver.storage.base import MAX_DELETE_BATCH
from objstore_saver.storage.s3.rules import NO_OBJECT_LOCK_CODES
from objstore_saver.storage.versions import ObjectVersion, RefusedVersion, Retention, refused_of


class Boto3Versions:
    """Object versions through the boto3 client of an :class:`Boto3S3Store` (mixed into it)."""

    # Of the store this is mixed into.
    _client: Any
    bucket: str
    prefix: str
    _full_key: Any
    _invoke: Any
    _error: Any

    def retention(self) -> Retention:
        """The bucket's versioning and Object Lock state (``GetBucketVersioning``, and
        ``GetObjectLockConfiguration`` when versioning was ever on)."""
        c = self._client
        answer = self._invoke(c.get_bucket_versioning, "get versioning", None, Bucket=self.bucket)
        status = answer.get("Status") or ""
        if not status:
            return Retention(versioning="", object_lock=False)
        try:
            lock = self._invoke(
                c.get_object_lock_configuration,
                "get object lock",
                None,
                ClientError,
                Bucket=self.bucket,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in NO_OBJECT_LOCK_CODES:
                return Retention(versioning=status, object_lock=False)
            raise self._error(exc, "get object lock") from exc
        enabled = lock.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
        return Retention(versioning=status, object_lock=enabled)

    def versions(self, prefix: str) -> list[ObjectVersion]:
        """Every version and delete marker under ``prefix`` (``ListObjectVersions``, every page)."""
        skip = len(self.prefix)
        found: list[ObjectVersion] = []
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Prefix": self.prefix + prefix,
            "MaxKeys": versions_module.PAGE_SIZE,
        }
        while True:
            page = self._invoke(self._client.list_object_versions, "list versions", prefix, **args)
            for field, marker in (("Versions", False), ("DeleteMarkers", True)):
                found.extend(
                    ObjectVersion(
                        key=item["Key"][skip:],
                        version_id=item.get("VersionId") or "null",
                        delete_marker=marker,
                        latest=bool(item.get("IsLatest")),
                    )
                    for item in page.get(field, [])
                )
            if not page.get("IsTruncated") or not page.get("NextKeyMarker"):
                return found
            args["KeyMarker"] = page["NextKeyMarker"]
            if page.get("NextVersionIdMarker"):
                args["VersionIdMarker"] = page["NextVersionIdMarker"]
            else:
                args.pop("VersionIdMarker", None)

    def delete_versions(self, versions: Sequence[ObjectVersion]) -> list[RefusedVersion]:
        """Delete these versions for good (``DeleteObjects``, 1,000 a request);
        return those the bucket refused (Object Lock)."""
        refused: list[RefusedVersion] = []
        for i in range(0, len(versions), MAX_DELETE_BATCH):
            batch = versions[i : i + MAX_DELETE_BATCH]
            objects = [{"Key": self._full_key(v.key), "VersionId": v.version_id} for v in batch]
            answer = self._invoke(
                self._client.delete_objects,
                "delete versions",
                batch[0].key,
                Bucket=self.bucket,
                Delete={"Objects": objects, "Quiet": True},
            )
            errors = [
                (e.get("Key", ""), e.get("VersionId", ""), e.get("Code", ""), e.get("Message", ""))
                for e in answer.get("Errors") or []
            ]
            refused += refused_of(batch, self._full_key, errors)
        return refused
