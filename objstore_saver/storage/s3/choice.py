"""Choosing the S3 transport: one function both ``from_url`` and ``from_bucket`` call.

The options each transport's store takes are read from its ``__init__``
signature (:data:`STORE_OPTIONS`): the one list of their names, which the
constructors use to tell a store option from one of the saver's.
"""

from __future__ import annotations

import inspect
from typing import Any

from objstore_saver.storage.s3.boto3_store import Boto3S3Store
from objstore_saver.storage.s3.lean import LeanS3Store

#: S3 transports by name: the lean one (default) and boto3's client.
TRANSPORTS = ("lean", "boto3")


def _keyword_options(store: type) -> frozenset[str]:
    """The keyword-only parameters of a store's ``__init__``: its options."""
    parameters = inspect.signature(store.__init__).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


#: The options of each transport's store (boto3's ``client`` comes through ``from_client``).
STORE_OPTIONS: dict[str, frozenset[str]] = {
    "lean": _keyword_options(LeanS3Store),
    "boto3": _keyword_options(Boto3S3Store) - {"client"},
}
#: Every option ``from_url`` and ``from_bucket`` pass to the store, whatever the transport.
S3_OPTIONS = STORE_OPTIONS["lean"] | STORE_OPTIONS["boto3"]
#: Options only :class:`LeanS3Store` has (boto3's client is configured otherwise).
LEAN_ONLY_OPTIONS = tuple(sorted(STORE_OPTIONS["lean"] - STORE_OPTIONS["boto3"]))
#: Options only :class:`Boto3S3Store` has (``retry_mode="standard"`` is the lean transport's own).
BOTO3_ONLY_OPTIONS = tuple(sorted(STORE_OPTIONS["boto3"] - STORE_OPTIONS["lean"]))


def open_s3_store(
    bucket: str, prefix: str = "", *, transport: str = "lean", **options: Any
) -> LeanS3Store | Boto3S3Store:
    """An S3 store on the named transport.

    Args:
        bucket: Bucket name.
        prefix: Key prefix of every object.
        transport: ``"lean"`` (:class:`LeanS3Store`, native async) or
            ``"boto3"`` (:class:`Boto3S3Store`).
        **options: Options of that store; ``None`` values keep its defaults.
            ``retry_mode`` other than ``"standard"`` needs ``boto3``.

    Raises:
        ValueError: an unknown transport, ``retry_mode`` with the lean one, or
            an option of one transport with the other.
    """
    if transport == "boto3":
        lean_only = [name for name in LEAN_ONLY_OPTIONS if options.get(name) is not None]
        if lean_only:
            raise ValueError(
                f"options of transport='lean' only: {', '.join(lean_only)} "
                "(boto3's Boto3S3Store takes client= or its own options instead)"
            )
        return Boto3S3Store(bucket, prefix, **options)
    if transport != "lean":
        raise ValueError(f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
    retry_mode = options.pop("retry_mode", None)
    if retry_mode not in (None, "standard"):
        raise ValueError(
            f"retry_mode {retry_mode!r} needs transport='boto3'; the lean "
            "transport retries like botocore's 'standard' mode"
        )
    boto3_only = [name for name in BOTO3_ONLY_OPTIONS if options.get(name) is not None]
    if boto3_only:
        raise ValueError(
            f"options of transport='boto3' only: {', '.join(boto3_only)} "
            "(the lean transport takes extra_put_headers / extra_get_headers instead)"
        )
    return LeanS3Store(bucket, prefix, **options)
