"""Helpers of the S3 suites: the test servers' encryption support, error answers, credentials."""

from __future__ import annotations

import os
from typing import Any

import botocore.awsrequest
import pytest

from objstore_saver.storage import S3Encryption

#: A KMS key the test servers accept: moto takes any id, the Ceph cluster of
#: scripts/ceph-rgw.sh has this one in its testing KMS backend.
KMS_KEY_ID = os.environ.get("OBJSTORE_TEST_KMS_KEY_ID", "objstore-test-key")
CUSTOMER_KEY = b"objstore-sse-c-test-key-32-bytes"

#: What each known test server does with each encryption mode: confirm it in
#: the PutObject answer (and so encrypt), or ignore it silently.
SUPPORTED = {
    "moto": {"SSE-S3", "SSE-KMS"},  # moto ignores SSE-C headers
    "ceph": {"SSE-KMS", "SSE-C"},  # Ceph 16 ignores SSE-S3 (AES256)
}


def server_kind() -> str:
    """The kind of the test endpoint: ``moto``, ``ceph`` (OBJSTORE_TEST_SERVER) or ``unknown``."""
    if not os.environ.get("OBJSTORE_TEST_ENDPOINT"):
        return "moto"
    return os.environ.get("OBJSTORE_TEST_SERVER", "unknown")


def encryption_of(kind: str) -> S3Encryption:
    """The :class:`S3Encryption` of ``SSE-S3``, ``SSE-KMS`` or ``SSE-C`` with the test keys."""
    if kind == "SSE-S3":
        return S3Encryption.sse_s3()
    if kind == "SSE-KMS":
        return S3Encryption.sse_kms(KMS_KEY_ID)
    return S3Encryption.sse_c(CUSTOMER_KEY)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def error_reply(status: int, code: str, message: str, times: int | None = None) -> Any:
    """A ``before-send`` hook answering the next ``times`` requests with an S3 error."""
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    ).encode()
    calls: list[str] = []

    def hook(request: Any, **_: Any) -> Any:
        if times is not None and len(calls) >= times:
            return None
        calls.append(request.url)
        return botocore.awsrequest.AWSResponse(
            request.url, status, {"Content-Type": "application/xml"}, _Raw(body)
        )

    hook.calls = calls  # type: ignore[attr-defined]
    return hook


def use_endpoint_credentials(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Expose the endpoint's credentials to boto3's default chain for one test."""
    if s3_endpoint.access_key:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_endpoint.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_endpoint.secret_key)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
