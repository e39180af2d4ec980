"""Choosing the S3 transport: one function both ``from_url`` and ``from_bucket`` call."""

from __future__ import annotations

from typing import Any

from objstore_saver.storage.s3.boto3_store import S3Store
from objstore_saver.storage.s3.lean import LeanS3Store

#: S3 transports by name: the lean one (default) and boto3's client.
TRANSPORTS = ("lean", "boto3")
#: Options only :class:`LeanS3Store` has (boto3's client is configured otherwise).
LEAN_ONLY_OPTIONS = (
    "backoff_base",
    "max_connections",
    "session",
    "extra_put_headers",
    "extra_get_headers",
)


def open_s3_store(
    bucket: str, prefix: str = "", *, transport: str = "lean", **options: Any
) -> LeanS3Store | S3Store:
    """An S3 store on the named transport.

    Args:
        bucket: Bucket name.
        prefix: Key prefix of every object.
        transport: ``"lean"`` (:class:`LeanS3Store`, native async) or
            ``"boto3"`` (:class:`S3Store`).
        **options: Options of that store; ``None`` values keep its defaults.
            ``retry_mode`` other than ``"standard"`` needs ``boto3``.

    Raises:
        ValueError: an unknown transport, ``retry_mode`` with the lean one, or
            an option of the lean one with ``boto3``.
    """
    if transport == "boto3":
        lean_only = [name for name in LEAN_ONLY_OPTIONS if options.get(name) is not None]
        if lean_only:
            raise ValueError(
                f"options of transport='lean' only: {', '.join(lean_only)} "
                "(boto3's S3Store takes client= or its own options instead)"
            )
        return S3Store(bucket, prefix, **options)
    if transport != "lean":
        raise ValueError(f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    retry_mode = options.pop("retry_mode", None)
    if retry_mode not in (None, "standard"):
        raise ValueError(
            f"retry_mode {retry_mode!r} needs transport='boto3'; the lean "
            "transport retries like botocore's 'standard' mode"
        )
    return LeanS3Store(bucket, prefix, **options)
