"""The lean transport's requests on object versions, as pure plans (see ``protocol.py``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from objstore_saver.storage import versions as versions_module
from objstore_saver.storage.base import MAX_DELETE_BATCH, StorageError
from objstore_saver.storage.http.messages import HttpResponse
from objstore_saver.storage.s3.protocol import (
    Exchange,
    S3Protocol,
    _local,
    delete_body,
    parse_delete_errors,
)
from objstore_saver.storage.s3.rules import NO_OBJECT_LOCK_CODES, error_code
from objstore_saver.storage.versions import ObjectVersion, RefusedVersion, Retention, refused_of


def _unreadable(protocol: S3Protocol, operation: str, exc: Exception) -> StorageError:
    return StorageError(
        f"S3 {operation} of bucket {protocol.bucket!r} in {protocol.location} failed: "
        f"unreadable answer ({type(exc).__name__}: {exc})"
    )


def retention(protocol: S3Protocol) -> Exchange[Retention]:
    """The bucket's versioning state, and Object Lock's when versioning was ever on."""
    reply, _ = yield from protocol.exchange(
        lambda: protocol.request("GET", None, query={"versioning": ""}), "get versioning"
    )
    if not isinstance(reply, HttpResponse) or reply.status != 200:
        raise protocol.error(reply, "get versioning")
    try:  # an empty configuration: versioning never turned on
        fields = {_local(e.tag): e.text or "" for e in ET.fromstring(reply.body.strip() or b"<V/>")}
    except ET.ParseError as exc:
        raise _unreadable(protocol, "get versioning", exc) from None
    status = fields.get("Status", "").strip()
    if not status:
        # Object Lock requires versioning: a bucket that never had it has no lock.
        return Retention(versioning="", object_lock=False)
    reply, _ = yield from protocol.exchange(
        lambda: protocol.request("GET", None, query={"object-lock": ""}), "get object lock"
    )
    no_lock = isinstance(reply, HttpResponse) and reply.status == 404
    if no_lock and error_code(reply)[0] in NO_OBJECT_LOCK_CODES:
        return Retention(versioning=status, object_lock=False)
    if not isinstance(reply, HttpResponse) or reply.status != 200:
        raise protocol.error(reply, "get object lock")
    try:
        fields = {_local(e.tag): (e.text or "").strip() for e in ET.fromstring(reply.body)}
    except ET.ParseError as exc:
        raise _unreadable(protocol, "get object lock", exc) from None
    return Retention(versioning=status, object_lock=fields.get("ObjectLockEnabled") == "Enabled")


def parse_versions(body: bytes, skip: int) -> tuple[list[ObjectVersion], dict[str, str]]:
    """A ``ListObjectVersions`` page: its versions (keys without the first ``skip``
    characters) and, when truncated, the query of the next page's markers."""
    root = ET.fromstring(body)
    found: list[ObjectVersion] = []
    fields_of_page: dict[str, str] = {}
    for child in root:
        tag = _local(child.tag)
        if tag in ("Version", "DeleteMarker"):
            fields = {_local(e.tag): e.text or "" for e in child}
            found.append(
                ObjectVersion(
                    key=fields["Key"][skip:],
                    version_id=fields.get("VersionId") or "null",
                    delete_marker=tag == "DeleteMarker",
                    latest=fields.get("IsLatest", "").strip().lower() == "true",
                )
            )
        else:
            fields_of_page[tag] = (child.text or "").strip()
    if fields_of_page.get("IsTruncated", "").lower() != "true":
        return found, {}
    after = {"key-marker": fields_of_page.get("NextKeyMarker", "")}
    if fields_of_page.get("NextVersionIdMarker"):
        after["version-id-marker"] = fields_of_page["NextVersionIdMarker"]
    return found, after


def versions(protocol: S3Protocol, prefix: str) -> Exchange[list[ObjectVersion]]:
    """Every version and delete marker under ``prefix``, page after page."""
    found: list[ObjectVersion] = []
    after: dict[str, str] = {}
    while True:
        query = {
            "versions": "",
            "prefix": protocol.prefix + prefix,
            "max-keys": str(versions_module.PAGE_SIZE),
        }
        query.update(after)
        reply, _ = yield from protocol.exchange(
            lambda query=query: protocol.request("GET", None, query=query), "list versions", prefix
        )
        if not isinstance(reply, HttpResponse) or reply.status != 200:
            raise protocol.error(reply, "list versions", prefix)
        try:
            page, after = parse_versions(reply.body, len(protocol.prefix))
        except (ET.ParseError, KeyError) as exc:
            raise _unreadable(protocol, "list versions", exc) from None
        found.extend(page)
        if not after or not after["key-marker"]:
            return found


def delete_versions(
    protocol: S3Protocol, doomed: Sequence[ObjectVersion]
) -> Exchange[list[RefusedVersion]]:
    """``DeleteObjects`` with version ids, 1,000 a request; the versions refused."""
    refused: list[RefusedVersion] = []
    for i in range(0, len(doomed), MAX_DELETE_BATCH):
        batch = doomed[i : i + MAX_DELETE_BATCH]
        full_keys = [protocol.full_key(v.key) for v in batch]
        body = delete_body(full_keys, [v.version_id for v in batch])
        reply = yield from protocol.post_delete(body, "delete versions", batch[0].key)
        if not isinstance(reply, HttpResponse) or reply.status != 200:
            raise protocol.error(reply, "delete versions", batch[0].key)
        try:
            errors = parse_delete_errors(reply.body)
        except ET.ParseError as exc:
            raise _unreadable(protocol, "delete versions", exc) from None
        refused += refused_of(batch, protocol.full_key, errors)
    return refused
